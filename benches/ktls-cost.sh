#!/usr/bin/env bash
# CPU per HTTPS/1.1 hit with the kernel sealing the records (kTLS) against reel's own record
# layer, and the syscalls of each: one reel worker on the demo config, `reel-load fixed`
# for DUR seconds per row, reel's own CPU time (utime + stime from /proc) per request. With
# NGINX=1 (default, when nginx is installed) also nginx serving the same bytes as static
# files with `sendfile on` and `ssl_conf_command Options KTLS` (OpenSSL's kTLS), one process.
# The last column is the kernel's count of TLS sessions it took for sending
# (/proc/net/tls_stat TlsTxSw) during the row: proof of who sealed.
#
# Needs a kernel with the `tls` module: run it inside the VM of benches/ktls-vm.sh, where
# the CPU is emulated, so quote ratios only, never absolute figures:
#
#     cargo build --release -p reel -p reel-benches
#     benches/ktls-vm.sh -- benches/ktls-cost.sh
#
# Knobs: SIZES ("2097152 262144"), DUR (10), CONNS (8), STRACE_DUR (3; 0 = no syscall
# mix), BIN_DIR (target/release). Writes the table to stdout and, when KTLS_VM_OUT is set
# (inside the VM), to $KTLS_VM_OUT/ktls-cost.md too. Exit status: 0 measured, 1 a step
# failed, 2 no kTLS in this kernel.
set -euo pipefail
cd "$(dirname "$0")/.."

SIZES=${SIZES:-2097152 262144}
DUR=${DUR:-10}
CONNS=${CONNS:-8}
STRACE_DUR=${STRACE_DUR:-3}
BIN_DIR=${BIN_DIR:-${CARGO_TARGET_DIR:-target}/release}
REEL=$BIN_DIR/reel
LOAD=$BIN_DIR/reel-load
[[ -x $REEL && -x $LOAD ]] || { echo "build first: cargo build --release -p reel -p reel-benches" >&2; exit 1; }
grep -qw tls /proc/sys/net/ipv4/tcp_available_ulp 2>/dev/null || modprobe tls 2>/dev/null || true
[[ -n ${MODES:-} ]] || grep -qw tls /proc/sys/net/ipv4/tcp_available_ulp || { echo "no kTLS in this kernel" >&2; exit 2; }

WORK=$(mktemp -d)
PID=
cleanup() { [[ -n $PID ]] && kill "$PID" 2>/dev/null; wait 2>/dev/null || true; rm -rf "$WORK"; }
trap cleanup EXIT

cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
TCK=$(getconf CLK_TCK)

start_reel() { # ktls mode
    sed -e "s|^ktls = .*|ktls = \"$1\"|" \
        -e 's|^workers = .*|workers = [0]|' \
        -e 's|^level = "info".*|level = "warn"|' \
        -e "s|^path = \"./var/log/access.log\".*|path = \"$WORK/access.log\"|" \
        -e "s|^path = \"./var/cache\".*|path = \"$WORK/cache-$1\"|" \
        -e 's|^latency_scale = .*|latency_scale = 0.0|' \
        -e 's|^size = "1GiB"|size = "256MiB"|' \
        config/reel.toml >"$WORK/reel-$1.toml"
    "$REEL" serve --config "$WORK/reel-$1.toml" >"$WORK/reel-$1.log" 2>&1 &
    PID=$!
    for _ in $(seq 300); do
        curl -sk -o /dev/null https://127.0.0.1:8443/healthz && return 0
        sleep 0.2
    done
    echo "reel did not start:"
    cat "$WORK/reel-$1.log"
    return 1
}

stop_reel() { kill "$PID"; wait "$PID" 2>/dev/null || true; PID=; }

tls_tx() { awk '$1 == "TlsTxSw" { print $2 }' /proc/net/tls_stat 2>/dev/null || echo 0; }

