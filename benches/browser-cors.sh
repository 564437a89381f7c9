#!/usr/bin/env bash
# CORS in a real browser: a web player's page on another origin than the CDN's reads a
# playlist, a segment by Range and a segment with CMCD fields (which makes the browser send a
# preflight first), and a page on an origin the site does not allow is refused.
#
# Starts reel (its built-in demo origin, one site with [site.cors] allowing
# http://localhost:PAGE) and a static page server (python3 -m http.server) on free ports
# under a temporary directory, then loads the page in headless Chromium twice with
# --dump-dom: from http://localhost:PAGE (allowed) and from http://127.0.0.1:PAGE (another
# origin, not allowed). The page fetch()es from http://127.0.0.1:REEL and writes what it
# read as JSON into the DOM; this script checks it, and that reel's access log shows the
# preflights answered at the edge (OPTIONS, 204, never sent to the origin).
#
# Chromium (Debian's `chromium`) is installed with apt-get when missing; where it cannot be
# (not root, no apt-get, no network), the script prints `SKIPPED browser-cors: <why>` and
# exits 0. crates/reel/tests/browser_cors.rs runs it in `cargo test`.
#
#     benches/browser-cors.sh                         # builds reel (release) first
#     SKIP_BUILD=1 REEL_BIN=target/debug/reel benches/browser-cors.sh
#
# Prints `browser-cors: ok` and exits 0 when every check passes.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
TGT=${CARGO_TARGET_DIR:-$ROOT/target}

log() { printf '%s\n' "$*" >&2; }
die() { log "browser-cors: $*"; exit 1; }
skip() { echo "SKIPPED browser-cors: $*"; exit 0; }

command -v python3 >/dev/null || skip "python3 is not installed (it serves the page)"
command -v curl >/dev/null || skip "curl is not installed"
CHROMIUM=$(command -v chromium || command -v chromium-browser || true)
if [[ -z $CHROMIUM ]]; then
    log "chromium missing: installing Debian's chromium with apt-get"
    [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null ||
        skip "chromium is not installed and this user cannot install it (apt-get install chromium)"
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; } \
        >/dev/null 2>&1 || skip "chromium is not installed and apt-get could not install it"
    CHROMIUM=$(command -v chromium) || skip "chromium did not install"
fi

if [[ -z ${SKIP_BUILD:-} ]]; then
    (cd "$ROOT" && cargo build -q --release --locked -p reel)
fi
REEL=${REEL_BIN:-$TGT/release/reel}
[[ -x $REEL ]] || die "no reel binary at $REEL"
REEL=$(cd "$(dirname "$REEL")" && pwd)/$(basename "$REEL")

WORK=$(mktemp -d)
STARTED=()
cleanup() {
    local pid
    for pid in "${STARTED[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    for pid in "${STARTED[@]}"; do
        for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$pid" 2>/dev/null || true
    done
    rm -rf "$WORK"
}
trap cleanup EXIT
mkdir -p "$WORK/www" "$WORK/store" "$WORK/profile"

