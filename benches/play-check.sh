#!/usr/bin/env bash
# Plays the demo with ffmpeg, straight from the demo origin and through reel, on the default
# config (config/reel.toml: reel on 127.0.0.1:8080, the built-in demo origin on :8081):
#
#     ffmpeg -i http://127.0.0.1:PORT/live/index.m3u8 -t 6 -c copy -f null -
#
# for the live stream and a VOD title on both ports. A check passes when ffmpeg exits 0 and
# prints no warning or error (-v warning). ffmpeg is installed with apt-get when missing;
# when it cannot be, every check is reported skipped. reel runs from a temporary directory
# (the config's ./var paths land there) and is stopped by PID at exit.
#
#     benches/play-check.sh                    # builds reel (release) first
#     SKIP_BUILD=1 CARGO_TARGET_DIR=/path benches/play-check.sh
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
TGT=${CARGO_TARGET_DIR:-$ROOT/target}
CONFIG=$ROOT/config/reel.toml
CHECKS=("8081/live/index.m3u8" "8081/vod/title_001/index.m3u8"
        "8080/live/index.m3u8" "8080/vod/title_001/index.m3u8")

log() { printf '%s\n' "$*" >&2; }

if ! command -v ffmpeg >/dev/null; then
    log "ffmpeg missing: installing it with apt-get"
    if ! { [[ $(id -u) == 0 ]] && apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
            apt-get install -y -qq ffmpeg >/dev/null; }; then
        log "SKIPPED ${#CHECKS[@]} checks: ffmpeg is not installed and could not be installed"
        echo "0 passed, 0 failed, ${#CHECKS[@]} skipped"
        exit 0
    fi
fi

for port in 8080 8081 9090; do
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
        log "port $port is taken: stop what listens there first"
        exit 1
    fi
done

if [[ -z ${SKIP_BUILD:-} ]]; then
    (cd "$ROOT" && cargo build -q --release --locked -p reel)
fi

WORK=$(mktemp -d)
REEL_PID=
cleanup() {
    if [[ -n $REEL_PID ]]; then
        kill -TERM "$REEL_PID" 2>/dev/null || true
        for _ in $(seq 50); do kill -0 "$REEL_PID" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$REEL_PID" 2>/dev/null || true
    fi
    rm -rf "$WORK"
}
trap cleanup EXIT

(cd "$WORK" && exec "$TGT/release/reel" serve --config "$CONFIG") >"$WORK/reel.log" 2>&1 &
REEL_PID=$!
for _ in $(seq 300); do
    if curl -fsS -o /dev/null http://127.0.0.1:8080/healthz 2>/dev/null \
        && curl -fsS -o /dev/null http://127.0.0.1:8081/healthz 2>/dev/null; then
        break
    fi
    kill -0 "$REEL_PID" 2>/dev/null || { log "reel exited:"; cat "$WORK/reel.log" >&2; exit 1; }
    sleep 0.1
done

passed=0
failed=0
for check in "${CHECKS[@]}"; do
    url="http://127.0.0.1:$check"
    cmd=(ffmpeg -hide_banner -nostdin -v warning -i "$url" -t 6 -c copy -f null -)
    if out=$(timeout 120 "${cmd[@]}" 2>&1) && [[ -z $out ]]; then
        passed=$((passed + 1))
        log "ok      ${cmd[*]}"
    else
        failed=$((failed + 1))
        log "FAILED  ${cmd[*]}"
        log "$out"
    fi
done
echo "$passed passed, $failed failed"
[[ $failed == 0 ]]