# measure <label> <pid> <url>: one table row.
measure() {
    local label=$1 pid=$2 url=$3 size=$4
    curl -sk -o /dev/null "$url"    # the miss
    curl -sk -o /dev/null "$url"
    local t0 before after n us mix="-"
    t0=$(tls_tx)
    before=$(cpu_ticks "$pid")
    n=$(taskset -c 1 "$LOAD" fixed -c "$CONNS" -d "${DUR}s" --kv "$url" | awk -F= '$1 == "requests" { print $2 }')
    after=$(cpu_ticks "$pid")
    local tx=$(( $(tls_tx) - t0 ))
    us=$(awk -v t=$((after - before)) -v n="$n" -v hz="$TCK" 'BEGIN { printf "%.0f", n ? t * 1e6 / hz / n : 0 }')
    if [[ $STRACE_DUR != 0 ]] && command -v strace >/dev/null; then
        strace -f -c -o "$WORK/strace-$label-$size" -p "$pid" &
        local spid=$!
        sleep 0.5
        local m
        m=$(taskset -c 1 "$LOAD" fixed -c "$CONNS" -d "${STRACE_DUR}s" --kv "$url" | awk -F= '$1 == "requests" { print $2 }')
        kill -INT "$spid"; wait "$spid" 2>/dev/null || true
        mix=$(awk -v m="$m" '$NF ~ /^(sendfile|sendto|writev|write)$/ { c[$NF] = $4 }
            END { printf "%.1f / %.1f / %.1f / %.1f", c["sendfile"]/m, c["sendto"]/m, c["writev"]/m, c["write"]/m }' "$WORK/strace-$label-$size")
    fi
    echo "| $size | $label | $n | $us | $mix | $tx |" >>"$out"
}

out=$WORK/table.md
{
    echo "| size | server | requests | CPU µs/request | sendfile / sendto / writev / write per request | kernel TLS TX sessions |"
    echo "|---|---|---|---|---|---|"
} >"$out"
for mode in ${MODES:-auto off}; do
    start_reel "$mode"
    label=$([[ $mode == auto ]] && echo "reel, kTLS" || echo "reel, its record layer")
    for size in $SIZES; do
        measure "$label" "$PID" "https://127.0.0.1:8443/obj/$size" "$size"
    done
    curl -s http://127.0.0.1:9090/metrics | grep "^reel_tls_connections_total" || true
    stop_reel
done

if [[ ${NGINX:-1} == 1 ]] && command -v nginx >/dev/null; then
    mkdir -p "$WORK/www/obj" "$WORK/ngx"
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj /CN=localhost \
        -keyout "$WORK/key.pem" -out "$WORK/cert.pem" 2>/dev/null
    for size in $SIZES; do head -c "$size" /dev/urandom >"$WORK/www/obj/$size"; done
    for ktls in on off; do
        opt=$([[ $ktls == on ]] && echo "ssl_conf_command Options KTLS;" || echo "")
        cat >"$WORK/nginx-$ktls.conf" <<NGX
daemon off;
master_process off;
worker_processes 1;
error_log $WORK/ngx/error.log warn;
pid $WORK/ngx/nginx.pid;
events { worker_connections 1024; }
http {
    access_log off;
    sendfile on;
    client_body_temp_path $WORK/ngx; proxy_temp_path $WORK/ngx; fastcgi_temp_path $WORK/ngx;
    uwsgi_temp_path $WORK/ngx; scgi_temp_path $WORK/ngx;
    server {
        listen 127.0.0.1:8444 ssl;
        ssl_certificate $WORK/cert.pem;
        ssl_certificate_key $WORK/key.pem;
        ssl_protocols TLSv1.3;
        $opt
        root $WORK/www;
    }
}
NGX
        taskset -c 0 nginx -c "$WORK/nginx-$ktls.conf" &
        PID=$!
        for _ in $(seq 100); do curl -sk -o /dev/null https://127.0.0.1:8444/obj/1 2>/dev/null && break; sleep 0.2; done
        for size in $SIZES; do
            measure "nginx, KTLS $ktls" "$PID" "https://127.0.0.1:8444/obj/$size" "$size"
        done
        kill "$PID"; wait "$PID" 2>/dev/null || true
        PID=
    done
fi
cat "$out"
[[ -n ${KTLS_VM_OUT:-} ]] && cp "$out" "$KTLS_VM_OUT/ktls-cost.md"
exit 0
