#!/usr/bin/env bash
# Runs reel's kTLS tests (or any command) inside a QEMU VM booted on Debian's kernel, which
# has the `tls` module, for machines whose own kernel has no kernel TLS. One VM boot per run:
# virtme-ng (vng) boots the kernel under emulation with the host's files as the guest's
# read-only root, so the guest runs the binaries built here. Inside it the script loads
# `tls`, proves kTLS works (a TCP_ULP "tls" socket and a TLS 1.3 AES-GCM record through the
# kernel, printed as "kTLS available in the VM: yes/no"), then runs each test binary with the
# filter, `--test-threads=1` and REEL_REQUIRE_KTLS=1 (tests fail instead of skipping when
# kTLS is missing), or the given command. Results come back as files in a folder shared
# with the guest and are printed here.
#
#   benches/ktls-vm.sh                           # the tests whose name has "ktls"
#   KTLS_FILTER=resum benches/ktls-vm.sh         # another filter ("" runs every test)
#   benches/ktls-vm.sh -- target/release/reel-load ...   # a command, after `modprobe tls`
#
# First run (root): installs what is missing and nothing else: qemu-system-x86, kmod,
# busybox-static (apt), virtme-ng (pip), and Debian's kernel image (the version that
# linux-image-amd64 depends on), kept in KTLS_VM_CACHE; its modules are copied to
# /lib/modules/VERSION and indexed with depmod. Later runs download nothing.
#
# Knobs (environment):
#   KTLS_FILTER      test-name filter passed to every test binary (default "ktls")
#   KTLS_TESTS       cargo selections to build and run, ';'-separated
#                    (default "-p reel --test tests;-p reel-tls")
#   KTLS_TEST_ARGS   more arguments for every test binary (e.g. "--exact", "--nocapture")
#   KTLS_VM_TIMEOUT  seconds the whole VM run (boot, probe, tests) may take (default 900)
#   KTLS_VM_CACHE    where the kernel package and image are kept (default /var/tmp/reel-ktls-vm)
#   KTLS_VM_KERNEL   kernel version, e.g. 6.1.0-56-amd64 (default: the cached one, else the
#                    one linux-image-amd64 depends on)
#   KTLS_VM_CPUS, KTLS_VM_MEMORY   guest size (default 2 and 2G)
#   KTLS_VM_KVM=1    use KVM (default off: emulation; guests hang at boot with KVM here)
#   KTLS_VM_KEEP=1   keep the results folder (always kept when the run fails)
#   CARGO_TARGET_DIR as for cargo
#
# Inside the guest: the root is read-only (/etc, /usr, /var, /tmp are throwaway overlays),
# TMPDIR is a fresh ext4 (a loop device in a tmpfs; a tmpfs if that fails), loopback is
# up, REEL_REQUIRE_KTLS=1, the host's PATH comes first, and a command runs from the repository root with KTLS_VM_OUT set to the results
# folder (writable, shared with the host: files written there survive the VM).
#
# Exit status: 0 everything passed; 1 a test binary or the command failed; 2 the `tls`
# module did not load or the kTLS probe failed; 3 the VM produced no result (boot failure
# or KTLS_VM_TIMEOUT); 64 bad usage, or the checkout or CARGO_TARGET_DIR is where the guest
# mounts an empty tmpfs (/var/tmp, /var/cache, /var/log, /run); any other non-zero: an
# install or build step failed.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(dirname "$HERE")
KTLS_FILTER=${KTLS_FILTER-ktls}
KTLS_TESTS=${KTLS_TESTS:--p reel --test tests;-p reel-tls}
KTLS_TEST_ARGS=${KTLS_TEST_ARGS:-}
KTLS_VM_TIMEOUT=${KTLS_VM_TIMEOUT:-900}
KTLS_VM_CACHE=${KTLS_VM_CACHE:-/var/tmp/reel-ktls-vm}
KTLS_VM_KERNEL=${KTLS_VM_KERNEL:-}
KTLS_VM_CPUS=${KTLS_VM_CPUS:-2}
KTLS_VM_MEMORY=${KTLS_VM_MEMORY:-2G}

