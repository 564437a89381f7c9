//! The access log: JSON lines with the documented fields, reopening after a rename on
//! SIGUSR1 (logrotate's `postrotate`), and every line written before exit on SIGTERM.

use serde_json::Value;

use crate::common::*;

fn lines(path: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

#[test]
fn json_lines_and_reopen_on_sigusr1() {
    let dir = tempfile::tempdir().unwrap();
    let o = Origin::start("a");
    o.put("/al/seg.ts", Object::ok("abc"));
    let reel = Reel::start(&Conf::new(dir.path(), &o));
    let log = dir.path().join("access.log");
    let r = request(reel.data, "GET", "127.0.0.1", "/al/seg.ts?x=1", &[("user-agent", "t/1")]);
    assert_eq!(r.status, 200);
    let l = eventually("the line in the access log", || {
        lines(&log).into_iter().find(|v| v["path"] == "/al/seg.ts?x=1")
    });
    assert_eq!(l["method"], "GET");
    assert_eq!(l["host"], "127.0.0.1");
    assert_eq!(l["status"], 200);
    assert_eq!(l["cache"], "miss");
    assert_eq!(l["client"], "127.0.0.1");
    assert_eq!(l["ua"], "t/1");
    assert!(l["bytes"].as_u64().unwrap() >= 3);
    assert!(l["origin_ms"].is_number() && l["total_ms"].is_number(), "{l}");
    assert!(l["time"].as_str().unwrap().ends_with('Z'));

    // logrotate: rename, then SIGUSR1; new lines go to a new file at the old path.
    let rotated = dir.path().join("access.log.1");
    std::fs::rename(&log, &rotated).unwrap();
    reel.signal(libc::SIGUSR1);
    reel.logs.wait_for("the reopen", |v| message(v) == "reopening the access log");
    eventually("lines in the new file", || {
        // Requests until one lands after the writer reopened.
        assert_eq!(get(reel.data, "/al/seg.ts").status, 200);
        lines(&log).into_iter().find(|v| v["path"] == "/al/seg.ts" && v["cache"] == "hit")
    });
    assert!(lines(&rotated).iter().any(|v| v["path"] == "/al/seg.ts?x=1"));
}

#[test]
fn sigterm_waits_until_every_line_is_written() {
    use std::io::{ErrorKind, Read};
    use std::os::unix::fs::OpenOptionsExt;

    let dir = tempfile::tempdir().unwrap();
    let o = Origin::start("a");
    // The access log is a pipe that the test reads only after SIGTERM: the writer is still
    // blocked on it when the workers have stopped, as it would be on a slow disk.
    let log = dir.path().join("access.log");
    rustix::fs::mkfifoat(rustix::fs::CWD, &log, rustix::fs::Mode::from_raw_mode(0o600)).unwrap();
    let mut reader =
        std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(&log).unwrap();
    let mut conf = Conf::new(dir.path(), &o);
    conf.access_log = "flush_interval = \"1s\"\nbuffer = \"256KiB\"\n".into();
    let mut reel = Reel::start(&conf);

    // Far more than a pipe holds (64 KiB), far fewer batches than the writer's queue.
    let target = format!("/healthz?pad={}", "p".repeat(1000));
    let n = 400;
    let mut client = Conn::open(reel.data).unwrap();
    for _ in 0..n {
        assert_eq!(client.get("127.0.0.1", &target).unwrap().status, 200);
    }
    drop(client);
    reel.signal(libc::SIGTERM);
    // Longer than any fixed grace period a shutdown might sleep instead of waiting.
    std::thread::sleep(std::time::Duration::from_secs(1));
    let mut text = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    let deadline = std::time::Instant::now() + PATIENCE;
    loop {
        match reader.read(&mut buf) {
            Ok(0) => break, // every writer closed: the process is gone
            Ok(k) => text.extend_from_slice(&buf[..k]),
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                assert!(std::time::Instant::now() < deadline, "the log never ended");
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            Err(e) => panic!("{e}"),
        }
    }
    assert!(reel.wait_exit().success());
    let text = String::from_utf8(text).unwrap();
    // A line cut off by an early exit does not parse and does not count.
    let lines: Vec<Value> = text.lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
    let logged = lines.iter().filter(|v| v["path"].as_str() == Some(target.as_str())).count();
    assert_eq!(logged, n, "every request of the session is in the log");
    assert_eq!(lines.len(), text.lines().count(), "every line is whole");
}

/// Sends `raw` on a new connection; returns the status of the answer.
fn raw_status(addr: std::net::SocketAddr, raw: &[u8]) -> u16 {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(PATIENCE)).unwrap();
    let _ = s.write_all(raw);
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    String::from_utf8_lossy(&out)
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0)
}

