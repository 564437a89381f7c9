#!/usr/bin/env bash
# reel against its peers on one server core: nginx proxy_cache, Varnish (malloc) and
# nginx serving the same files statically (the practical ceiling), all pinned to CPU 0,
# our load generator (reel-load) pinned to CPU 1. Loopback only.
#
# Knobs (environment):
#   DUR (s per measured run, 3)       ROUNDS (interleaved rounds, median reported, 3)
#   WARM_DUR (s of warm load per server and object, 1)   CONNS (connections, 64)
#   OPEN_RATE (req/s of the open-loop run on the 1 KiB object, 2000)
#   STRACE_DUR (s of load under strace, 3; 0 skips)      LIVE_VIEWERS (1000)  LIVE_DUR (s, 6)
#   HERD_VIEWERS (100)  HERD_DUR (s, 4)  STREAM_MS (slow-origin body spread, 1000)
#   SKIP_BUILD (1 = use existing binaries)  CARGO_TARGET_DIR (where binaries are built/found)
#   PORT_BASE (18180: origin, +1 nginx-cache, +2 varnish, +3 nginx-static, +4 reel, +5 reel admin,
#              +6 reel https, +7 nginx-cache https, +8 reel sliced, +9 its admin, +10 nginx slice)
#   SECTIONS ("plain tls llhls"): which tables to measure. llhls: LL_VIEWERS LL-HLS players
#     through reel, nginx-cache and Varnish (reel-load llhls: edge-added latency, origin
#     requests per part and playlist version). tls: reel's and nginx-cache's HTTPS
#     listeners (same ECDSA P-256 certificate, same core): HTTP/1.1 keep-alive (reel-load
#     fixed), HTTP/2 (h2load -c H2_CLIENTS -m H2_STREAMS), full and resumed TLS 1.3
#     handshakes (reel-load connect, HS_CONNS connections, one 1 KiB request each).
#   H2_CLIENTS (8)  H2_STREAMS (16)  HS_CONNS (32)
#   seek (in SECTIONS): large files by ranges. SEEK_VIEWERS viewers play a SEEK_SIZE-byte
#     MP4-like file of the demo origin (/obj/<n>.mp4) by SEEK_CHUNK-byte ranges from random
#     start points at SEEK_RATE bytes/s (reel-load seek, SEEK_RUN s per seek, SEEK_DUR s in
#     all), each origin fetch delayed SEEK_DELAY_MS: reel with `slice = "2MiB"` (read_ahead
#     SEEK_READ_AHEAD) against nginx with `slice 2m` and proxy_cache. SEEK_ROUNDS
#     interleaved rounds, median shown; each round asks for a URL of its own (a query
#     string), so both caches start cold, and both servers get the same viewers (the
#     round's seed). Both caches hold every round (SEEK_ROUNDS x SEEK_SIZE + 512 MiB of
#     disk each), so nothing is evicted. Needs the demo origin (it counts body bytes sent).
#   SEEK_VIEWERS (48)  SEEK_DUR (30)  SEEK_SIZE (1073741824)  SEEK_CHUNK (2097152)
#   SEEK_RATE (2097152)  SEEK_RUN (5)  SEEK_DELAY_MS (20)  SEEK_READ_AHEAD (2)  SEEK_ROUNDS (3)
#   LL_VIEWERS (LL-HLS viewers, 1000)  LL_DUR (s per LL-HLS run, 10)
# Output: the markdown table on stdout and in benches/runs/<date>-<host>/results.md; raw
# outputs in benches/runs/<date>-<host>/raw/ (gitignored).
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
DUR=${DUR:-3}
ROUNDS=${ROUNDS:-3}
WARM_DUR=${WARM_DUR:-1}
CONNS=${CONNS:-64}
OPEN_RATE=${OPEN_RATE:-2000}
STRACE_DUR=${STRACE_DUR:-3}
LIVE_VIEWERS=${LIVE_VIEWERS:-1000}
LIVE_DUR=${LIVE_DUR:-6}
HERD_VIEWERS=${HERD_VIEWERS:-100}
HERD_DUR=${HERD_DUR:-4}
STREAM_MS=${STREAM_MS:-1000}
PORT_BASE=${PORT_BASE:-18180}
SECTIONS=${SECTIONS:-plain tls llhls}
LL_VIEWERS=${LL_VIEWERS:-1000}
LL_DUR=${LL_DUR:-10}
H2_CLIENTS=${H2_CLIENTS:-8}
H2_STREAMS=${H2_STREAMS:-16}
HS_CONNS=${HS_CONNS:-32}
SEEK_VIEWERS=${SEEK_VIEWERS:-48}
SEEK_DUR=${SEEK_DUR:-30}
SEEK_SIZE=${SEEK_SIZE:-1073741824}
SEEK_CHUNK=${SEEK_CHUNK:-2097152}
SEEK_RATE=${SEEK_RATE:-2097152}
SEEK_RUN=${SEEK_RUN:-5}
SEEK_DELAY_MS=${SEEK_DELAY_MS:-20}
SEEK_READ_AHEAD=${SEEK_READ_AHEAD:-2}
SEEK_ROUNDS=${SEEK_ROUNDS:-3}
has() { [[ " $SECTIONS " == *" $1 "* ]]; }
TGT=${CARGO_TARGET_DIR:-$ROOT/target}
SRV_CPU=0
GEN_CPU=1
ORIGIN_PORT=$PORT_BASE
REEL_PORT=$((PORT_BASE + 4))
REEL_ADMIN_PORT=$((PORT_BASE + 5))
REEL_TLS_PORT=$((PORT_BASE + 6))
NGINX_TLS_PORT=$((PORT_BASE + 7))
T_START=$(date +%s)
RUN_DIR=$HERE/runs/$(date -u +%Y-%m-%d)-$(hostname -s)
RAW=$RUN_DIR/raw
CLK_TCK=$(getconf CLK_TCK)

