#!/bin/sh
# Pins the NIC queue interrupts to reel's IRQ cores and sets RPS/XPS to match `reel plan`.
# Usage: reel-irq.sh [CONFIG]   (default /etc/reel/reel.toml). Install as /usr/local/lib/reel/reel-irq.sh.
# `reel plan --format env` prints NICS, IRQ_CPUS, WORKER_CPUS and NIC_IRQS (shell assignments).
set -eu
CONFIG=${1:-/etc/reel/reel.toml}
REEL=${REEL:-/usr/local/bin/reel}
DRY=${DRY_RUN:-0}

eval "$("$REEL" plan --config "$CONFIG" --format env)"

put() { # file value
    if [ "$DRY" = 1 ]; then echo "$2 > $1"; else echo "$2" > "$1" || echo "reel-irq: cannot write $1" >&2; fi
}

mask() { # cpu list (space separated) -> hex mask for /sys rps_cpus / xps_cpus
    m=0
    for c in $1; do m=$((m | (1 << c))); done
    printf '%x' "$m"
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
    # Transmit: each worker core sends on its own queue where there are enough queues.
    set -- $WORKER_CPUS
    w=$#
    j=0
    for tx in "$q"/tx-*; do
        [ -e "$tx/xps_cpus" ] || continue
        cpus=""
        k=0
        for c in $WORKER_CPUS; do
            [ $((k % $(ls -d "$q"/tx-* | wc -l))) -eq "$j" ] && cpus="$cpus $c"
            k=$((k + 1))
        done
        [ -n "$cpus" ] && put "$tx/xps_cpus" "$(mask "$cpus")"
        j=$((j + 1))
    done
    : "$w"
done
echo "reel-irq: NIC interrupts on CPUs $IRQ_CPUS; workers on CPUs $WORKER_CPUS"
