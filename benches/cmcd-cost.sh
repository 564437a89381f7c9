#!/usr/bin/env bash
# What CMCD (CTA-5004) costs a hit: one reel worker (CPU 1, one-worker.sh), a 1 KiB object
# that stays fresh, `reel-load fixed` on CPU 0, the same site and object in every mode:
#
#   plain     requests without CMCD (what every other request pays: a look at the field
#             names and the query)
#   fields    the four CMCD-* fields hls.js sends in header mode: parsed after the
#             response (metrics), and a copy of the request without them for the cache
#   query     the same data as one CMCD= query parameter (hls.js's default)
#
# Rows alternate, ROUNDS times; reel's own CPU time (utime + stime from /proc) per request
# and the request rate, median of the rounds per mode. The access log is off, as in the
# other one-worker benches (the JSON line's `cmcd` object is not measured here).
#
#     benches/cmcd-cost.sh              # builds reel and reel-load (release) first
#     PORT=19280 DUR=8 ROUNDS=3 CONNS=64 benches/cmcd-cost.sh
set -euo pipefail
PORT=${PORT:-19280}
DUR=${DUR:-8}
ROUNDS=${ROUNDS:-3}
CONNS=${CONNS:-64}
# shellcheck source=benches/one-worker.sh
source "$(dirname "$0")/one-worker.sh"

TCK=$(getconf CLK_TCK)
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }

SITE=$(printf '[[site]]\nhosts = ["127.0.0.1"]\norigin_group = "o"\n[[origin_group]]\nname = "o"\n  [[origin_group.tier]]\n  hosts = ["127.0.0.1:%s"]\n' "$((PORT + 1))")
FIELDS=(
    -H 'CMCD-Request: bl=21300,dl=18500,mtp=48100,nor="seg_1043.ts",su'
    -H 'CMCD-Object: br=3200,d=4004,ot=v,tb=6000'
    -H 'CMCD-Status: bs'
    -H 'CMCD-Session: cid="movie-42",sf=h,sid="6e2fb550-c457-11e9-bb97-0800200c9a66",st=v'
)
QUERY='CMCD=bl%3D21300%2Cbr%3D3200%2Cbs%2Ccid%3D%22movie-42%22%2Cd%3D4004%2Cdl%3D18500%2Cmtp%3D48100%2Cnor%3D%22seg_1043.ts%22%2Cot%3Dv%2Csf%3Dh%2Csid%3D%226e2fb550-c457-11e9-bb97-0800200c9a66%22%2Cst%3Dv%2Csu%2Ctb%3D6000'

MODES=(plain fields query)
declare -A US RPS
for round in $(seq "$ROUNDS"); do
    for mode in "${MODES[@]}"; do
        write_config "$SITE"
        start_reel
        url="http://127.0.0.1:$PORT/obj1k"
        args=()
        case $mode in
            fields) args=("${FIELDS[@]}") ;;
            query) url="$url?$QUERY" ;;
        esac
        curl -sf -o /dev/null "$url"   # the miss
        curl -sf -o /dev/null "$url"
        before=$(cpu_ticks "$REEL")
        out=$(taskset -c 0 "$BIN/reel-load" fixed -c "$CONNS" -d "${DUR}s" "${args[@]}" --kv "$url")
        after=$(cpu_ticks "$REEL")
        n=$(awk -F= '$1 == "requests" { print $2 }' <<<"$out")
        us=$(awk -v t=$((after - before)) -v n="$n" -v hz="$TCK" 'BEGIN { printf "%.2f", t * 1e6 / hz / n }')
        rps=$(awk -v n="$n" -v d="$DUR" 'BEGIN { printf "%.0f", n / d }')
        echo "round $round $mode: $rps req/s, $us µs CPU per hit" >&2
        US[$mode]+="$us "
        RPS[$mode]+="$rps "
        if [[ $mode != plain ]]; then
            m=$(curl -sf "http://127.0.0.1:$((PORT + 2))/metrics")
            grep -q "^reel_cmcd_requests_total{site=\"127.0.0.1\"} [1-9]" <<<"$m" \
                || { echo "no CMCD counted in $mode mode" >&2; exit 1; }
        fi
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
