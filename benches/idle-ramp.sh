#!/usr/bin/env bash
# Memory per idle keep-alive connection, as the slope of reel's anonymous RSS while N idle
# connections open (least squares over samples every 0.2 s from 1,000 connections on), so
# neither the process's start-up memory nor the allocator's reuse of what a warm-up freed
# counts. One worker on CPU 1, a 1 KiB object, `reel-load idle --connect-rate 1000`.
#
#   benches/idle-ramp.sh                 # N=15000, heap on small pages (MIMALLOC_ALLOW_THP=0)
#   N=10000 THP=1 benches/idle-ramp.sh   # heap on transparent huge pages: 2 MiB steps
#
# Prints the slope, the first and last samples, and the parked count at the end.
N=${N:-15000}
THP=${THP:-0}
PORT=${PORT:-28380}
# shellcheck source=one-worker.sh
. "$(dirname "$0")/one-worker.sh"
write_config
start_reel MIMALLOC_ALLOW_THP="$THP"
url=http://127.0.0.1:$PORT/obj1k
"$BIN/reel-load" fixed -c 50 -d 3s "$url" --kv >/dev/null
sleep 1
"$BIN/reel-load" idle -c "$N" --connect-rate 1000 --buffer 4096 -d "$((N / 1000 + 15))s" \
    --timeout 10s "$url" --kv >"$TMP/idle.kv" 2>&1 &
PIDS+=($!)
established() { ss -Htn state established "( sport = :$PORT )" | wc -l; }
anon() { awk '/^RssAnon/ { print $2 }' "/proc/$REEL/status"; }
for _ in $(seq $((N / 200 + 40))); do
    n=$(established)
    echo "$n $(anon)"
    ((n >= N)) && break
    sleep 0.2
done >"$TMP/ramp.txt"
sleep 3
echo "$(established) $(anon)" >>"$TMP/ramp.txt"
parked=$(curl -s "http://127.0.0.1:$((PORT + 2))/metrics" | awk '/^reel_connections_parked/ { s += $2 } END { print s + 0 }')
awk -v thp="$THP" -v parked="$parked" '
    $1 >= 1000 { n++; x[n] = $1; y[n] = $2 * 1024; sx += $1; sy += $2 * 1024 }
    END {
        if (n < 2) { print "too few samples"; exit 1 }
        mx = sx / n; my = sy / n
        for (i = 1; i <= n; i++) { num += (x[i] - mx) * (y[i] - my); den += (x[i] - mx) ^ 2 }
        printf "idle ramp (THP %s): %d samples, %d -> %d connections, RssAnon %d -> %d KiB, slope %.0f B per connection; parked at the end: %d\n",
            thp, n, x[1], x[n], y[1] / 1024, y[n] / 1024, num / den, parked
    }' "$TMP/ramp.txt"
