#!/usr/bin/env bash
# What a refusal by a site's access rules costs against a hit: reel's CPU per request for
# a 1 KiB hit (site without rules), a 1 KiB hit through rules that admit it (CIDR lists,
# a country rule, a rate limit the load stays under), a 403 by CIDR deny, a 403 by country
# and a 429, side by side in one run. One worker on CPU 1, `reel-load fixed` on CPU 0
# (CONNS connections, DUR seconds each), ROUNDS interleaved rounds; the client is
# 127.0.0.1, which a MaxMind DB written for the run (mmdb-writer) places in DE.
#
#   benches/access.sh                    # 3 rounds of 8 s per case
#   ROUNDS=5 DUR=10 benches/access.sh
DUR=${DUR:-8}
ROUNDS=${ROUNDS:-3}
CONNS=${CONNS:-32}
PORT=${PORT:-28580}
# shellcheck source=one-worker.sh
. "$(dirname "$0")/one-worker.sh"
CLK_TCK=$(getconf CLK_TCK)

# The country database: 127.0.0.0/8 in DE, written by MaxMind's format (mmdb-writer in a
# venv under target/, the one the tests use).
VENV=$ROOT/target/test-tools/mmdb-venv
if [[ ! -f $VENV/.ready ]]; then
    rm -rf "$VENV"
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install --quiet --disable-pip-version-check mmdb-writer==0.2.7 netaddr
    touch "$VENV/.ready"
fi
"$VENV/bin/python" - "$TMP/countries.mmdb" <<'PY'
import sys
from netaddr import IPSet
from mmdb_writer import MMDBWriter
w = MMDBWriter(ip_version=6, database_type="GeoLite2-Country", languages=["en"],
               description={"en": "reel bench"}, ipv4_compatible=True)
w.insert_network(IPSet(["127.0.0.0/8"]), {"country": {"iso_code": "DE", "names": {"en": "Germany"}}})
w.insert_network(IPSet(["192.0.2.0/24"]), {"country": {"iso_code": "FR", "names": {"en": "France"}}})
w.to_db_file(sys.argv[1])
PY

# The `[site.access]` / `[site.limits]` lines of each case.
rules() {
    case $1 in
        hit) ;;
        hit-rules) printf '%s\n' '[site.access]' 'allow = ["10.0.0.0/8", "127.0.0.0/8", "2001:db8::/32"]' \
            'deny = ["192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24"]' 'deny_countries = ["FR", "US"]' \
            '[site.limits]' 'rate = 1000000000' 'burst = 1000000' ;;
        403-cidr) printf '%s\n' '[site.access]' 'deny = ["10.0.0.0/8", "127.0.0.0/8", "192.0.2.0/24"]' ;;
        403-country) printf '%s\n' '[site.access]' 'deny_countries = ["DE", "FR"]' ;;
        429) printf '%s\n' '[site.limits]' 'rate = 0.001' 'burst = 1' ;;
    esac
}

# One run: prints "cpu_us_per_request requests 4xx other_errors".
run() {
    local case=$1
    write_config "" "[[site]]" 'hosts = ["127.0.0.1"]' 'origin_group = "o"' "$(rules "$case")" "" \
        "[[origin_group]]" 'name = "o"' "[[origin_group.tier]]" "hosts = [\"127.0.0.1:$((PORT + 1))\"]" "" \
        "[geo]" "database = \"$TMP/countries.mmdb\""
    start_reel
    local reel=$REEL
    # Fill the cache (the 429 case spends the one request of its burst here).
    curl -s -o /dev/null "http://127.0.0.1:$PORT/obj1k"
    local t0 t1
    t0=$(awk '{ print $14 + $15 }' "/proc/$reel/stat")
    taskset -c 0 "$BIN/reel-load" fixed -c "$CONNS" -d "${DUR}s" "http://127.0.0.1:$PORT/obj1k" \
        --kv >"$TMP/load.kv"
    t1=$(awk '{ print $14 + $15 }' "/proc/$reel/stat")
    kill "$reel"
    wait "$reel" 2>/dev/null || true
    awk -F= -v ticks=$((t1 - t0)) -v tck="$CLK_TCK" '
        $1 == "requests" { r = $2 } $1 == "errors.status_4xx" { x = $2 } $1 == "errors_total" { e = $2 }
        END { printf "%.2f %d %d %d\n", ticks * 1e6 / tck / r, r, x, e - x }' "$TMP/load.kv"
}

echo "one worker (CPU 1), $CONNS connections from 127.0.0.1, ${DUR}s per run"
echo "round case cpu_us_per_request requests 4xx other_errors"
for r in $(seq "$ROUNDS"); do
    for c in hit hit-rules 403-cidr 403-country 429; do
        echo "$r $c $(run "$c")"
    done
done
