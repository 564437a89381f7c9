#!/usr/bin/env bash
# Where reel's HTTP/3 CPU goes on a 2 MiB hit: one reel worker on the demo config (CPU 0),
# `reel-load fixed --h3` on CPU 1 against the demo origin's `/obj/2097152` (a hit after the
# first request), with UDP segmentation offload (GSO) on and off (`REEL_QUIC_GSO=0`).
# Per row: reel's CPU µs per request (utime + stime from /proc), UDP datagrams sent per
# request on the host (/proc/net/snmp OutDatagrams: both ends, the client's ACKs too, and a
# GSO send of many segments counts once), reel's send and receive syscalls per request
# (`strace -f -c` for STRACE_DUR s of the same load), and a `perf record` profile of reel
# for PERF_DUR s grouped by what the time is spent on: crypto (ring's AES-GCM and header
# protection), copies (memcpy/memmove in user space, copy_*_iter and usercopy checks in
# the kernel), the kernel's UDP/IP path (on loopback the send includes delivery to the
# client's socket), receive syscalls, quinn's protocol logic (with its ACK and
# retransmission maps), h3 and reel, the allocator, syscall entry and wakeups, the rest.
#
#     cargo build --release -p reel -p reel-benches
#     benches/h3-profile.sh
#
# Knobs: SIZE (2097152), DUR (8), CONNS (16), STRACE_DUR (3; 0 = none), PERF_DUR (5; 0 =
# none), BIN_DIR (target/release), PROFILE_OUT (a path prefix: the top 40 symbols of each
# profile go to PROFILE_OUT-gso1.txt and -gso0.txt). Loopback only; a 2-core VM is noisy:
# quote ratios.
set -euo pipefail
cd "$(dirname "$0")/.."

SIZE=${SIZE:-2097152}
DUR=${DUR:-8}
CONNS=${CONNS:-16}
STRACE_DUR=${STRACE_DUR:-3}
PERF_DUR=${PERF_DUR:-5}
BIN_DIR=${BIN_DIR:-${CARGO_TARGET_DIR:-target}/release}
REEL=$BIN_DIR/reel
LOAD=$BIN_DIR/reel-load
[[ -x $REEL && -x $LOAD ]] || { echo "build first: cargo build --release -p reel -p reel-benches" >&2; exit 1; }
URL=https://127.0.0.1:8443/obj/$SIZE

WORK=$(mktemp -d)
PID=
cleanup() { [[ -n $PID ]] && kill "$PID" 2>/dev/null; wait 2>/dev/null || true; rm -rf "$WORK"; }
trap cleanup EXIT

cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
TCK=$(getconf CLK_TCK)
udp_out() { awk '$1 == "Udp:" && $2 ~ /^[0-9]+$/ { print $5 }' /proc/net/snmp; }

start_reel() { # gso: 1 or 0
    sed -e 's|^workers = .*|workers = [0]|' \
        -e 's|^level = "info".*|level = "warn"|' \
        -e "s|^path = \"./var/log/access.log\".*|path = \"$WORK/access.log\"|" \
        -e "s|^path = \"./var/cache\".*|path = \"$WORK/cache-$1\"|" \
        -e 's|^latency_scale = .*|latency_scale = 0.0|' \
        -e 's|^size = "1GiB"|size = "256MiB"|' \
        config/reel.toml >"$WORK/reel-$1.toml"
    grep -q '^http3 = true' "$WORK/reel-$1.toml" || { echo "config/reel.toml has no http3 = true" >&2; return 1; }
    REEL_QUIC_GSO=$1 "$REEL" serve --config "$WORK/reel-$1.toml" >"$WORK/reel-$1.log" 2>&1 &
    PID=$!
    for _ in $(seq 300); do
        "$LOAD" get --h3 --timeout 2s https://127.0.0.1:8443/healthz >/dev/null 2>&1 && return 0
        sleep 0.2
    done
    echo "reel did not start:"
    cat "$WORK/reel-$1.log"
    return 1
}

stop_reel() { kill "$PID"; wait "$PID" 2>/dev/null || true; PID=; }

load() { # seconds -> requests
    taskset -c 1 "$LOAD" fixed --h3 -c "$CONNS" -d "${1}s" --timeout 10s --kv "$URL" |
        awk -F= '$1 == "requests" { print $2 }'
}

