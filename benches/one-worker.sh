# Sourced by the one-worker benches (idle-ramp.sh, park-cost.sh, access.sh, cors-cost.sh, ...): a release build, a temp dir cleaned on exit,
# a python origin serving a 1 KiB object that stays fresh, and reel's config for one
# worker on CPU 1 (listener PORT, origin PORT+1, admin PORT+2). The caller sets PORT.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(dirname "$HERE")
cd "$ROOT"
cargo build -q --release --locked -p reel -p reel-benches
BIN=$ROOT/target/release
TMP=$(mktemp -d)
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    [[ -n "${KEEP:-}" ]] || rm -rf "$TMP"
}
trap cleanup EXIT
echo "work dir: $TMP" >&2

mkdir -p "$TMP/origin"
head -c 1024 /dev/zero >"$TMP/origin/obj1k"
# The origin sends no Cache-Control: an old Last-Modified keeps the object fresh (heuristic
# freshness), so every request is a hit.
touch -d 2020-01-01 "$TMP/origin/obj1k"
(cd "$TMP/origin" && exec python3 -m http.server "$((PORT + 1))" --bind 127.0.0.1) >/dev/null 2>&1 &
PIDS+=($!)
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$((PORT + 1))/obj1k" >/dev/null && break; sleep 0.1; done

# Writes $TMP/reel.toml with an empty store; extra `[http]` lines as arguments.
write_config() {
    rm -rf "$TMP/store"
    {
        cat <<EOF
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
EOF
        printf '%s\n' "$@"
    } >"$TMP/reel.toml"
}

# Starts reel on $TMP/reel.toml (environment from the arguments, `NAME=value`), waits for
# /healthz, sets REEL to its PID.
start_reel() {
    env "$@" "$BIN/reel" serve --config "$TMP/reel.toml" \
        --origin "http://127.0.0.1:$((PORT + 1))" >"$TMP/reel.log" 2>&1 &
    REEL=$!
    PIDS+=("$REEL")
    for _ in $(seq 100); do curl -sf "http://127.0.0.1:$PORT/healthz" >/dev/null && break; sleep 0.1; done
}

# The median of the space-separated numbers on standard input (the lower of the two middle
# ones for an even count), for the scripts' per-round figures.
median() { tr ' ' '\n' | grep . | sort -g | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
