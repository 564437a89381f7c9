#!/usr/bin/env bash
# What parking idle keep-alive connections costs viewers that ask every few seconds: reel's
# CPU per request and the p99 with `http.park_after = "1s"` (every viewer parks between
# requests) against `"0s"` (none does). One worker on CPU 1, VIEWERS viewers each asking for
# a 1 KiB hit every INTERVAL (`reel-load zipf`), DUR long, ROUNDS interleaved rounds.
#
#   benches/park-cost.sh                           # 4000 viewers every 2s, 20s, 3 rounds
#   VIEWERS=8000 INTERVAL=3s benches/park-cost.sh
VIEWERS=${VIEWERS:-4000}
INTERVAL=${INTERVAL:-2s}
DUR=${DUR:-20}
ROUNDS=${ROUNDS:-3}
PORT=${PORT:-28480}
# shellcheck source=one-worker.sh
. "$(dirname "$0")/one-worker.sh"
CLK_TCK=$(getconf CLK_TCK)

# One run: prints "µs-per-request p99-µs requests".
run() {
    local park=$1
    write_config "park_after = \"$park\""
    start_reel
    local reel=$REEL
    curl -sf "http://127.0.0.1:$PORT/obj1k" >/dev/null
    local t0 t1
    t0=$(awk '{ print $14 + $15 }' "/proc/$reel/stat")
    taskset -c 0 "$BIN/reel-load" zipf -v "$VIEWERS" --objects 1 --interval "$INTERVAL" \
        -d "${DUR}s" --timeout 10s "http://127.0.0.1:$PORT/obj1k?v={i}" --kv >"$TMP/load.kv"
    t1=$(awk '{ print $14 + $15 }' "/proc/$reel/stat")
    kill "$reel"
    wait "$reel" 2>/dev/null || true
    awk -F= -v ticks=$((t1 - t0)) -v tck="$CLK_TCK" '
        $1 == "requests" { r = $2 } $1 == "latency_us.p99" { p = $2 } $1 == "errors_total" { e = $2 }
        END { printf "%.1f %d %d %d\n", ticks * 1e6 / tck / r, p, r, e }' "$TMP/load.kv"
}

echo "viewers $VIEWERS, a request every $INTERVAL each, ${DUR}s per run"
echo "round park_after cpu_us_per_request p99_us requests errors"
for r in $(seq "$ROUNDS"); do
    for park in 1s 0s; do
        echo "$r $park $(run "$park")"
    done
done
