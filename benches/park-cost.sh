#!/usr/bin/env bash
# What parking idle keep-alive connections costs viewers that ask every few seconds: reel's
# CPU per request and the p99 with `http.park_after = "1s"` (every viewer parks between
# requests) against `"0s"` (none does). One worker on CPU 1, VIEWERS viewers each asking for
# a 1 KiB hit every INTERVAL (`reel-load zipf`), DUR long, ROUNDS interleaved rounds.
#
#   benches/park-cost.sh                           # 4000 viewers every 2s, 20s, 3 rounds
#   VIEWERS=8000 INTERVAL=3s benches/park-cost.sh
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(dirname "$HERE")
VIEWERS=${VIEWERS:-4000}
INTERVAL=${INTERVAL:-2s}
DUR=${DUR:-20}
ROUNDS=${ROUNDS:-3}
PORT=${PORT:-28480}
cd "$ROOT"
cargo build -q --release --locked -p reel -p reel-benches
BIN=$ROOT/target/release
TMP=$(mktemp -d)
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    rm -rf "$TMP"
}
trap cleanup EXIT
CLK_TCK=$(getconf CLK_TCK)

mkdir -p "$TMP/origin"
head -c 1024 /dev/zero >"$TMP/origin/obj1k"
touch -d 2020-01-01 "$TMP/origin/obj1k" # heuristic freshness: every request a hit
(cd "$TMP/origin" && exec python3 -m http.server "$((PORT + 1))" --bind 127.0.0.1) >/dev/null 2>&1 &
PIDS+=($!)
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$((PORT + 1))/obj1k" >/dev/null && break; sleep 0.1; done

# One run: prints "µs-per-request p99-µs requests".
run() {
    local park=$1
    rm -rf "$TMP/store"
    cat >"$TMP/reel.toml" <<EOF
[[listener]]
name = "http"
address = "127.0.0.1:$PORT"
backlog = 4096

[cores]
workers = [1]
irq = "auto"
nic = []

[store]
path = "$TMP/store"
size = "256MiB"
volume_size = "64MiB"

[access_log]
enabled = false

[admin]
address = "127.0.0.1:$((PORT + 2))"

[http]
max_connections_per_client = 0
park_after = "$park"
EOF
    "$BIN/reel" serve --config "$TMP/reel.toml" --origin "http://127.0.0.1:$((PORT + 1))" \
        >"$TMP/reel.log" 2>&1 &
    local reel=$!
    for _ in $(seq 100); do curl -sf "http://127.0.0.1:$PORT/healthz" >/dev/null && break; sleep 0.1; done
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
