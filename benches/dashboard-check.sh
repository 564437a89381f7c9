#!/usr/bin/env bash
# The admin dashboard in a real browser: starts the demo origin and reel (an HTTP and an
# HTTPS listener, HTTP/2 on the latter, a self-signed certificate, an admin token) on free
# ports under a temporary directory, runs a bounded load (reel-load zipf over HTTP/1.1, curl
# over HTTP/2, a player's live playlist reloads), then loads the dashboard in headless
# Chromium twice, the token given by HTTP Basic authentication
# (http://viewer:TOKEN@127.0.0.1:ADMIN/dashboard): once dumping the DOM, whose root element
# carries the page's own check in `data-selfcheck` ("ok charts=N empty=0 errors=0
# samples=S"), once saving a screenshot. Fails when the page without the token does not ask
# for Basic authentication, a chart is empty, the page counted a script error or Chromium
# logged one, a chart's title names no unit, a count axis has fractions, the hit ratio of
# segments or of playlists is missing, or the page shows a debug line. Chromium (Debian's
# `chromium`) is installed with apt-get when missing.
#
#     benches/dashboard-check.sh                 # builds reel, reel-load, the demo origin (release)
#     SKIP_BUILD=1 CARGO_TARGET_DIR=/path benches/dashboard-check.sh
#     SKIP_BUILD=1 REEL_BIN=target/debug/reel benches/dashboard-check.sh   # another reel binary
#     SKIP_BUILD=1 BIN_DIR=target/debug benches/dashboard-check.sh          # all three from a debug build
#
#   PORT_BASE (18480: origin, +1 http, +2 https, +3 admin), LOAD_SECS (25)
#
# Output: benches/runs/<date>-dashboard/{dashboard.png,selfcheck.txt}; logs in raw/ (gitignored).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
TGT=${CARGO_TARGET_DIR:-$ROOT/target}
PORT_BASE=${PORT_BASE:-18480}
LOAD_SECS=${LOAD_SECS:-25}
ORIGIN_PORT=$PORT_BASE
HTTP_PORT=$((PORT_BASE + 1))
HTTPS_PORT=$((PORT_BASE + 2))
ADMIN_PORT=$((PORT_BASE + 3))
OUT=$ROOT/benches/runs/$(date -u +%Y-%m-%d)-dashboard
RAW=$OUT/raw

log() { printf '%s\n' "$*" >&2; }
die() { log "dashboard-check: $*"; exit 1; }

CHROMIUM=$(command -v chromium || command -v chromium-browser || true)
if [[ -z $CHROMIUM ]]; then
    log "chromium missing: installing Debian's chromium with apt-get"
    [[ $(id -u) == 0 ]] || die "not root: install chromium first (apt-get install chromium)"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
    CHROMIUM=$(command -v chromium) || die "chromium did not install"
fi

for port in $(seq "$PORT_BASE" "$ADMIN_PORT"); do
    if ss -ltnH "sport = :$port" | grep -q .; then die "port $port already in use (set PORT_BASE)"; fi
done

if [[ -z ${SKIP_BUILD:-} ]]; then
    (cd "$ROOT" && cargo build -q --release --locked -p reel -p reel-benches -p reel-demo-origin)
fi
BIN_DIR=${BIN_DIR:-$TGT/release}
REEL=${REEL_BIN:-$BIN_DIR/reel}
LOAD=$BIN_DIR/reel-load
ORIGIN_BIN=$BIN_DIR/reel-demo-origin
# The admin token: the browser gives it by Basic authentication (any user, the token as
# the password).
TOKEN=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')

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
mkdir -p "$RAW" "$WORK/store" "$WORK/profile-dom" "$WORK/profile-shot"

wait_http() {   # URL LOG PID
    for _ in $(seq 300); do
        if curl -fsk -o /dev/null -m 1 "$1" 2>/dev/null; then return 0; fi
        kill -0 "$3" 2>/dev/null || { tail -n 20 "$2" >&2; return 1; }
        sleep 0.1
    done
    tail -n 20 "$2" >&2
    return 1
}

cat >"$WORK/reel.toml" <<EOF
[server]
cdn_id = "reel-dashboard-check"

[log]
level = "warn"

[[listener]]
name = "http"
address = "127.0.0.1:$HTTP_PORT"

[[listener]]
name = "https"
address = "127.0.0.1:$HTTPS_PORT"
tls_cert = "self-signed"
http2 = true

