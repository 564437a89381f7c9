//! Issue 40.3: access logs people can ship. The JSON fields an operator chose, in their
//! order; sampling per status class; `reel check` refusing an unknown field; lines shipped
//! to a real rsyslog over UDP and TCP, and in NDJSON batches (gzip too) to a collector on
//! a real socket; and a collector that is down or never answers costing nothing but
//! dropped-line counts, shown in `/metrics` and in `/healthz` details.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};

use serde_json::Value;

use crate::common::*;

fn raw_lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path).unwrap_or_default().lines().map(str::to_owned).collect()
}

#[test]
fn chosen_fields_in_their_order_and_one_line_in_n_per_status_class() {
    let dir = tempfile::tempdir().unwrap();
    let o = Origin::start("a");
    o.put("/f/a.ts", Object::ok("abc"));
    let mut conf = Conf::new(dir.path(), &o);
    conf.access_log =
        "flush_interval = \"100ms\"\nfields = [\"status\", \"path\", \"method\", \"peer\"]\n\
                       \n[access_log.sample]\n\"2xx\" = 0.25\n\"4xx\" = 1\n"
            .into();
    let reel = Reel::start(&conf);
    // One connection: one worker, whose counts decide.
    let mut c = Conn::open(reel.data).unwrap();
    for _ in 0..8 {
        assert_eq!(c.get("127.0.0.1", "/f/a.ts").unwrap().status, 200);
    }
    for _ in 0..3 {
        assert_eq!(c.get("127.0.0.1", "/f/none.ts").unwrap().status, 404);
    }
    let log = dir.path().join("access.log");
    let lines = eventually("the sampled lines", || {
        let l = raw_lines(&log);
        (l.len() >= 5).then_some(l)
    });
    // The first and the fifth 200 of the worker; every 404. `peer` has nothing to say on
    // a direct connection and is left out.
    assert_eq!(
        lines,
        [
            r#"{"status":200,"path":"/f/a.ts","method":"GET"}"#,
            r#"{"status":200,"path":"/f/a.ts","method":"GET"}"#,
            r#"{"status":404,"path":"/f/none.ts","method":"GET"}"#,
            r#"{"status":404,"path":"/f/none.ts","method":"GET"}"#,
            r#"{"status":404,"path":"/f/none.ts","method":"GET"}"#,
        ]
    );
    eventually("the sampled-out count", || {
        (metric(&reel.metrics(), "reel_access_log_sampled_out_total") == Some(6.0)).then_some(())
    });
}

#[test]
fn check_refuses_an_unknown_field_naming_the_known_ones() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("reel.toml");
    let text = "[[listener]]\nname = \"http\"\naddress = \"127.0.0.1:0\"\n\n[access_log]\n\
                path = \"-\"\nfields = [\"time\", \"stauts\"]\n";
    std::fs::write(&p, text).unwrap();
    let out = Command::new(BIN).arg("check").arg("--config").arg(&p).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(64), "{err}");
    let want = format!(
        "{}:7:19: access_log.fields[1]: unknown field \"stauts\": known fields are time, client, \
         peer, method, host, path, protocol, status, bytes, cache, origin_ms, total_ms, ua, \
         request, error, denied",
        p.display()
    );
    assert!(err.contains(&want), "expected {want:?} in:\n{err}");
}

/// A real rsyslogd, our child, listening on UDP and TCP on 127.0.0.1 and writing each
/// message's parsed RFC 5424 parts to a file.
struct Rsyslog {
    child: Child,
    out: PathBuf,
    udp: u16,
    tcp: u16,
}

