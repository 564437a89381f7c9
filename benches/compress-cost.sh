#!/usr/bin/env bash
# What a compressed playlist hit costs, against nginx: one server core each (CPU 1), the
# load on CPU 0 (`reel-load fixed`, CONNS connections, keep-alive), a 2.8 KiB LL-HLS media
# playlist that stays fresh, in five modes that alternate, ROUNDS times:
#
#   reel identity       reel, no Accept-Encoding (the plain hit)
#   reel gzip           reel with `[site.compress]`, `Accept-Encoding: gzip` (made once, kept)
#   reel br             the same with `Accept-Encoding: br`
#   nginx gzip_static   nginx serving the file and its `.gz` made ahead (`gzip_static on`):
#                       the cheapest compressed answer nginx has, with no cache logic
#   nginx cache gzip    nginx `proxy_cache` with `gzip on` (level 1, its default): what an
#                       nginx edge does, compressing the cached playlist on every hit
#
# Each server's own CPU time (utime + stime of all its processes, from /proc) per request,
# and the request rate; medians over the rounds. Installs nginx with apt-get when missing.
#
#     benches/compress-cost.sh                  # builds reel and reel-load (release) first
#     PORT=19280 DUR=8 ROUNDS=3 CONNS=64 benches/compress-cost.sh
set -euo pipefail
PORT=${PORT:-19280}
DUR=${DUR:-8}
ROUNDS=${ROUNDS:-3}
CONNS=${CONNS:-64}
if ! command -v nginx >/dev/null 2>&1; then
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nginx; } >/dev/null
fi
# shellcheck source=benches/one-worker.sh
source "$(dirname "$0")/one-worker.sh"

TCK=$(getconf CLK_TCK)
NGINX_PORT=$((PORT + 3))

# A live playlist as an LL-HLS origin serves it: 8 segments of 4 parts, a preload hint.
{
    printf '#EXTM3U\n#EXT-X-VERSION:9\n#EXT-X-TARGETDURATION:4\n#EXT-X-PART-INF:PART-TARGET=1.0\n'
    printf '#EXT-X-SERVER-CONTROL:CAN-BLOCK-RELOAD=YES,PART-HOLD-BACK=3.0,CAN-SKIP-UNTIL=24.0\n'
    printf '#EXT-X-MEDIA-SEQUENCE:1200\n#EXT-X-MAP:URI="init.mp4"\n'
    for s in $(seq 1200 1207); do
        printf '#EXT-X-PROGRAM-DATE-TIME:2026-12-07T10:%02d:%02d.000Z\n' $((s / 15 % 60)) $((s * 4 % 60))
        for p in 0 1 2 3; do
            printf '#EXT-X-PART:DURATION=1.00000,URI="seg%d.part%d.m4s"%s\n' "$s" "$p" \
                "$([[ $p == 0 ]] && echo ',INDEPENDENT=YES')"
        done
        printf '#EXTINF:4.00000,\nseg%d.m4s\n' "$s"
    done
    printf '#EXT-X-PRELOAD-HINT:TYPE=PART,URI="seg1208.part0.m4s"\n'
    printf '#EXT-X-RENDITION-REPORT:URI="../720p/index.m3u8",LAST-MSN=1207,LAST-PART=3\n'
} >"$TMP/origin/index.m3u8"
touch -d 2020-01-01 "$TMP/origin/index.m3u8"
gzip -k -6 "$TMP/origin/index.m3u8"
SIZE=$(stat -c %s "$TMP/origin/index.m3u8")
GZSIZE=$(stat -c %s "$TMP/origin/index.m3u8.gz")

mkdir -p "$TMP/nginx/tmp" "$TMP/nginx/cache"
nginx_start() {   # mode
    local server
    case $1 in
        static) server="root $TMP/origin; gzip_static on;" ;;
        cache) server="location / { proxy_pass http://127.0.0.1:$((PORT + 1)); proxy_http_version 1.1;
               proxy_set_header Connection \"\"; proxy_cache edge; proxy_cache_valid 200 1h;
               proxy_cache_lock on; gzip on; gzip_types application/vnd.apple.mpegurl;
               gzip_min_length 256; gzip_proxied any; }" ;;
    esac
    cat >"$TMP/nginx/nginx.conf" <<NGINX
