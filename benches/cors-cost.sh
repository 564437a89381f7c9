#!/usr/bin/env bash
# What `[site.cors]` costs a hit: one reel worker (CPU 1, one-worker.sh), a 1 KiB object
# that stays fresh, `reel-load fixed` on CPU 0 with an allowed `Origin` on every request,
# against the same site without and with `[site.cors]` (and with one `[[site.header]]`
# `set` rule on top, which copies the stored header block of every response it matches).
# Rows alternate, ROUNDS times; reel's own CPU time (utime + stime from /proc) per request
# and the request rate, median of the rounds per mode.
#
#     benches/cors-cost.sh              # builds reel and reel-load (release) first
#     PORT=19180 DUR=8 ROUNDS=3 CONNS=64 benches/cors-cost.sh
set -euo pipefail
PORT=${PORT:-19180}
DUR=${DUR:-8}
ROUNDS=${ROUNDS:-3}
CONNS=${CONNS:-64}
# shellcheck source=benches/one-worker.sh
source "$(dirname "$0")/one-worker.sh"

ORIGIN=https://player.example
TCK=$(getconf CLK_TCK)
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }

site() {   # mode
    cat <<EOF
[[site]]
hosts = ["127.0.0.1"]
origin_group = "o"
EOF
    case $1 in
        cors | cors+rule) printf '[site.cors]\nallow_origins = ["%s"]\n' "$ORIGIN" ;;
    esac
    if [[ $1 == cors+rule ]]; then
        printf '[[site.header]]\naction = "set"\nname = "Cache-Control"\nvalue = "max-age=1"\n'
    fi
    printf '[[origin_group]]\nname = "o"\n  [[origin_group.tier]]\n  hosts = ["127.0.0.1:%s"]\n' \
        "$((PORT + 1))"
}

MODES=(plain cors cors+rule)
declare -A US RPS
for round in $(seq "$ROUNDS"); do
    for mode in "${MODES[@]}"; do
        write_config "$(site "$mode")"
        start_reel
        url="http://127.0.0.1:$PORT/obj1k"
        head=$(curl -sfi -H "Origin: $ORIGIN" -o /dev/null -D - "$url")   # the miss
        curl -sf -o /dev/null "$url"
        if [[ $mode != plain ]] && ! grep -qi '^access-control-allow-origin' <<<"$head"; then
            echo "no CORS field in $mode mode:" >&2
            echo "$head" >&2
            exit 1
        fi
        before=$(cpu_ticks "$REEL")
        out=$(taskset -c 0 "$BIN/reel-load" fixed -c "$CONNS" -d "${DUR}s" -H "Origin: $ORIGIN" --kv "$url")
        after=$(cpu_ticks "$REEL")
        n=$(awk -F= '$1 == "requests" { print $2 }' <<<"$out")
        us=$(awk -v t=$((after - before)) -v n="$n" -v hz="$TCK" 'BEGIN { printf "%.2f", t * 1e6 / hz / n }')
        rps=$(awk -v n="$n" -v d="$DUR" 'BEGIN { printf "%.0f", n / d }')
        echo "round $round $mode: $rps req/s, $us µs CPU per hit" >&2
        US[$mode]+="$us "
        RPS[$mode]+="$rps "
        kill "$REEL"
        wait "$REEL" 2>/dev/null || true
    done
done

base=$(median <<<"${US[plain]}")
echo "| mode | req/s (median) | CPU µs per hit (median) | / plain |"
echo "|---|---|---|---|"
for mode in "${MODES[@]}"; do
    us=$(median <<<"${US[$mode]}")
    echo "| $mode | $(median <<<"${RPS[$mode]}") | $us | $(awk -v a="$us" -v b="$base" 'BEGIN { printf "%.3f", a / b }') |"
done
