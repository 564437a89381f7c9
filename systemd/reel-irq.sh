#!/bin/sh
# Pins the NIC queue interrupts to reel's IRQ cores and sets RPS/XPS to match `reel plan`.
# Usage: reel-irq.sh [CONFIG]   (default /etc/reel/reel.toml). Install as /usr/local/lib/reel/reel-irq.sh.
# `reel plan --format env` prints NICS, IRQ_CPUS, WORKER_CPUS and NIC_IRQS (shell assignments).
# Environment: REEL (the binary, default /usr/local/bin/reel); DRY_RUN=1 prints
# "VALUE > FILE" for every write instead of writing.
set -eu
CONFIG=${1:-/etc/reel/reel.toml}
REEL=${REEL:-/usr/local/bin/reel}
DRY=${DRY_RUN:-0}

# A failed plan must stop the script: `eval "$(cmd)"` alone would ignore cmd's status.
PLAN=$("$REEL" plan --config "$CONFIG" --format env) || {
    echo "reel-irq: '$REEL plan --config $CONFIG --format env' failed" >&2
    exit 1
}
eval "$PLAN"

put() { # file value
    if [ "$DRY" = 1 ]; then echo "$2 > $1"; else echo "$2" > "$1" || echo "reel-irq: cannot write $1" >&2; fi
}

# cpu list (space separated) -> the bitmap format of rps_cpus / xps_cpus: hex, in
# comma-separated 32-bit groups, most significant first (the kernel rejects longer groups).
mask() {
    max=0
    for c in $1; do [ "$c" -gt "$max" ] && max=$c; done
    g=$((max / 32))
    out=""
    while [ "$g" -ge 0 ]; do
        m=0
        for c in $1; do
            [ $((c / 32)) -eq "$g" ] && m=$((m | (1 << (c % 32))))
        done
        if [ -z "$out" ]; then out=$(printf '%x' "$m"); else out="$out,$(printf '%08x' "$m")"; fi
        g=$((g - 1))
    done
    printf '%s' "$out"
}

if [ -z "$IRQ_CPUS" ]; then
    echo "reel-irq: the plan has no IRQ cores; leaving interrupts where they are" >&2
    exit 0
fi

# Spread the queue interrupts round-robin over the IRQ cores.
set -- $IRQ_CPUS
n=$#
i=0
for irq in $NIC_IRQS; do
    k=$((i % n + 1))
    eval cpu=\${$k}
    put "/proc/irq/$irq/smp_affinity_list" "$cpu"
    i=$((i + 1))
done

for nic in $NICS; do
    q=/sys/class/net/$nic/queues
    [ -d "$q" ] || continue
    # Receive packet steering stays on the IRQ cores: softirq work never lands on a worker.
    for rx in "$q"/rx-*; do
        [ -e "$rx/rps_cpus" ] && put "$rx/rps_cpus" "$(mask "$IRQ_CPUS")"
    done
    # Transmit: worker k sends on queue k mod (number of tx queues), so with enough queues
    # each worker core has its own.
    ntx=0
    for tx in "$q"/tx-*; do [ -e "$tx/xps_cpus" ] && ntx=$((ntx + 1)); done
    [ "$ntx" -gt 0 ] || continue
    j=0
    for tx in "$q"/tx-*; do
        [ -e "$tx/xps_cpus" ] || continue
        cpus=""
        k=0
        for c in $WORKER_CPUS; do
            [ $((k % ntx)) -eq "$j" ] && cpus="$cpus $c"
            k=$((k + 1))
        done
        [ -n "$cpus" ] && put "$tx/xps_cpus" "$(mask "$cpus")"
        j=$((j + 1))
    done
done
echo "reel-irq: NIC interrupts on CPUs $IRQ_CPUS; workers on CPUs $WORKER_CPUS"
