#!/usr/bin/env bash
# A shield tier under a live herd: EDGES reel edges fill from one reel shield (rendezvous
# balancing, the origin as their second tier), the shield fills from the demo origin.
# VIEWERS synchronized live viewers (reel-load live) are spread evenly over the edges for DUR
# seconds. Reports what the origin received per live segment (the target: exactly 1) and the
# chained Cache-Status a viewer sees. Loopback only; every process it starts is stopped by
# PID at exit.
#
# Knobs (environment):
#   VIEWERS (1000)  DUR (s of live viewing, 12)  EDGES (3)
#   SEGMENT_SIZE (bytes per live segment, 262144)  SEGMENT_MS (live segment duration, 2000)
#   PORT_BASE (18380: origin, +1 shield, +2 shield admin, then per edge a data and an admin port)
#   SKIP_BUILD (1 = use existing binaries)  CARGO_TARGET_DIR (where binaries are built/found)
# Output: a markdown table on stdout and in benches/runs/<date>-<host>/shield.md; raw
# reel-load and origin outputs in benches/runs/<date>-<host>/raw/ (gitignored).
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
VIEWERS=${VIEWERS:-1000}
DUR=${DUR:-12}
EDGES=${EDGES:-3}
SEGMENT_SIZE=${SEGMENT_SIZE:-262144}
SEGMENT_MS=${SEGMENT_MS:-2000}
PORT_BASE=${PORT_BASE:-18380}
TGT=${CARGO_TARGET_DIR:-$ROOT/target}
ORIGIN_PORT=$PORT_BASE
SHIELD_PORT=$((PORT_BASE + 1))
LAST_PORT=$((PORT_BASE + 2 + 2 * EDGES))
T_START=$(date +%s)
RUN_DIR=$HERE/runs/$(date -u +%Y-%m-%d)-$(hostname -s)
RAW=$RUN_DIR/raw

log() { echo "[$(date +%H:%M:%S)] $*" >&2; }
die() { log "ERROR: $*"; exit 1; }