#[test]
fn refused_requests_get_a_line_with_what_was_known() {
    let dir = tempfile::tempdir().unwrap();
    let o = Origin::start("a");
    let mut conf = Conf::new(dir.path(), &o);
    conf.http = "header_timeout = \"1s\"\nmax_request_line = \"1KiB\"\nmax_headers = 10\n\
                 max_body = \"1KiB\"\n"
        .into();
    let reel = Reel::start(&conf);
    let log = dir.path().join("access.log");

    let long = format!("GET /{} HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n", "a".repeat(4000));
    assert_eq!(raw_status(reel.data, long.as_bytes()), 414);
    let hostile = b"GET /x\"y\\\xff HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\n";
    assert_eq!(raw_status(reel.data, hostile), 400);
    assert_eq!(raw_status(reel.data, b"GET /v HTTP/3.0\r\nHost: 127.0.0.1\r\n\r\n"), 505);
    assert_eq!(raw_status(reel.data, b"GET /half HTTP/1.1\r\nHost: 127"), 408);
    let many: String = (0..20).map(|i| format!("x-h{i}: v\r\n")).collect();
    let many = format!("GET /many HTTP/1.1\r\nHost: 127.0.0.1\r\n{many}\r\n");
    assert_eq!(raw_status(reel.data, many.as_bytes()), 431);
    let big = b"POST /big HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 5000\r\n\r\n";
    assert_eq!(raw_status(reel.data, big), 413);

    let refused = |status: u16| {
        eventually(&format!("the {status} line"), || {
            lines(&log).into_iter().find(|v| v["status"] == status)
        })
    };
    let l = refused(414);
    assert_eq!(l["client"], "127.0.0.1");
    assert_eq!(l["cache"], "local");
    assert!(l["bytes"].as_u64().unwrap() > 0, "{l}");
    let req = l["request"].as_str().unwrap();
    assert!(req.starts_with("GET /aaaa") && req.len() <= 512, "{req}");
    assert_eq!(l["error"], "request line too long");

    let l = refused(400);
    assert_eq!(l["request"], "GET /x\"y\\\\xff HTTP/1.1", "escaped: {l}");
    assert_eq!(l["error"], "malformed request line or line ending");
    let l = refused(505);
    assert_eq!(
        (l["request"].as_str(), l["error"].as_str()),
        (Some("GET /v HTTP/3.0"), Some("unsupported HTTP version"))
    );
    let l = refused(408);
    assert_eq!(
        (l["request"].as_str(), l["error"].as_str()),
        (Some("GET /half HTTP/1.1"), Some("header timeout"))
    );
    let l = refused(431);
    assert_eq!(l["request"], "GET /many HTTP/1.1", "{l}");
    assert!(l["error"].as_str().is_some_and(|e| !e.is_empty()), "{l}");
    let l = refused(413);
    assert_eq!(l["request"], "POST /big HTTP/1.1", "{l}");
    assert!(l["error"].as_str().is_some_and(|e| !e.is_empty()), "{l}");

    // A request that was parsed keeps the usual fields and has neither.
    assert_eq!(get(reel.data, "/healthz").status, 200);
    let ok = eventually("the healthz line", || {
        lines(&log).into_iter().find(|v| v["path"] == "/healthz")
    });
    assert!(ok.get("request").is_none() && ok.get("error").is_none(), "{ok}");
}