[cores]
workers = "auto"
irq = "auto"
nic = ["lo"]                    # the data interfaces chart (loopback here)

[admin]
address = "127.0.0.1:$ADMIN_PORT"
token = "$TOKEN"

[access_log]
enabled = false

[store]
path = "$WORK/store"
size = "256MiB"
volume_size = "16MiB"

[[site]]
hosts = ["127.0.0.1", "localhost"]
origin_group = "demo"

[[origin_group]]
name = "demo"

  [[origin_group.tier]]
  hosts = ["127.0.0.1:$ORIGIN_PORT"]
EOF

"$ORIGIN_BIN" --listen "127.0.0.1:$ORIGIN_PORT" --latency-scale 0.2 \
    >"$RAW/origin.log" 2>&1 &
STARTED+=("$!")
wait_http "http://127.0.0.1:$ORIGIN_PORT/obj/16" "$RAW/origin.log" "$!" || die "origin did not start"
"$REEL" serve --config "$WORK/reel.toml" >"$RAW/reel.log" 2>&1 &
REEL_PID=$!
STARTED+=("$REEL_PID")
wait_http "http://127.0.0.1:$HTTP_PORT/healthz" "$RAW/reel.log" "$REEL_PID" || die "reel did not start"
log "reel up (pid $REEL_PID): http :$HTTP_PORT, https :$HTTPS_PORT, admin :$ADMIN_PORT"

# HTTP/1.1: 16 viewers over 2000 objects by Zipf popularity (hits and misses), paced.
"$LOAD" zipf -v 16 --objects 2000 --exponent 0.9 --interval 20ms -d "${LOAD_SECS}s" \
    "http://127.0.0.1:$HTTP_PORT/obj/32768?v={i}" >"$RAW/load-h1.txt" 2>&1 &
LOAD_PID=$!
STARTED+=("$LOAD_PID")
# HTTP/2 over TLS: a slower trickle, so the protocol chart has two lines.
(
    end=$((SECONDS + LOAD_SECS))
    i=0
    while ((SECONDS < end)); do
        curl -sk --http2 -o /dev/null -m 2 "https://127.0.0.1:$HTTPS_PORT/obj/8192?v=$((i % 300))" || true
        i=$((i + 1))
        sleep 0.05
    done
) &
STARTED+=("$!")

# A player on the live stream: its playlist reloaded every half second (live playlists are
# short-lived, so mostly misses: the dashboard draws their hit ratio apart from segments').
(
    end=$((SECONDS + LOAD_SECS))
    while ((SECONDS < end)); do
        curl -s -o /dev/null -m 2 "http://127.0.0.1:$HTTP_PORT/live/index.m3u8" || true
        sleep 0.5
    done
) &
STARTED+=("$!")

# Without the token the page asks for it by Basic authentication; with it, it is served.
PAGE="http://127.0.0.1:$ADMIN_PORT/dashboard"
challenge=$(curl -s -o /dev/null -D - "$PAGE" | tr -d '\r' | grep -i '^www-authenticate:' || true)
[[ ${challenge,,} == 'www-authenticate: basic realm="reel"' ]] ||
    die "the page without the token did not ask for Basic authentication: ${challenge:-no header}"
[[ $(curl -s -o /dev/null -w '%{http_code}' -u "viewer:$TOKEN" "$PAGE") == 200 ]] ||
    die "the page with the token by Basic authentication was not served"

# Let the history fill while the load runs, then look at the page under load.
sleep $((LOAD_SECS * 2 / 3))
URL="http://viewer:$TOKEN@127.0.0.1:$ADMIN_PORT/dashboard"
FLAGS=(--headless --no-sandbox --disable-gpu --disable-quic --no-first-run
       --disable-background-networking --disable-component-update --disable-sync
       --hide-scrollbars --window-size=1600,1000 --virtual-time-budget=6000)
timeout 60 "$CHROMIUM" "${FLAGS[@]}" --user-data-dir="$WORK/profile-dom" \
    --enable-logging=stderr --v=0 --dump-dom "$URL" >"$RAW/dom.html" 2>"$RAW/chromium-dom.log" ||
    die "chromium --dump-dom failed (see $RAW/chromium-dom.log)"