# Four free ports, held together while they are chosen: reel, its admin, the demo origin
# and the page server.
read -r REEL_PORT ADMIN_PORT ORIGIN_PORT PAGE_PORT < <(python3 -c '
import socket
ss = [socket.socket() for _ in range(4)]
for s in ss:
    s.bind(("127.0.0.1", 0))
print(*[s.getsockname()[1] for s in ss])
')
CDN=http://127.0.0.1:$REEL_PORT
ALLOWED=http://localhost:$PAGE_PORT
OTHER=http://127.0.0.1:$PAGE_PORT

wait_http() {   # URL LOG PID
    for _ in $(seq 300); do
        if curl -fs -o /dev/null -m 1 "$1" 2>/dev/null; then return 0; fi
        kill -0 "$3" 2>/dev/null || { tail -n 20 "$2" >&2; return 1; }
        sleep 0.1
    done
    tail -n 20 "$2" >&2
    return 1
}

cat >"$WORK/reel.toml" <<EOF
[log]
level = "warn"

[[listener]]
name = "http"
address = "127.0.0.1:$REEL_PORT"

[cores]
workers = "auto"
irq = "auto"
nic = []

[admin]
address = "127.0.0.1:$ADMIN_PORT"

[access_log]
enabled = true
path = "$WORK/access.log"
format = "json"
flush_interval = "100ms"

[store]
path = "$WORK/store"
size = "64MiB"
volume_size = "8MiB"
io = "threads"

[[site]]
hosts = ["127.0.0.1", "localhost"]
origin_group = "demo"

[site.cors]
allow_origins = ["$ALLOWED"]
expose_headers = ["Content-Length", "Content-Range", "Cache-Status", "Age", "Timing-Allow-Origin"]

[[site.header]]
action = "add"
name = "Timing-Allow-Origin"
value = "$ALLOWED"

[[origin_group]]
name = "demo"

  [origin_group.health]
  enabled = false

  [[origin_group.tier]]
  hosts = ["127.0.0.1:$ORIGIN_PORT"]

[demo_origin]
enabled = true
address = "127.0.0.1:$ORIGIN_PORT"
latency_scale = 0.0
EOF

"$REEL" check --config "$WORK/reel.toml" >/dev/null || die "reel check refused the config"
(cd "$WORK" && exec "$REEL" serve --config "$WORK/reel.toml") >"$WORK/reel.log" 2>&1 &
REEL_PID=$!
STARTED+=("$REEL_PID")
wait_http "$CDN/healthz" "$WORK/reel.log" "$REEL_PID" || die "reel did not start"

# A segment of the first VOD title: the page reads it by Range (a miss), then with CMCD
# fields (a hit). Its playlist is read by curl here; the page reads another title's (a miss).
SEG=$(curl -fsS "$CDN/vod/title_001/index.m3u8" | grep -v '^#' | grep -m1 .) ||
    die "no playlist from $CDN/vod/title_001/index.m3u8"
[[ $SEG == /* ]] || SEG=/vod/title_001/$SEG

cat >"$WORK/www/player.html" <<'EOF'
<!doctype html>
<html><head><meta charset="utf-8"><title>cors check</title></head>
<body><pre id="out">pending</pre>
<script>
const q = new URLSearchParams(location.search);
const cdn = q.get("cdn"), seg = cdn + q.get("seg");
const res = {page: location.origin};
// Each step on its own: one refused does not hide the others.
async function step(name, url, headers) {
  try {
    const r = await fetch(url, {headers, mode: "cors"});
    const b = new Uint8Array(await r.arrayBuffer());
    res[name] = {
      status: r.status, len: b.length, first: b.length ? b[0] : null,
      head: new TextDecoder().decode(b.slice(0, 7)),
      cacheStatus: r.headers.get("cache-status"), contentRange: r.headers.get("content-range"),
      age: r.headers.get("age"), timingAllowOrigin: r.headers.get("timing-allow-origin"),
    };
  } catch (e) {
    res[name] = {error: String(e)};
  }
}
(async () => {
  await step("playlist", cdn + "/vod/title_002/index.m3u8", {});
  await step("range", seg, {"Range": "bytes=0-187"});
  await step("cmcd", seg, {"CMCD-Request": "bl=2100,dl=2000", "CMCD-Session": "sf=h,st=v"});
  document.getElementById("out").textContent = JSON.stringify(res);
})();
</script></body></html>
EOF

(cd "$WORK/www" && exec python3 -m http.server --bind 127.0.0.1 "$PAGE_PORT") \
    >"$WORK/page.log" 2>&1 &
PAGE_PID=$!
STARTED+=("$PAGE_PID")
wait_http "$OTHER/player.html" "$WORK/page.log" "$PAGE_PID" || die "the page server did not start"

FLAGS=(--headless --no-sandbox --disable-gpu --disable-quic --no-first-run
       --disable-background-networking --disable-component-update --disable-sync
       --virtual-time-budget=15000)
run_page() {   # PAGE-ORIGIN NAME
    local url="$1/player.html?cdn=$CDN&seg=$SEG"
    rm -rf "$WORK/profile"
    local t0=$SECONDS
    timeout 60 "$CHROMIUM" "${FLAGS[@]}" --user-data-dir="$WORK/profile" --dump-dom "$url" \
        >"$WORK/$2.html" 2>"$WORK/$2-chromium.log" || {
        tail -n 20 "$WORK/$2-chromium.log" >&2
        die "chromium failed on $url"
    }
    log "chromium: $url in $((SECONDS - t0)) s"
    python3 - "$WORK/$2.html" <<'PY'
import html, re, sys
m = re.search(r'<pre id="out">(.*?)</pre>', open(sys.argv[1]).read(), re.S)
print(html.unescape(m.group(1)) if m else "no-output")
PY
}

allowed=$(run_page "$ALLOWED" allowed)
other=$(run_page "$OTHER" other)
sleep 0.3   # the access log flushes every 100 ms
echo "allowed page ($ALLOWED): $allowed"
echo "other page ($OTHER): $other"

python3 - "$allowed" "$other" "$WORK/access.log" "$SEG" <<'PY' || die "checks failed"
import json, sys

ok = True
def check(cond, what):
    global ok
    print(("ok      " if cond else "FAILED  ") + what)
    ok = ok and cond

try:
    a, o = json.loads(sys.argv[1]), json.loads(sys.argv[2])
except ValueError:
    print("FAILED  the page wrote no JSON (did its script run?)")
    sys.exit(1)
log = [json.loads(l) for l in open(sys.argv[3]) if l.strip()]
seg = sys.argv[4]

p, r, c = a.get("playlist", {}), a.get("range", {}), a.get("cmcd", {})
check(p.get("status") == 200 and p.get("head") == "#EXTM3U", f"allowed: playlist read: {p}")
check("reel" in (p.get("cacheStatus") or ""), "allowed: Cache-Status exposed on the playlist")
check(p.get("timingAllowOrigin") == a.get("page"), "allowed: the header rule's field reads")
check(r.get("status") == 206 and r.get("len") == 188 and r.get("first") == 0x47,
      f"allowed: segment by Range read (188 bytes, TS sync byte): {r}")
check((r.get("contentRange") or "").startswith("bytes 0-187/"), "allowed: Content-Range exposed")
check(c.get("status") == 200 and c.get("len", 0) > 188 and c.get("first") == 0x47,
      f"allowed: segment with CMCD fields read after its preflight: {c}")
# The Range read started the segment's one fetch: the CMCD read finds it stored (a hit) or,
# on a loaded machine, still being written (collapsed into that fetch); never a fetch of
# its own.
cs = c.get("cacheStatus") or ""
check(("hit" in cs or "collapsed" in cs) and c.get("age") is not None,
      f"allowed: the CMCD read comes from the cache, Cache-Status and Age exposed: {cs}")

for step in ("playlist", "range", "cmcd"):
    check("error" in o.get(step, {}) and "status" not in o.get(step, {}),
          f"other origin: {step} refused by the browser: {o.get(step)}")

pre = [e for e in log if e.get("method") == "OPTIONS"]
check(any(e.get("status") == 204 and e.get("path") == seg for e in pre),
      f"a preflight for the CMCD read reached reel: {pre}")
check(all(e.get("status") == 204 and e.get("cache") == "local" for e in pre),
      "every preflight was answered at the edge (204, local), none forwarded")
sys.exit(0 if ok else 1)
PY
echo "browser-cors: ok"