CMD=()
if [[ $# -gt 0 ]]; then
    if [[ $1 != -- || $# -lt 2 ]]; then
        echo "usage: $0 [-- COMMAND [ARG...]]" >&2
        exit 64
    fi
    shift
    CMD=("$@")
fi

log() { printf '[ktls-vm] %s\n' "$*" >&2; }

# --- what the VM needs, installed only when missing -------------------------------------

APT_UPDATED=
apt_update_once() {
    if [[ -z $APT_UPDATED ]]; then
        log "apt-get update"
        apt-get update -qq
        APT_UPDATED=1
    fi
}

install_tools() {
    local missing=() p
    for p in qemu-system-x86 kmod busybox-static; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
            missing+=("$p")
    done
    if [[ ${#missing[@]} -gt 0 ]]; then
        apt_update_once
        log "apt-get install ${missing[*]}"
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
    fi
    if ! command -v vng >/dev/null && ! python3 -c 'import virtme_ng' 2>/dev/null; then
        log "pip install virtme-ng"
        python3 -m pip install -q virtme-ng
    fi
    VNG=$(command -v vng ||
        python3 -c 'import sysconfig; print(sysconfig.get_path("scripts") + "/vng")')
    [[ -x $VNG ]] || { log "vng not found after installing virtme-ng"; exit 1; }
}

# Sets KVER and KIMG: the kernel image in the cache, its modules in /lib/modules/KVER. The
# image is kept outside any lib/modules tree so that vng gives the guest the host's
# /lib/modules (the guest's /var/tmp and /var/cache are empty tmpfs: a module tree kept
# there would be invisible to it).
install_kernel() {
    mkdir -p "$KTLS_VM_CACHE"
    KVER=$KTLS_VM_KERNEL
    if [[ -z $KVER ]]; then
        KVER=$(find "$KTLS_VM_CACHE" -maxdepth 1 -name 'vmlinuz-*' -printf '%f\n' |
            sed 's/^vmlinuz-//' | sort -V | tail -n 1)
    fi
    if [[ -z $KVER ]]; then
        local dep
        dep=$(apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-/ { print $2; exit }')
        if [[ -z $dep ]]; then
            apt_update_once
            dep=$(apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-/ { print $2; exit }')
        fi
        [[ -n $dep ]] || { log "apt-cache names no kernel for linux-image-amd64"; exit 1; }
        KVER=${dep#linux-image-}
    fi
    KIMG=$KTLS_VM_CACHE/vmlinuz-$KVER
    local moddir=/lib/modules/$KVER mods=
    if [[ -f $moddir/modules.dep && -n $(find "$moddir/kernel/net/tls" -name 'tls.ko*' 2>/dev/null) ]]; then
        mods=1
    fi
    [[ ! -f $KIMG || -z $mods ]] || return 0
    local deb
    deb=$(find "$KTLS_VM_CACHE" -maxdepth 1 -name "linux-image-${KVER}_*.deb" | sort -V | tail -n 1)
    if [[ -z $deb ]]; then
        log "downloading linux-image-$KVER"
        (cd "$KTLS_VM_CACHE" && apt-get -q -o APT::Sandbox::User=root download "linux-image-$KVER") ||
            (apt_update_once && cd "$KTLS_VM_CACHE" &&
                apt-get -q -o APT::Sandbox::User=root download "linux-image-$KVER")
        deb=$(find "$KTLS_VM_CACHE" -maxdepth 1 -name "linux-image-${KVER}_*.deb" | sort -V | tail -n 1)
    fi
    local x=$KTLS_VM_CACHE/extract.$$
    rm -rf "$x"
    log "extracting $(basename "$deb")"
    dpkg -x "$deb" "$x"
    if [[ ! -f $KIMG ]]; then
        cp "$x/boot/vmlinuz-$KVER" "$KIMG.tmp"
        mv "$KIMG.tmp" "$KIMG"
    fi
    if [[ -z $mods ]]; then
        log "installing modules into $moddir"
        mkdir -p /lib/modules
        rm -rf "$moddir"
        cp -a "$x/lib/modules/$KVER" "$moddir"
        depmod "$KVER"
    fi
    rm -rf "$x"
}

mkdir -p "$KTLS_VM_CACHE"
exec 9>"$KTLS_VM_CACHE/.lock"
flock 9
install_tools
install_kernel
exec 9>&-

# --- the test binaries ---------------------------------------------------------------

TESTS=""
if [[ ${#CMD[@]} -eq 0 ]]; then
    IFS=';' read -ra SELECTIONS <<<"$KTLS_TESTS"
    for sel in "${SELECTIONS[@]}"; do
        read -ra sel_args <<<"$sel"
        [[ ${#sel_args[@]} -gt 0 ]] || continue
        log "cargo test --no-run --locked ${sel_args[*]}"
        TESTS+=$(cd "$REPO" && cargo test --no-run --locked --message-format=json-render-diagnostics "${sel_args[@]}" |
            python3 -c '
import json, os, sys
for line in sys.stdin:
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["profile"]["test"]:
        print(m["executable"] + "\t" + os.path.dirname(m["manifest_path"]))
')$'\n'
    done
    TESTS=$(printf '%s' "$TESTS" | sed '/^$/d' | sort -u)
    [[ -n $TESTS ]] || { log "no test binary built for KTLS_TESTS=$KTLS_TESTS"; exit 1; }
fi
# The guest mounts empty tmpfs on these: files there are not seen inside it.
for p in "$REPO" $(printf '%s\n' "$TESTS" | cut -f1); do
    case $p/ in
    /var/tmp/* | /var/cache/* | /var/log/* | /var/lib/apt/* | /var/lib/private/* | /run/* | /dev/*)
        log "$p is hidden inside the VM (the guest mounts a tmpfs there): use another CARGO_TARGET_DIR or checkout"
        exit 64
        ;;
    esac
done

# --- the run folder shared with the guest --------------------------------------------------

RW=$(mktemp -d /tmp/reel-ktls-vm.XXXXXX)
chmod 755 "$RW"
KEEP=${KTLS_VM_KEEP:-}
# shellcheck disable=SC2317 # called by the trap
cleanup() { if [[ -z $KEEP ]]; then rm -rf "$RW"; fi; }
trap cleanup EXIT

printf '%s\n' "$TESTS" | sed '/^$/d' >"$RW/tests.tsv"
# The guest runs the host's python3 (its root is the host's); sys.executable avoids shims.
PY=$(python3 -c 'import sys; print(sys.executable)')
{
    printf 'PY=%q\nREPO=%q\nFILTER=%q\nHOST_PATH=%q\n' "$PY" "$REPO" "$KTLS_FILTER" "$PATH"
    printf 'TEST_ARGS=(%s)\n' "$KTLS_TEST_ARGS"
    if [[ ${#CMD[@]} -gt 0 ]]; then printf 'CMD=(%s)\n' "$(printf '%q ' "${CMD[@]}")"; fi
} >"$RW/env.sh"

# The probe: a loopback TCP pair, TCP_ULP "tls" on both ends, TLS 1.3 AES-GCM-128 keys for
# sending on one and receiving on the other; the text must come back through the kernel's
# encryption and decryption.
cat >"$RW/probe.py" <<'EOF'
import socket, struct, sys

TCP_ULP, SOL_TLS, TLS_TX, TLS_RX = 31, 282, 1, 2
# struct tls12_crypto_info_aes_gcm_128: version, cipher_type, iv[8], key[16], salt[4], rec_seq[8]
info = struct.pack("=HH", 0x0304, 51) + bytes(range(8)) + bytes(range(16)) + bytes(4) + bytes(8)
step = "listen"
try:
    lst = socket.socket()
    lst.bind(("127.0.0.1", 0))
    lst.listen(1)
    cli = socket.create_connection(lst.getsockname())
    srv, _ = lst.accept()
    step = 'setsockopt(TCP_ULP, "tls")'
    cli.setsockopt(socket.IPPROTO_TCP, TCP_ULP, b"tls")
    srv.setsockopt(socket.IPPROTO_TCP, TCP_ULP, b"tls")
    step = "setsockopt(SOL_TLS, TLS_TX/TLS_RX) with TLS 1.3 AES-GCM-128"
    cli.setsockopt(SOL_TLS, TLS_TX, info)
    srv.setsockopt(SOL_TLS, TLS_RX, info)
    step = "a record through kTLS"
    msg = b"hello through kernel TLS"
    cli.sendall(msg)
    srv.settimeout(10)
    got = b""
    while len(got) < len(msg):
        chunk = srv.recv(64)
        if not chunk:
            break
        got += chunk
    if got != msg:
        raise OSError(f"received {got!r}")
except OSError as e:
    print(f"{step}: {e}")
    sys.exit(1)
print("TCP_ULP tls, TLS 1.3 AES-GCM-128 send and receive through the kernel")
EOF

# Runs inside the guest; every result is a file next to it.
cat >"$RW/vm.sh" <<'EOF'
#!/bin/bash
set -u
rw=$(cd "$(dirname "$0")" && pwd)
. "$rw/env.sh"
now() { cut -d' ' -f1 /proc/uptime; }
now >"$rw/booted"
uname -r >"$rw/uname"
ip link set lo up 2>/dev/null
ip -br addr show dev lo >"$rw/lo" 2>&1
mkdir -p /run/reel-ktls-tmp && mount -t tmpfs -o mode=1777 tmpfs /run/reel-ktls-tmp
export TMPDIR=/run/reel-ktls-tmp
# The tests' stores want a disk file system: tmpfs on this kernel (6.1) refuses the
# RWF_NOWAIT reads the store probes page residency with, so every hit would take the
# cold-read path instead of sendfile. An ext4 image in the tmpfs, on a loop device.
if command -v mkfs.ext4 >/dev/null 2>&1 && modprobe loop 2>/dev/null; then
    truncate -s 1G /run/reel-ktls-tmp/ext4.img
    if mkfs.ext4 -q -F /run/reel-ktls-tmp/ext4.img >"$rw/ext4.out" 2>&1 &&
        mkdir -p /run/reel-ktls-disk &&
        mount -o loop /run/reel-ktls-tmp/ext4.img /run/reel-ktls-disk >>"$rw/ext4.out" 2>&1; then
        chmod 1777 /run/reel-ktls-disk
        export TMPDIR=/run/reel-ktls-disk
    fi
fi
echo "$TMPDIR" >"$rw/tmpdir"
modprobe tls >"$rw/modprobe.out" 2>&1
echo $? >"$rw/modprobe.status"
t0=$(now)
"$PY" "$rw/probe.py" >"$rw/probe.out" 2>&1
echo "$? $t0 $(now)" >"$rw/probe.status"
# The interpreter's own folder first: a pyenv shim works in the guest but is slow there.
export REEL_REQUIRE_KTLS=1 RUST_BACKTRACE=1 KTLS_VM_OUT=$rw PATH="${PY%/*}:$HOST_PATH:$PATH"
if [[ -n ${CMD+x} ]]; then
    t0=$(now)
    (cd "$REPO" && "${CMD[@]}") >"$rw/cmd.out" 2>&1 </dev/null
    echo "$? $t0 $(now)" >"$rw/cmd.status"
else
    i=0
    while IFS=$'\t' read -r exe dir; do
        i=$((i + 1))
        printf '%s\n' "$exe" >"$rw/test-$i.name"
        t0=$(now)
        (cd "$dir" && CARGO_MANIFEST_DIR=$dir "$exe" ${FILTER:+"$FILTER"} --test-threads=1 "${TEST_ARGS[@]}") \
            >"$rw/test-$i.out" 2>&1 </dev/null
        echo "$? $t0 $(now)" >"$rw/test-$i.status"
    done <"$rw/tests.tsv"
fi
now >"$rw/done"
EOF

# --- one boot ---------------------------------------------------------------------

VNG_ARGS=(--run "$KIMG" --cpus "$KTLS_VM_CPUS" --memory "$KTLS_VM_MEMORY" --force-9p --verbose
    --rwdir "$RW" --cwd "$REPO" --exec "bash $RW/vm.sh")
[[ ${KTLS_VM_KVM:-} == 1 ]] || VNG_ARGS+=(--disable-kvm)
log "booting $KVER (${KTLS_VM_CPUS} CPUs, $KTLS_VM_MEMORY, timeout ${KTLS_VM_TIMEOUT}s); console: $RW/console.log"
T0=$(date +%s.%N)
VNG_RC=0
timeout -k 20 "$KTLS_VM_TIMEOUT" "$VNG" "${VNG_ARGS[@]}" </dev/null >"$RW/console.log" 2>&1 || VNG_RC=$?
T1=$(date +%s.%N)

secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }
STATUS=0
if [[ ! -f $RW/done ]]; then
    if [[ $VNG_RC -eq 124 ]]; then
        log "the VM did not finish within KTLS_VM_TIMEOUT=${KTLS_VM_TIMEOUT}s"
    else
        log "the VM produced no result (vng exit $VNG_RC); last console lines:"
    fi
    tail -n 40 "$RW/console.log" >&2
    STATUS=3
fi

echo "kernel: $(cat "$RW/uname" 2>/dev/null || echo "$KVER (did not boot)")"
if [[ -f $RW/booted ]]; then
    echo "boot: $(cat "$RW/booted") s to the guest script; the whole VM run (set-up, boot, run, power-off) $(secs "$T0" "$T1") s"
fi
[[ ! -s $RW/lo ]] || echo "loopback: $(cat "$RW/lo")"
if [[ -f $RW/modprobe.status ]]; then
    if [[ $(cat "$RW/modprobe.status") != 0 ]]; then
        echo "modprobe tls failed: $(cat "$RW/modprobe.out")"
        [[ $STATUS -ne 0 ]] || STATUS=2
    fi
fi
if [[ -f $RW/probe.status ]]; then
    read -r rc t0 t1 <"$RW/probe.status"
    if [[ $rc == 0 ]]; then
        echo "kTLS available in the VM: yes ($(cat "$RW/probe.out"); $(secs "$t0" "$t1") s)"
    else
        echo "kTLS available in the VM: no ($(cat "$RW/probe.out"))"
        [[ $STATUS -ne 0 ]] || STATUS=2
    fi
fi

FAILED=0
report() { # name, output file, status file
    local rc t0 t1
    if [[ ! -f $3 ]]; then
        echo "== $1: did not run"
        FAILED=1
        return
    fi
    read -r rc t0 t1 <"$3"
    echo "== $1 (exit $rc, $(secs "$t0" "$t1") s)"
    cat "$2"
    [[ $rc -eq 0 ]] || FAILED=1
}
if [[ ${#CMD[@]} -gt 0 ]]; then
    [[ $STATUS -eq 3 && ! -f $RW/cmd.status ]] || report "${CMD[*]}" "$RW/cmd.out" "$RW/cmd.status"
else
    n=$(wc -l <"$RW/tests.tsv")
    for i in $(seq "$n"); do
        name=$(sed -n "${i}p" "$RW/tests.tsv" | cut -f1)
        [[ $STATUS -eq 3 && ! -f $RW/test-$i.status ]] ||
            report "$(basename "$name") ${KTLS_FILTER:+(filter \"$KTLS_FILTER\")}" "$RW/test-$i.out" "$RW/test-$i.status"
    done
fi
[[ $FAILED -eq 0 || $STATUS -ne 0 ]] || STATUS=1

if [[ $STATUS -ne 0 ]]; then
    KEEP=1
    log "failed (exit $STATUS); results kept in $RW"
elif [[ -n $KEEP ]]; then
    log "results kept in $RW"
fi
exit "$STATUS"
