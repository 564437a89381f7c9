#!/usr/bin/env bash
# Two reel builds and nginx-cache side by side over HTTP/2 (TLS 1.3, one ECDSA P-256
# certificate): the three servers run at once on CPU 0 (only the one under load is busy),
# h2load on CPU 1, the demo origin behind them. ROUNDS interleaved rounds; each round, for
# 256 KiB and 2 MiB hits and each server in turn: a closed loop
# (`h2load -D DUR -c H2_CLIENTS -m H2_STREAMS`, 1 s warm-up) for the server's CPU µs per
# request (user + system, /proc/PID/stat) and the requests' latency p50/p99, then one burst
# (`h2load -n H2_CLIENTS*H2_STREAMS`, every client asks for H2_STREAMS objects at once) for
# its latency p50/p99. Prints each run, then the medians. Compare builds of the same
# machine at the same time: the runs of compare.sh minutes apart drift more than that.
#
#   benches/h2-ab.sh BEFORE_DIR AFTER_DIR   # dirs holding release/reel (and reel-demo-origin)
#   ROUNDS=5 H2_CLIENTS=8 H2_STREAMS=16 benches/h2-ab.sh target-a target-b
set -euo pipefail
A=${1:?usage: h2-ab.sh BEFORE_DIR AFTER_DIR}
B=${2:?usage: h2-ab.sh BEFORE_DIR AFTER_DIR}
ROUNDS=${ROUNDS:-5}
DUR=${DUR:-5}
H2_CLIENTS=${H2_CLIENTS:-32}
H2_STREAMS=${H2_STREAMS:-10}
PORT_BASE=${PORT_BASE:-28300}
for t in nginx h2load openssl curl; do command -v "$t" >/dev/null || { echo "needs $t" >&2; exit 1; }; done
W=$(mktemp -d /tmp/reel-h2ab.XXXXXX)
STARTED=()
cleanup() {
    local p
    for p in "${STARTED[@]}"; do kill "$p" 2>/dev/null || true; done
    [[ -f $W/ng/nginx.pid ]] && kill "$(cat "$W/ng/nginx.pid")" 2>/dev/null || true
    wait 2>/dev/null || true
    rm -rf "$W"
}
trap cleanup EXIT
mkdir -p "$W/tls" "$W/ng/tmp"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 30 -subj /CN=localhost \
    -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" -addext "basicConstraints=critical,CA:FALSE" \
    -keyout "$W/tls/key.pem" -out "$W/tls/cert.pem" 2>/dev/null
ORIGIN=$PORT_BASE
taskset -c 1 "$A/release/reel-demo-origin" --listen "127.0.0.1:$ORIGIN" --latency-scale 0 >"$W/origin.log" 2>&1 &
STARTED+=("$!")

declare -A PID PORT
for v in before after; do
    dir=$A; base=$((PORT_BASE + 4)); [[ $v == after ]] && { dir=$B; base=$((PORT_BASE + 14)); }
    mkdir -p "$W/$v/store"
    cat >"$W/$v/reel.toml" <<EOF
[[listener]]
name = "http"
address = "127.0.0.1:$base"
[[listener]]
name = "https"
address = "127.0.0.1:$((base + 2))"
tls_cert = "$W/tls/cert.pem"
tls_key = "$W/tls/key.pem"
[cores]
workers = [0]
irq = "auto"
nic = []
[store]
path = "$W/$v/store"
size = "1GiB"
volume_size = "64MiB"
[http]
max_connections_per_client = 0
[access_log]
enabled = false
[admin]
address = "127.0.0.1:$((base + 1))"
[[site]]
hosts = ["127.0.0.1", "localhost"]
origin_group = "origin"
[[origin_group]]
name = "origin"
  [origin_group.health]
  enabled = false
  [[origin_group.tier]]
  hosts = ["127.0.0.1:$ORIGIN"]
EOF
    taskset -c 0 "$dir/release/reel" serve --config "$W/$v/reel.toml" >"$W/$v/log" 2>&1 &
    PID[$v]=$!; PORT[$v]=$((base + 2)); STARTED+=("$!")
