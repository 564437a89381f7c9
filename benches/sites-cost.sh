#!/usr/bin/env bash
# What the per-site counters and `[site.cmsd]` cost a hit: one reel worker (CPU 1,
# one-worker.sh), a 1 KiB object that stays fresh, `reel-load fixed` on CPU 0. Modes:
# `base`, the binary at BASE_BIN (a build from before the per-site counters; skipped when
# unset); `sites`, this tree's binary (every request counted under its site); `cmsd`, the
# same with `[site.cmsd]` on the site. Rows alternate, ROUNDS times; reel's own CPU time
# (utime + stime from /proc) per request, its user-space instructions per request where
# `perf stat` may count them, and the request rate, median of the rounds per mode.
#
#     benches/sites-cost.sh                       # builds reel and reel-load (release) first
#     BASE_BIN=/tmp/base/reel ROUNDS=5 DUR=8 benches/sites-cost.sh
set -euo pipefail
PORT=${PORT:-19280}
DUR=${DUR:-8}
ROUNDS=${ROUNDS:-3}
CONNS=${CONNS:-64}
# shellcheck source=benches/one-worker.sh
source "$(dirname "$0")/one-worker.sh"

TCK=$(getconf CLK_TCK)
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
PERF=0
# Counted only where the CPU's counters are there (not in most VMs).
if command -v perf >/dev/null && perf stat -x, -e instructions:u -- true 2>&1 >/dev/null | grep -q '^[0-9]'; then
    PERF=1
fi

site() {   # mode
    printf '[[site]]\nhosts = ["127.0.0.1"]\norigin_group = "o"\n'
    [[ $1 == cmsd ]] && printf '[site.cmsd]\nenabled = true\nid = "bench-edge"\n'
    printf '[[origin_group]]\nname = "o"\n  [[origin_group.tier]]\n  hosts = ["127.0.0.1:%s"]\n' \
        "$((PORT + 1))"
}

MODES=(sites cmsd)
[[ -n ${BASE_BIN:-} ]] && MODES=(base sites cmsd)
declare -A US RPS INS
for round in $(seq "$ROUNDS"); do
    for mode in "${MODES[@]}"; do
        write_config "$(site "$mode")"
        reel_bin=$BIN/reel
        [[ $mode == base ]] && reel_bin=$BASE_BIN
        "$reel_bin" serve --config "$TMP/reel.toml" --origin "http://127.0.0.1:$((PORT + 1))" \
            >"$TMP/reel.log" 2>&1 &
        REEL=$!
        PIDS+=("$REEL")
        for _ in $(seq 100); do curl -sf "http://127.0.0.1:$PORT/healthz" >/dev/null && break; sleep 0.1; done
        url="http://127.0.0.1:$PORT/obj1k"
        curl -sf -o /dev/null "$url"   # the miss
        head=$(curl -sfi -o /dev/null -D - "$url")
        if [[ $mode == cmsd ]] && ! grep -qi '^cmsd-dynamic' <<<"$head"; then
            echo "no CMSD field in cmsd mode:" >&2
            echo "$head" >&2
            exit 1
        fi
        if [[ $PERF == 1 ]]; then
            perf stat -x, -e instructions:u -p "$REEL" -o "$TMP/perf.csv" &
            perf_pid=$!
            sleep 0.2
        fi
        before=$(cpu_ticks "$REEL")
        out=$(taskset -c 0 "$BIN/reel-load" fixed -c "$CONNS" -d "${DUR}s" --kv "$url")
        after=$(cpu_ticks "$REEL")
        n=$(awk -F= '$1 == "requests" { print $2 }' <<<"$out")
        ins=n/a
        if [[ $PERF == 1 ]]; then
            kill -INT "$perf_pid"
            wait "$perf_pid" 2>/dev/null || true
            ins=$(awk -F, -v n="$n" '$3 ~ /instructions/ && $1 ~ /^[0-9]+$/ { printf "%.0f", $1 / n }' "$TMP/perf.csv")
        fi
        us=$(awk -v t=$((after - before)) -v n="$n" -v hz="$TCK" 'BEGIN { printf "%.2f", t * 1e6 / hz / n }')
        rps=$(awk -v n="$n" -v d="$DUR" 'BEGIN { printf "%.0f", n / d }')
        echo "round $round $mode: $rps req/s, $us µs CPU and $ins instructions per hit" >&2
        US[$mode]+="$us "
        RPS[$mode]+="$rps "
        INS[$mode]+="$ins "
        kill "$REEL"
        wait "$REEL" 2>/dev/null || true
    done
done

ref=${MODES[0]}
base_us=$(median <<<"${US[$ref]}")
base_ins=$(median <<<"${INS[$ref]}")
echo "| mode | req/s (median) | CPU µs per hit (median) | / $ref | instructions per hit (median) | / $ref |"
echo "|---|---|---|---|---|---|"
for mode in "${MODES[@]}"; do
    us=$(median <<<"${US[$mode]}")
    ins=$(median <<<"${INS[$mode]}")
    echo "| $mode | $(median <<<"${RPS[$mode]}") | $us | $(awk -v a="$us" -v b="$base_us" 'BEGIN { printf "%.3f", a / b }') | $ins | $(awk -v a="$ins" -v b="$base_ins" 'BEGIN { if (b + 0 > 0) printf "%.3f", a / b; else print "n/a" }') |"
done
