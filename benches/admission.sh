#!/usr/bin/env bash
# `[store] admission`: hit ratio, origin bytes and bytes written into the store per byte
# served, for `always` against `second-hit`, with a library 4x the store and a share of
# one-hit URLs (`reel-load zipf --one-hit-share`). Each run: a fresh store, WARM seconds of
# the load (another seed) to fill it, then DUR measured seconds. Rounds alternate the two
# settings. Loopback only; reel on CPU 1, the demo origin and the load generator on CPU 0.
#
#   benches/admission.sh                                  # 3 rounds of 60 s, 30 % one-hit
#   ROUNDS=1 DUR=20 WARM=20 ONE_HIT=0.5 ADMISSIONS=second-hit benches/admission.sh
#
# Columns: hit ratio of all requests and of the catalog's (the Zipf objects) alone; origin
# bytes per byte served; bytes written into the store's volume files per byte served
# (`reel_store_bytes_written_total`) and into spill files (bodies served but not stored),
# per byte served; fetches not stored (`reel_store_admission_rejected_total`).
set -euo pipefail
ROUNDS=${ROUNDS:-3}
DUR=${DUR:-60}
WARM=${WARM:-40}
ONE_HIT=${ONE_HIT:-0.3}
STORE_MIB=${STORE_MIB:-256}
VOLUME_MIB=${VOLUME_MIB:-16}
OBJ=${OBJ:-262144}
VIEWERS=${VIEWERS:-16}
EXPONENT=${EXPONENT:-1.0}
PORT=${PORT:-28580}
ADMISSIONS=${ADMISSIONS:-always second-hit}
OBJECTS=$((STORE_MIB * 4 * 1048576 / OBJ))

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(dirname "$HERE")
cd "$ROOT"
TGT=${CARGO_TARGET_DIR:-$ROOT/target}
[[ -n "${SKIP_BUILD:-}" ]] || cargo build -q --release --locked -p reel -p reel-demo-origin -p reel-benches --bins
BIN=$TGT/release
TMP=$(mktemp -d)
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    [[ -n "${KEEP:-}" ]] || rm -rf "$TMP"
}
trap cleanup EXIT
echo "work dir: $TMP" >&2

taskset -c 0 "$BIN/reel-demo-origin" --listen "127.0.0.1:$((PORT + 1))" --latency-scale 0.1 \
    >"$TMP/origin.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$((PORT + 1))/__origin/stats" >/dev/null && break; sleep 0.1; done

origin_requests() {
    curl -sf "http://127.0.0.1:$((PORT + 1))/__origin/stats" | grep -o '"total": *[0-9]*' | head -1 | grep -o '[0-9]*$'
}
metric() {
    curl -sf "http://127.0.0.1:$((PORT + 2))/metrics" | awk -v m="$1" '$1 == m { printf "%.0f", $2 }'
}
kv() { awk -F= -v k="$1" '$1 == k { print $2 }' "$2"; }

start_reel() {
    rm -rf "$TMP/store"
    cat >"$TMP/reel.toml" <<EOF
[[listener]]
name = "http"
address = "127.0.0.1:$PORT"
backlog = 4096

[cores]
workers = [1]
irq = "auto"
nic = []

[store]
path = "$TMP/store"
size = "${STORE_MIB}MiB"
volume_size = "${VOLUME_MIB}MiB"
admission = "$1"

[access_log]
enabled = false

[admin]
address = "127.0.0.1:$((PORT + 2))"

[http]
max_connections_per_client = 0
EOF
    "$BIN/reel" serve --config "$TMP/reel.toml" --origin "http://127.0.0.1:$((PORT + 1))" \
        >"$TMP/reel.log" 2>&1 &
    REEL=$!
    PIDS+=("$REEL")
    for _ in $(seq 100); do curl -sf "http://127.0.0.1:$PORT/healthz" >/dev/null && break; sleep 0.1; done
}

load() {   # output, duration, seed
    taskset -c 0 "$BIN/reel-load" zipf -v "$VIEWERS" --objects "$OBJECTS" --exponent "$EXPONENT" \
        --one-hit-share "$ONE_HIT" -d "${2}s" --seed "$3" --timeout 30s --kv \
        --mark-header 'cache-status: hit' "http://127.0.0.1:$PORT/obj/$OBJ?v={i}" >"$1"
}

echo "store ${STORE_MIB} MiB (volumes ${VOLUME_MIB} MiB), catalog $OBJECTS objects of $OBJ bytes (4x), Zipf s=$EXPONENT, one-hit share $ONE_HIT, $VIEWERS viewers back to back, ${WARM}s warm-up, ${DUR}s measured"
echo "| round | admission | requests | hit ratio | catalog hit ratio | origin B / served B | store writes / served B | spill writes / served B | rejected |"
echo "|---|---|---:|---:|---:|---:|---:|---:|---:|"
for r in $(seq "$ROUNDS"); do
    for adm in $ADMISSIONS; do
        start_reel "$adm"
        load /dev/null "$WARM" $((1000 * r))
        o0=$(origin_requests); w0=$(metric reel_store_bytes_written_total)
        s0=$(metric reel_store_spill_bytes_written_total)
        j0=$(metric reel_store_admission_rejected_total)
        load "$TMP/run.kv" "$DUR" $((1000 * r + 500))
        o1=$(origin_requests); w1=$(metric reel_store_bytes_written_total)
        s1=$(metric reel_store_spill_bytes_written_total)
        j1=$(metric reel_store_admission_rejected_total)
        if grep -E '^errors\.[a-z_0-9]+=[1-9]' "$TMP/run.kv" | sed "s/^/round $r $adm: /" >&2; then
            # What reel says of them: 5xx answers by cache result, origin errors by kind.
            curl -sf "http://127.0.0.1:$((PORT + 2))/metrics" |
                grep -E '^(reel_requests_total\{status="5|reel_origin_errors_total)' |
                grep -v ' 0$' | sed "s/^/round $r $adm: /" >&2 || true
        fi
        kill "$REEL"
        wait "$REEL" 2>/dev/null || true
        awk -v r="$r" -v adm="$adm" -v req="$(kv requests "$TMP/run.kv")" \
            -v hit="$(kv marked "$TMP/run.kv")" -v oh="$(kv one_hit "$TMP/run.kv")" \
            -v ohm="$(kv one_hit_marked "$TMP/run.kv")" -v body="$(kv body_bytes "$TMP/run.kv")" \
            -v err="$(kv errors_total "$TMP/run.kv")" -v origin=$(((o1 - o0) * OBJ)) \
            -v w=$((w1 - w0)) -v s=$((s1 - s0)) -v j=$((j1 - j0)) 'BEGIN {
                printf "| %d | %s | %d | %.3f | %.3f | %.3f | %.3f | %.3f | %d |\n", r, adm, req,
                    hit / req, (hit - ohm) / (req - oh), origin / body, w / body, s / body, j
                if (err > 0) printf "(round %d %s: %d errors)\n", r, adm, err > "/dev/stderr"
            }'
    done
done