done
d=$W/ng
cat >"$d/nginx.conf" <<EOF
user root;
worker_processes 1;
pid $d/nginx.pid;
error_log $d/error.log warn;
events { worker_connections 20000; }
http {
    include /etc/nginx/mime.types;
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
    proxy_cache_path $d/cache levels=1:2 keys_zone=edge:64m max_size=4g inactive=1h use_temp_path=off;
    upstream origin { server 127.0.0.1:$ORIGIN; keepalive 32; }
    server { listen 127.0.0.1:$((PORT_BASE + 7)) ssl http2;
        ssl_certificate $W/tls/cert.pem;
        ssl_certificate_key $W/tls/key.pem;
        ssl_protocols TLSv1.2 TLSv1.3;
        location / {
            proxy_pass http://origin;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_cache edge;
            proxy_cache_valid 200 1h;
        } }
}
EOF
taskset -c 0 nginx -c "$d/nginx.conf"
for _ in $(seq 100); do [[ -s $d/nginx.pid ]] && break; sleep 0.1; done
sleep 0.5
PID[nginx]=$(pgrep -P "$(cat "$d/nginx.pid")" | head -1); PORT[nginx]=$((PORT_BASE + 7))
SERVERS=(nginx before after)
for v in "${SERVERS[@]}"; do
    for i in $(seq 100); do
        [[ $(curl -sk -o /dev/null -w '%{http_code}' "https://127.0.0.1:${PORT[$v]}/live/part0.m4s") == 200 ]] && break
        ((i < 100)) || { echo "$v does not answer" >&2; exit 1; }
        sleep 0.1
    done
    for p in /live/part0.m4s /vod/seg.ts; do
        curl -sk -o /dev/null "https://127.0.0.1:${PORT[$v]}$p"
        taskset -c 1 h2load -D 1 -c 8 -m 4 -t 1 "https://127.0.0.1:${PORT[$v]}$p" >/dev/null 2>&1 || true
    done
done
pct() {   # h2load log, percentile -> ms (h2load appends to its log: each run gets a fresh file)
    awk '$2 == 200 { print $3 }' "$1" | sort -n |
        awk -v q="$2" '{ v[NR] = $1 } END { i = int(NR * q / 100 + 0.999999); if (i < 1) i = 1; printf "%.1f", v[i] / 1000 }'
}
RUNS=$W/runs.txt
for r in $(seq "$ROUNDS"); do
    for sz in 256k 2m; do
        p=/live/part0.m4s; [[ $sz == 2m ]] && p=/vod/seg.ts
        for v in "${SERVERS[@]}"; do
            url=https://127.0.0.1:${PORT[$v]}$p
            rm -f "$W/loop.log" "$W/burst.log"
            t0=$(awk '{ print $14 + $15 }' "/proc/${PID[$v]}/stat")
            taskset -c 1 h2load -D "$DUR" -c "$H2_CLIENTS" -m "$H2_STREAMS" -t 1 --warm-up-time=1 \
                --log-file="$W/loop.log" "$url" >"$W/loop.txt" 2>&1 || true
            t1=$(awk '{ print $14 + $15 }' "/proc/${PID[$v]}/stat")
            req=$(grep -m1 '^requests:' "$W/loop.txt" | sed -E 's/.* ([0-9]+) succeeded.*/\1/')
            taskset -c 1 h2load -n $((H2_CLIENTS * H2_STREAMS)) -c "$H2_CLIENTS" -m "$H2_STREAMS" -t 1 \
                --log-file="$W/burst.log" "$url" >/dev/null 2>&1 || true
            cpu=$(awk -v b=$((t1 - t0)) -v t="$(getconf CLK_TCK)" -v r="${req:-0}" 'BEGIN { if (r) printf "%.1f", b * 1e6 / t / r; else print 0 }')
            echo "$v $sz cpu_us $cpu p50 $(pct "$W/loop.log" 50) p99 $(pct "$W/loop.log" 99) burst_p50 $(pct "$W/burst.log" 50) burst_p99 $(pct "$W/burst.log" 99) requests ${req:-0}" | tee -a "$RUNS"
        done
    done
done
echo "medians of $ROUNDS rounds, -c $H2_CLIENTS -m $H2_STREAMS, $DUR s (latencies in ms):"
awk '{ k = $1 " " $2; keys[k] = 1; for (i = 3; i < NF; i += 2) { n[k, $i]++; v[k, $i, n[k, $i]] = $(i + 1) } }
    END { split("cpu_us p50 p99 burst_p50 burst_p99", F, " ")
        for (k in keys) { line = k
            for (f = 1; f <= 5; f++) { m = n[k, F[f]]; delete a
                for (i = 1; i <= m; i++) a[i] = v[k, F[f], i] + 0
                for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
                line = line " " F[f] " " a[int((m + 1) / 2)] }
            print line } }' "$RUNS" | sort