user root;
worker_processes 1;
pid $TMP/nginx/nginx.pid;
error_log $TMP/nginx/error.log warn;
events { worker_connections 4096; }
http {
    include /etc/nginx/mime.types;
    access_log off;
    sendfile on;
    tcp_nopush on;
    keepalive_requests 1000000;
    open_file_cache max=1000 inactive=60s;
    client_body_temp_path $TMP/nginx/tmp/body;
    proxy_temp_path $TMP/nginx/tmp/proxy;
    fastcgi_temp_path $TMP/nginx/tmp/fastcgi;
    uwsgi_temp_path $TMP/nginx/tmp/uwsgi;
    scgi_temp_path $TMP/nginx/tmp/scgi;
    proxy_cache_path $TMP/nginx/cache levels=1:2 keys_zone=edge:16m inactive=1h use_temp_path=off;
    server { listen 127.0.0.1:$NGINX_PORT; $server }
}
NGINX
    taskset -c 1 nginx -p "$TMP/nginx/" -e "$TMP/nginx/error.log" -c "$TMP/nginx/nginx.conf" \
        -g 'daemon off;' >"$TMP/nginx/stdout.log" 2>&1 &
    NGINX=$!
    PIDS+=("$NGINX")
    for _ in $(seq 100); do curl -sf -o /dev/null "http://127.0.0.1:$NGINX_PORT/index.m3u8" && break; sleep 0.1; done
}
# CPU ticks of a process and its children (nginx: master and worker).
cpu_ticks() {
    local t=0 p
    for p in $1 $(pgrep -P "$1" || true); do
        t=$((t + $(awk '{ print $14 + $15 }' "/proc/$p/stat")))
    done
    echo "$t"
}

MODES=("reel identity" "reel gzip" "reel br" "nginx gzip_static" "nginx cache gzip")
declare -A US RPS BYTES
for round in $(seq "$ROUNDS"); do
    for mode in "${MODES[@]}"; do
        case $mode in
            reel*)
                write_config "" '[[site]]' 'hosts = ["127.0.0.1"]' 'origin_group = "o"' \
                    '[site.compress]' 'enabled = true' '[[origin_group]]' 'name = "o"' \
                    '[[origin_group.tier]]' "hosts = [\"127.0.0.1:$((PORT + 1))\"]"
                start_reel
                pid=$REEL url="http://127.0.0.1:$PORT/index.m3u8"
                ;;
            "nginx gzip_static") nginx_start static; pid=$NGINX url="http://127.0.0.1:$NGINX_PORT/index.m3u8" ;;
            "nginx cache gzip") nginx_start cache; pid=$NGINX url="http://127.0.0.1:$NGINX_PORT/index.m3u8" ;;
        esac
        headers=()
        case $mode in
            "reel identity") ;;
            "reel br") headers=(-H "Accept-Encoding: br") ;;
            *) headers=(-H "Accept-Encoding: gzip") ;;
        esac
        # The miss, then hits until the compressed answer is the one kept.
        for _ in 1 2 3; do curl -sf "${headers[@]}" -o /dev/null "$url"; done
        got=$(curl -sf "${headers[@]}" -D - -o "$TMP/body" "$url" | tr -d '\r')
        enc=$(awk -F': ' 'tolower($1) == "content-encoding" { print $2 }' <<<"$got")
        if [[ $mode == "reel identity" && -n $enc ]] || [[ $mode != "reel identity" && -z $enc ]]; then
            echo "$mode: unexpected Content-Encoding '$enc':" >&2
            echo "$got" >&2
            exit 1
        fi
        before=$(cpu_ticks "$pid")
        out=$(taskset -c 0 "$BIN/reel-load" fixed -c "$CONNS" -d "${DUR}s" "${headers[@]}" --kv "$url")
        after=$(cpu_ticks "$pid")
        n=$(awk -F= '$1 == "requests" { print $2 }' <<<"$out")
        errs=$(awk -F= '$1 == "errors_total" { print $2 }' <<<"$out")
        [[ ${errs:-0} == 0 ]] || { echo "$mode: $errs errors" >&2; echo "$out" >&2; exit 1; }
        us=$(awk -v t=$((after - before)) -v n="$n" -v hz="$TCK" 'BEGIN { printf "%.2f", t * 1e6 / hz / n }')
        rps=$(awk -v n="$n" -v d="$DUR" 'BEGIN { printf "%.0f", n / d }')
        echo "round $round $mode: $rps req/s, $us µs CPU per hit, body $(stat -c %s "$TMP/body") B ($enc)" >&2
        US[$mode]+="$us "
        RPS[$mode]+="$rps "
        BYTES[$mode]=$(stat -c %s "$TMP/body")
        kill "$pid"
        wait "$pid" 2>/dev/null || true
    done
done

base=$(median <<<"${US[reel identity]}")
ng=$(median <<<"${US[nginx gzip_static]}")
echo "playlist $SIZE B (gzip -6: $GZSIZE B), $CONNS connections, ${DUR}s x $ROUNDS rounds"
echo "| mode | body B | req/s (median) | CPU µs per hit (median) | / reel identity | / nginx gzip_static |"
echo "|---|---|---|---|---|---|"
for mode in "${MODES[@]}"; do
    us=$(median <<<"${US[$mode]}")
    printf '| %s | %s | %s | %s | %.2f | %.2f |\n' "$mode" "${BYTES[$mode]}" \
        "$(median <<<"${RPS[$mode]}")" "$us" \
        "$(awk -v a="$us" -v b="$base" 'BEGIN { print a / b }')" \
        "$(awk -v a="$us" -v b="$ng" 'BEGIN { print a / b }')"
done