# Percent of samples per group, from `perf report` lines "  12.34%  comm  dso  [.] symbol".
groups() {
    awk '
        /^ +[0-9.]+%/ {
            p = $1; sub(/%/, "", p); s = $0
            if (s ~ /aes|gcm|ghash|chacha|poly1305|ring_core|GFp|ring::aead|header_protection/) g = "crypto"
            else if (s ~ /memcpy|memmove|copy_user|copy_to_user|copy_from_user|rep_movs|_copy_from_iter|_copy_to_iter|check_object_size|virt_addr_valid|copy_msghdr/) g = "copies"
            else if (s ~ /udp_recvmsg|recvmsg|recvmmsg|__skb_recv|skb_copy_datagram|__skb_try_recv/) g = "receive syscalls"
            else if (s ~ /udp|ip_|ipv4_|fib_|skb|sock_|net_rx|netif|dev_|loopback|raw_local|sendmsg|sendmmsg|__local_bh|nf_|neigh|inet_|__ip/) g = "kernel UDP path"
            else if (s ~ /quinn_proto|quinn::|quinn_udp|BTreeMap|btree/) g = "quinn"
            else if (s ~ /h3::|reel_http|reel_cache|reel_store|reel::/) g = "h3 + reel"
            else if (s ~ /mi_|malloc|free|alloc::/) g = "allocator"
            else if (s ~ /syscall|entry_SYSCALL|do_syscall|epoll|schedule|futex|spin_unlock|try_to_wake|wake_up/) g = "syscall entry, wakeups"
            else g = "other"
            t[g] += p
        }
        END { for (g in t) printf "%s=%.1f\n", g, t[g] }'
}

echo "| GSO | CPU µs/req | host UDP sends/req | reel sendmsg/req | reel recvmsg/req | profile (% of reel's samples) |"
echo "|---|---:|---:|---:|---:|---|"
for gso in 1 0; do
    start_reel "$gso"
    taskset -c 1 "$LOAD" get --h3 "$URL" >/dev/null 2>&1 || true   # the miss
    load 2 >/dev/null                                                # warm
    before=$(cpu_ticks "$PID"); u0=$(udp_out)
    n=$(load "$DUR")
    after=$(cpu_ticks "$PID"); u1=$(udp_out)
    us=$(awk -v t=$((after - before)) -v n="$n" -v hz="$TCK" 'BEGIN { printf "%.0f", n ? t * 1e6 / hz / n : 0 }')
    dg=$(awk -v d=$((u1 - u0)) -v n="$n" 'BEGIN { printf "%.0f", n ? d / n : 0 }')
    send="-"; recv="-"
    if [[ $STRACE_DUR != 0 ]] && command -v strace >/dev/null; then
        strace -f -c -o "$WORK/strace-$gso" -p "$PID" &
        spid=$!
        sleep 0.5
        m=$(load "$STRACE_DUR")
        kill -INT "$spid"; wait "$spid" 2>/dev/null || true
        send=$(awk -v n="$m" '$NF ~ /^sendmsg$|^sendmmsg$/ { c += $4 } END { printf "%.0f", n ? c / n : 0 }' "$WORK/strace-$gso")
        recv=$(awk -v n="$m" '$NF ~ /^recvmsg$|^recvmmsg$/ { c += $4 } END { printf "%.0f", n ? c / n : 0 }' "$WORK/strace-$gso")
    fi
    prof="-"
    if [[ $PERF_DUR != 0 ]] && command -v perf >/dev/null; then
        perf record -e cpu-clock -F 999 -g -o "$WORK/perf-$gso.data" -p "$PID" -- sleep "$PERF_DUR" >/dev/null 2>&1 &
        ppid=$!
        load "$PERF_DUR" >/dev/null
        wait "$ppid" 2>/dev/null || true
        perf report -i "$WORK/perf-$gso.data" --no-children --sort sym --stdio -g none 2>/dev/null >"$WORK/perf-$gso.txt" || true
        prof=$(groups <"$WORK/perf-$gso.txt" | sort -t= -k2 -rn | tr '\n' ' ')
        if [[ -n ${PROFILE_OUT:-} ]]; then
            grep '%' "$WORK/perf-$gso.txt" | head -40 >"$PROFILE_OUT-gso$gso.txt" || true
        fi
    fi
    echo "| $([[ $gso == 1 ]] && echo on || echo off) | $us | $dg | $send | $recv | $prof |"
    stop_reel
done
