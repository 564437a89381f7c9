#!/usr/bin/env bash
# What the access log costs a 1 KiB hit: reel's CPU per request (all its threads, the sinks'
# included) with the log off, JSON lines to a file, to syslog (RFC 5424 over UDP to a local
# rsyslogd, or to a UDP socket that discards them when rsyslog is not installed) and to an
# HTTP collector (NDJSON batches POSTed to a local Python server), side by side in one run.
# One worker on CPU 1; `reel-load fixed`, the syslog receiver and the collector on CPU 0
# (CONNS connections, DUR seconds each), ROUNDS interleaved rounds, then the median of each
# case and its ratio to "off". Lines a sink dropped are printed with each run: a sink that
# drops does less work, so a run with drops understates its cost.
#
#   benches/access-log-cost.sh                    # 3 rounds of 8 s per case
#   ROUNDS=5 DUR=10 benches/access-log-cost.sh
#   CARGO_TARGET_DIR=/path benches/access-log-cost.sh   # a release build elsewhere
DUR=${DUR:-8}
ROUNDS=${ROUNDS:-3}
CONNS=${CONNS:-32}
PORT=${PORT:-28680}
# shellcheck source=one-worker.sh
. "$(dirname "$0")/one-worker.sh"
BIN=${CARGO_TARGET_DIR:-$ROOT/target}/release
CLK_TCK=$(getconf CLK_TCK)
SYSLOG_PORT=$((PORT + 3))
COLLECTOR_PORT=$((PORT + 4))

# The syslog receiver: rsyslogd with imudp writing to a file, else a UDP socket that reads
# and discards.
RSYSLOGD=$(command -v rsyslogd || ls /usr/sbin/rsyslogd 2>/dev/null || true)
if [[ -n $RSYSLOGD ]]; then
    cat >"$TMP/rsyslog.conf" <<EOF
global(workDirectory="$TMP")
module(load="imudp")
input(type="imudp" address="127.0.0.1" port="$SYSLOG_PORT" ruleset="r")
ruleset(name="r") { action(type="omfile" file="$TMP/syslog.out") }
EOF
    taskset -c 0 "$RSYSLOGD" -n -f "$TMP/rsyslog.conf" -i "$TMP/rsyslogd.pid" >/dev/null 2>&1 &
    PIDS+=($!)
    RECEIVER="rsyslogd (imudp)"
else
    taskset -c 0 python3 -c '
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
s.bind(("127.0.0.1", int(sys.argv[1])))
while True:
    s.recv(65536)
' "$SYSLOG_PORT" &
    PIDS+=($!)
    RECEIVER="a discarding UDP socket (rsyslog not installed)"
fi

# The collector: answers every POST 204 on kept-alive connections.
taskset -c 0 python3 -c '
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(204)
        self.send_header("Content-Length", "0")
        self.end_headers()
    def log_message(self, *a):
        pass
ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
' "$COLLECTOR_PORT" &
PIDS+=($!)
for _ in $(seq 100); do
    curl -s -o /dev/null -X POST --data x "http://127.0.0.1:$COLLECTOR_PORT/" && break
    sleep 0.1
done

# The `[access_log]` of each case, in place of one-worker.sh's `enabled = false`.
log_config() {
    case $1 in
        off) echo 'enabled = false' ;;
        file) printf '%s\n' 'enabled = true' "path = \"$TMP/access.log\"" ;;
        syslog) printf '%s\n' 'enabled = true' 'path = ""' '[[access_log.sink]]' 'kind = "syslog"' \
            "address = \"udp://127.0.0.1:$SYSLOG_PORT\"" ;;
        http) printf '%s\n' 'enabled = true' 'path = ""' '[[access_log.sink]]' 'kind = "http"' \
            "url = \"http://127.0.0.1:$COLLECTOR_PORT/reel\"" ;;
    esac
}

# One run: prints "cpu_us_per_request requests errors dropped_lines".
run() {
    local case=$1
    write_config
    # `[access_log]` is a table of one-worker.sh's file: replace its one line, and move the
    # sink tables (which must follow every plain table) to the end.
    python3 - "$TMP/reel.toml" "$(log_config "$case")" <<'PY'
import sys
path, lines = sys.argv[1], sys.argv[2].split("\n")
keys = [l for l in lines[: lines.index("[[access_log.sink]]")]] if "[[access_log.sink]]" in lines else lines
sink = lines[len(keys):]
text = open(path).read().replace("[access_log]\nenabled = false\n", "[access_log]\n" + "\n".join(keys) + "\n", 1)
open(path, "w").write(text + "\n" + "\n".join(sink) + "\n")
PY
    rm -f "$TMP/access.log"
    start_reel
    local reel=$REEL
    curl -s -o /dev/null "http://127.0.0.1:$PORT/obj1k"
    local t0 t1
    t0=$(awk '{ print $14 + $15 }' "/proc/$reel/stat")
    taskset -c 0 "$BIN/reel-load" fixed -c "$CONNS" -d "${DUR}s" "http://127.0.0.1:$PORT/obj1k" \
        --kv >"$TMP/load.kv"
    t1=$(awk '{ print $14 + $15 }' "/proc/$reel/stat")
    local dropped
    dropped=$(curl -s "http://127.0.0.1:$((PORT + 2))/metrics" |
        awk '$1 == "reel_access_log_dropped_lines_total" { print $2 }' | head -1)
    kill "$reel"
    wait "$reel" 2>/dev/null || true
    awk -F= -v ticks=$((t1 - t0)) -v tck="$CLK_TCK" -v dropped="${dropped:-0}" '
        $1 == "requests" { r = $2 } $1 == "errors_total" { e = $2 }
        END { printf "%.2f %d %d %d\n", ticks * 1e6 / tck / r, r, e, dropped }' "$TMP/load.kv"
}

echo "one worker (CPU 1), $CONNS connections, ${DUR}s per run; syslog receiver: $RECEIVER"
echo "round case cpu_us_per_request requests errors dropped_lines"
: >"$TMP/results"
for r in $(seq "$ROUNDS"); do
    for c in off file syslog http; do
        line="$r $c $(run "$c")"
        echo "$line"
        echo "$line" >>"$TMP/results"
    done
done
echo "case median_cpu_us_per_request ratio_to_off"
awk '
    { v[$2, ++n[$2]] = $3 }
    function median(c,   i, j, t, k) {
        k = n[c]
        for (i = 1; i <= k; i++) for (j = i + 1; j <= k; j++) if (v[c, j] < v[c, i]) { t = v[c, i]; v[c, i] = v[c, j]; v[c, j] = t }
        return k % 2 ? v[c, (k + 1) / 2] : (v[c, k / 2] + v[c, k / 2 + 1]) / 2
    }
    END {
        off = median("off")
        split("off file syslog http", cases, " ")
        for (i = 1; i <= 4; i++) { m = median(cases[i]); printf "%s %.2f %.3f\n", cases[i], m, m / off }
    }' "$TMP/results"
