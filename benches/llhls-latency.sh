#!/usr/bin/env bash
# LL-HLS viewers through reel on the shipped config, its demo origin at its production
# latency (p99.9 2.47 s, p99.99 6.05 s): what `[cache] blocking_timeout` costs viewers when
# the origin is slow. Prints reel-load's LL-HLS figures and reel's blocking-timeout counters.
#
#   BLOCKING_TIMEOUT (3s)  VIEWERS (100)  DUR (300, seconds)  PORT_BASE (18280: data, +1
#   demo origin, +2 admin, +3 https)  SKIP_BUILD (1 = use existing binaries)
#   CARGO_TARGET_DIR (where binaries are built/found)
#
#   BLOCKING_TIMEOUT=8s benches/llhls-latency.sh
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BT=${BLOCKING_TIMEOUT:-3s}
VIEWERS=${VIEWERS:-100}
DUR=${DUR:-300}
PORT_BASE=${PORT_BASE:-18280}
TGT=${CARGO_TARGET_DIR:-$ROOT/target}
if [[ "${SKIP_BUILD:-0}" != 1 ]]; then
    cargo build --release --locked --manifest-path "$ROOT/Cargo.toml" -p reel -p reel-benches --bin reel --bin reel-load >&2
fi
WORK=$(mktemp -d /tmp/reel-llhls-latency.XXXXXX)
pid=""
cleanup() { [[ -n $pid ]] && kill -TERM "$pid" 2>/dev/null && wait "$pid" 2>/dev/null; rm -rf "$WORK"; }
trap cleanup EXIT
sed -e "s/127.0.0.1:8080/127.0.0.1:$PORT_BASE/" \
    -e "s/127.0.0.1:8081/127.0.0.1:$((PORT_BASE + 1))/g" \
    -e "s/127.0.0.1:9090/127.0.0.1:$((PORT_BASE + 2))/" \
    -e "s/127.0.0.1:8443/127.0.0.1:$((PORT_BASE + 3))/" \
    -e "s/^blocking_timeout = \"[^\"]*\"/blocking_timeout = \"$BT\"/" \
    "$ROOT/config/reel.toml" > "$WORK/reel.toml"
grep -q "^blocking_timeout = \"$BT\"" "$WORK/reel.toml" || { echo "no blocking_timeout line" >&2; exit 1; }
grep -q "^latency_scale = 1.0" "$WORK/reel.toml" || { echo "the shipped demo origin is not at production latency" >&2; exit 1; }
(cd "$WORK" && exec "$TGT/release/reel" serve --config reel.toml >"$WORK/stdout.log" 2>"$WORK/stderr.log") &
pid=$!
for _ in $(seq 1 100); do curl -s -o /dev/null "http://127.0.0.1:$PORT_BASE/healthz" && break; sleep 0.1; done
curl -s -o /dev/null "http://127.0.0.1:$PORT_BASE/healthz" || { tail -3 "$WORK/stderr.log" >&2; exit 1; }
timeout $((DUR + 60)) "$TGT/release/reel-load" llhls -v "$VIEWERS" -d "$DUR" \
    --origin "http://127.0.0.1:$((PORT_BASE + 1))" "http://127.0.0.1:$PORT_BASE/live/index.m3u8" --kv \
    > "$WORK/load.kv"
echo "blocking_timeout=$BT viewers=$VIEWERS duration_s=$DUR"
grep -E "errors_total|viewers_fell_behind|parts_caught_up|playlists_blocking|^llhls.parts=|latency_us.p99|per_part.max|per_playlist_version.max" "$WORK/load.kv"
curl -s "http://127.0.0.1:$((PORT_BASE + 2))/metrics" |
    grep -E '^reel_blocking_timeouts_total|^reel_origin_errors_total.*kind="(blocking|first_byte)_timeout"'
