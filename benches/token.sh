#!/usr/bin/env bash
# Signed viewer tokens ([site.token]), one run, side by side, on the shipped config with its
# demo origin and two sites on it: "127.0.0.1" without tokens, "localhost" with
# `[site.token]` (propagate = "query").
#
#  1. CPU of the reel process (utime + stime from /proc, all threads) per request, for:
#     1 KiB hits on the site without tokens; 1 KiB hits with a valid token (verified, then
#     the same hit); 403 refusals (a token with a wrong HMAC). ROUNDS rounds of DUR seconds
#     each, interleaved; medians.
#  2. LL-HLS blocking-reload playlist latency (reel-load llhls: arrival minus the origin's
#     release, per playlist) of VIEWERS viewers on each site at the same time, for LL_DUR
#     seconds: propagate = "query" rewrites every playlist it serves them.
#
#   DUR (8, seconds)  ROUNDS (3)  CONNS (16)  VIEWERS (20)  LL_DUR (30, seconds)
#   PORT_BASE (18380: data, +1 demo origin, +2 admin, +3 https)
#   SKIP_BUILD (1 = use existing binaries)  CARGO_TARGET_DIR (where binaries are found)
#
#   benches/token.sh
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DUR=${DUR:-8}
ROUNDS=${ROUNDS:-3}
CONNS=${CONNS:-16}
VIEWERS=${VIEWERS:-20}
LL_DUR=${LL_DUR:-30}
PORT_BASE=${PORT_BASE:-18380}
TGT=${CARGO_TARGET_DIR:-$ROOT/target}
KEY=0a1b2c3d4e5f60718293a4b5c6d7e8f9
if [[ "${SKIP_BUILD:-0}" != 1 ]]; then
    cargo build --release --locked --manifest-path "$ROOT/Cargo.toml" -p reel -p reel-benches --bin reel --bin reel-load >&2
fi
WORK=$(mktemp -d /tmp/reel-token.XXXXXX)
pid=""
cleanup() { [[ -n $pid ]] && kill -TERM "$pid" 2>/dev/null && wait "$pid" 2>/dev/null; rm -rf "$WORK"; }
trap cleanup EXIT

# An EdgeAuth 2.0 ACL token, as Akamai's generators make it: HMAC-SHA256 (hex key) of the
# fields before `~hmac=`.
token() { # acl, key
    local exp=$(($(date +%s) + 3600)) fields mac
    fields="exp=$exp~acl=$1"
    mac=$(printf '%s' "$fields" | openssl dgst -sha256 -mac HMAC -macopt "hexkey:$2" | awk '{ print $NF }')
    printf '%s~hmac=%s' "$fields" "$mac"
}
GOOD=$(token '/*' "$KEY")
BAD=$(token '/*' ffeeddccbbaa99887766554433221100)

sed -e "s/127.0.0.1:8080/127.0.0.1:$PORT_BASE/" \
    -e "s/127.0.0.1:8081/127.0.0.1:$((PORT_BASE + 1))/g" \
    -e "s/127.0.0.1:9090/127.0.0.1:$((PORT_BASE + 2))/" \
    -e "s/127.0.0.1:8443/127.0.0.1:$((PORT_BASE + 3))/" \
    -e 's/^hosts = \["127.0.0.1", "localhost"\]/hosts = ["127.0.0.1"]/' \
    "$ROOT/config/reel.toml" > "$WORK/reel.toml"
grep -q '^hosts = \["127.0.0.1"\]$' "$WORK/reel.toml" || { echo "no site hosts line in the shipped config" >&2; exit 1; }
cat >> "$WORK/reel.toml" <<EOF

[[cache.rule]]
match = "/obj/*"
ttl = "1h"
override = true

[[site]]
hosts = ["localhost"]
origin_group = "demo"
prefetch = "hinted"