/// A request whose body stalls past `body_timeout` gets 408, made by the codec in place of
/// the handler's answer: it is counted and logged as `local`, never as a cache hit (which
/// inflated the hit ratio `/healthz` reports).
#[test]
fn a_408_for_a_stalled_body_is_local_not_a_hit() {
    let dir = tempfile::tempdir().unwrap();
    let origin = Origin::start("o");
    origin.put("/up", Object::ok("stored"));
    let mut conf = Conf::new(dir.path(), &origin);
    conf.http = "body_timeout = \"1s\"\n".into();
    let reel = Reel::start(&conf);
    let raw = b"POST /up HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\n0123456789";
    assert_eq!(raw_status(reel.data, raw), 408);
    eventually("the 408 counted", || {
        let m = reel.metrics();
        metric(&m, "reel_requests_total{status=\"4xx\",cache=\"local\"}").filter(|&n| n >= 1.0)
    });
    let hits = metric(&reel.metrics(), "reel_requests_total{status=\"4xx\",cache=\"hit\"}");
    assert_eq!(hits.unwrap_or(0.0), 0.0, "a 408 counted as a hit");
    let log = dir.path().join("access.log");
    let line =
        eventually("the 408 logged", || lines(&log).into_iter().find(|v| v["status"] == 408));
    assert_eq!(line["cache"], "local");
}

/// A cache hit answered before its request body arrived (the handler never reads it) and
/// whose body then stalls past `body_timeout` gets a 408 too, where the connection used to
/// be closed without an answer and logged with status 0 as a `hit`: the 408 is counted and
/// logged as `local`, and no hit is counted for it.
#[test]
fn a_stalled_body_on_a_hit_gets_a_local_408_not_a_silent_close() {
    let dir = tempfile::tempdir().unwrap();
    let origin = Origin::start("o");
    origin.put("/stalled/hit.ts", Object::ok("stored"));
    let mut conf = Conf::new(dir.path(), &origin);
    conf.http = "body_timeout = \"1s\"\n".into();
    let reel = Reel::start(&conf);
    eventually("the object stored", || {
        (get(reel.data, "/stalled/hit.ts").cache_status() == "reel; hit").then_some(())
    });
    // The one hit so far is counted once its worker has recorded it, a moment after the
    // answer: wait for it, so the count below starts from a settled figure.
    let hits_before = eventually("the hit counted", || {
        metric(&reel.metrics(), "reel_requests_total{status=\"2xx\",cache=\"hit\"}")
            .filter(|&n| n >= 1.0)
    });
    let raw = b"GET /stalled/hit.ts HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\n0123";
    assert_eq!(raw_status(reel.data, raw), 408);
    eventually("the 408 counted as local", || {
        let m = reel.metrics();
        metric(&m, "reel_requests_total{status=\"4xx\",cache=\"local\"}").filter(|&n| n >= 1.0)
    });
    let m = reel.metrics();
    for class in ["other", "4xx"] {
        let hits = metric(&m, &format!("reel_requests_total{{status=\"{class}\",cache=\"hit\"}}"));
        assert_eq!(hits.unwrap_or(0.0), 0.0, "{class} hits:\n{m}");
    }
    let hits_after = metric(&m, "reel_requests_total{status=\"2xx\",cache=\"hit\"}");
    assert_eq!(hits_after, Some(hits_before), "the refused request counted as a 2xx hit");
    let log = dir.path().join("access.log");
    let line = eventually("the 408 logged", || {
        lines(&log).into_iter().find(|v| v["status"] == 408 && v["path"] == "/stalled/hit.ts")
    });
    assert_eq!(line["cache"], "local", "{line}");
    assert!(!lines(&log).iter().any(|v| v["status"] == 0), "a line with status 0");
}