timeout 60 "$CHROMIUM" "${FLAGS[@]}" --user-data-dir="$WORK/profile-shot" \
    --screenshot="$OUT/dashboard.png" "$URL" >"$RAW/chromium-shot.log" 2>&1 ||
    die "chromium --screenshot failed (see $RAW/chromium-shot.log)"
wait "$LOAD_PID" || die "reel-load failed (see $RAW/load-h1.txt)"

selfcheck=$(grep -o 'data-selfcheck="[^"]*"' "$RAW/dom.html" | head -n 1 | sed 's/^data-selfcheck="/selfcheck: /; s/"$//' || true)
# What a person sees: every chart's title names its unit, counts step by whole numbers,
# both hit ratios are drawn, and no debug line is shown.
content=$(python3 - "$RAW/dom.html" <<'PY'
import re, sys
from html.parser import HTMLParser

class Page(HTMLParser):
    def __init__(self):
        super().__init__()
        self.skip = 0; self.text = []; self.titles = []; self.ticks = []; self.legends = []
        self.in_h2 = False; self.in_legend = 0
    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag in ("script", "style"): self.skip += 1
        if tag == "h2": self.in_h2 = True; self.titles.append("")
        if tag == "canvas": self.ticks.append((self.titles[-1] if self.titles else "", a.get("data-ticks", "")))
        if tag == "div" and a.get("class") == "legend": self.in_legend = 1; self.legends.append((self.titles[-1], ""))
    def handle_endtag(self, tag):
        if tag in ("script", "style"): self.skip -= 1
        if tag == "h2": self.in_h2 = False
        if tag == "div" and self.in_legend: self.in_legend = 0
    def handle_data(self, d):
        if self.skip: return
        self.text.append(d)
        if self.in_h2: self.titles[-1] += d
        if self.in_legend: t, l = self.legends[-1]; self.legends[-1] = (t, l + d + " ")

p = Page(); p.feed(open(sys.argv[1]).read())
problems = []
charts = [t for t, _ in p.ticks]
for t in charts:
    if not re.search(r"\([^()]+\)$", t): problems.append("no unit in the title %r" % t)
for t, ticks in p.ticks:
    if "(count)" in t:
        for k in ticks.split("|"):
            if not re.fullmatch(r"\d+|\d+(\.\d+)?[kMG]", k): problems.append("count axis %r has %r" % (t, k))
    if not ticks: problems.append("no axis labels on %r" % t)
ratio = [l for t, l in p.legends if t.startswith("Hit ratio")]
if not ratio or "segments" not in ratio[0] or "playlists" not in ratio[0]:
    problems.append("the hit ratio chart does not draw segments and playlists: %r" % ratio)
if "selfcheck" in " ".join(p.text).lower(): problems.append("a debug line on the page")
print("content: %d charts, each with its unit; hit ratio legend: %s" % (len(charts), " ".join(ratio[0].split()) if ratio else "-"))
for q in problems: print("content problem: " + q)
PY
)
console_errors=$(grep -E 'CONSOLE\(|Uncaught|SyntaxError|TypeError|ReferenceError|Content Security Policy' \
    "$RAW/chromium-dom.log" || true)
{
    echo "date: $(date -u +%FT%TZ)"
    echo "host: $(uname -n) $(uname -r), $(nproc) CPUs"
    echo "chromium: $("$CHROMIUM" --version 2>/dev/null | head -n 1)"
    echo "url: http://viewer:TOKEN@127.0.0.1:$ADMIN_PORT/dashboard (Basic authentication; under load: reel-load zipf -v 16 --interval 20ms, curl --http2 loop, a live playlist every 0.5 s)"
    echo "$selfcheck"
    echo "$content"
    [[ -z $console_errors ]] || { echo "console:"; echo "$console_errors"; }
} >"$OUT/selfcheck.txt"
cat "$OUT/selfcheck.txt"
log "screenshot: $OUT/dashboard.png"

[[ -n $selfcheck ]] || die "no data-selfcheck attribute on the page (did the script run?)"
[[ $selfcheck == "selfcheck: ok "* ]] || die "page self-check failed: $selfcheck"
[[ $selfcheck == *" empty=0 errors=0 "* ]] || die "page self-check failed: $selfcheck"
[[ -z $console_errors ]] || die "the browser logged script errors"
[[ $content == "content: "* && $content != *"content problem:"* ]] || die "the page's content: $content"
[[ -s $OUT/dashboard.png ]] || die "no screenshot"
echo "dashboard-check: ok"
