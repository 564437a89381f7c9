#!/usr/bin/env bash
# LL-HLS viewers through reel on the shipped config, its demo origin at its production
# latency (p99.9 2.47 s, p99.99 6.05 s): what `[cache] blocking_timeout` costs viewers when
# the origin is slow. Prints reel-load's LL-HLS figures and reel's blocking-timeout counters.
#
#   BLOCKING_TIMEOUT (10s, the shipped default)  VIEWERS (100)  DUR (300, seconds)  PORT_BASE (18280: data, +1
#   demo origin, +2 admin, +3 https)  SKIP_BUILD (1 = use existing binaries)
#   CARGO_TARGET_DIR (where binaries are built/found)
#   LATENCY_SCALE (1.0: the demo origin's latency table times this; 3 makes slow answers
#   common enough to meet in minutes)
#   PLAYER_TIMEOUT (5s: how long a viewer waits for an answer before it gives up and asks
#   again, reel-load's --timeout)
#   DIRECT (0: viewers that read the demo origin directly during the same run, as a
#   reference for what the path through reel adds)
#   HEADER (none: one extra request header every viewer sends, e.g. "Accept-Encoding: br";
#   compressed playlists are decoded before the viewer reads them)
#
#   BLOCKING_TIMEOUT=3s LATENCY_SCALE=2 PLAYER_TIMEOUT=15s benches/llhls-latency.sh
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BT=${BLOCKING_TIMEOUT:-10s}
PLAYER_TIMEOUT=${PLAYER_TIMEOUT:-5s}
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
    -e "s/^latency_scale = 1.0 /latency_scale = ${LATENCY_SCALE:-1.0} /" \
    "$ROOT/config/reel.toml" > "$WORK/reel.toml"
grep -q "^blocking_timeout = \"$BT\"" "$WORK/reel.toml" || { echo "no blocking_timeout line" >&2; exit 1; }
grep -q "^latency_scale = ${LATENCY_SCALE:-1.0} " "$WORK/reel.toml" || { echo "no latency_scale line in the shipped config" >&2; exit 1; }
(cd "$WORK" && exec "$TGT/release/reel" serve --config reel.toml >"$WORK/stdout.log" 2>"$WORK/stderr.log") &
pid=$!
for _ in $(seq 1 100); do curl -s -o /dev/null "http://127.0.0.1:$PORT_BASE/healthz" && break; sleep 0.1; done
curl -s -o /dev/null "http://127.0.0.1:$PORT_BASE/healthz" || { tail -3 "$WORK/stderr.log" >&2; exit 1; }
direct=""
if [[ ${DIRECT:-0} -gt 0 ]]; then
    timeout $((DUR + 60)) "$TGT/release/reel-load" llhls -v "$DIRECT" -d "$DUR" \
        "http://127.0.0.1:$((PORT_BASE + 1))/live/index.m3u8" --kv > "$WORK/direct.kv" &
    direct=$!
fi
extra=()
[[ -n ${HEADER:-} ]] && extra=(-H "$HEADER")
timeout $((DUR + 60)) "$TGT/release/reel-load" llhls -v "$VIEWERS" -d "$DUR" --timeout "$PLAYER_TIMEOUT" \
    "${extra[@]}" --origin "http://127.0.0.1:$((PORT_BASE + 1))" "http://127.0.0.1:$PORT_BASE/live/index.m3u8" --kv \
    > "$WORK/load.kv"
[[ -n $direct ]] && wait "$direct"
figures='errors_total|playlists_compressed|errors\.[a-z_0-9]+=[1-9]|last_byte_by_index.*(index|p50|p99)=|viewers_fell_behind|parts_caught_up|playlists_blocking|^llhls.parts=|latency_us.p(50|99)|per_part.max|per_playlist_version.max'
echo "header=${HEADER:-none} blocking_timeout=$BT viewers=$VIEWERS duration_s=$DUR latency_scale=${LATENCY_SCALE:-1.0} player_timeout=$PLAYER_TIMEOUT"
grep -E "$figures" "$WORK/load.kv"
if [[ -n $direct ]]; then
    echo "direct from the origin: viewers=$DIRECT"
    grep -E "$figures" "$WORK/direct.kv" | grep -v per_
fi
curl -s "http://127.0.0.1:$((PORT_BASE + 2))/metrics" |
    grep -E '^reel_blocking_timeouts_total|^reel_origin_errors_total.*kind="(blocking|first_byte)_timeout"'