log() { echo "[$(date +%H:%M:%S)] $*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# ---------------------------------------------------------------- installs
need=()
for p in nginx varnish strace curl openssl nghttp2-client; do dpkg -s "$p" >/dev/null 2>&1 || need+=("$p"); done
if ((${#need[@]})); then
    log "installing: ${need[*]}"
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi

for port in $(seq "$PORT_BASE" $((PORT_BASE + 10))); do
    if ss -ltnH "sport = :$port" | grep -q .; then die "port $port already in use"; fi
done

# ---------------------------------------------------------------- build
if [[ "${SKIP_BUILD:-0}" != 1 ]]; then
    log "building (release) into $TGT"
    BUILD_LOG=$(mktemp /tmp/reel-compare-build.XXXXXX)
    if ! (cd "$ROOT" && cargo build -q --release --locked -p reel -p reel-benches -p reel-demo-origin) 2>"$BUILD_LOG"; then
        log "full build failed (see below); retrying without reel"; tail -n 5 "$BUILD_LOG" >&2
        (cd "$ROOT" && cargo build -q --release --locked -p reel-benches -p reel-demo-origin) 2>>"$BUILD_LOG" ||
            (cd "$ROOT" && cargo build -q --release --locked -p reel-benches) || die "reel-load does not build"
    fi
    rm -f "$BUILD_LOG"
fi
LOAD=$TGT/release/reel-load
[[ -x "$LOAD" ]] || die "no $LOAD (build it or unset SKIP_BUILD)"
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"

# ---------------------------------------------------------------- process bookkeeping
WORK=$(mktemp -d /tmp/reel-compare.XXXXXX)
chmod 755 "$WORK"            # varnish's child runs as user vcache and must traverse it
STARTED=()                   # PIDs we started
declare -A PIDS_OF=()        # server -> PIDs doing the serving (for strace)
descendants() { local p=$1 c; echo "$p"; for c in $(ps -o pid= --ppid "$p"); do descendants "$c"; done; }
cleanup() {
    local rc=$? pid all=() i alive
    trap - EXIT INT TERM
    for pid in "${STARTED[@]}"; do all+=($(descendants "$pid")); done
    for pid in "${STARTED[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    for i in $(seq 50); do
        alive=0
        for pid in "${all[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
        ((alive)) || break
        sleep 0.1
    done
    for pid in "${all[@]}"; do
        if kill -0 "$pid" 2>/dev/null; then log "PID $pid still alive, KILL"; kill -KILL "$pid" 2>/dev/null || true; fi
    done
    rm -rf "$WORK"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

http_code() { curl -sk -o /dev/null -m "${2:-2}" -w '%{http_code}' "$1" || true; }
wait_http() {   # url, log file, tries (x0.1 s), optional PID that must stay alive
    local i
    for i in $(seq "${3:-100}"); do
        [[ "$(http_code "$1" 1)" == 200 ]] && return 0
        [[ -z "${4:-}" ]] || kill -0 "$4" 2>/dev/null || break
        sleep 0.1
    done
    log "no 200 from $1; last log lines:"; tail -n 20 "$2" >&2 || true
    return 1
}

OBJECTS=(/live/playlist.m3u8 /live/part0.m4s /vod/seg.ts)

# ---------------------------------------------------------------- origin (the one switch)
# reel-demo-origin when it is built (counts requests at /__origin/stats, slow-streams on
# x-origin-stream-ms, serves live HLS), else nginx over a generated corpus with an access
# log as its counter (no live playlist, no slow streaming: those rows become n/a).
ORIGIN_KIND=nginx
[[ -x "$TGT/release/reel-demo-origin" ]] && ORIGIN_KIND=demo
mkdir -p "$WORK/origin" "$WORK/www"
nginx_conf() {  # dir, extra http lines, server block
    local d=$1
    mkdir -p "$d/tmp"
    cat > "$d/nginx.conf" <<EOF
user root;
worker_processes 1;
pid $d/nginx.pid;
error_log $d/error.log warn;
events { worker_connections 4096; }
http {
    include /etc/nginx/mime.types;
    types { video/iso.segment m4s; }
    access_log off;
    sendfile on;
    tcp_nopush on;
    keepalive_requests 1000000;
    open_file_cache max=10000 inactive=60s;
    client_body_temp_path $d/tmp/body;
    proxy_temp_path $d/tmp/proxy;
    fastcgi_temp_path $d/tmp/fastcgi;
    uwsgi_temp_path $d/tmp/uwsgi;
    scgi_temp_path $d/tmp/scgi;
$2
$3
}
EOF
}
start_nginx() {  # name, port, cpu
    local d=$WORK/$1 pid
    taskset -c "$3" nginx -p "$d/" -e "$d/error.log" -c "$d/nginx.conf" -g 'daemon off;' >"$d/stdout.log" 2>&1 &
    pid=$!
    STARTED+=("$pid")
    wait_http "http://127.0.0.1:$2/live/playlist.m3u8" "$d/error.log" || die "$1 failed to start"
    PIDS_OF[$1]="$(descendants "$pid" | grep -vx "$pid" | tr '\n' ' ')"
    log "$1 up on :$2 (master $pid, children ${PIDS_OF[$1]})"
}
if [[ $ORIGIN_KIND == demo ]]; then
    # the origin is idle while hits are measured; keep it off the server core
    taskset -c "$GEN_CPU" "$TGT/release/reel-demo-origin" --listen "127.0.0.1:$ORIGIN_PORT" --latency-scale 0 \
        >"$WORK/origin/stdout.log" 2>"$WORK/origin/stderr.log" &
    STARTED+=("$!")
    wait_http "http://127.0.0.1:$ORIGIN_PORT/live/playlist.m3u8" "$WORK/origin/stderr.log" || die "origin failed"
    origin_count() {   # the first "total" of /__origin/stats is the overall request count
        curl -s -m 5 "http://127.0.0.1:$ORIGIN_PORT/__origin/stats" | grep -o '"total": *[0-9]*' | head -1 | grep -o '[0-9]*$' || echo 0
    }
else
    mkdir -p "$WORK/www/live" "$WORK/www/vod"
    { printf '#EXTM3U\n#EXT-X-TARGETDURATION:2\n'; printf '#%*s\n' 1000 '' | tr ' ' x; } | head -c 1024 > "$WORK/www/live/playlist.m3u8"
    head -c 262144 /dev/urandom > "$WORK/www/live/part0.m4s"
    head -c 2097152 /dev/urandom > "$WORK/www/vod/seg.ts"
    nginx_conf "$WORK/origin" "    access_log $WORK/origin/access.log;" \
        "    server { listen 127.0.0.1:$ORIGIN_PORT; root $WORK/www;
             location / { add_header Cache-Control \"public, max-age=3600\"; } }"
    start_nginx origin "$ORIGIN_PORT" "$GEN_CPU"
    origin_count() { cat "$WORK/origin/access.log" 2>/dev/null | wc -l; }
fi
log "origin: $ORIGIN_KIND on :$ORIGIN_PORT"
ORIGIN=http://127.0.0.1:$ORIGIN_PORT

# one certificate for every HTTPS listener: ECDSA P-256, for localhost and 127.0.0.1
mkdir -p "$WORK/tls"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 30 -subj /CN=localhost \
    -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" -addext "basicConstraints=critical,CA:FALSE" \
    -keyout "$WORK/tls/key.pem" -out "$WORK/tls/cert.pem" 2>/dev/null || die "openssl req"

# nginx-static serves the same bytes the origin serves, fetched once
mkdir -p "$WORK/static"
for p in "${OBJECTS[@]}"; do
    mkdir -p "$WORK/static$(dirname "$p")"
    curl -sf -m 30 -o "$WORK/static$p" "$ORIGIN$p" || die "fetching $p from the origin"
done

# ---------------------------------------------------------------- servers
SERVERS=()   # name|base url, in table order
nginx_conf "$WORK/nginx-cache" \
    "    proxy_cache_path $WORK/nginx-cache/cache levels=1:2 keys_zone=edge:64m max_size=4g inactive=1h use_temp_path=off;
    upstream origin { server 127.0.0.1:$ORIGIN_PORT; keepalive 32; }" \
    "    server { listen 127.0.0.1:$((PORT_BASE + 1));
        listen 127.0.0.1:$NGINX_TLS_PORT ssl http2;
        ssl_certificate $WORK/tls/cert.pem;
        ssl_certificate_key $WORK/tls/key.pem;
        ssl_protocols TLSv1.2 TLSv1.3;
        ssl_session_tickets on;
        location / {
            proxy_pass http://origin;
            proxy_http_version 1.1;
            proxy_set_header Connection \"\";
            proxy_cache edge;
            proxy_cache_key \$scheme\$proxy_host\$uri\$is_args\$args;
            proxy_cache_lock on;
            proxy_cache_valid 200 1h;
            add_header X-Cache \$upstream_cache_status;
        } }"
nginx_conf "$WORK/nginx-static" "" "    server { listen 127.0.0.1:$((PORT_BASE + 3)); root $WORK/static; }"
mkdir -p "$WORK/varnish"
cat > "$WORK/varnish/default.vcl" <<EOF
vcl 4.1;
backend origin { .host = "127.0.0.1"; .port = "$ORIGIN_PORT"; }
EOF

# reel: n/a when not built or when it does not come up
REEL_BIN=$TGT/release/reel
if [[ -x "$REEL_BIN" ]] && { has plain || has tls; }; then
    mkdir -p "$WORK/reel/store"
    cat > "$WORK/reel/reel.toml" <<EOF
[[listener]]
name = "http"
address = "127.0.0.1:$REEL_PORT"
backlog = 4096

[[listener]]
name = "https"
address = "127.0.0.1:$REEL_TLS_PORT"
backlog = 4096
tls_cert = "$WORK/tls/cert.pem"
tls_key = "$WORK/tls/key.pem"

[cores]
workers = [$SRV_CPU]
irq = "auto"
nic = []

[store]
path = "$WORK/reel/store"
size = "2GiB"
volume_size = "64MiB"

[access_log]
enabled = false

[admin]
address = "127.0.0.1:$REEL_ADMIN_PORT"

[[site]]
hosts = ["127.0.0.1", "localhost"]
origin_group = "origin"
prefetch = "hinted"             # LL-HLS, as the demo site

[[origin_group]]
name = "origin"

  [origin_group.health]
  enabled = false

  [[origin_group.tier]]
  hosts = ["127.0.0.1:$ORIGIN_PORT"]
EOF
    taskset -c "$SRV_CPU" "$REEL_BIN" serve --config "$WORK/reel/reel.toml" \
        >"$WORK/reel/stdout.log" 2>"$WORK/reel/stderr.log" &
    rpid=$!
    STARTED+=("$rpid")
    if wait_http "http://127.0.0.1:$REEL_PORT/live/playlist.m3u8" "$WORK/reel/stderr.log" 100 "$rpid"; then
        PIDS_OF[reel]=$(descendants "$rpid" | tr '\n' ' ')
        SERVERS+=("reel|http://127.0.0.1:$REEL_PORT")
        log "reel up on :$REEL_PORT (pid $rpid)"
    else
        log "reel did not start: its row is n/a"
        kill -TERM "$rpid" 2>/dev/null || true
    fi
elif has plain || has tls; then
    log "no $REEL_BIN: reel's row is n/a"
fi
if has plain || has tls; then
    start_nginx nginx-cache $((PORT_BASE + 1)) "$SRV_CPU"
    SERVERS+=("nginx-cache|http://127.0.0.1:$((PORT_BASE + 1))")
fi
if has plain; then
    start_nginx nginx-static $((PORT_BASE + 3)) "$SRV_CPU"
    SERVERS+=("nginx-static|http://127.0.0.1:$((PORT_BASE + 3))")
fi
if has plain || has llhls; then
    taskset -c "$SRV_CPU" varnishd -F -n "$WORK/varnish/n" -a "127.0.0.1:$((PORT_BASE + 2))" \
        -f "$WORK/varnish/default.vcl" -s malloc,1G >"$WORK/varnish/varnishd.log" 2>&1 &
    VPID=$!
    STARTED+=("$VPID")
    wait_http "http://127.0.0.1:$((PORT_BASE + 2))/live/playlist.m3u8" "$WORK/varnish/varnishd.log" || die "varnish failed"
    PIDS_OF[varnish]=$(descendants "$VPID" | tr '\n' ' ')
    SERVERS+=("varnish|http://127.0.0.1:$((PORT_BASE + 2))")
    log "varnish up (manager $VPID)"
fi

# ---------------------------------------------------------------- helpers
rm -rf "$RAW"; mkdir -p "$RAW"
DATA=$RAW/data.psv       # server|metric|round|value
: > "$DATA"
put() { echo "$1|$2|$3|$4" >> "$DATA"; }
cpu0_busy() { awk '$1 == "cpu0" { print $2 + $3 + $4 + $7 + $8 }' /proc/stat; }
irq_sum() { awk -v k="$1:" '$1 == k { s = $2 + $3 } END { print s + 0 }' /proc/interrupts; }
kv() { grep -m1 "^$1=" "$2" 2>/dev/null | cut -d= -f2 || true; }
load() {         # output file, reel-load args... (bounded by its own --duration, plus a guard)
    local out=$1; shift
    timeout 600 taskset -c "$GEN_CPU" "$LOAD" "$@" --kv > "$out" 2>"$out.err" || true
}

# warm: every object twice (miss, then hit), then a short load
for s in "${SERVERS[@]}"; do
    IFS='|' read -r name base <<<"$s"
    for p in "${OBJECTS[@]}"; do
        for pass in 1 2; do
            [[ "$(http_code "$base$p" 30)" == 200 ]] || die "warming $name$p: no 200"
        done
        load /dev/null fixed -c 8 -d "$WARM_DUR" "$base$p"
    done
    log "warmed $name"
done

# ---------------------------------------------------------------- measured rounds
# round -> workload -> server, so machine drift hits every server alike
WORKLOADS=("1k|/live/playlist.m3u8" "256k|/live/part0.m4s" "2m|/vod/seg.ts")
has plain || ROUNDS_PLAIN=0
for round in $(seq "${ROUNDS_PLAIN:-$ROUNDS}"); do
    for w in "${WORKLOADS[@]}" "open|/live/playlist.m3u8"; do
        IFS='|' read -r wl path <<<"$w"
        for s in "${SERVERS[@]}"; do
            IFS='|' read -r name base <<<"$s"
            out=$RAW/$name-$wl-r$round.kv
            c0=$(cpu0_busy); t0=$(irq_sum TLB); a0=$(irq_sum CAL); o0=$(origin_count)
            if [[ $wl == open ]]; then
                load "$out" open -c 32 -r "$OPEN_RATE" -d "$DUR" "$base$path"
            else
                load "$out" fixed -c "$CONNS" -d "$DUR" "$base$path"
            fi
            c1=$(cpu0_busy); t1=$(irq_sum TLB); a1=$(irq_sum CAL); o1=$(origin_count)
            req=$(kv requests "$out"); req=${req:-0}
            if ((req == 0)); then log "$name $wl r$round: no requests"; cat "$out.err" >&2; continue; fi
            put "$name" "$wl.rps" "$round" "$(kv requests_per_s "$out")"
            put "$name" "$wl.mibs" "$round" "$(kv mib_per_s "$out")"
            put "$name" "$wl.p50" "$round" "$(kv latency_us.p50 "$out")"
            put "$name" "$wl.p99" "$round" "$(kv latency_us.p99 "$out")"
            put "$name" "$wl.errors" "$round" "$(kv errors_total "$out")"
            put "$name" "$wl.origin" "$round" $((o1 - o0))
            put "$name" "$wl.cpu_us" "$round" "$(awk -v b=$((c1 - c0)) -v t="$CLK_TCK" -v r="$req" 'BEGIN { printf "%.2f", b * 1e6 / t / r }')"
            put "$name" "tlb" "$round" "$(awk -v d=$((t1 - t0)) -v r="$req" 'BEGIN { printf "%.3f", d * 1000 / r }')"
            put "$name" "cal" "$round" "$(awk -v d=$((a1 - a0)) -v r="$req" 'BEGIN { printf "%.3f", d * 1000 / r }')"
            log "r$round $wl $name: $(kv requests_per_s "$out") req/s, p99 $(kv latency_us.p99 "$out") us, errors $(kv errors_total "$out")"
        done
    done
done

# ---------------------------------------------------------------- syscalls per hit (strace)
if has plain && ((STRACE_DUR > 0)); then
    for w in "1k|/live/playlist.m3u8" "2m|/vod/seg.ts"; do
        IFS='|' read -r wl path <<<"$w"
        for s in "${SERVERS[@]}"; do
            IFS='|' read -r name base <<<"$s"
            [[ -n "${PIDS_OF[$name]:-}" ]] || continue
            pargs=(); for p in ${PIDS_OF[$name]}; do [[ -d /proc/$p ]] && pargs+=(-p "$p"); done
            ((${#pargs[@]})) || continue
            st=$RAW/strace-$name-$wl.txt
            timeout -s INT $((STRACE_DUR + 15)) strace -c -f -qq -o "$st" "${pargs[@]}" &
            spid=$!
            sleep 1
            load "$RAW/strace-load-$name-$wl.kv" fixed -c "$CONNS" -d "$STRACE_DUR" "$base$path"
            kill -INT "$spid" 2>/dev/null || true
            wait "$spid" 2>/dev/null || true
            req=$(kv requests "$RAW/strace-load-$name-$wl.kv"); req=${req:-0}
            [[ $req -gt 0 && -s $st ]] || { log "strace failed for $name $wl"; continue; }
            read -r tot mad fad < <(awk '$NF != "total" && $NF ~ /^[a-z_0-9]+$/ && $4 ~ /^[0-9]+$/ {
                    t += $4; if ($NF == "madvise") m += $4; if ($NF == "fadvise64") f += $4 }
                END { print t + 0, m + 0, f + 0 }' "$st")
            put "$name" "$wl.sys" 1 "$(awk -v t="$tot" -v r="$req" 'BEGIN { printf "%.2f", t / r }')"
            put "$name" "$wl.madvise" 1 "$(awk -v t="$mad" -v r="$req" 'BEGIN { printf "%.3f", t * 1000 / r }')"
            put "$name" "$wl.fadvise" 1 "$(awk -v t="$fad" -v r="$req" 'BEGIN { printf "%.3f", t * 1000 / r }')"
            log "strace $name $wl: $tot syscalls / $req req, madvise $mad, fadvise64 $fad"
        done
    done
fi

# ---------------------------------------------------------------- live herd and coalesced misses
if has plain && [[ $ORIGIN_KIND == demo ]]; then
    for s in "${SERVERS[@]}"; do
        IFS='|' read -r name base <<<"$s"
        [[ $name == nginx-static ]] && continue      # static files: no live stream, no misses
        out=$RAW/live-$name.kv
        o0=$(origin_count)
        load "$out" live -v "$LIVE_VIEWERS" -d "$LIVE_DUR" "$base/live/index.m3u8"
        o1=$(origin_count)
        put "$name" "live.origin" 1 $((o1 - o0))
        put "$name" "live.segments" 1 "$(kv segments "$out")"
        put "$name" "live.errors" 1 "$(kv errors_total "$out")"
        log "live $name: $(kv segments "$out") segments to $LIVE_VIEWERS viewers, $((o1 - o0)) origin requests"
        out=$RAW/herd-$name.kv
        o0=$(origin_count)
        load "$out" herd -v "$HERD_VIEWERS" --interval 1s -d "$HERD_DUR" --timeout 30s \
            -H "x-origin-stream-ms: $STREAM_MS" "$base/obj/2097152?herd={n}"
        o1=$(origin_count)
        put "$name" "herd.ttfb50" 1 "$(kv segment_ttfb_us.p50 "$out")"
        put "$name" "herd.ttfb99" 1 "$(kv segment_ttfb_us.p99 "$out")"
        put "$name" "herd.origin" 1 $((o1 - o0))
        put "$name" "herd.segments" 1 "$(kv segments "$out")"
        log "herd $name: ttfb p50 $(kv segment_ttfb_us.p50 "$out") us p99 $(kv segment_ttfb_us.p99 "$out") us, $((o1 - o0)) origin requests"
    done
fi

# ---------------------------------------------------------------- LL-HLS
# LL_VIEWERS players on the demo origin's live stream through each cache: blocking reloads
# for the next part (_HLS_msn/_HLS_part, delta updates) and the preload-hinted part, as
# `reel-load llhls` plays them. Edge-added latency = arrival (the kernel's receive time)
# minus the origin's x-origin-release-ms; origin requests per part and per playlist
# version from the origin's requests_by_target, reset before each run.
if has llhls && [[ $ORIGIN_KIND == demo ]]; then
    for s in "${SERVERS[@]}"; do
        IFS='|' read -r name base <<<"$s"
        [[ $name == nginx-static ]] && continue      # static files: no live stream
        curl -s -m 5 -X POST "$ORIGIN/__origin/reset" >/dev/null || true
        out=$RAW/llhls-$name.kv
        load "$out" llhls -v "$LL_VIEWERS" -d "$LL_DUR" --origin "$ORIGIN" "$base/live/index.m3u8"
        put "$name" "ll.pl50" 1 "$(kv llhls.playlist_latency_us.p50 "$out")"
        put "$name" "ll.pl99" 1 "$(kv llhls.playlist_latency_us.p99 "$out")"
        put "$name" "ll.pl999" 1 "$(kv llhls.playlist_latency_us.p999 "$out")"
        put "$name" "ll.pt50" 1 "$(kv llhls.part_first_byte_latency_us.p50 "$out")"
        put "$name" "ll.pt99" 1 "$(kv llhls.part_first_byte_latency_us.p99 "$out")"
        put "$name" "ll.pt999" 1 "$(kv llhls.part_first_byte_latency_us.p999 "$out")"
        put "$name" "ll.ver_mean" 1 "$(kv llhls.origin.per_playlist_version.mean "$out")"
        put "$name" "ll.ver_max" 1 "$(kv llhls.origin.per_playlist_version.max "$out")"
        put "$name" "ll.part_mean" 1 "$(kv llhls.origin.per_part.mean "$out")"
        put "$name" "ll.part_max" 1 "$(kv llhls.origin.per_part.max "$out")"
        put "$name" "ll.blocking" 1 "$(kv llhls.playlists_blocking "$out")"
        put "$name" "ll.parts" 1 "$(kv llhls.parts "$out")"
        put "$name" "ll.errors" 1 "$(kv errors_total "$out")"
        put "$name" "ll.behind" 1 "$(kv llhls.viewers_fell_behind "$out")"
        log "llhls $name: playlist p99 $(kv llhls.playlist_latency_us.p99 "$out") us," \
            "part first byte p99 $(kv llhls.part_first_byte_latency_us.p99 "$out") us," \
            "origin per version $(kv llhls.origin.per_playlist_version.mean "$out")" \
            "(max $(kv llhls.origin.per_playlist_version.max "$out")), per part" \
            "$(kv llhls.origin.per_part.mean "$out") (max $(kv llhls.origin.per_part.max "$out"))," \
            "errors $(kv errors_total "$out"), behind $(kv llhls.viewers_fell_behind "$out")"
    done
fi

# ---------------------------------------------------------------- HTTPS and HTTP/2
# reel's and nginx-cache's TLS listeners, the same certificate, both on CPU $SRV_CPU; the
# objects are already cached (warmed over plain HTTP, same caches).
TLS_SERVERS=()
if has tls; then
    [[ -n "${PIDS_OF[reel]:-}" ]] && TLS_SERVERS+=("reel|https://127.0.0.1:$REEL_TLS_PORT")
    TLS_SERVERS+=("nginx-cache|https://127.0.0.1:$NGINX_TLS_PORT")
    for s in "${TLS_SERVERS[@]}"; do
        IFS='|' read -r name base <<<"$s"
        for p in "${OBJECTS[@]}"; do
            [[ "$(http_code "$base$p" 30)" == 200 ]] || die "warming $name$p over TLS: no 200"
        done
    done
fi
# CPU time (user + system, all threads) of a server's processes, in clock ticks: unlike CPU
# 0's busy time it leaves out whatever else runs on the core (a shared machine), and it
# counts the softirq network work done in the server's system calls.
proc_ticks() {
    local t=0 p
    for p in $1; do
        [[ -r /proc/$p/stat ]] && t=$((t + $(awk '{ print $14 + $15 }' "/proc/$p/stat")))
    done
    echo "$t"
}
h2run() {     # output file, url: h2load for DUR s, bounded by a guard
    timeout $((DUR + 60)) taskset -c "$GEN_CPU" h2load -D "$DUR" -c "$H2_CLIENTS" -m "$H2_STREAMS" -t 1 \
        --warm-up-time=1 "$2" > "$1" 2>&1 || true
}
h2kv() {      # file, field: succeeded | failed | rps
    case $2 in
        succeeded) grep -m1 '^requests:' "$1" | sed -E 's/.* ([0-9]+) succeeded.*/\1/' ;;
        failed) grep -m1 '^requests:' "$1" | sed -E 's/.* ([0-9]+) failed.*/\1/' ;;
        rps) grep -m1 '^finished in' "$1" | sed -E 's/.*, ([0-9.]+) req\/s.*/\1/' ;;
    esac
}
for round in $(seq "$ROUNDS"); do
    ((${#TLS_SERVERS[@]})) || break
    for w in "${WORKLOADS[@]}" "hs-full|/live/playlist.m3u8" "hs-resumed|/live/playlist.m3u8"; do
        IFS='|' read -r wl path <<<"$w"
        for proto in h1 h2; do
            [[ $wl == hs-* && $proto == h2 ]] && continue
            for s in "${TLS_SERVERS[@]}"; do
                IFS='|' read -r name base <<<"$s"
                key=tls-$proto-$wl
                out=$RAW/$name-$key-r$round.txt
                c0=$(cpu0_busy); p0=$(proc_ticks "${PIDS_OF[$name]}")
                case $wl/$proto in
                    hs-full/*) load "$out" connect --full -c "$HS_CONNS" -d "$DUR" "$base$path" ;;
                    hs-resumed/*) load "$out" connect -c "$HS_CONNS" -d "$DUR" "$base$path" ;;
                    */h1) load "$out" fixed -c "$CONNS" -d "$DUR" "$base$path" ;;
                    */h2) h2run "$out" "$base$path" ;;
                esac
                c1=$(cpu0_busy); p1=$(proc_ticks "${PIDS_OF[$name]}")
                if [[ $proto == h2 ]]; then
                    req=$(h2kv "$out" succeeded); fail=$(h2kv "$out" failed); rps=$(h2kv "$out" rps)
                else
                    req=$(kv requests "$out"); fail=$(kv errors_total "$out"); rps=$(kv requests_per_s "$out")
                fi
                req=${req:-0}
                if ! [[ $req =~ ^[0-9]+$ ]] || ((req == 0)); then
                    log "$name $key r$round: no requests"; tail -n 5 "$out" "$out.err" >&2 2>/dev/null; continue
                fi
                put "$name" "$key.rps" "$round" "${rps:-0}"
                put "$name" "$key.errors" "$round" "${fail:-0}"
                put "$name" "$key.cpu_us" "$round" "$(awk -v b=$((c1 - c0)) -v t="$CLK_TCK" -v r="$req" 'BEGIN { printf "%.2f", b * 1e6 / t / r }')"
                put "$name" "$key.pcpu_us" "$round" "$(awk -v b=$((p1 - p0)) -v t="$CLK_TCK" -v r="$req" 'BEGIN { printf "%.2f", b * 1e6 / t / r }')"
                put "$name" "$key.per_core" "$round" "$(awk -v b=$((p1 - p0)) -v t="$CLK_TCK" -v r="$req" 'BEGIN { if (b > 0) printf "%.0f", r * t / b; else print 0 }')"
                log "r$round $key $name: ${rps:-?} req/s, $req done, ${fail:-?} failed"
            done
        done
    done
done

# ---------------------------------------------------------------- large files by ranges (seek)
# reel slicing by 2 MiB against nginx's slice module with proxy_cache, one after the other
# in each round, through reel-load seek: per round a new URL (cold in both caches, sized
# to keep every round: eviction is not what this measures) and a new seed, the same for
# both.
SEEK_SERVERS=()
if has seek && [[ $ORIGIN_KIND != demo ]]; then
    log "seek: needs the demo origin (reel-demo-origin built); skipped"
elif has seek; then
    SEEK_PATH=/obj/$SEEK_SIZE.mp4
    origin_body_bytes() {
        curl -s -m 5 "$ORIGIN/__origin/stats" | grep -o '"body_bytes": *[0-9]*' | grep -o '[0-9]*$' || echo 0
    }
    reel_waits() {
        curl -s -m 5 "http://127.0.0.1:$((PORT_BASE + 9))/metrics" | awk '$1 == "reel_slice_waits_total" { print $2 + 0 }'
    }
    nginx_conf "$WORK/nginx-slice" \
        "    proxy_cache_path $WORK/nginx-slice/cache levels=1:2 keys_zone=slice:64m max_size=$(( SEEK_ROUNDS * SEEK_SIZE / 1048576 + 512 ))m inactive=1h use_temp_path=off;
    upstream origin { server 127.0.0.1:$ORIGIN_PORT; keepalive 32; }" \
        "    server { listen 127.0.0.1:$((PORT_BASE + 10));
        location / {
            slice 2m;
            proxy_cache slice;
            proxy_cache_key \$uri\$is_args\$args\$slice_range;
            proxy_set_header Range \$slice_range;
            proxy_cache_valid 200 206 1h;
            proxy_cache_lock on;
            proxy_http_version 1.1;
            proxy_set_header Connection \"\";
            proxy_pass http://origin;
            add_header X-Cache \$upstream_cache_status;
        } }"
    if [[ -x "$REEL_BIN" ]]; then
        mkdir -p "$WORK/reel-slice/store"
        cat > "$WORK/reel-slice/reel.toml" <<EOF
[[listener]]
name = "http"
address = "127.0.0.1:$((PORT_BASE + 8))"
backlog = 4096

[cores]
workers = [$SRV_CPU]
irq = "auto"
nic = []

[store]
path = "$WORK/reel-slice/store"
size = "$(( (SEEK_ROUNDS * SEEK_SIZE / 1048576 + 512) / 64 * 64 ))MiB"
volume_size = "64MiB"

[access_log]
enabled = false

[admin]
address = "127.0.0.1:$((PORT_BASE + 9))"

[[site]]
hosts = ["127.0.0.1", "localhost"]
origin_group = "demo"
slice = "2MiB"
read_ahead = $SEEK_READ_AHEAD

[[origin_group]]
name = "demo"
  [origin_group.health]
  enabled = false
  [[origin_group.tier]]
  hosts = ["127.0.0.1:$ORIGIN_PORT"]
EOF
        taskset -c "$SRV_CPU" "$REEL_BIN" serve --config "$WORK/reel-slice/reel.toml" \
            >"$WORK/reel-slice/stdout.log" 2>"$WORK/reel-slice/stderr.log" &
        rpid=$!
        STARTED+=("$rpid")
        if wait_http "http://127.0.0.1:$((PORT_BASE + 8))/healthz" "$WORK/reel-slice/stderr.log" 100 "$rpid"; then
            PIDS_OF[reel]=$(descendants "$rpid" | tr '\n' ' ')
            SEEK_SERVERS+=("reel|http://127.0.0.1:$((PORT_BASE + 8))")
            log "reel (sliced) up on :$((PORT_BASE + 8)) (pid $rpid)"
        else
            log "reel (sliced) did not start: its column is n/a"
        fi
    fi
    start_nginx nginx-slice $((PORT_BASE + 10)) "$SRV_CPU"
    SEEK_SERVERS+=("nginx-slice|http://127.0.0.1:$((PORT_BASE + 10))")
    for round in $(seq "$SEEK_ROUNDS"); do
        for s in "${SEEK_SERVERS[@]}"; do
            IFS='|' read -r name base <<<"$s"
            out=$RAW/seek-$name-$round.kv
            o0=$(origin_body_bytes); p0=$(proc_ticks "${PIDS_OF[$name]}")
            w0=0; [[ $name == reel ]] && w0=$(reel_waits)
            load "$out" seek -v "$SEEK_VIEWERS" --size "$SEEK_SIZE" --chunk "$SEEK_CHUNK" --rate "$SEEK_RATE" \
                --run "$SEEK_RUN" -d "$SEEK_DUR" --seed $((42 + 1000 * round)) --timeout 30s \
                -H "x-origin-delay-ms: $SEEK_DELAY_MS" "$base$SEEK_PATH?round=$round"
            sleep 2     # fills and read-ahead still arriving count as origin bytes too
            o1=$(origin_body_bytes); p1=$(proc_ticks "${PIDS_OF[$name]}")
            body=$(kv body_bytes "$out"); body=${body:-0}
            distinct=$(kv seek.distinct_bytes "$out"); distinct=${distinct:-0}
            if ((body == 0)); then log "seek $name: no bytes"; tail -n 5 "$out.err" >&2; continue; fi
            put "$name" "seek.origin_per_viewer" "$round" "$(awk -v o=$((o1 - o0)) -v b="$body" 'BEGIN { printf "%.3f", o / b }')"
            put "$name" "seek.origin_per_distinct" "$round" "$(awk -v o=$((o1 - o0)) -v d="$distinct" 'BEGIN { printf "%.3f", (d > 0 ? o / d : 0) }')"
            put "$name" "seek.origin_mib" "$round" "$(awk -v o=$((o1 - o0)) 'BEGIN { printf "%.0f", o / 1048576 }')"
            put "$name" "seek.viewer_mib" "$round" "$(awk -v b="$body" 'BEGIN { printf "%.0f", b / 1048576 }')"
            put "$name" "seek.distinct_mib" "$round" "$(awk -v d="$distinct" 'BEGIN { printf "%.0f", d / 1048576 }')"
            put "$name" "seek.ttfb50" "$round" "$(kv seek.seek_ttfb_us.p50 "$out")"
            put "$name" "seek.ttfb99" "$round" "$(kv seek.seek_ttfb_us.p99 "$out")"
            put "$name" "seek.chunk50" "$round" "$(kv seek.chunk_ttfb_us.p50 "$out")"
            put "$name" "seek.chunk99" "$round" "$(kv seek.chunk_ttfb_us.p99 "$out")"
            put "$name" "seek.seeks" "$round" "$(kv seek.seeks "$out")"
            put "$name" "seek.after" "$round" "$(kv seek.chunks_after_seek "$out")"
            put "$name" "seek.not_stored" "$round" "$(kv seek.chunks_after_seek_not_stored "$out")"
            put "$name" "seek.paced" "$round" "$(kv seek.paced_chunks "$out")"
            put "$name" "seek.paced_not_stored" "$round" "$(kv seek.paced_chunks_not_stored "$out")"
            put "$name" "seek.errors" "$round" "$(kv errors_total "$out")"
            put "$name" "seek.cpu_us_mib" "$round" "$(awk -v t=$((p1 - p0)) -v k="$CLK_TCK" -v b="$body" 'BEGIN { printf "%.0f", t * 1e6 / k / (b / 1048576) }')"
            if [[ $name == reel ]]; then
                put "$name" "seek.waits" "$round" "$(( $(reel_waits) - w0 ))"
            fi
            log "seek $name round $round: origin $((o1 - o0)) B for $body B to viewers ($distinct distinct); seek ttfb p50 $(kv seek.seek_ttfb_us.p50 "$out") us p99 $(kv seek.seek_ttfb_us.p99 "$out") us; $(kv seek.chunks_after_seek_not_stored "$out")/$(kv seek.chunks_after_seek "$out") later chunks not from the store"
        done
    done
fi

# ---------------------------------------------------------------- table
# errors: summed over every measured run of a server
awk -F'|' '$2 ~ /\.errors$/ && $2 !~ /^(tls-|ll\.)/ { e[$1] += $4 } END { for (n in e) printf "%s|errors_sum|1|%d\n", n, e[n] }' "$DATA" >> "$DATA"
awk -F'|' '$2 ~ /^tls-.*\.errors$/ { e[$1] += $4 } END { for (n in e) printf "%s|tls_errors|1|%d\n", n, e[n] }' "$DATA" >> "$DATA"
# median over rounds per (server, metric); spread = (max - min) / median
SUMMARY=$RAW/summary.psv
awk -F'|' '{ k = $1 "|" $2; n[k]++; v[k, n[k]] = $4 }
    END { for (k in n) { m = n[k]
            for (i = 1; i <= m; i++) a[i] = v[k, i]
            for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
            med = a[int((m + 1) / 2)]
            printf "%s|%s|%s\n", k, med, (med + 0 > 0 ? 100 * (a[m] - a[1]) / med : 0) } }' "$DATA" > "$SUMMARY"
declare -A MED SPREAD
while IFS='|' read -r srv met med spr; do MED[$srv|$met]=$med; SPREAD[$srv|$met]=$spr; done < "$SUMMARY"

NAMES=(reel nginx-cache nginx-static varnish)
fmtv() {  # server metric kind -> cell
    local v=${MED[$1|$2]:-}
    [[ -n "$v" ]] || { echo "n/a"; return; }
    case $3 in
        rps) awk -v v="$v" -v s="${SPREAD[$1|$2]}" 'BEGIN { printf "%.0f (±%.0f%%)", v, s / 2 }' ;;
        ms) awk -v v="$v" 'BEGIN { printf "%.2f", v / 1000 }' ;;
        f1) awk -v v="$v" 'BEGIN { printf "%.1f", v }' ;;
        f2) awk -v v="$v" 'BEGIN { printf "%.2f", v }' ;;
        *) echo "$v" ;;
    esac
}
ratio() { # metric, other server
    local a=${MED[reel|$1]:-} b=${MED[$2|$1]:-}
    [[ -n "$a" && -n "$b" ]] && awk -v a="$a" -v b="$b" 'BEGIN { if (b + 0 == 0) print "-"; else printf "%.2f", a / b }' || echo "n/a"
}
row() {  # label metric kind
    local cells="" n
    for n in "${NAMES[@]}"; do cells+=" $(fmtv "$n" "$2" "$3") |"; done
    echo "| $1 |$cells $(ratio "$2" nginx-cache) | $(ratio "$2" nginx-static) | $(ratio "$2" varnish) |"
}
mkdir -p "$RUN_DIR"
RESULTS=$RUN_DIR/results.md
{
    echo "# reel vs peers, $(date -u '+%Y-%m-%d %H:%M UTC'), host $(hostname -s)"
    echo
    echo "$(nproc) CPUs ($(awk -F': ' '/model name/{print $2; exit}' /proc/cpuinfo)), kernel $(uname -r)," \
        "$(nginx -v 2>&1 | sed 's/.*: //'), $(varnishd -V 2>&1 | head -1 | sed 's/^varnishd (//; s/ revision.*//'), origin: $ORIGIN_KIND."
    has plain && echo "Servers pinned to CPU $SRV_CPU, reel-load to CPU $GEN_CPU; closed loop \`reel-load fixed -c $CONNS -d ${DUR}s\`," \
        "open loop \`reel-load open -c 32 -r $OPEN_RATE -d ${DUR}s\`; $ROUNDS interleaved rounds, median shown, ± = half the spread (max - min) / median."
    has plain && echo "CPU µs/req = CPU $SRV_CPU busy time (/proc/stat) / requests. TLB / CAL = /proc/interrupts deltas (all CPUs) per 1000 requests over the measured runs." \
        "Syscalls: \`strace -c -f\` on the serving processes during ${STRACE_DUR}s of hits (per request; madvise / fadvise64 per 1000 requests)." \
        "Live herd: $LIVE_VIEWERS synchronized viewers for ${LIVE_DUR}s on /live/index.m3u8, origin requests counted at the origin." \
        "Coalesced miss: $HERD_VIEWERS viewers at once on a cold 2 MiB object whose origin body streams over ${STREAM_MS} ms (x-origin-stream-ms), one round per second for ${HERD_DUR}s."
    echo
    if has plain; then
    echo "| metric | reel | nginx-cache | nginx-static | varnish | reel/nginx-cache | reel/nginx-static | reel/varnish |"
    echo "|---|---:|---:|---:|---:|---:|---:|---:|"
    for w in "1k|1 KiB playlist" "256k|256 KiB part" "2m|2 MiB segment"; do
        IFS='|' read -r wl label <<<"$w"
        row "$label: req/s" "$wl.rps" rps
        row "$label: MiB/s" "$wl.mibs" f1
        row "$label: p50 ms" "$wl.p50" ms
        row "$label: p99 ms" "$wl.p99" ms
        row "$label: CPU µs/req" "$wl.cpu_us" f1
    done
    row "open loop $OPEN_RATE req/s, 1 KiB: p50 ms" "open.p50" ms
    row "open loop $OPEN_RATE req/s, 1 KiB: p99 ms" "open.p99" ms
    row "syscalls per hit, 1 KiB" "1k.sys" f2
    row "syscalls per hit, 2 MiB" "2m.sys" f2
    row "madvise per 1000 req, 1 KiB" "1k.madvise" f2
    row "madvise per 1000 req, 2 MiB" "2m.madvise" f2
    row "fadvise64 per 1000 req, 1 KiB" "1k.fadvise" f2
    row "fadvise64 per 1000 req, 2 MiB" "2m.fadvise" f2
    row "TLB shootdowns per 1000 req" "tlb" f2
    row "CAL IPIs per 1000 req" "cal" f2
    row "live herd, $LIVE_VIEWERS viewers: segments served" "live.segments" raw
    row "live herd, $LIVE_VIEWERS viewers: origin requests" "live.origin" raw
    row "coalesced miss TTFB p50 ms" "herd.ttfb50" ms
    row "coalesced miss TTFB p99 ms" "herd.ttfb99" ms
    row "coalesced miss: origin requests" "herd.origin" raw
    row "errors, all measured runs" "errors_sum" raw
    fi
    if has llhls && [[ $ORIGIN_KIND == demo ]]; then
        echo
        echo "## LL-HLS ($LL_VIEWERS viewers; reel, nginx proxy_cache, Varnish, each on CPU $SRV_CPU)"
        echo
        echo "\`reel-load llhls -v $LL_VIEWERS -d ${LL_DUR}s --origin ORIGIN URL/live/index.m3u8\` on the demo origin's live stream (2 s segments of four 0.5 s parts):" \
            "each viewer holds a blocking reload of the next part (\`_HLS_msn\`/\`_HLS_part\`, delta updates) and the preload-hinted part, on two keep-alive connections." \
            "Latency after release = the kernel's receive time of the response (playlist: its end; part: its first body bytes) minus the origin's \`x-origin-release-ms\`, over the responses viewers were waiting for when released." \
            "Origin requests per distinct target the viewers asked for, from the origin's \`requests_by_target\`." \
            "nginx: \`proxy_cache_lock on\`, key \`\$scheme\$proxy_host\$uri\$is_args\$args\`; Varnish: default VCL (the hash includes the query); reel: \`prefetch = \"hinted\"\`."
        echo
        echo "| metric | reel | nginx-cache | varnish | reel/nginx-cache | reel/varnish |"
        echo "|---|---:|---:|---:|---:|---:|"
        lrow() {  # label metric kind
            echo "| $1 | $(fmtv reel "$2" "$3") | $(fmtv nginx-cache "$2" "$3") | $(fmtv varnish "$2" "$3") | $(ratio "$2" nginx-cache) | $(ratio "$2" varnish) |"
        }
        lrow "playlist after release p50 ms" "ll.pl50" ms
        lrow "playlist after release p99 ms" "ll.pl99" ms
        lrow "playlist after release p99.9 ms" "ll.pl999" ms
        lrow "part first byte after release p50 ms" "ll.pt50" ms
        lrow "part first byte after release p99 ms" "ll.pt99" ms
        lrow "part first byte after release p99.9 ms" "ll.pt999" ms
        lrow "origin requests per playlist version, mean" "ll.ver_mean" f2
        lrow "origin requests per playlist version, max" "ll.ver_max" raw
        lrow "origin requests per part, mean" "ll.part_mean" f2
        lrow "origin requests per part, max" "ll.part_max" raw
        lrow "blocking playlists received" "ll.blocking" raw
        lrow "parts received" "ll.parts" raw
        lrow "viewers that fell behind" "ll.behind" raw
        lrow "errors" "ll.errors" raw
    fi
    if ((${#TLS_SERVERS[@]})); then
        echo
        echo "## HTTPS and HTTP/2 (reel vs nginx-cache, TLS 1.3, the same ECDSA P-256 certificate, both on CPU $SRV_CPU)"
        echo
        echo "HTTP/1.1: \`reel-load fixed -c $CONNS -d ${DUR}s https://...\` (keep-alive). HTTP/2: \`h2load -D $DUR -c $H2_CLIENTS -m $H2_STREAMS -t 1\`." \
            "Handshakes: \`reel-load connect [--full] -c $HS_CONNS -d ${DUR}s\` (a new connection, a handshake and one 1 KiB request each);" \
            "CPU µs/req = the server processes' CPU time (user + system, /proc/PID/stat) / requests; CPU$SRV_CPU µs/req = CPU $SRV_CPU busy time / requests (includes anything else on that core);" \
            "handshakes per core = handshakes / server CPU seconds. Median of $ROUNDS rounds."
        echo
        echo "| metric | reel | nginx-cache | reel/nginx-cache |"
        echo "|---|---:|---:|---:|"
        trow() {  # label metric kind
            echo "| $1 | $(fmtv reel "$2" "$3") | $(fmtv nginx-cache "$2" "$3") | $(ratio "$2" nginx-cache) |"
        }
        for proto in "h1|HTTPS/1.1" "h2|HTTP/2"; do
            IFS='|' read -r pk plabel <<<"$proto"
            for w in "1k|1 KiB" "256k|256 KiB" "2m|2 MiB"; do
                IFS='|' read -r wl label <<<"$w"
                trow "$plabel $label: CPU µs/req" "tls-$pk-$wl.pcpu_us" f1
                trow "$plabel $label: CPU$SRV_CPU µs/req" "tls-$pk-$wl.cpu_us" f1
                trow "$plabel $label: req/s" "tls-$pk-$wl.rps" rps
            done
        done
        trow "full TLS 1.3 handshakes/s per core" "tls-h1-hs-full.per_core" raw
        trow "full handshake: CPU µs each" "tls-h1-hs-full.pcpu_us" f1
        trow "resumed TLS 1.3 handshakes/s per core" "tls-h1-hs-resumed.per_core" raw
        trow "resumed handshake: CPU µs each" "tls-h1-hs-resumed.pcpu_us" f1
        trow "failed requests, all TLS runs" "tls_errors" raw
    fi
    if ((${#SEEK_SERVERS[@]})); then
        echo
        echo "## Large files by ranges (reel \`slice = \"2MiB\"\`, read_ahead $SEEK_READ_AHEAD, vs nginx \`slice 2m\` + proxy_cache)"
        echo
        echo "\`reel-load seek -v $SEEK_VIEWERS --size $SEEK_SIZE --chunk $SEEK_CHUNK --rate $SEEK_RATE --run $SEEK_RUN -d $SEEK_DUR\`:" \
            "$SEEK_VIEWERS viewers play a $((SEEK_SIZE / 1048576)) MiB MP4-like file of the demo origin by $((SEEK_CHUNK / 1048576)) MiB ranges from random start points" \
            "(the chunk up to the next boundary and two more at once, then one chunk per chunk of play at $SEEK_RATE bytes/s), seeking again every ${SEEK_RUN} s;" \
            "each origin fetch delayed ${SEEK_DELAY_MS} ms (\`x-origin-delay-ms\`); both servers on CPU $SRV_CPU;" \
            "$SEEK_ROUNDS interleaved rounds, median shown, each round on a URL of its own (cold in both caches, which are large enough to evict nothing) with viewers of its own (the same for both servers)." \
            "Origin bytes: the demo origin's body bytes sent. Distinct bytes: the union of the ranges the viewers asked for." \
            "Later chunks not from the store: chunks after the first of a seek whose \`Cache-Status\` (reel) or \`X-Cache\` (nginx) was not a stored hit;" \
            "paced chunks: those after the startup burst, asked for when playback reached them (what read-ahead is for)." \
            "CPU µs/MiB: the server processes' CPU time (user + system) per MiB received by the viewers."
        echo
        echo "| metric | reel | nginx-slice | reel/nginx-slice |"
        echo "|---|---:|---:|---:|"
        srow() {  # label metric kind
            local a=${MED[reel|$2]:-} b=${MED[nginx-slice|$2]:-} r="n/a"
            [[ -n "$a" && -n "$b" ]] && r=$(awk -v a="$a" -v b="$b" 'BEGIN { if (b + 0 == 0) print "-"; else printf "%.2f", a / b }')
            echo "| $1 | $(fmtv reel "$2" "$3") | $(fmtv nginx-slice "$2" "$3") | $r |"
        }
        srow "origin bytes per viewer byte" "seek.origin_per_viewer" raw
        srow "origin bytes per distinct byte asked for" "seek.origin_per_distinct" raw
        srow "origin MiB sent" "seek.origin_mib" raw
        srow "viewer MiB received" "seek.viewer_mib" raw
        srow "distinct MiB asked for" "seek.distinct_mib" raw
        srow "seeks" "seek.seeks" raw
        srow "seek TTFB p50 ms" "seek.ttfb50" ms
        srow "seek TTFB p99 ms" "seek.ttfb99" ms
        srow "later chunks" "seek.after" raw
        srow "later chunks not from the store" "seek.not_stored" raw
        srow "paced chunks (after the startup burst)" "seek.paced" raw
        srow "paced chunks not from the store" "seek.paced_not_stored" raw
        srow "later chunk TTFB p50 ms" "seek.chunk50" ms
        srow "later chunk TTFB p99 ms" "seek.chunk99" ms
        srow "slices a response fetched itself after its first (reel_slice_waits_total)" "seek.waits" raw
        srow "CPU µs per MiB served" "seek.cpu_us_mib" raw
        srow "errors" "seek.errors" raw
    fi
    echo
    echo "Whole run: $(( $(date +%s) - T_START )) s. Command: \`$(for v in SECTIONS DUR ROUNDS CONNS OPEN_RATE STRACE_DUR LIVE_VIEWERS LIVE_DUR HERD_VIEWERS H2_CLIENTS H2_STREAMS HS_CONNS LL_VIEWERS LL_DUR; do printf '%s="%s" ' "$v" "${!v}"; done)$(has seek && for v in SEEK_VIEWERS SEEK_DUR SEEK_SIZE SEEK_CHUNK SEEK_RATE SEEK_RUN SEEK_DELAY_MS SEEK_READ_AHEAD SEEK_ROUNDS; do printf '%s="%s" ' "$v" "${!v}"; done)benches/compare.sh\`. Raw data: raw/ (not committed)."
} > "$RESULTS"
echo
cat "$RESULTS"