impl Rsyslog {
    fn start(dir: &Path) -> Option<Rsyslog> {
        let bin = reel_test_support::tool_or_install("rsyslogd", "rsyslog")?;
        let udp = UdpSocket::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let tcp = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let out = dir.join("syslog.out");
        let conf = dir.join("rsyslog.conf");
        let d = dir.display();
        std::fs::write(
            &conf,
            format!(
                "global(workDirectory=\"{d}\")\nmodule(load=\"imudp\")\nmodule(load=\"imtcp\")\n\
                 input(type=\"imudp\" address=\"127.0.0.1\" port=\"{udp}\" ruleset=\"r\")\n\
                 input(type=\"imtcp\" address=\"127.0.0.1\" port=\"{tcp}\" ruleset=\"r\")\n\
                 template(name=\"t\" type=\"string\" string=\"%inputname%|%pri%|%protocol-version%|\
                 %app-name%|%procid%|%msgid%|%structured-data%|%msg%\\n\")\n\
                 ruleset(name=\"r\") {{ action(type=\"omfile\" file=\"{}\" template=\"t\") }}\n",
                out.display()
            ),
        )
        .unwrap();
        let child = Command::new(bin)
            .arg("-n")
            .arg("-f")
            .arg(&conf)
            .arg("-i")
            .arg(dir.join("rsyslogd.pid"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let r = Rsyslog { child, out, udp, tcp };
        eventually("rsyslogd listening", || TcpStream::connect(("127.0.0.1", tcp)).ok());
        Some(r)
    }

    /// The messages received: (input, pri, version, app-name, procid, msgid, sd, msg).
    fn messages(&self) -> Vec<Vec<String>> {
        raw_lines(&self.out)
            .into_iter()
            .map(|l| l.splitn(8, '|').map(|c| c.trim().to_owned()).collect())
            .collect()
    }
}

impl Drop for Rsyslog {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn syslog_lines_reach_rsyslog_over_udp_and_tcp() {
    let dir = tempfile::tempdir().unwrap();
    let Some(rs) = Rsyslog::start(dir.path()) else { return };
    let o = Origin::start("a");
    o.put("/s/a.ts", Object::ok("abc"));
    let mut conf = Conf::new(dir.path(), &o);
    conf.extra = format!(
        "\n[[access_log.sink]]\nkind = \"syslog\"\nname = \"rs-udp\"\naddress = \"udp://127.0.0.1:{}\"\n\
         facility = \"local3\"\napp_name = \"edge-a\"\n\
         \n[[access_log.sink]]\nkind = \"syslog\"\nname = \"rs-tcp\"\naddress = \"tcp://127.0.0.1:{}\"\n",
        rs.udp, rs.tcp
    );
    let reel = Reel::start(&conf);
    let pid = reel.pid().to_string();
    let got = eventually("a line over each transport", || {
        // UDP may be lost until rsyslog's socket is up: ask again until both arrive.
        assert_eq!(get(reel.data, "/s/a.ts").status, 200);
        let m = rs.messages();
        let has = |input: &str| m.iter().any(|f| f.first().map(String::as_str) == Some(input));
        (has("imudp") && has("imtcp")).then_some(m)
    });
    for f in &got {
        let input = f[0].as_str();
        // local3 (19) * 8 + informational (6) = 158; local0 (16) * 8 + 6 = 134.
        let (pri, app) = if input == "imudp" { ("158", "edge-a") } else { ("134", "reel") };
        assert_eq!(
            f[1..7].to_vec(),
            [pri, "1", app, pid.as_str(), "access", "-"],
            "{input}: {f:?}"
        );
        let v: Value = serde_json::from_str(&f[7]).unwrap_or_else(|e| panic!("{e}: {f:?}"));
        assert_eq!((v["path"].as_str(), v["status"].as_u64()), (Some("/s/a.ts"), Some(200)));
    }
    let m = reel.metrics();
    for sink in ["rs-udp", "rs-tcp"] {
        let shipped = metric(
            &m,
            &format!("reel_access_log_shipped_total{{sink=\"{sink}\",kind=\"syslog\"}}"),
        );
        assert!(shipped.is_some_and(|n| n >= 1.0), "{sink}: {m}");
    }
    // The file of `path` still gets every line.
    assert!(!raw_lines(&dir.path().join("access.log")).is_empty());
}

/// One POST a collector received.
#[derive(Debug, Clone)]
struct Post {
    target: String,
    headers: Vec<(String, String)>,
    /// The body, gunzipped when it came gzipped.
    body: String,
}

impl Post {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }

    fn lines(&self) -> Vec<Value> {
        self.body
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
            .collect()
    }
}

/// A collector on 127.0.0.1 that answers every POST `204` on kept-alive connections.
struct Collector {
    addr: SocketAddr,
    posts: Arc<Mutex<Vec<Post>>>,
}

impl Collector {
    fn start() -> Collector {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let posts = Arc::new(Mutex::new(Vec::new()));
        let p = posts.clone();
        std::thread::spawn(move || {
            for s in l.incoming().flatten() {
                let p = p.clone();
                std::thread::spawn(move || serve(s, &p));
            }
        });
        Collector { addr, posts }
    }

    fn posts(&self) -> Vec<Post> {
        self.posts.lock().unwrap().clone()
    }
}

fn serve(s: TcpStream, posts: &Mutex<Vec<Post>>) {
    let mut w = s.try_clone().unwrap();
    let mut r = BufReader::new(s);
    loop {
        let mut line = String::new();
        if r.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let target = line.split(' ').nth(1).unwrap_or("").to_owned();
        let mut headers = Vec::new();
        loop {
            let mut h = String::new();
            r.read_line(&mut h).unwrap();
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            let (n, v) = h.split_once(':').unwrap();
            headers.push((n.to_ascii_lowercase(), v.trim().to_owned()));
        }
        let len: usize = headers
            .iter()
            .find(|(n, _)| n == "content-length")
            .map(|(_, v)| v.parse().unwrap())
            .unwrap();
        let mut raw = vec![0; len];
        r.read_exact(&mut raw).unwrap();
        let gz = headers.iter().any(|(n, v)| n == "content-encoding" && v == "gzip");
        let body = if gz {
            let mut s = String::new();
            flate2::read::GzDecoder::new(&raw[..]).read_to_string(&mut s).unwrap();
            s
        } else {
            String::from_utf8(raw).unwrap()
        };
        posts.lock().unwrap().push(Post { target, headers, body });
        w.write_all(b"HTTP/1.1 204 No Content\r\ncontent-length: 0\r\n\r\n").unwrap();
    }
}

#[test]
fn an_http_collector_gets_ndjson_batches_plain_and_gzipped() {
    let dir = tempfile::tempdir().unwrap();
    let col = Collector::start();
    let o = Origin::start("a");
    o.put("/h/a.ts", Object::ok("abc"));
    let mut conf = Conf::new(dir.path(), &o);
    conf.extra = format!(
        "\n[[access_log.sink]]\nkind = \"http\"\nname = \"plain\"\nurl = \"http://{0}/plain?x=1\"\n\
         batch_lines = 2\ninterval = \"200ms\"\n\
         \n[[access_log.sink]]\nkind = \"http\"\nname = \"zipped\"\nurl = \"http://{0}/zipped\"\n\
         gzip = true\ninterval = \"200ms\"\n",
        col.addr
    );
    let reel = Reel::start(&conf);
    for i in 0..5 {
        assert_eq!(get(reel.data, &format!("/h/a.ts?n={i}")).status, 200);
    }
    let lines_of = |target: &str| -> Vec<Value> {
        col.posts().iter().filter(|p| p.target == target).flat_map(|p| p.lines()).collect()
    };
    eventually("5 lines at each collector path", || {
        (lines_of("/plain?x=1").len() == 5 && lines_of("/zipped").len() == 5).then_some(())
    });
    let posts = col.posts();
    for p in &posts {
        assert_eq!(p.header("content-type"), Some("application/x-ndjson"), "{p:?}");
        assert_eq!(p.header("host"), Some(col.addr.to_string().as_str()));
        match p.target.as_str() {
            "/plain?x=1" => {
                assert!(p.lines().len() <= 2, "batch_lines = 2: {p:?}");
                assert_eq!(p.header("content-encoding"), None);
            }
            "/zipped" => assert_eq!(p.header("content-encoding"), Some("gzip")),
            t => panic!("unexpected target {t}"),
        }
    }
    let mut paths: Vec<String> =
        lines_of("/zipped").iter().map(|v| v["path"].as_str().unwrap().to_owned()).collect();
    paths.sort();
    assert_eq!(paths, (0..5).map(|i| format!("/h/a.ts?n={i}")).collect::<Vec<_>>());
    let m = reel.metrics();
    assert_eq!(
        metric(&m, "reel_access_log_shipped_total{sink=\"plain\",kind=\"http\"}"),
        Some(5.0)
    );
    assert_eq!(
        metric(&m, "reel_access_log_dropped_total{sink=\"zipped\",kind=\"http\"}"),
        Some(0.0)
    );
}

#[test]
fn a_dead_or_silent_collector_costs_only_dropped_lines() {
    let dir = tempfile::tempdir().unwrap();
    // A port nobody listens on, and a collector that accepts and never answers.
    let closed = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let silent_addr = silent.local_addr().unwrap();
    let held = Arc::new(Mutex::new(Vec::new()));
    let h = held.clone();
    std::thread::spawn(move || {
        for s in silent.incoming().flatten() {
            h.lock().unwrap().push(s);
        }
    });
    let o = Origin::start("a");
    o.put("/d/a.ts", Object::ok("abc"));
    let mut conf = Conf::new(dir.path(), &o);
    conf.access_log = "flush_interval = \"50ms\"\nbuffer = \"4KiB\"\n".into();
    conf.extra = format!(
        "\n[[access_log.sink]]\nkind = \"http\"\nname = \"dead\"\nurl = \"http://{closed}/\"\n\
         interval = \"50ms\"\nretries = 1\ntimeout = \"300ms\"\n\
         \n[[access_log.sink]]\nkind = \"http\"\nname = \"silent\"\nurl = \"http://{silent_addr}/\"\n\
         interval = \"50ms\"\nretries = 1\ntimeout = \"300ms\"\n"
    );
    let reel = Reel::start(&conf);
    let mut c = Conn::open(reel.data).unwrap();
    for i in 0..400 {
        assert_eq!(c.get("127.0.0.1", &format!("/d/a.ts?n={i}")).unwrap().status, 200);
    }
    eventually("lines dropped by both sinks", || {
        let m = reel.metrics();
        let dropped = |s: &str| {
            metric(&m, &format!("reel_access_log_dropped_total{{sink=\"{s}\",kind=\"http\"}}"))
                .unwrap_or(0.0)
        };
        (dropped("dead") > 0.0 && dropped("silent") > 0.0).then_some(())
    });
    let h = eventually("/healthz details naming both sinks", || {
        let r = get(reel.data, "/healthz");
        let v = r.json();
        let details: Vec<String> = v["details"]
            .as_array()
            .map(|d| d.iter().filter_map(|s| s.as_str().map(str::to_owned)).collect())
            .unwrap_or_default();
        let names = |s: &str| {
            details
                .iter()
                .any(|d| d.starts_with(&format!("access_log sink \"{s}\" (http) dropping lines")))
        };
        (names("dead") && names("silent")).then_some((r.status, v))
    });
    assert_eq!(
        (h.0, h.1["status"].as_str()),
        (200, Some("ok")),
        "the verdict is untouched: {}",
        h.1
    );
    // The file sink got every line meanwhile, and requests kept being served.
    eventually("every line in the file", || {
        let l = raw_lines(&dir.path().join("access.log"));
        (l.iter().filter(|l| l.contains("\"path\":\"/d/a.ts?n=")).count() == 400).then_some(())
    });
    assert_eq!(c.get("127.0.0.1", "/d/a.ts").unwrap().status, 200);
    assert_eq!(
        metric(&reel.metrics(), "reel_access_log_dropped_total{sink=\"file\",kind=\"file\"}"),
        Some(0.0)
    );
}

#[test]
fn a_reload_changes_fields_and_sampling_without_reopening_the_sinks() {
    let dir = tempfile::tempdir().unwrap();
    let col = Collector::start();
    let o = Origin::start("a");
    o.put("/r/a.ts", Object::ok("abc"));
    let mut conf = Conf::new(dir.path(), &o);
    conf.extra = format!(
        "\n[[access_log.sink]]\nkind = \"http\"\nname = \"col\"\nurl = \"http://{}/r\"\nbatch_lines = 1\n",
        col.addr
    );
    let mut reel = Reel::start(&conf);
    assert_eq!(get(reel.data, "/r/a.ts?before").status, 200);
    let shipped = |reel: &Reel| {
        metric(&reel.metrics(), "reel_access_log_shipped_total{sink=\"col\",kind=\"http\"}")
            .unwrap_or(0.0)
    };
    eventually("the first line shipped", || (shipped(&reel) >= 1.0).then_some(()));
    let before = col.posts().iter().flat_map(|p| p.lines()).find(|v| v["path"] == "/r/a.ts?before");
    assert!(before.is_some_and(|v| v["ua"].is_string() && v["time"].is_string()));

    let mut next = conf.clone();
    next.access_log = "flush_interval = \"100ms\"\nfields = [\"path\", \"status\"]\n\
                       \n[access_log.sample]\n\"4xx\" = 0\n"
        .into();
    reel.rewrite(&next);
    let st = reel.sighup_reload();
    assert_eq!(st["reload"]["last_ok"], true, "{st}");
    assert_eq!(get(reel.data, "/r/a.ts?after").status, 200);
    assert_eq!(get(reel.data, "/r/missing.ts").status, 404);
    let after = eventually("the line after the reload", || {
        col.posts().iter().flat_map(|p| p.lines()).find(|v| v["path"] == "/r/a.ts?after")
    });
    assert_eq!(after, serde_json::json!({"path": "/r/a.ts?after", "status": 200}));
    // The same sink (its count went on), and the 404 was sampled out of both sinks.
    assert!(shipped(&reel) >= 2.0);
    assert!(col.posts().iter().flat_map(|p| p.lines()).all(|v| v["path"] != "/r/missing.ts"));
    eventually("the new shape in the file too", || {
        let file = raw_lines(&dir.path().join("access.log"));
        file.contains(&r#"{"path":"/r/a.ts?after","status":200}"#.to_owned()).then_some(())
    });
}
