#!/bin/sh
# Upgrades a running reel to a newly installed binary (SIGUSR2) while reel-load keeps
# requesting cached VOD segments over keep-alive connections, then prints what reel-load
# counted (0 errors expected), the listening socket inodes before and after, and how many
# requests the origin got (a warm cache: none for the segments after the upgrade).
#
# Usage (from the repository root): benches/upgrade-demo.sh
# Environment: DUR (load seconds, default 12), CONNS (keep-alive connections, default 16),
# PORT (reel's listener, default 28480; admin PORT+1, origin PORT+2), SKIP_BUILD=1 to use
# the release binaries already built, KEEP=FILE to keep both processes' log there. Loopback only; everything it starts is stopped by PID.
set -eu

DUR=${DUR:-12}
CONNS=${CONNS:-16}
PORT=${PORT:-28480}
APORT=$((PORT + 1))
OPORT=$((PORT + 2))
T=${CARGO_TARGET_DIR:-target}/release

if [ "${SKIP_BUILD:-0}" != 1 ]; then
    cargo build --release --locked -p reel -p reel-benches -p reel-demo-origin >&2
fi
for b in reel reel-load reel-demo-origin; do
    [ -x "$T/$b" ] || { echo "upgrade-demo: $T/$b is missing" >&2; exit 1; }
done

WORK=$(mktemp -d)
ORIGIN_PID=""
REEL_PID=""
NEW_PID=""
cleanup() {
    for p in $NEW_PID $REEL_PID $ORIGIN_PID; do
        kill "$p" 2>/dev/null || true
    done
    [ -n "${KEEP:-}" ] && cp "$WORK/reel.log" "$KEEP" 2>/dev/null; rm -rf "$WORK"
}
trap cleanup EXIT INT TERM

listening_inodes() { # port -> sorted inodes of 127.0.0.1:port sockets in LISTEN
    hex=$(printf '0100007F:%04X' "$1")
    awk -v a="$hex" '$2 == a && $4 == "0A" { print $10 }' /proc/net/tcp | sort -n | tr '\n' ' '
}
status_field() { # python-free: pid from /status
    curl -s "http://127.0.0.1:$APORT/status" | sed -n "s/^  \"$1\": \([0-9]*\),*$/\1/p"
}
origin_segment_requests() {
    curl -s "http://127.0.0.1:$OPORT/__origin/stats" | sed -n 's/^ *"vod_segment": \([0-9]*\),*$/\1/p' | head -1
}

"$T/reel-demo-origin" --listen "127.0.0.1:$OPORT" --latency-scale 0 --vod-titles 2 \
    --vod-segments 16 --vod-segment-size 262144 > "$WORK/origin.log" 2>&1 &
ORIGIN_PID=$!

mkdir -p "$WORK/bin"
cp "$T/reel" "$WORK/bin/reel"
cat > "$WORK/reel.toml" <<EOF
[server]
shutdown_timeout = "10s"
shutdown_delay = "3s"
[log]
format = "json"
[[listener]]
name = "http"
address = "127.0.0.1:$PORT"
[admin]
address = "127.0.0.1:$APORT"
[access_log]
enabled = false
[store]
path = "$WORK/store"
size = "256MiB"
volume_size = "16MiB"
[demo_origin]
enabled = false
EOF
"$WORK/bin/reel" serve --config "$WORK/reel.toml" --origin "http://127.0.0.1:$OPORT" \
    2> "$WORK/reel.log" &
REEL_PID=$!
i=0
until curl -sf "http://127.0.0.1:$PORT/healthz" > /dev/null; do
    i=$((i + 1))
    [ $i -lt 100 ] || { echo "upgrade-demo: reel did not start" >&2; cat "$WORK/reel.log" >&2; exit 1; }
    sleep 0.1
done

URLS=""
for t in 000 001; do
    for s in 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15; do
        URLS="$URLS http://127.0.0.1:$PORT/vod/title_$t/seg_$s.ts"
    done
done
# Warm the cache: every segment once from the origin, then hits.
"$T/reel-load" fixed -c 4 -d 2s $URLS > /dev/null
warm=$(origin_segment_requests)
before=$(listening_inodes "$PORT")

echo "reel pid $REEL_PID; listening sockets on :$PORT (inodes): $before"
echo "origin segment requests after warming: $warm"
"$T/reel-load" fixed -c "$CONNS" -d "${DUR}s" $URLS > "$WORK/load.txt" &
LOAD_PID=$!
sleep 3

# A new version is installed at the same path (renamed into place), then SIGUSR2.
cp "$T/reel" "$WORK/bin/.reel.new"
mv "$WORK/bin/.reel.new" "$WORK/bin/reel"
echo "installed a new binary at $WORK/bin/reel; kill -USR2 $REEL_PID"
kill -USR2 "$REEL_PID"
i=0
while :; do
    NEW_PID=$(status_field pid)
    [ -n "$NEW_PID" ] && [ "$NEW_PID" != "$REEL_PID" ] && break
    i=$((i + 1))
    [ $i -lt 300 ] || { echo "upgrade-demo: no new process" >&2; cat "$WORK/reel.log" >&2; exit 1; }
    sleep 0.1
done
echo "new reel pid $NEW_PID serves; waiting for the old one to drain"
old_status=0
wait "$REEL_PID" || old_status=$?
REEL_PID=""
echo "old reel exited with status $old_status"

wait "$LOAD_PID"
after=$(listening_inodes "$PORT")
end=$(origin_segment_requests)
cache=$(curl -s -o /dev/null -D - "http://127.0.0.1:$PORT/vod/title_000/seg_3.ts" | tr -d '\r' | sed -n 's/^cache-status: //Ip')

echo
echo "reel-load fixed -c $CONNS -d ${DUR}s over $(echo $URLS | wc -w) cached segments, upgraded at 3 s:"
sed -n 's/^\(requests\|errors\|latency\) */  \1 /p' "$WORK/load.txt"
echo "listening sockets on :$PORT after (inodes): $after"
[ "$before" = "$after" ] && echo "  the same sockets" || echo "  DIFFERENT sockets"
echo "origin segment requests: $warm after warming, $end at the end"
echo "cache-status of a segment now: $cache"
grep -o '"message":"upgrade[^"]*"' "$WORK/reel.log" | sed 's/"message"://' | sed 's/^/  log: /'

errors=$(sed -n 's/^errors *\([0-9]*\).*/\1/p' "$WORK/load.txt")
kill -TERM "$NEW_PID" 2>/dev/null || true
i=0
while kill -0 "$NEW_PID" 2>/dev/null && [ $i -lt 300 ]; do i=$((i + 1)); sleep 0.1; done
NEW_PID=""
if [ "$errors" != 0 ] || [ "$old_status" != 0 ] || [ "$before" != "$after" ] || [ "$warm" != "$end" ]; then
    echo "upgrade-demo: FAILED" >&2
    exit 1
fi
echo "upgrade-demo: 0 errors"
