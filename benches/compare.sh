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
#              +6 reel https, +7 nginx-cache https, +8 the latency origin, +9/+10 reel-vod
#              (admin), +11 nginx-vod, +12 varnish-vod, +13/+14 reel-cold, +15/+16
#              reel-cold-threads, +17 nginx-cold, +18 reel sliced, +19 its admin, +20 nginx slice,
#              +21 caddy (HTTPS and HTTP/3))
#   SECTIONS ("plain tls llhls"): which tables to measure. llhls: LL_VIEWERS LL-HLS players
#     through reel, nginx-cache and Varnish (reel-load llhls: edge-added latency, origin
#     requests per part and playlist version). tls: reel's and nginx-cache's HTTPS
#     listeners (same ECDSA P-256 certificate, same core): HTTP/1.1 keep-alive (reel-load
#     fixed), HTTP/2 (h2load -c H2_CLIENTS -m H2_STREAMS), full and resumed TLS 1.3
#     handshakes (reel-load connect, HS_CONNS connections, one 1 KiB request each).
#   H2_CLIENTS (8)  H2_STREAMS (16)  HS_CONNS (32)  TLS_PROTOS ("h1 h2": h1 = the HTTPS/1.1
#     and handshake rows, h2 = the HTTP/2 rows, which also give each request's latency
#     p50/p99, from h2load --log-file, for the closed loop and for one burst: every client
#     asks for H2_STREAMS objects at once, once, as a player fetching several segments)
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
#   STORE_SIZE (reel's store for the plain, tls and mix rows, "2GiB")
#   mix: reel's CPU per hit on MIX_N (400) distinct 2 MiB segments against one, nginx-static
#     beside it (its copies in /dev/shm); store reads and residency checks per 100 hits
#     (perf stat on reel's syscalls).
#   vod: a VOD library 4x the store: VOD_STORE_MIB (1024) store, nginx proxy_cache max_size
#     and Varnish malloc of the same bytes, 2 MiB objects, Zipf s=1.0 over 4x as many as fit,
#     VOD_VIEWERS (200) viewers one request every VOD_INTERVAL (2s), from a demo origin with
#     its production latency table; VOD_WARM (15) s of load, then VOD_DUR (60) s measured,
#     then VOD_HIT_DUR (20) s over a catalog that fits (all hits); VOD_ROUNDS (ROUNDS) rounds.
#   cold: the store evicted from the page cache before each run (sync + fadvise by dd, the
#     harness's, never the server's); open loop COLD_RATE (1000) req/s for COLD_DUR (5) s over
#     256 KiB objects, every fifth request a cold object: reel on io_uring, reel with
#     REEL_STORE_IO=threads, nginx proxy_cache; hot p99 against an all-hot run at the same rate.
#   h3 (not in the default SECTIONS): HTTP/3 over QUIC on loopback UDP. Caddy (Debian's
#     package, installed if missing) as a static file server of the same 1 KiB, 256 KiB and
#     2 MiB files as nginx-static, with the same certificate, on the server CPU (GOMAXPROCS
#     follows the affinity: 1), admin and logs off, against reel's HTTPS listener with
#     `http3 = true` (same address and port, UDP; the objects warmed over plain HTTP first).
#     `reel-load fixed --h3 -c H3_CONNS --streams H3_STREAMS --timeout H3_TIMEOUT` for DUR s
#     per size, ROUNDS rounds: server CPU µs/req (its processes' user + system time /
#     requests), req/s, errors. A reel whose config refuses `http3` (`reel check`) runs
#     without it and its HTTP/3 rows are n/a; a reel that takes the key but does not answer
#     over HTTP/3 is reported and skipped. Every reel-load run is bounded (DUR + H3_TIMEOUT
#     + 30 s). Fewer connections than CONNS: a QUIC server shares its core fairly between
#     connections, so 64 concurrent 2 MiB bodies all end together, late.
#   H3_CONNS (16)  H3_STREAMS (1)  H3_TIMEOUT (s, 10)
#   conns: CONN_IDLE (10000) idle keep-alive connections (one request each, then silent) next to
#     CONN_BUSY (64) busy ones on the 1 KiB object for CONN_DUR (5) s: memory per idle
#     connection (serving processes' RSS), CPU per hit and hit p99 against the busy ones alone;
#     reel and nginx proxy_cache.
# Output: the markdown table on stdout and in benches/runs/<date>-<host>[-RUN_TAG]/results.md;
# raw outputs in its raw/ (gitignored).
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
TLS_PROTOS=${TLS_PROTOS:-h1 h2}
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
STORE_SIZE=${STORE_SIZE:-2GiB}
MIX_N=${MIX_N:-400}
VOD_STORE_MIB=${VOD_STORE_MIB:-1024}
VOD_VIEWERS=${VOD_VIEWERS:-200}
VOD_INTERVAL=${VOD_INTERVAL:-2s}
VOD_WARM=${VOD_WARM:-15}
VOD_DUR=${VOD_DUR:-60}
VOD_HIT_DUR=${VOD_HIT_DUR:-20}
VOD_ROUNDS=${VOD_ROUNDS:-$ROUNDS}
COLD_RATE=${COLD_RATE:-1000}
COLD_DUR=${COLD_DUR:-5}
CONN_IDLE=${CONN_IDLE:-10000}
CONN_BUSY=${CONN_BUSY:-64}
CONN_DUR=${CONN_DUR:-5}
H3_CONNS=${H3_CONNS:-16}
H3_STREAMS=${H3_STREAMS:-1}
H3_TIMEOUT=${H3_TIMEOUT:-10}
has() { [[ " $SECTIONS " == *" $1 "* ]]; }
TGT=${CARGO_TARGET_DIR:-$ROOT/target}
SRV_CPU=0
GEN_CPU=1
ORIGIN_PORT=$PORT_BASE
REEL_PORT=$((PORT_BASE + 4))
REEL_ADMIN_PORT=$((PORT_BASE + 5))
REEL_TLS_PORT=$((PORT_BASE + 6))
NGINX_TLS_PORT=$((PORT_BASE + 7))
LAT_ORIGIN_PORT=$((PORT_BASE + 8))
CADDY_PORT=$((PORT_BASE + 21))
T_START=$(date +%s)
RUN_DIR=$HERE/runs/$(date -u +%Y-%m-%d)-$(hostname -s)${RUN_TAG:+-$RUN_TAG}
RAW=$RUN_DIR/raw
CLK_TCK=$(getconf CLK_TCK)