[site.token]
format = "edgeauth"
keys = ["$KEY"]
propagate = "query"
EOF
(cd "$WORK" && exec "$TGT/release/reel" serve --config reel.toml >"$WORK/stdout.log" 2>"$WORK/stderr.log") &
pid=$!
for _ in $(seq 1 100); do curl -s -o /dev/null "http://127.0.0.1:$PORT_BASE/healthz" && break; sleep 0.1; done
curl -s -o /dev/null "http://127.0.0.1:$PORT_BASE/healthz" || { tail -3 "$WORK/stderr.log" >&2; exit 1; }

D="127.0.0.1:$PORT_BASE"
L="localhost:$PORT_BASE"
declare -A URL=(
    [hit]="http://$D/obj/1024"
    [token_hit]="http://$L/obj/1024?hdnts=$GOOD"
    [refused]="http://$L/obj/1024?hdnts=$BAD"
)
declare -A WANT=([hit]=200 [token_hit]=200 [refused]=403)
for w in hit token_hit refused; do # warm the store and check each answer
    for _ in 1 2; do code=$(curl -s -o /dev/null -w '%{http_code}' "${URL[$w]}"); done
    [[ $code == "${WANT[$w]}" ]] || { echo "$w: status $code, want ${WANT[$w]}" >&2; exit 1; }
done
ticks() { awk '{ print $14 + $15 }' "/proc/$pid/stat"; }
CLK_TCK=$(getconf CLK_TCK)
declare -A CPU
for round in $(seq 1 "$ROUNDS"); do
    for w in hit token_hit refused; do
        t0=$(ticks)
        "$TGT/release/reel-load" fixed -c "$CONNS" -d "${DUR}s" "${URL[$w]}" --kv > "$WORK/$w.kv"
        t1=$(ticks)
        req=$(awk -F= '$1 == "requests" { print $2 }' "$WORK/$w.kv")
        CPU[$w]+="$(awk -v b=$((t1 - t0)) -v t="$CLK_TCK" -v r="$req" 'BEGIN { printf "%.2f", b * 1e6 / t / r }') "
    done
done
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
echo "cpu_us_per_request (median of $ROUNDS rounds of ${DUR}s, $CONNS connections; rounds: values)"
for w in hit token_hit refused; do
    printf '%-10s %8s   (%s)\n' "$w" "$(echo "${CPU[$w]}" | median)" "${CPU[$w]% }"
done
h=$(echo "${CPU[hit]}" | median)
printf 'ratio refused/hit %.2f   token_hit/hit %.2f\n' \
    "$(awk -v a="$(echo "${CPU[refused]}" | median)" -v b="$h" 'BEGIN { print a / b }')" \
    "$(awk -v a="$(echo "${CPU[token_hit]}" | median)" -v b="$h" 'BEGIN { print a / b }')"

# LL-HLS: both sites' viewers at once, so both see the same parts released at the same times.
"$TGT/release/reel-load" llhls -v "$VIEWERS" -d "${LL_DUR}s" "http://$D/live/index.m3u8" --kv > "$WORK/ll_plain.kv" &
a=$!
"$TGT/release/reel-load" llhls -v "$VIEWERS" -d "${LL_DUR}s" "http://$L/live/index.m3u8?hdnts=$GOOD" --kv > "$WORK/ll_query.kv"
wait "$a"
echo "llhls playlist latency, us (arrival minus release; $VIEWERS viewers each, ${LL_DUR}s)"
for f in plain query; do
    p50=$(awk -F= '$1 ~ /playlist_latency_us\.p50$/ { print $2 }' "$WORK/ll_$f.kv")
    p99=$(awk -F= '$1 ~ /playlist_latency_us\.p99$/ { print $2 }' "$WORK/ll_$f.kv")
    blocking=$(awk -F= '$1 ~ /playlists_blocking$/ { print $2 }' "$WORK/ll_$f.kv")
    errors=$(awk -F= '$1 == "errors_total" { print $2 }' "$WORK/ll_$f.kv")
    printf '%-6s p50 %8s  p99 %8s  blocking_playlists %6s  errors %s\n' "$f" "$p50" "$p99" "$blocking" "${errors:-0}"
done
curl -s "http://127.0.0.1:$((PORT_BASE + 2))/metrics" | grep -E '^reel_denied_total' | grep -v ' 0$' || true
