#!/usr/bin/env bash
# What compressed playlists cost LL-HLS viewers: VIEWERS players (1000) follow the shipped
# config's live stream through reel (benches/llhls-latency.sh: blocking playlist reloads and
# hinted parts), sending no `Accept-Encoding`, `gzip`, or `br` (the shipped site compresses
# playlists with `[site.compress]`); reel-load decodes each compressed playlist before it
# parses it, so its latency includes the decoding a player does. Modes alternate, ROUNDS
# times; prints each run's figures and the medians of the playlist latency after release.
#
#     benches/llhls-compress.sh                       # builds the release binaries first
#     VIEWERS=1000 DUR=60 ROUNDS=2 SKIP_BUILD=1 benches/llhls-compress.sh
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(dirname "$HERE")
VIEWERS=${VIEWERS:-1000}
DUR=${DUR:-60}
ROUNDS=${ROUNDS:-2}
if [[ "${SKIP_BUILD:-0}" != 1 ]]; then
    cargo build --release --locked --manifest-path "$ROOT/Cargo.toml" -p reel -p reel-benches \
        --bin reel --bin reel-load >&2
fi
# Many viewers hold two connections each, and the origin side needs its own.
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"
MODES=(identity gzip br)
declare -A P50 P99 PART BLOCKING COMPRESSED ERRORS
pick() { awk -F= -v k="$1" '$1 == k { print $2 }' "$2"; }
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for round in $(seq "$ROUNDS"); do
    for mode in "${MODES[@]}"; do
        header=""
        [[ $mode != identity ]] && header="Accept-Encoding: $mode"
        HEADER=$header VIEWERS=$VIEWERS DUR=$DUR SKIP_BUILD=1 "$HERE/llhls-latency.sh" >"$out"
        echo "-- round $round, $mode" >&2
        cat "$out" >&2
        P50[$mode]+="$(pick llhls.playlist_latency_us.p50 "$out") "
        P99[$mode]+="$(pick llhls.playlist_latency_us.p99 "$out") "
        PART[$mode]+="$(pick llhls.part_first_byte_latency_us.p50 "$out") "
        BLOCKING[$mode]+="$(pick llhls.playlists_blocking "$out") "
        COMPRESSED[$mode]+="$(pick llhls.playlists_compressed "$out") "
        ERRORS[$mode]+="$(pick errors_total "$out") "
    done
done
median() { tr ' ' '\n' | grep . | sort -g | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
base=$(median <<<"${P50[identity]}")
echo "viewers=$VIEWERS duration_s=$DUR rounds=$ROUNDS"
echo "| Accept-Encoding | playlist after release p50 ms | / identity | p99 ms | part first byte p50 ms | blocking reloads | compressed | errors |"
echo "|---|---|---|---|---|---|---|---|"
for mode in "${MODES[@]}"; do
    p50=$(median <<<"${P50[$mode]}")
    printf '| %s | %.2f | %.2f | %.2f | %.2f | %s | %s | %s |\n' "$mode" \
        "$(awk -v v="$p50" 'BEGIN { print v / 1000 }')" \
        "$(awk -v a="$p50" -v b="$base" 'BEGIN { print (b > 0 ? a / b : 0) }')" \
        "$(awk -v v="$(median <<<"${P99[$mode]}")" 'BEGIN { print v / 1000 }')" \
        "$(awk -v v="$(median <<<"${PART[$mode]}")" 'BEGIN { print v / 1000 }')" \
        "$(median <<<"${BLOCKING[$mode]}")" "$(median <<<"${COMPRESSED[$mode]}")" \
        "$(median <<<"${ERRORS[$mode]}")"
done