log() { echo "[$(date +%H:%M:%S)] $*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# ---------------------------------------------------------------- installs
need=()
for p in nginx varnish strace curl openssl nghttp2-client; do dpkg -s "$p" >/dev/null 2>&1 || need+=("$p"); done
command -v perf >/dev/null 2>&1 || need+=(linux-perf)
if has h3; then dpkg -s caddy >/dev/null 2>&1 || need+=(caddy); fi
if ((${#need[@]})); then
    log "installing: ${need[*]}"
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi

for port in $(seq "$PORT_BASE" $((PORT_BASE + 21))); do
    if ss -ltnH "sport = :$port" | grep -q .; then die "port $port already in use"; fi
    if has h3 && ss -lunH "sport = :$port" | grep -q .; then die "UDP port $port already in use"; fi
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
SCRATCH=()                   # directories outside $WORK to remove at exit
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
    rm -rf "$WORK" "${SCRATCH[@]}"
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
worker_rlimit_nofile 65536;
pid $d/nginx.pid;
error_log $d/error.log warn;
events { worker_connections 20000; }
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
varnish_vcl() {  # file, origin port: stock behaviour plus an X-Cache header (HIT / MISS)
    cat > "$1" <<EOF
vcl 4.1;
backend origin { .host = "127.0.0.1"; .port = "$2"; }
sub vcl_deliver { if (obj.hits > 0) { set resp.http.X-Cache = "HIT"; } else { set resp.http.X-Cache = "MISS"; } }
EOF
}
varnish_vcl "$WORK/varnish/default.vcl" "$ORIGIN_PORT"

# reel: n/a when not built or when it does not come up
REEL_BIN=$TGT/release/reel
# The sections that measure the main reel: plain, tls, llhls, mix and conns.
REEL_H3=0        # 1: reel's HTTPS listener has `http3 = true`
REEL_H3_NOTE=""
if [[ -x "$REEL_BIN" ]] && { has plain || has tls || has llhls || has mix || has conns || has h3; }; then
    mkdir -p "$WORK/reel/store"
    reel_conf() {    # extra lines of the HTTPS listener
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
$1

[cores]
workers = [$SRV_CPU]
irq = "auto"
nic = []

[store]
path = "$WORK/reel/store"
size = "$STORE_SIZE"
volume_size = "64MiB"

[http]
# Every client of the benchmark comes from 127.0.0.1 (the conns section holds 10,000).
max_connections_per_client = 0

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
    }
    reel_conf ""
    if has h3; then
        reel_conf "http3 = true"
        if timeout 60 "$REEL_BIN" check --config "$WORK/reel/reel.toml" >"$WORK/reel/check.log" 2>&1; then
            REEL_H3=1
        else
            REEL_H3_NOTE="this reel refuses \`http3 = true\`"
            log "$REEL_H3_NOTE ($(grep -m1 -i http3 "$WORK/reel/check.log" || tail -n 1 "$WORK/reel/check.log")): reel's HTTP/3 rows are skipped"
            reel_conf ""
        fi
    fi
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
elif has plain || has tls || has llhls || has h3; then
    log "no $REEL_BIN: reel's row is n/a"
    REEL_H3_NOTE="no reel binary"
fi
# The LL-HLS section also plays through reel with two workers (`LL_SERVERS` only): the
# once-per-part and once-per-version promises must hold whatever worker a viewer lands on.
# With more than two CPUs its workers keep off the load generator's CPU; on two they share.
LL_SERVERS=()
REEL2_PORT=$((PORT_BASE + 10))
REEL2_ADMIN_PORT=$((PORT_BASE + 11))
if [[ -x "$REEL_BIN" ]] && has llhls; then
    ncpu=$(nproc)
    if ((ncpu > 2)); then
        two=$(seq 0 $((ncpu - 1)) | grep -vx "$GEN_CPU" | head -2 | paste -sd, -)
    else
        two="0, 1"
    fi
    mkdir -p "$WORK/reel2/store"
    sed -e "s|127.0.0.1:$REEL_PORT|127.0.0.1:$REEL2_PORT|" \
        -e "s|127.0.0.1:$REEL_ADMIN_PORT|127.0.0.1:$REEL2_ADMIN_PORT|" \
        -e "s|$WORK/reel/store|$WORK/reel2/store|" \
        -e "s|^workers = \[.*\]|workers = [$two]|" "$WORK/reel/reel.toml" |
        awk '/^\[/ { drop = 0 } /^\[\[listener\]\]/ && ++n == 2 { drop = 1 } !drop' \
        > "$WORK/reel2/reel.toml"
    "$REEL_BIN" serve --config "$WORK/reel2/reel.toml" \
        >"$WORK/reel2/stdout.log" 2>"$WORK/reel2/stderr.log" &
    r2pid=$!
    STARTED+=("$r2pid")
    if wait_http "http://127.0.0.1:$REEL2_PORT/live/playlist.m3u8" "$WORK/reel2/stderr.log" 100 "$r2pid"; then
        LL_SERVERS+=("reel-2w|http://127.0.0.1:$REEL2_PORT")
        log "reel with two workers ($two) up on :$REEL2_PORT (pid $r2pid)"
    else
        log "reel with two workers did not start: its LL-HLS column is n/a ($(tail -1 "$WORK/reel2/stderr.log"))"
        kill -TERM "$r2pid" 2>/dev/null || true
    fi
fi
start_nginx nginx-cache $((PORT_BASE + 1)) "$SRV_CPU"
SERVERS+=("nginx-cache|http://127.0.0.1:$((PORT_BASE + 1))")
if has plain || has mix; then
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
put() { [[ -n "$4" ]] && echo "$1|$2|$3|$4" >> "$DATA"; return 0; }   # an empty value is n/a, not 0
cpu0_busy() { awk '$1 == "cpu0" { print $2 + $3 + $4 + $7 + $8 }' /proc/stat; }
irq_sum() { awk -v k="$1:" '$1 == k { s = $2 + $3 } END { print s + 0 }' /proc/interrupts; }
# Syscall and TLB-flush tracepoints counted for given PIDs (their threads, and threads they
# start) by `perf stat`: per process, unlike /proc/interrupts, so other jobs on the machine
# do not count. Empty when perf is missing or refuses.
PERF_EVENTS=syscalls:sys_enter_madvise,syscalls:sys_enter_fadvise64,syscalls:sys_enter_preadv2,syscalls:sys_enter_pread64,syscalls:sys_enter_io_uring_enter,syscalls:sys_enter_cachestat,syscalls:sys_enter_sendfile64
pstat_start() {  # output file, PIDs (space separated); prints the perf PID or nothing
    command -v perf >/dev/null 2>&1 || return 0
    # tlb:tlb_flush counted for the shootdowns a process makes (reasons 2-4: local range,
    # local whole-mm, IPI sent). Left out: the flush on a switch to another address space
    # (0, scheduling) and the flushes a CPU does for another CPU's IPI (1, 5), which count
    # against whatever process that CPU was running.
    # Only the processes still there: perf refuses the whole list for one that exited
    # (nginx's cache loader leaves after its first minute).
    local p live=()
    for p in $2; do [[ -d /proc/$p ]] && live+=("$p"); done
    ((${#live[@]})) || return 0
    perf stat -x, -o "$1" -e "$PERF_EVENTS" -e tlb:tlb_flush --filter 'reason >= 2 && reason <= 4' \
        -p "$(IFS=,; echo "${live[*]}")" >/dev/null 2>&1 &
    local pid=$!
    STARTED+=("$pid")
    sleep 0.3
    echo "$pid"
}
pstat_stop() {   # perf PID: stops it and waits until it wrote its counts (perf was started
    # in a command substitution, so it is not this shell's child and `wait` cannot be used)
    [[ -n "${1:-}" ]] || return 0
    kill -INT "$1" 2>/dev/null || return 0
    local i
    for i in $(seq 100); do kill -0 "$1" 2>/dev/null || return 0; sleep 0.05; done
}
pstat_get() {    # file, event (e.g. syscalls:sys_enter_madvise): the count, empty if unknown
    [[ -s "$1" ]] || return 0
    awk -F, -v e="$2" '$3 == e && $1 ~ /^[0-9]+$/ { print $1 }' "$1"
}
rss_kib() {      # PIDs: summed VmRSS in KiB
    local t=0 p v
    for p in $1; do
        v=$(awk '/^VmRSS:/ { print $2 }' "/proc/$p/status" 2>/dev/null || true)
        t=$((t + ${v:-0}))
    done
    echo "$t"
}
per() { awk -v a="$1" -v b="$2" -v m="${3:-1}" 'BEGIN { if (b > 0 && a != "") printf "%.3f", a * m / b; else print "" }'; }
# Drops a directory's files from the page cache: written back first (dirty pages cannot be
# dropped), then POSIX_FADV_DONTNEED through dd. Prints the bytes still resident.
evict_dir() {
    local f left=0 r
    while IFS= read -r -d '' f; do
        sync "$f" 2>/dev/null || true
        dd if="$f" iflag=nocache count=0 status=none 2>/dev/null || true
        r=$(fincore --bytes --noheadings --output RES "$f" 2>/dev/null || echo 0)
        left=$((left + ${r:-0}))
    done < <(find "$1" -type f -print0)
    echo "$left"
}
# A reel with one worker on CPU $SRV_CPU and a plain listener. name, port, admin port, store
# size, volume size, origin URL, then optional `VAR=value` environment settings.
start_reel_plain() {
    local name=$1 port=$2 admin=$3 size=$4 vol=$5 origin=$6 pid
    shift 6
    mkdir -p "$WORK/$name/store"
    cat > "$WORK/$name/reel.toml" <<EOF
[[listener]]
name = "http"
address = "127.0.0.1:$port"
backlog = 4096

[cores]
workers = [$SRV_CPU]
irq = "auto"
nic = []

[store]
path = "$WORK/$name/store"
size = "$size"
volume_size = "$vol"

[access_log]
enabled = false

[admin]
address = "127.0.0.1:$admin"
EOF
    env "$@" taskset -c "$SRV_CPU" "$REEL_BIN" serve --config "$WORK/$name/reel.toml" --origin "$origin" \
        >"$WORK/$name/stdout.log" 2>"$WORK/$name/stderr.log" &
    pid=$!
    STARTED+=("$pid")
    wait_http "http://127.0.0.1:$port/obj/16" "$WORK/$name/stderr.log" 300 "$pid" || return 1
    PIDS_OF[$name]=$(descendants "$pid" | tr '\n' ' ')
    log "$name up on :$port (pid $pid)"
}
# nginx proxy_cache in front of an origin port, on CPU $SRV_CPU: name, port, origin port, max_size
start_nginx_cache() {
    local name=$1 port=$2 oport=$3 max=$4
    nginx_conf "$WORK/$name" \
        "    proxy_cache_path $WORK/$name/cache levels=1:2 keys_zone=$name:64m max_size=$max inactive=1h use_temp_path=off;
    upstream origin { server 127.0.0.1:$oport; keepalive 32; }" \
        "    server { listen 127.0.0.1:$port;
        location / {
            proxy_pass http://origin;
            proxy_http_version 1.1;
            proxy_set_header Connection \"\";
            proxy_cache $name;
            proxy_cache_lock on;
            proxy_cache_valid 200 1h;
            add_header X-Cache \$upstream_cache_status;
        } }"
    start_nginx "$name" "$port" "$SRV_CPU"
}
# curl over a URL with a glob range (e.g. seg_[000-399].ts), one keep-alive process; fails
# unless every answer is 200.
fetch_all() {
    local codes
    codes=$(curl -s -m 600 -w '%{stderr}%{http_code}\n' "$1" 2>&1 >/dev/null | sort | uniq -c || true)
    [[ "$(awk '$2 != 200' <<<"$codes")" == "" && -n "$codes" ]] || { log "fetching $1: $codes"; return 1; }
}
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
    for s in "${SERVERS[@]}" "${LL_SERVERS[@]}"; do
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
h2run() {     # output file, url: h2load for DUR s, bounded by a guard; per-request log in file.log
    rm -f "$1.log"
    timeout $((DUR + 60)) taskset -c "$GEN_CPU" h2load -D "$DUR" -c "$H2_CLIENTS" -m "$H2_STREAMS" -t 1 \
        --warm-up-time=1 --log-file="$1.log" "$2" > "$1" 2>&1 || true
}
h2burst() {   # output file, url: one burst, H2_STREAMS requests per client at once; log in file.log
    rm -f "$1.log"
    timeout 120 taskset -c "$GEN_CPU" h2load -n $((H2_CLIENTS * H2_STREAMS)) -c "$H2_CLIENTS" -m "$H2_STREAMS" -t 1 \
        --log-file="$1.log" "$2" > "$1" 2>&1 || true
}
h2kv() {      # file, field: succeeded | failed | rps | p50 | p99 (request latency, µs)
    case $2 in
        succeeded) grep -m1 '^requests:' "$1" | sed -E 's/.* ([0-9]+) succeeded.*/\1/' ;;
        failed) grep -m1 '^requests:' "$1" | sed -E 's/.* ([0-9]+) failed.*/\1/' ;;
        rps) grep -m1 '^finished in' "$1" | sed -E 's/.*, ([0-9.]+) req\/s.*/\1/' ;;
        # h2load's log: start (µs since the epoch), status, µs until the response ended.
        p50 | p99) [[ -s "$1.log" ]] && awk '$2 == 200 { print $3 }' "$1.log" | sort -n |
            awk -v q="${2#p}" '{ v[NR] = $1 } END { if (NR) { i = int(NR * q / 100 + 0.999999); if (i < 1) i = 1; print v[i] } }' ;;
    esac
}
for round in $(seq "$ROUNDS"); do
    ((${#TLS_SERVERS[@]})) || break
    for w in "${WORKLOADS[@]}" "hs-full|/live/playlist.m3u8" "hs-resumed|/live/playlist.m3u8"; do
        IFS='|' read -r wl path <<<"$w"
        for proto in h1 h2; do
            [[ $wl == hs-* && $proto == h2 ]] && continue
            [[ " $TLS_PROTOS " == *" $proto "* ]] || continue
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
                if [[ $proto == h2 ]]; then
                    put "$name" "$key.p50" "$round" "$(h2kv "$out" p50)"
                    put "$name" "$key.p99" "$round" "$(h2kv "$out" p99)"
                    h2burst "$out.burst" "$base$path"
                    put "$name" "$key.burst_p50" "$round" "$(h2kv "$out.burst" p50)"
                    put "$name" "$key.burst_p99" "$round" "$(h2kv "$out.burst" p99)"
                fi
                put "$name" "$key.cpu_us" "$round" "$(awk -v b=$((c1 - c0)) -v t="$CLK_TCK" -v r="$req" 'BEGIN { printf "%.2f", b * 1e6 / t / r }')"
                put "$name" "$key.pcpu_us" "$round" "$(awk -v b=$((p1 - p0)) -v t="$CLK_TCK" -v r="$req" 'BEGIN { printf "%.2f", b * 1e6 / t / r }')"
                put "$name" "$key.per_core" "$round" "$(awk -v b=$((p1 - p0)) -v t="$CLK_TCK" -v r="$req" 'BEGIN { if (b > 0) printf "%.0f", r * t / b; else print 0 }')"
                log "r$round $key $name: ${rps:-?} req/s, $req done, ${fail:-?} failed"
            done
        done
    done
done

# ---------------------------------------------------------------- HTTP/3 (QUIC)
# Caddy's file_server and reel's HTTPS listener with `http3 = true`, both on CPU $SRV_CPU,
# the same certificate and files; `reel-load fixed --h3`. Every run is bounded by a guard.
H3_SERVERS=()
load_h3() {      # output file, reel-load args... (the run's own deadline: DUR + H3_TIMEOUT + 2 s)
    local out=$1; shift
    timeout -k 5 $((DUR + H3_TIMEOUT + 30)) taskset -c "$GEN_CPU" "$LOAD" "$@" --timeout "${H3_TIMEOUT}s" --kv \
        > "$out" 2>"$out.err" || true
}
wait_h3() {      # url, log file, PID that must stay alive: a 200 over HTTP/3 within ~15 s
    local i
    for i in $(seq 30); do
        timeout -k 2 5 "$LOAD" get --h3 --timeout 1s "$1" >/dev/null 2>&1 && return 0
        kill -0 "$3" 2>/dev/null || break
        sleep 0.5
    done
    log "no HTTP/3 200 from $1; last log lines:"; tail -n 20 "$2" >&2 || true
    return 1
}
if has h3; then
    mkdir -p "$WORK/caddy/data" "$WORK/caddy/config"
    cat > "$WORK/caddy/Caddyfile" <<EOF
{
	admin off
	auto_https off
	# No SNI from an IP-address client: this certificate.
	default_sni 127.0.0.1
	log {
		output discard
	}
	servers {
		protocols h1 h2 h3
	}
}
https://127.0.0.1:$CADDY_PORT {
	bind 127.0.0.1
	tls $WORK/tls/cert.pem $WORK/tls/key.pem
	root * $WORK/static
	file_server
}
EOF
    # Caddy's storage and autosave under $WORK, not in the home directory.
    XDG_DATA_HOME=$WORK/caddy/data XDG_CONFIG_HOME=$WORK/caddy/config \
        taskset -c "$SRV_CPU" caddy run --config "$WORK/caddy/Caddyfile" --adapter caddyfile \
        >"$WORK/caddy/stdout.log" 2>"$WORK/caddy/stderr.log" &
    cpid=$!
    STARTED+=("$cpid")
    if wait_h3 "https://127.0.0.1:$CADDY_PORT${OBJECTS[0]}" "$WORK/caddy/stderr.log" "$cpid"; then
        PIDS_OF[caddy]=$(descendants "$cpid" | tr '\n' ' ')
        H3_SERVERS+=("caddy|https://127.0.0.1:$CADDY_PORT")
        log "caddy up on :$CADDY_PORT, HTTP/3 (pid $cpid)"
    else
        log "caddy does not answer over HTTP/3: its rows are n/a"
        kill -TERM "$cpid" 2>/dev/null || true
    fi
    if ((REEL_H3)) && [[ -n "${PIDS_OF[reel]:-}" ]]; then
        if wait_h3 "https://127.0.0.1:$REEL_TLS_PORT${OBJECTS[0]}" "$WORK/reel/stderr.log" "${PIDS_OF[reel]%% *}"; then
            H3_SERVERS=("reel|https://127.0.0.1:$REEL_TLS_PORT" "${H3_SERVERS[@]}")
            log "reel answers over HTTP/3 on :$REEL_TLS_PORT"
        else
            REEL_H3_NOTE="reel took \`http3 = true\` but did not answer over HTTP/3"
            log "$REEL_H3_NOTE: its HTTP/3 rows are skipped"
        fi
    elif [[ -z "$REEL_H3_NOTE" ]]; then
        REEL_H3_NOTE="reel did not start"
    fi
    for s in "${H3_SERVERS[@]}"; do
        IFS='|' read -r name base <<<"$s"
        for p in "${OBJECTS[@]}"; do
            load_h3 /dev/null fixed --h3 -c 4 -d "$WARM_DUR" "$base$p"
        done
    done
fi
for round in $(seq "$ROUNDS"); do
    ((${#H3_SERVERS[@]})) || break
    for w in "${WORKLOADS[@]}"; do
        IFS='|' read -r wl path <<<"$w"
        for s in "${H3_SERVERS[@]}"; do
            IFS='|' read -r name base <<<"$s"
            key=h3-$wl
            out=$RAW/$name-$key-r$round.kv
            c0=$(cpu0_busy); p0=$(proc_ticks "${PIDS_OF[$name]}")
            load_h3 "$out" fixed --h3 --streams "$H3_STREAMS" -c "$H3_CONNS" -d "$DUR" "$base$path"
            c1=$(cpu0_busy); p1=$(proc_ticks "${PIDS_OF[$name]}")
            req=$(kv requests "$out"); req=${req:-0}; fail=$(kv errors_total "$out")
            put "$name" "$key.errors" "$round" "${fail:-}"
            if ! [[ $req =~ ^[0-9]+$ ]] || ((req == 0)); then
                log "$name $key r$round: no requests"; tail -n 5 "$out" "$out.err" >&2 2>/dev/null; continue
            fi
            put "$name" "$key.rps" "$round" "$(kv requests_per_s "$out")"
            put "$name" "$key.p50" "$round" "$(kv latency_us.p50 "$out")"
            put "$name" "$key.p99" "$round" "$(kv latency_us.p99 "$out")"
            put "$name" "$key.cpu_us" "$round" "$(awk -v b=$((c1 - c0)) -v t="$CLK_TCK" -v r="$req" 'BEGIN { printf "%.2f", b * 1e6 / t / r }')"
            put "$name" "$key.pcpu_us" "$round" "$(awk -v b=$((p1 - p0)) -v t="$CLK_TCK" -v r="$req" 'BEGIN { printf "%.2f", b * 1e6 / t / r }')"
            log "r$round $key $name: $(kv requests_per_s "$out") req/s, $req done, ${fail:-?} failed," \
                "$(awk -v b=$((p1 - p0)) -v t="$CLK_TCK" -v r="$req" 'BEGIN { printf "%.1f", b * 1e6 / t / r }') server CPU us/req"
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
        curl -s -m 5 "http://127.0.0.1:$((PORT_BASE + 19))/metrics" | awk '$1 == "reel_slice_waits_total" { print $2 + 0 }'
    }
    nginx_conf "$WORK/nginx-slice" \
        "    proxy_cache_path $WORK/nginx-slice/cache levels=1:2 keys_zone=slice:64m max_size=$(( SEEK_ROUNDS * SEEK_SIZE / 1048576 + 512 ))m inactive=1h use_temp_path=off;
    upstream origin { server 127.0.0.1:$ORIGIN_PORT; keepalive 32; }" \
        "    server { listen 127.0.0.1:$((PORT_BASE + 20));
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
address = "127.0.0.1:$((PORT_BASE + 18))"
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
address = "127.0.0.1:$((PORT_BASE + 19))"

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
        if wait_http "http://127.0.0.1:$((PORT_BASE + 18))/healthz" "$WORK/reel-slice/stderr.log" 100 "$rpid"; then
            PIDS_OF[reel]=$(descendants "$rpid" | tr '\n' ' ')
            SEEK_SERVERS+=("reel|http://127.0.0.1:$((PORT_BASE + 18))")
            log "reel (sliced) up on :$((PORT_BASE + 18)) (pid $rpid)"
        else
            log "reel (sliced) did not start: its column is n/a"
        fi
    fi
    start_nginx nginx-slice $((PORT_BASE + 20)) "$SRV_CPU"
    SEEK_SERVERS+=("nginx-slice|http://127.0.0.1:$((PORT_BASE + 20))")
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

# ---------------------------------------------------------------- mix: many distinct segments
# reel's cost per hit on MIX_N distinct 2 MiB segments against one (the residency check and
# the page cache at work), and how often it reads from the store per hit; nginx-static on
# the same bytes (copies in /dev/shm) as the physical reference: many distinct objects miss
# the CPU caches for everyone.
MIX_SERVERS=()
if has mix; then
    MIXDIR=$(mktemp -d /dev/shm/reel-mix.XXXXXX)
    SCRATCH+=("$MIXDIR")
    chmod 755 "$MIXDIR"
    mkdir -p "$WORK/static/vod"
    ln -sfn "$MIXDIR" "$WORK/static/vod/cat"
    last=$(printf '%03d' $((MIX_N - 1)))
    (cd "$MIXDIR" && curl -sf -m 600 -o "seg_#1.ts" "$ORIGIN/vod/cat/seg_[000-$last].ts") || die "fetching the mix objects"
    MIX_URLS=()
    for i in $(seq 0 $((MIX_N - 1))); do MIX_URLS+=("$(printf '/vod/cat/seg_%03d.ts' "$i")"); done
    [[ -n "${PIDS_OF[reel]:-}" ]] && MIX_SERVERS+=("reel|http://127.0.0.1:$REEL_PORT")
    MIX_SERVERS+=("nginx-static|http://127.0.0.1:$((PORT_BASE + 3))")
    for s in "${MIX_SERVERS[@]}"; do
        IFS='|' read -r name base <<<"$s"
        fetch_all "$base/vod/cat/seg_[000-$last].ts" && fetch_all "$base/vod/cat/seg_[000-$last].ts" ||
            die "warming the mix objects on $name"
        log "mix: $name warm"
    done
    for round in $(seq "$ROUNDS"); do
        for wl in mix1 mixn; do
            for s in "${MIX_SERVERS[@]}"; do
                IFS='|' read -r name base <<<"$s"
                urls=()
                if [[ $wl == mix1 ]]; then urls=("$base${MIX_URLS[0]}"); else for u in "${MIX_URLS[@]}"; do urls+=("$base$u"); done; fi
                out=$RAW/$name-$wl-r$round.kv
                ps=$(pstat_start "$RAW/$name-$wl-r$round.perf" "${PIDS_OF[$name]}")
                c0=$(cpu0_busy); p0=$(proc_ticks "${PIDS_OF[$name]}")
                load "$out" fixed -c "$CONNS" -d "$DUR" "${urls[@]}"
                c1=$(cpu0_busy); p1=$(proc_ticks "${PIDS_OF[$name]}")
                pstat_stop "$ps"
                req=$(kv requests "$out"); req=${req:-0}
                ((req > 0)) || { log "$name $wl r$round: no requests"; continue; }
                put "$name" "$wl.rps" "$round" "$(kv requests_per_s "$out")"
                put "$name" "$wl.errors" "$round" "$(kv errors_total "$out")"
                put "$name" "$wl.cpu_us" "$round" "$(per $((c1 - c0)) "$req" "$((1000000 / CLK_TCK))")"
                put "$name" "$wl.pcpu_us" "$round" "$(per $((p1 - p0)) "$req" "$((1000000 / CLK_TCK))")"
                pf=$RAW/$name-$wl-r$round.perf
                reads=0
                for e in preadv2 pread64 io_uring_enter; do
                    v=$(pstat_get "$pf" "syscalls:sys_enter_$e"); reads=$((reads + ${v:-0}))
                done
                if [[ -s $pf ]]; then
                    put "$name" "$wl.reads100" "$round" "$(per "$reads" "$req" 100)"
                    put "$name" "$wl.cachestat100" "$round" "$(per "$(pstat_get "$pf" syscalls:sys_enter_cachestat)" "$req" 100)"
                fi
                log "r$round $wl $name: $(kv requests_per_s "$out") req/s, CPU0 $(per $((c1 - c0)) "$req" "$((1000000 / CLK_TCK))") us/req, store reads $reads"
            done
        done
    done
fi

# ---------------------------------------------------------------- vod: a library 4x the store
# Zipf s=1.0 over 2 MiB objects, four times as many as the store holds, from a demo origin
# with its production latency table; the caches evict all the time. Hits are told apart by
# each server's own header (reel's Cache-Status, X-Cache from nginx's $upstream_cache_status
# and from the Varnish VCL).
VOD_SERVERS=()
if has vod; then
    VOD_OBJECTS=$((VOD_STORE_MIB * 4 / 2))
    VOD_FIT=$((VOD_STORE_MIB / 4))
    taskset -c "$GEN_CPU" "$TGT/release/reel-demo-origin" --listen "127.0.0.1:$LAT_ORIGIN_PORT" \
        >"$WORK/origin/lat-stdout.log" 2>"$WORK/origin/lat-stderr.log" &
    STARTED+=("$!")
    wait_http "http://127.0.0.1:$LAT_ORIGIN_PORT/__origin/stats" "$WORK/origin/lat-stderr.log" || die "latency origin failed"
    LAT_ORIGIN=http://127.0.0.1:$LAT_ORIGIN_PORT
    lat_origin_count() {
        curl -s -m 5 "$LAT_ORIGIN/__origin/stats" | grep -o '"total": *[0-9]*' | head -1 | grep -o '[0-9]*$' || echo 0
    }
    if [[ -x "$REEL_BIN" ]] && start_reel_plain reel-vod $((PORT_BASE + 9)) $((PORT_BASE + 10)) \
        "${VOD_STORE_MIB}MiB" 64MiB "$LAT_ORIGIN"; then
        VOD_SERVERS+=("reel-vod|http://127.0.0.1:$((PORT_BASE + 9))|cache-status: hit")
    fi
    start_nginx_cache nginx-vod $((PORT_BASE + 11)) "$LAT_ORIGIN_PORT" "${VOD_STORE_MIB}m"
    VOD_SERVERS+=("nginx-vod|http://127.0.0.1:$((PORT_BASE + 11))|x-cache: hit")
    mkdir -p "$WORK/varnish-vod"
    varnish_vcl "$WORK/varnish-vod/default.vcl" "$LAT_ORIGIN_PORT"
    taskset -c "$SRV_CPU" varnishd -F -n "$WORK/varnish-vod/n" -a "127.0.0.1:$((PORT_BASE + 12))" \
        -f "$WORK/varnish-vod/default.vcl" -s "malloc,${VOD_STORE_MIB}M" >"$WORK/varnish-vod/varnishd.log" 2>&1 &
    VVPID=$!
    STARTED+=("$VVPID")
    wait_http "http://127.0.0.1:$((PORT_BASE + 12))/obj/16" "$WORK/varnish-vod/varnishd.log" || die "varnish-vod failed"
    PIDS_OF[varnish-vod]=$(descendants "$VVPID" | tr '\n' ' ')
    VOD_SERVERS+=("varnish-vod|http://127.0.0.1:$((PORT_BASE + 12))|x-cache: hit")
    vod_run() {   # output, base, mark header, objects, duration, seed
        load "$1" zipf -v "$VOD_VIEWERS" --objects "$4" --exponent 1.0 --interval "$VOD_INTERVAL" \
            -d "$5" --seed "$6" --timeout 30s --mark-header "$3" "$2/obj/2097152?v={i}"
    }
    # What a server holds of the catalog, MiB: the store's bytes, the cache directory, the
    # malloc storage in use.
    vod_held() {
        case $1 in
            reel-vod) curl -sf "http://127.0.0.1:$((PORT_BASE + 10))/metrics" | awk '/^reel_store_bytes / { printf "%.0f", $2 / 1048576 }' ;;
            nginx-vod) du -sm "$WORK/nginx-vod/cache" | cut -f1 ;;
            varnish-vod) varnishstat -n "$WORK/varnish-vod/n" -1 -f SMA.s0.g_bytes | awk '{ printf "%.0f", $2 / 1048576 }' ;;
        esac
    }
    for round in $(seq "$VOD_ROUNDS"); do
        for s in "${VOD_SERVERS[@]}"; do
            IFS='|' read -r name base mark <<<"$s"
            pids=${PIDS_OF[$name]}
            # Evictions: the catalog 4x the store, after a warm-up that fills it.
            # Warm-up and measured run draw different sequences (the same for every server):
            # a replayed warm-up would be hits for any cache that kept it.
            vod_run /dev/null "$base" "$mark" "$VOD_OBJECTS" "$VOD_WARM" $((1000 * round))
            out=$RAW/$name-vod-r$round.kv
            ps=$(pstat_start "$RAW/$name-vod-r$round.perf" "$pids")
            c0=$(cpu0_busy); p0=$(proc_ticks "$pids"); t0=$(irq_sum TLB); o0=$(lat_origin_count)
            vod_run "$out" "$base" "$mark" "$VOD_OBJECTS" "$VOD_DUR" $((1000 * round + 500))
            c1=$(cpu0_busy); p1=$(proc_ticks "$pids"); t1=$(irq_sum TLB); o1=$(lat_origin_count)
            put "$name" vod.held_mib "$round" "$(vod_held "$name")"
            pstat_stop "$ps"
            req=$(kv requests "$out"); req=${req:-0}
            ((req > 0)) || { log "$name vod r$round: no requests"; continue; }
            el=$(kv elapsed_s "$out")
            pf=$RAW/$name-vod-r$round.perf
            put "$name" vod.req "$round" "$req"
            put "$name" vod.hit_ratio "$round" "$(per "$(kv marked "$out")" "$req")"
            put "$name" vod.origin_gbps "$round" "$(awk -v o=$((o1 - o0)) -v e="$el" 'BEGIN { printf "%.3f", o * 2097152 * 8 / e / 1e9 }')"
            put "$name" vod.gbps "$round" "$(kv gbit_per_s "$out")"
            put "$name" vod.pcpu_us "$round" "$(per $((p1 - p0)) "$req" "$((1000000 / CLK_TCK))")"
            put "$name" vod.cpu_us "$round" "$(per $((c1 - c0)) "$req" "$((1000000 / CLK_TCK))")"
            put "$name" vod.hit_p50 "$round" "$(kv marked_latency_us.p50 "$out")"
            put "$name" vod.hit_p99 "$round" "$(kv marked_latency_us.p99 "$out")"
            put "$name" vod.miss_p99 "$round" "$(kv unmarked_latency_us.p99 "$out")"
            put "$name" vod.errors "$round" "$(kv errors_total "$out")"
            put "$name" vod.tlb_irq "$round" "$(per $((t1 - t0)) "$req" 1000)"
            if [[ -s $pf ]]; then
                put "$name" vod.tlb_flush "$round" "$(per "$(pstat_get "$pf" tlb:tlb_flush)" "$req" 1000)"
                put "$name" vod.madvise "$round" "$(per "$(pstat_get "$pf" syscalls:sys_enter_madvise)" "$req" 1000)"
                put "$name" vod.fadvise "$round" "$(per "$(pstat_get "$pf" syscalls:sys_enter_fadvise64)" "$req" 1000)"
            fi
            log "r$round vod $name: $req req, hits $(kv marked "$out"), origin $((o1 - o0)), hit p99 $(kv marked_latency_us.p99 "$out") us, errors $(kv errors_total "$out")"
            # All hits: a catalog half the store, every object fetched first.
            last=$((VOD_FIT - 1))
            fetch_all "$base/obj/2097152?v=[0-$last]" && fetch_all "$base/obj/2097152?v=[0-$last]" ||
                log "$name: warming the all-hit catalog failed"
            out=$RAW/$name-vodhit-r$round.kv
            vod_run "$out" "$base" "$mark" "$VOD_FIT" "$VOD_HIT_DUR" 42
            req=$(kv requests "$out"); req=${req:-0}
            ((req > 0)) || continue
            put "$name" vodhit.hit_ratio "$round" "$(per "$(kv marked "$out")" "$req")"
            put "$name" vodhit.hit_p50 "$round" "$(kv marked_latency_us.p50 "$out")"
            put "$name" vodhit.hit_p99 "$round" "$(kv marked_latency_us.p99 "$out")"
            log "r$round vod all-hit $name: $req req, hits $(kv marked "$out"), hit p99 $(kv marked_latency_us.p99 "$out") us"
        done
    done
fi

# ---------------------------------------------------------------- cold: reads from the disk
# Before each run the harness drops the store's files from the page cache; then an open loop
# at COLD_RATE where every fifth request names a 256 KiB object not read since (each cold
# object once per run) and the others one of four hot ones. The hot hits share the worker
# with the cold reads: their p99 against an all-hot run at the same rate.
COLD_SERVERS=()
if has cold; then
    COLD_N=$((COLD_RATE * COLD_DUR / 5))
    # 256 KiB bodies take 260 KiB each with their record header; 32 MiB volumes, one spare.
    cold_mib=$(((COLD_N + 8) * 260 / 1024 * 5 / 4 / 32 * 32 + 64))
    if [[ -x "$REEL_BIN" ]]; then
        start_reel_plain reel-cold $((PORT_BASE + 13)) $((PORT_BASE + 14)) "${cold_mib}MiB" 32MiB "$ORIGIN" &&
            COLD_SERVERS+=("reel-cold|http://127.0.0.1:$((PORT_BASE + 13))|$WORK/reel-cold/store")
        start_reel_plain reel-cold-threads $((PORT_BASE + 15)) $((PORT_BASE + 16)) "${cold_mib}MiB" 32MiB \
            "$ORIGIN" REEL_STORE_IO=threads &&
            COLD_SERVERS+=("reel-cold-threads|http://127.0.0.1:$((PORT_BASE + 15))|$WORK/reel-cold-threads/store")
    fi
    start_nginx_cache nginx-cold $((PORT_BASE + 17)) "$ORIGIN_PORT" 4g
    COLD_SERVERS+=("nginx-cold|http://127.0.0.1:$((PORT_BASE + 17))|$WORK/nginx-cold/cache")
    for s in "${COLD_SERVERS[@]}"; do
        IFS='|' read -r name base dir <<<"$s"
        for pass in 1 2; do
            fetch_all "$base/obj/262144?hot=[0-3]" && fetch_all "$base/obj/262144?cold=[0-$((COLD_N - 1))]" ||
                die "warming the cold objects on $name"
        done
        log "cold: $name stored $COLD_N cold and 4 hot objects"
    done
    for round in $(seq "$ROUNDS"); do
        for s in "${COLD_SERVERS[@]}"; do
            IFS='|' read -r name base dir <<<"$s"
            pids=${PIDS_OF[$name]}
            mixed=(); hot=()
            for h in 0 1 2 3; do hot+=("$base/obj/262144?hot=$h"); done
            for j in $(seq 0 $((COLD_N - 1))); do
                mixed+=("${hot[$((j % 4))]}" "${hot[$(((j + 1) % 4))]}" "${hot[$(((j + 2) % 4))]}" "${hot[$(((j + 3) % 4))]}" "$base/obj/262144?cold=$j")
            done
            left=$(evict_dir "$dir")
            out=$RAW/$name-cold-r$round.kv
            c0=$(cpu0_busy); p0=$(proc_ticks "$pids"); a0=$(irq_sum CAL); r0=$(irq_sum RES)
            load "$out" open -c 32 -r "$COLD_RATE" -d "$COLD_DUR" --mark-url cold "${mixed[@]}"
            c1=$(cpu0_busy); p1=$(proc_ticks "$pids"); a1=$(irq_sum CAL); r1=$(irq_sum RES)
            req=$(kv requests "$out"); req=${req:-0}
            ((req > 0)) || { log "$name cold r$round: no requests"; continue; }
            cold=$(kv marked "$out")
            put "$name" cold.hot_p50 "$round" "$(kv unmarked_latency_us.p50 "$out")"
            put "$name" cold.hot_p99 "$round" "$(kv unmarked_latency_us.p99 "$out")"
            put "$name" cold.cold_p99 "$round" "$(kv marked_latency_us.p99 "$out")"
            put "$name" cold.cold_share "$round" "$(per "$cold" "$req")"
            put "$name" cold.pcpu_us "$round" "$(per $((p1 - p0)) "$req" "$((1000000 / CLK_TCK))")"
            put "$name" cold.cal "$round" "$(per $((a1 - a0)) "$cold" 1000)"
            put "$name" cold.res "$round" "$(per $((r1 - r0)) "$cold" 1000)"
            put "$name" cold.errors "$round" "$(kv errors_total "$out")"
            pm=$((p1 - p0)); rm=$req
            log "r$round cold $name: evicted (left $left bytes), $req req, $cold cold, hot p99 $(kv unmarked_latency_us.p99 "$out") us, cold p99 $(kv marked_latency_us.p99 "$out") us"
            out=$RAW/$name-allhot-r$round.kv
            c0=$(cpu0_busy); p0=$(proc_ticks "$pids"); a0=$(irq_sum CAL); r0=$(irq_sum RES)
            load "$out" open -c 32 -r "$COLD_RATE" -d "$COLD_DUR" --mark-url cold "${hot[@]}"
            c1=$(cpu0_busy); p1=$(proc_ticks "$pids"); a1=$(irq_sum CAL); r1=$(irq_sum RES)
            req=$(kv requests "$out"); req=${req:-0}
            ((req > 0)) || continue
            put "$name" allhot.hot_p50 "$round" "$(kv unmarked_latency_us.p50 "$out")"
            put "$name" allhot.hot_p99 "$round" "$(kv unmarked_latency_us.p99 "$out")"
            put "$name" allhot.pcpu_us "$round" "$(per $((p1 - p0)) "$req" "$((1000000 / CLK_TCK))")"
            # The extra CPU of the mixed run over the all-hot one, per cold read.
            put "$name" cold.cpu_per_cold "$round" "$(awk -v pm="$pm" -v rm="$rm" -v ph=$((p1 - p0)) -v rh="$req" -v c="$cold" -v t="$CLK_TCK" \
                'BEGIN { if (c > 0 && rh > 0) printf "%.1f", (pm / rm - ph / rh) * rm * 1e6 / t / c }')"
            log "r$round all-hot $name: hot p99 $(kv unmarked_latency_us.p99 "$out") us"
        done
    done
fi

# ---------------------------------------------------------------- conns: many idle viewers
# CONN_BUSY connections in a closed loop on the 1 KiB object, alone and then beside CONN_IDLE
# keep-alive connections that made one request each and sit idle. Memory per idle connection
# = growth of the serving processes' RSS while the idle ones are held, divided by them.
CONN_SERVERS=()
if has conns; then
    [[ -n "${PIDS_OF[reel]:-}" ]] && CONN_SERVERS+=("reel|$REEL_PORT")
    CONN_SERVERS+=("nginx-cache|$((PORT_BASE + 1))")
    established() { ss -Htn state established "( sport = :$1 )" | wc -l; }
    for round in $(seq "$ROUNDS"); do
        for s in "${CONN_SERVERS[@]}"; do
            IFS='|' read -r name port <<<"$s"
            pids=${PIDS_OF[$name]}
            url=http://127.0.0.1:$port/live/playlist.m3u8
            out=$RAW/$name-busy-r$round.kv
            c0=$(cpu0_busy); p0=$(proc_ticks "$pids")
            load "$out" fixed -c "$CONN_BUSY" -d "$CONN_DUR" "$url"
            c1=$(cpu0_busy); p1=$(proc_ticks "$pids")
            req=$(kv requests "$out"); req=${req:-0}
            ((req > 0)) || { log "$name busy r$round: no requests"; continue; }
            put "$name" busy.p99 "$round" "$(kv latency_us.p99 "$out")"
            put "$name" busy.rps "$round" "$(kv requests_per_s "$out")"
            put "$name" busy.pcpu_us "$round" "$(per $((p1 - p0)) "$req" "$((1000000 / CLK_TCK))")"
            put "$name" busy.cpu_us "$round" "$(per $((c1 - c0)) "$req" "$((1000000 / CLK_TCK))")"
            m0=$(rss_kib "$pids")
            k0=$(awk '$1 == "TCP:" { for (i = 2; i < NF; i++) if ($i == "mem") print $(i + 1) }' /proc/net/sockstat)
            idle_out=$RAW/$name-idle-r$round.kv
            hold=$((CONN_IDLE / 2000 + 3 * CONN_DUR + 15))
            timeout $((hold + 60)) taskset -c "$GEN_CPU" "$LOAD" idle -c "$CONN_IDLE" --connect-rate 2000 --buffer 4096 \
                -d "$hold" --timeout 10s "$url" --kv >"$idle_out" 2>"$idle_out.err" &
            ipid=$!
            STARTED+=("$ipid")
            for i in $(seq 300); do
                (($(established "$port") >= CONN_IDLE)) && break
                sleep 0.1
            done
            # Idle means idle: reel parks a connection once it has waited 1 s, so the last
            # ones opened are measured after that too.
            sleep 3
            n=$(established "$port")
            m1=$(rss_kib "$pids")
            k1=$(awk '$1 == "TCP:" { for (i = 2; i < NF; i++) if ($i == "mem") print $(i + 1) }' /proc/net/sockstat)
            out=$RAW/$name-busyidle-r$round.kv
            c0=$(cpu0_busy); p0=$(proc_ticks "$pids")
            load "$out" fixed -c "$CONN_BUSY" -d "$CONN_DUR" "$url"
            c1=$(cpu0_busy); p1=$(proc_ticks "$pids")
            m2=$(rss_kib "$pids")
            req=$(kv requests "$out"); req=${req:-0}
            put "$name" idle.conns "$round" "$n"
            # Memory from the first round only: later rounds reuse what the first one's
            # connections left in the server's allocator (and nginx's cache loader exits
            # between rounds), so their growth understates the cost of a connection.
            if ((round == 1)); then
                put "$name" idle.rss_b "$round" "$(per $(((m1 - m0) * 1024)) "$n")"
                put "$name" idle.rss_after_b "$round" "$(per $(((m2 - m0) * 1024)) "$n")"
            fi
            put "$name" idle.kernel_b "$round" "$(per $(((k1 - k0) * 4096)) "$n")"
            if ((req > 0)); then
                put "$name" busyidle.p99 "$round" "$(kv latency_us.p99 "$out")"
                put "$name" busyidle.rps "$round" "$(kv requests_per_s "$out")"
                put "$name" busyidle.pcpu_us "$round" "$(per $((p1 - p0)) "$req" "$((1000000 / CLK_TCK))")"
                put "$name" busyidle.cpu_us "$round" "$(per $((c1 - c0)) "$req" "$((1000000 / CLK_TCK))")"
            fi
            wait "$ipid" 2>/dev/null || true
            put "$name" idle.held "$round" "$(kv held "$idle_out")"
            put "$name" idle.errors "$round" "$(kv errors_total "$idle_out")"
            log "r$round conns $name: $n idle held, RSS +$((m1 - m0)) KiB ($(per $(((m1 - m0) * 1024)) "$n") B each), busy p99 alone/with idle $(kv latency_us.p99 "$RAW/$name-busy-r$round.kv") / $(kv latency_us.p99 "$out") us"
            # Let the server close them before the next run.
            for i in $(seq 100); do (($(established "$port") < CONN_BUSY)) && break; sleep 0.1; done
        done
    done
fi

# ---------------------------------------------------------------- table
# errors: summed over every measured run of a server
awk -F'|' '$2 ~ /^(1k|256k|2m|open|live)\.errors$/ { e[$1] += $4 } END { for (n in e) printf "%s|errors_sum|1|%d\n", n, e[n] }' "$DATA" >> "$DATA"
awk -F'|' '$2 ~ /^tls-.*\.errors$/ { e[$1] += $4 } END { for (n in e) printf "%s|tls_errors|1|%d\n", n, e[n] }' "$DATA" >> "$DATA"
awk -F'|' '$2 ~ /^h3-.*\.errors$/ { e[$1 "|" $2] += $4 } END { for (k in e) printf "%s_sum|1|%d\n", k, e[k] }' "$DATA" >> "$DATA"
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
        echo "| metric | reel | reel, 2 workers | nginx-cache | varnish | reel/nginx-cache | reel/varnish |"
        echo "|---|---:|---:|---:|---:|---:|---:|"
        lrow() {  # label metric kind
            echo "| $1 | $(fmtv reel "$2" "$3") | $(fmtv reel-2w "$2" "$3") | $(fmtv nginx-cache "$2" "$3") | $(fmtv varnish "$2" "$3") | $(ratio "$2" nginx-cache) | $(ratio "$2" varnish) |"
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
        echo "HTTP/1.1: \`reel-load fixed -c $CONNS -d ${DUR}s https://...\` (keep-alive). HTTP/2: \`h2load -D $DUR -c $H2_CLIENTS -m $H2_STREAMS -t 1\`;" \
            "request latency = h2load's per-request times (--log-file) of that closed loop; burst latency = one \`h2load -n $((H2_CLIENTS * H2_STREAMS)) -c $H2_CLIENTS -m $H2_STREAMS\` (each client asks for $H2_STREAMS at once)." \
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
            [[ " $TLS_PROTOS " == *" $pk "* ]] || continue
            for w in "1k|1 KiB" "256k|256 KiB" "2m|2 MiB"; do
                IFS='|' read -r wl label <<<"$w"
                trow "$plabel $label: CPU µs/req" "tls-$pk-$wl.pcpu_us" f1
                trow "$plabel $label: CPU$SRV_CPU µs/req" "tls-$pk-$wl.cpu_us" f1
                trow "$plabel $label: req/s" "tls-$pk-$wl.rps" rps
                if [[ $pk == h2 ]]; then
                    trow "$plabel $label: request latency p50 ms" "tls-$pk-$wl.p50" ms
                    trow "$plabel $label: request latency p99 ms" "tls-$pk-$wl.p99" ms
                    trow "$plabel $label: burst latency p50 ms" "tls-$pk-$wl.burst_p50" ms
                    trow "$plabel $label: burst latency p99 ms" "tls-$pk-$wl.burst_p99" ms
                fi
            done
        done
        if [[ " $TLS_PROTOS " == *" h1 "* ]]; then
            trow "full TLS 1.3 handshakes/s per core" "tls-h1-hs-full.per_core" raw
            trow "full handshake: CPU µs each" "tls-h1-hs-full.pcpu_us" f1
            trow "resumed TLS 1.3 handshakes/s per core" "tls-h1-hs-resumed.per_core" raw
            trow "resumed handshake: CPU µs each" "tls-h1-hs-resumed.pcpu_us" f1
        fi
        trow "failed requests, all TLS runs" "tls_errors" raw
    fi
    if has h3; then
        echo
        echo "## HTTP/3 (reel vs Caddy file_server, QUIC on loopback UDP, TLS 1.3, the same ECDSA P-256 certificate, both on CPU $SRV_CPU)"
        echo
        echo "\`reel-load fixed --h3 -c $H3_CONNS --streams $H3_STREAMS --timeout ${H3_TIMEOUT}s -d ${DUR}s https://...\` ($H3_CONNS QUIC connections from one UDP socket, $H3_STREAMS request(s) at a time on each), pinned to CPU $GEN_CPU;" \
            "Caddy $(caddy version 2>/dev/null | awk '{ print $1; exit }') serves the files nginx-static serves (\`file_server\`, admin and logs off; Go runtime limited to CPU $SRV_CPU by its affinity);" \
            "reel serves them from its cache (HTTPS listener with \`http3 = true\`, warmed over plain HTTP)." \
            "CPU µs/req = the server processes' CPU time (user + system, /proc/PID/stat) / requests; CPU$SRV_CPU µs/req = CPU $SRV_CPU busy time / requests (includes softirq work and anything else on that core)." \
            "Errors summed over the $ROUNDS rounds; the others are medians.${REEL_H3_NOTE:+ reel: $REEL_H3_NOTE, its rows are n/a.}"
        echo
        echo "| metric | reel | caddy | reel/caddy |"
        echo "|---|---:|---:|---:|"
        hrow() {  # label metric kind
            echo "| $1 | $(fmtv reel "$2" "$3") | $(fmtv caddy "$2" "$3") | $(ratio "$2" caddy) |"
        }
        for w in "1k|1 KiB" "256k|256 KiB" "2m|2 MiB"; do
            IFS='|' read -r wl label <<<"$w"
            hrow "HTTP/3 $label: CPU µs/req" "h3-$wl.pcpu_us" f1
            hrow "HTTP/3 $label: CPU$SRV_CPU µs/req" "h3-$wl.cpu_us" f1
            hrow "HTTP/3 $label: req/s" "h3-$wl.rps" rps
            hrow "HTTP/3 $label: p99 ms" "h3-$wl.p99" ms
            hrow "HTTP/3 $label: errors" "h3-$wl.errors_sum" raw
        done
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
    # A row over the given servers: label, metric, kind, servers...; then "reel/<peer>" ratios
    # for the peers named in RATIO_PEERS (first server is reel's).
    nrow() {
        local label=$1 met=$2 kind=$3 cells="" n first peer a b
        shift 3
        first=$1
        for n in "$@"; do cells+=" $(fmtv "$n" "$met" "$kind") |"; done
        for peer in "${RATIO_PEERS[@]}"; do
            a=${MED[$first|$met]:-}; b=${MED[$peer|$met]:-}
            if [[ -n "$a" && -n "$b" ]]; then
                cells+=" $(awk -v a="$a" -v b="$b" 'BEGIN { if (b + 0 == 0) print "-"; else printf "%.2f", a / b }') |"
            else
                cells+=" n/a |"
            fi
        done
        echo "| $label |$cells"
    }
    # Ratio of two metrics of the same server (medians): label, metric a, metric b, servers...
    qrow() {
        local label=$1 ma=$2 mb=$3 cells="" n a b
        shift 3
        for n in "$@"; do
            a=${MED[$n|$ma]:-}; b=${MED[$n|$mb]:-}
            if [[ -n "$a" && -n "$b" ]]; then
                cells+=" $(awk -v a="$a" -v b="$b" 'BEGIN { if (b + 0 == 0) print "-"; else printf "%.2f", a / b }') |"
            else
                cells+=" n/a |"
            fi
        done
        for n in "${RATIO_PEERS[@]}"; do cells+=" |"; done
        echo "| $label |$cells"
    }
    header() {   # servers...
        local h="| metric |" l="|---|" n
        for n in "$@"; do h+=" $n |"; l+="---:|"; done
        for n in "${RATIO_PEERS[@]}"; do h+=" ${1}/$n |"; l+="---:|"; done
        echo "$h"; echo "$l"
    }
    if ((${#MIX_SERVERS[@]})); then
        names=(); for s in "${MIX_SERVERS[@]}"; do names+=("${s%%|*}"); done
        RATIO_PEERS=(); [[ " ${names[*]} " == *" reel "* ]] && RATIO_PEERS=(nginx-static)
        echo
        echo "## Many distinct segments: $MIX_N x 2 MiB against one"
        echo
        echo "\`reel-load fixed -c $CONNS -d ${DUR}s\` over one 2 MiB segment, then over $MIX_N distinct ones (each connection walks the list from its own start); median of $ROUNDS rounds." \
            "CPU0 = CPU 0 busy time / requests, server = the server processes' CPU time / requests. Store reads = \`preadv2\` + \`pread64\` + \`io_uring_enter\` calls of the serving process" \
            "(perf stat), residency checks = \`cachestat\` calls, both per 100 hits. nginx-static serves copies in /dev/shm."
        echo
        header "${names[@]}"
        nrow "1 segment: req/s" mix1.rps rps "${names[@]}"
        nrow "1 segment: CPU0 µs/req" mix1.cpu_us f1 "${names[@]}"
        nrow "1 segment: server CPU µs/req" mix1.pcpu_us f1 "${names[@]}"
        nrow "$MIX_N segments: req/s" mixn.rps rps "${names[@]}"
        nrow "$MIX_N segments: CPU0 µs/req" mixn.cpu_us f1 "${names[@]}"
        nrow "$MIX_N segments: server CPU µs/req" mixn.pcpu_us f1 "${names[@]}"
        qrow "CPU0 per hit, $MIX_N segments / 1 segment" mixn.cpu_us mix1.cpu_us "${names[@]}"
        qrow "server CPU per hit, $MIX_N segments / 1 segment" mixn.pcpu_us mix1.pcpu_us "${names[@]}"
        nrow "store reads per 100 hits, 1 segment" mix1.reads100 f2 "${names[@]}"
        nrow "store reads per 100 hits, $MIX_N segments" mixn.reads100 f2 "${names[@]}"
        nrow "residency checks (cachestat) per 100 hits, $MIX_N segments" mixn.cachestat100 f2 "${names[@]}"
    fi
    if ((${#VOD_SERVERS[@]})); then
        names=(); for s in "${VOD_SERVERS[@]}"; do names+=("${s%%|*}"); done
        RATIO_PEERS=("${names[@]:1}")
        echo
        echo "## A VOD library 4x the store (evictions under load)"
        echo
        echo "Store ${VOD_STORE_MIB} MiB (reel \`[store] size\`, nginx \`max_size\`, Varnish \`malloc\`); $((VOD_STORE_MIB * 4 / 2)) objects of 2 MiB (\`/obj/2097152?v={i}\`)," \
            "Zipf s=1.0; \`reel-load zipf -v $VOD_VIEWERS --interval $VOD_INTERVAL\` ($VOD_VIEWERS viewers, one request every $VOD_INTERVAL each) for ${VOD_DUR}s after ${VOD_WARM}s of the same load with another seed;" \
            "the origin is reel-demo-origin with its production latency table (p50 33 ms, p99 166 ms). Hits are the responses the server marks as hits." \
            "All-hit: the same viewers over the $((VOD_STORE_MIB / 4)) most popular objects (half the store), every one fetched first, for ${VOD_HIT_DUR}s." \
            "TLB (IRQ) = the machine-wide /proc/interrupts row; tlb_flush = perf stat of the shootdowns the serving processes made (\`tlb:tlb_flush\` reasons 2-4: not the flush on a task switch, nor flushes run for another process's IPI); madvise and fadvise64 likewise. Median of $VOD_ROUNDS rounds."
        echo
        header "${names[@]}"
        nrow "hit ratio" vod.hit_ratio f2 "${names[@]}"
        nrow "MiB held at the end" vod.held_mib raw "${names[@]}"
        nrow "origin Gbit/s" vod.origin_gbps f2 "${names[@]}"
        nrow "delivered Gbit/s" vod.gbps f2 "${names[@]}"
        nrow "server CPU µs/req" vod.pcpu_us f1 "${names[@]}"
        nrow "CPU0 µs/req" vod.cpu_us f1 "${names[@]}"
        nrow "hit p50 ms, evicting" vod.hit_p50 ms "${names[@]}"
        nrow "hit p99 ms, evicting" vod.hit_p99 ms "${names[@]}"
        nrow "hit p99 ms, all hits" vodhit.hit_p99 ms "${names[@]}"
        qrow "hit p99 evicting / all hits" vod.hit_p99 vodhit.hit_p99 "${names[@]}"
        nrow "hit ratio of the all-hit run" vodhit.hit_ratio f2 "${names[@]}"
        nrow "miss p99 ms" vod.miss_p99 ms "${names[@]}"
        nrow "TLB shootdowns (IRQ, machine) per 1000 req" vod.tlb_irq f2 "${names[@]}"
        nrow "TLB shootdowns made by the serving processes per 1000 req" vod.tlb_flush f2 "${names[@]}"
        nrow "madvise per 1000 req" vod.madvise f2 "${names[@]}"
        nrow "fadvise64 per 1000 req" vod.fadvise f2 "${names[@]}"
        nrow "errors (median run)" vod.errors raw "${names[@]}"
    fi
    if ((${#COLD_SERVERS[@]})); then
        names=(); for s in "${COLD_SERVERS[@]}"; do names+=("${s%%|*}"); done
        RATIO_PEERS=()
        echo
        echo "## Cold reads beside hot hits"
        echo
        echo "Before each run the harness writes back and drops the store's files from the page cache (\`sync FILE; dd if=FILE iflag=nocache count=0\`)." \
            "\`reel-load open -c 32 -r $COLD_RATE -d ${COLD_DUR}s\`: every fifth request is a 256 KiB object not read since ($((COLD_RATE * COLD_DUR / 5)) of them, each once), the others one of four hot 256 KiB objects;" \
            "all-hot: the four hot ones only, same rate. One worker serves both. reel-cold: io_uring; reel-cold-threads: \`REEL_STORE_IO=threads\`." \
            "CAL / RES = machine-wide function-call / rescheduling IPIs per 1000 cold reads. CPU per cold read = extra server CPU of the mixed run over the all-hot one. Median of $ROUNDS rounds."
        echo
        header "${names[@]}"
        nrow "hot p50 ms, with cold reads" cold.hot_p50 ms "${names[@]}"
        nrow "hot p99 ms, with cold reads" cold.hot_p99 ms "${names[@]}"
        nrow "hot p99 ms, all hot" allhot.hot_p99 ms "${names[@]}"
        qrow "hot p99 with cold / all hot" cold.hot_p99 allhot.hot_p99 "${names[@]}"
        nrow "cold p99 ms" cold.cold_p99 ms "${names[@]}"
        nrow "cold share of requests" cold.cold_share f2 "${names[@]}"
        nrow "server CPU µs/req, with cold" cold.pcpu_us f1 "${names[@]}"
        nrow "server CPU µs/req, all hot" allhot.pcpu_us f1 "${names[@]}"
        nrow "server CPU µs per cold read" cold.cpu_per_cold f1 "${names[@]}"
        nrow "CAL IPIs per 1000 cold reads" cold.cal f1 "${names[@]}"
        nrow "RES IPIs per 1000 cold reads" cold.res f1 "${names[@]}"
        nrow "errors (median run)" cold.errors raw "${names[@]}"
    fi
    if ((${#CONN_SERVERS[@]})); then
        names=(); for s in "${CONN_SERVERS[@]}"; do names+=("${s%%|*}"); done
        RATIO_PEERS=("${names[@]:1}")
        echo
        echo "## Many idle keep-alive connections"
        echo
        echo "\`reel-load idle -c $CONN_IDLE\` (one 1 KiB request each, then silent) held open while \`reel-load fixed -c $CONN_BUSY -d ${CONN_DUR}s\` runs on the 1 KiB object; \"alone\" is the same busy run before." \
            "Memory per idle connection = growth of the serving processes' RSS once the idle ones are connected, / connections, in the first round (later rounds reuse memory the first one left; run the section alone, as other sections leave memory behind too); RSS moves in 2 MiB steps where transparent huge pages back the heap (±210 B per connection at 10,000); kernel = growth of the TCP socket memory (/proc/net/sockstat, both ends of loopback). Median of $ROUNDS rounds."
        echo
        header "${names[@]}"
        nrow "idle connections held" idle.conns raw "${names[@]}"
        nrow "RSS per idle connection, bytes" idle.rss_b f1 "${names[@]}"
        nrow "RSS per idle connection after the busy run, bytes" idle.rss_after_b f1 "${names[@]}"
        nrow "kernel socket memory per connection, bytes" idle.kernel_b f1 "${names[@]}"
        nrow "busy p99 ms, alone" busy.p99 ms "${names[@]}"
        nrow "busy p99 ms, with idle" busyidle.p99 ms "${names[@]}"
        qrow "busy p99 with idle / alone" busyidle.p99 busy.p99 "${names[@]}"
        nrow "server CPU µs/hit, alone" busy.pcpu_us f1 "${names[@]}"
        nrow "server CPU µs/hit, with idle" busyidle.pcpu_us f1 "${names[@]}"
        nrow "req/s, alone" busy.rps rps "${names[@]}"
        nrow "req/s, with idle" busyidle.rps rps "${names[@]}"
        nrow "idle connections closed early (errors)" idle.errors raw "${names[@]}"
    fi
    echo
    echo "Whole run: $(( $(date +%s) - T_START )) s. Command: \`$(for v in SECTIONS DUR ROUNDS CONNS OPEN_RATE STRACE_DUR LIVE_VIEWERS LIVE_DUR HERD_VIEWERS H2_CLIENTS H2_STREAMS TLS_PROTOS HS_CONNS LL_VIEWERS LL_DUR STORE_SIZE MIX_N VOD_STORE_MIB VOD_VIEWERS VOD_INTERVAL VOD_WARM VOD_DUR VOD_HIT_DUR VOD_ROUNDS COLD_RATE COLD_DUR CONN_IDLE CONN_BUSY CONN_DUR H3_CONNS H3_STREAMS H3_TIMEOUT; do printf '%s="%s" ' "$v" "${!v}"; done)$(has seek && for v in SEEK_VIEWERS SEEK_DUR SEEK_SIZE SEEK_CHUNK SEEK_RATE SEEK_RUN SEEK_DELAY_MS SEEK_READ_AHEAD SEEK_ROUNDS; do printf '%s="%s" ' "$v" "${!v}"; done)benches/compare.sh\`. Raw data: raw/ (not committed)."
} > "$RESULTS"
echo
cat "$RESULTS"