((EDGES >= 1 && VIEWERS >= EDGES)) || die "need at least one edge and one viewer per edge"
need=()
for p in curl python3; do command -v "$p" >/dev/null || need+=("$p"); done
if ((${#need[@]})); then
    log "installing: ${need[*]}"
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]/python3/python3-minimal}" >/dev/null
fi
for port in $(seq "$PORT_BASE" "$LAST_PORT"); do
    if ss -ltnH "sport = :$port" | grep -q .; then die "port $port already in use"; fi
done

if [[ "${SKIP_BUILD:-0}" != 1 ]]; then
    log "building (release) into $TGT"
    (cd "$ROOT" && cargo build -q --release --locked -p reel -p reel-benches -p reel-demo-origin)
fi
REEL=$TGT/release/reel
LOAD=$TGT/release/reel-load
ORIGIN_BIN=$TGT/release/reel-demo-origin
for b in "$REEL" "$LOAD" "$ORIGIN_BIN"; do [[ -x "$b" ]] || die "no $b (build it or unset SKIP_BUILD)"; done
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"

WORK=$(mktemp -d /tmp/reel-shield.XXXXXX)
STARTED=()
cleanup() {
    local rc=$? pid i alive
    trap - EXIT INT TERM
    for pid in "${STARTED[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    for i in $(seq 50); do
        alive=0
        for pid in "${STARTED[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
        ((alive)) || break
        sleep 0.1
    done
    for pid in "${STARTED[@]}"; do
        if kill -0 "$pid" 2>/dev/null; then log "PID $pid still alive, KILL"; kill -KILL "$pid" 2>/dev/null || true; fi
    done
    rm -rf "$WORK"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

wait_http() {   # url, log file, PID that must stay alive
    local i
    for i in $(seq 100); do
        [[ "$(curl -s -o /dev/null -m 1 -w '%{http_code}' "$1" || true)" == 200 ]] && return 0
        kill -0 "$3" 2>/dev/null || break
        sleep 0.1
    done
    log "no 200 from $1; last log lines:"; tail -n 20 "$2" >&2 || true
    return 1
}

# reel_conf NAME PORT ADMIN_PORT CPU TIERS: a reel node whose one site's origin group has the
# given tiers, one per line: a TOML array of hosts, optionally `|` and a host_header.
reel_conf() {
    local name=$1 port=$2 admin=$3 cpu=$4 tiers=$5 t hosts hh
    mkdir -p "$WORK/$name/store"
    {
        cat <<EOF
[server]
cdn_id = "reel-bench"
max_hops = 3
cache_status_name = "$name"

[log]
level = "warn"

[[listener]]
name = "http"
address = "127.0.0.1:$port"
backlog = 4096

[cores]
workers = [$cpu]
irq = "auto"
nic = []

[admin]
address = "127.0.0.1:$admin"

[access_log]
enabled = false

[store]
path = "$WORK/$name/store"
size = "256MiB"
volume_size = "16MiB"

[[site]]
hosts = ["127.0.0.1", "localhost"]
origin_group = "up"

[[origin_group]]
name = "up"
balance = "rendezvous"
retries = 1

  [origin_group.health]
  enabled = false
EOF
        while read -r t; do
            [[ -n $t ]] || continue
            IFS='|' read -r hosts hh <<<"$t"
            printf '\n  [[origin_group.tier]]\n  hosts = %s\n' "$hosts"
            [[ -z $hh ]] || printf '  host_header = "%s"\n' "$hh"
        done <<<"$tiers"
    } >"$WORK/$name/reel.toml"
}

start_reel() {   # NAME PORT
    "$REEL" serve --config "$WORK/$1/reel.toml" >"$WORK/$1/stdout.log" 2>"$WORK/$1/stderr.log" &
    local pid=$!
    STARTED+=("$pid")
    wait_http "http://127.0.0.1:$2/healthz" "$WORK/$1/stderr.log" "$pid" || die "$1 did not start"
    log "$1 up on :$2 (pid $pid)"
}

mkdir -p "$RAW" "$WORK/origin"
"$ORIGIN_BIN" --listen "127.0.0.1:$ORIGIN_PORT" --latency-scale 0 \
    --live-segment-size "$SEGMENT_SIZE" --segment-duration-ms "$SEGMENT_MS" \
    >"$WORK/origin/stdout.log" 2>"$WORK/origin/stderr.log" &
STARTED+=("$!")
wait_http "http://127.0.0.1:$ORIGIN_PORT/live/index.m3u8" "$WORK/origin/stderr.log" "$!" || die "origin failed"

reel_conf shield "$SHIELD_PORT" $((PORT_BASE + 2)) 1 "[\"127.0.0.1:$ORIGIN_PORT\"]"
start_reel shield "$SHIELD_PORT"
EDGE_PORTS=()
for i in $(seq "$EDGES"); do
    port=$((PORT_BASE + 1 + 2 * i))
    # The shield first; the origin only when the shield is unavailable. Each edge is reached
    # on its own port, so its viewers' Host differs (127.0.0.1:PORT) where a deployment's
    # edges all see the site's one name: host_header gives the shield that one name, so the
    # edges' fills of one segment are one object there.
    reel_conf "edge-$i" "$port" $((port + 1)) 0 "[\"127.0.0.1:$SHIELD_PORT\"]|127.0.0.1
[\"127.0.0.1:$ORIGIN_PORT\"]|127.0.0.1"
    start_reel "edge-$i" "$port"
    EDGE_PORTS+=("$port")
done

curl -s -m 5 "http://127.0.0.1:$ORIGIN_PORT/__origin/stats" >"$RAW/shield-origin-before.json"
per_edge=$((VIEWERS / EDGES))
log "live herd: $VIEWERS viewers ($per_edge per edge) for ${DUR}s"
LOADS=()
for i in "${!EDGE_PORTS[@]}"; do
    n=$per_edge
    ((i == 0)) && n=$((VIEWERS - per_edge * (EDGES - 1)))
    taskset -c 1 "$LOAD" live -v "$n" -d "${DUR}s" --json \
        "http://127.0.0.1:${EDGE_PORTS[$i]}/live/index.m3u8" >"$RAW/shield-load-edge-$((i + 1)).json" &
    LOADS+=("$!")
    STARTED+=("$!")
done
for pid in "${LOADS[@]}"; do wait "$pid" || die "reel-load failed"; done
curl -s -m 5 "http://127.0.0.1:$ORIGIN_PORT/__origin/stats" >"$RAW/shield-origin-after.json"
# What a viewer sees for the newest segment: the shield's entry, then the edge's.
seg=$(curl -s -m 5 "http://127.0.0.1:${EDGE_PORTS[0]}/live/index.m3u8" | grep -E '^seg_[0-9]+\.ts$' | tail -n 1)
chained=$(curl -s -m 5 -o /dev/null -D - "http://127.0.0.1:${EDGE_PORTS[0]}/live/$seg" |
    tr -d '\r' | grep -i '^cache-status:' | cut -d' ' -f2- || true)

mkdir -p "$RUN_DIR"
python3 - "$RAW" "$EDGES" "$VIEWERS" "$DUR" "$SEGMENT_SIZE" "$chained" \
    "$(( $(date +%s) - T_START ))" >"$RUN_DIR/shield.md" <<'EOF'
import json, re, sys
raw, edges, viewers, dur, size, chained, secs = sys.argv[1:]
before = json.load(open(f"{raw}/shield-origin-before.json"))["by_path"]
after = json.load(open(f"{raw}/shield-origin-after.json"))["by_path"]
delta = {p: n - before.get(p, 0) for p, n in after.items() if n - before.get(p, 0) > 0}
segs = {p: n for p, n in delta.items() if re.fullmatch(r"/live/seg_\d+\.ts", p)}
playlists = sum(n for p, n in delta.items() if p.endswith(".m3u8"))
loads = [json.load(open(f"{raw}/shield-load-edge-{i + 1}.json")) for i in range(int(edges))]
served = sum(l["segments"] for l in loads)
errors = sum(l["errors_total"] for l in loads)
counts = sorted(segs.values())
mean = sum(counts) / len(counts) if counts else 0
ok = counts and counts[-1] == 1 and counts[0] == 1 and errors == 0
print(f"# Shield tier under a live herd\n")
print(f"{edges} reel edges -> 1 reel shield -> reel-demo-origin, loopback; {viewers} live viewers "
      f"(reel-load live, synchronized starts) spread over the edges for {dur} s; "
      f"live segments of {size} bytes.\n")
print("| metric | value |\n|---|---:|")
print(f"| segments served to viewers | {served} |")
print(f"| distinct live segments the origin was asked for | {len(counts)} |")
if counts:
    print(f"| origin requests per segment: min / mean / max | {counts[0]} / {mean:.2f} / {counts[-1]} |")
print(f"| playlists served to viewers | {sum(l['playlists'] for l in loads)} |")
print(f"| origin requests for playlists | {playlists} |")
ttfb = " / ".join(f"{l['segment_ttfb_us']['p50'] / 1000:.1f}, {l['segment_ttfb_us']['p99'] / 1000:.1f}"
                  for l in loads)
print(f"| segment time to first byte p50, p99 per edge (ms) | {ttfb} |")
print(f"| client errors | {errors} |")
print(f"| Cache-Status of a segment at edge-1 | `{chained}` |")
print(f"\nOne origin request per segment: **{'met' if ok else 'NOT met'}**. Whole run: {secs} s.")
EOF
cat "$RUN_DIR/shield.md"
