//! Live reload by SIGHUP and `POST /admin/reload`: valid, invalid, listener changes,
//! "needs restart" keys, HTTP limits, the connection cap, origin pools kept across reloads,
//! and many reloads under keep-alive load.

use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use serde_json::Value;

use crate::common::*;

fn listener_from_status(st: &Value, name: &str) -> Option<SocketAddr> {
    st["listeners"]
        .as_array()?
        .iter()
        .find(|l| l["name"] == name)
        .and_then(|l| l["address"].as_str()?.parse().ok())
}

#[test]
fn valid_reload_applies_a_cache_rule_and_an_origin_change() {
    let dir = tempfile::tempdir().unwrap();
    let a = Origin::start("a");
    a.put("/r/doc.txt", Object::ok("from a").header("etag", "\"1\""));
    let mut conf = Conf::new(dir.path(), &a);
    let mut reel = Reel::start(&conf);

    // No rule for *.txt and no freshness from the origin: requests keep going to the origin
    // (a request may still join a fill that has not finished, so look for a later one).
    let r = get(reel.data, "/r/doc.txt");
    assert_eq!((r.status, r.text().as_str()), (200, "from a"));
    let first = a.hits("/r/doc.txt");
    eventually("a later request to reach the origin", || {
        let r = get(reel.data, "/r/doc.txt");
        assert_eq!((r.status, r.text().as_str()), (200, "from a"));
        assert!(!r.cache_status().contains("hit"), "{}", r.cache_status());
        (a.hits("/r/doc.txt") > first).then_some(())
    });

    // SIGHUP with a rule that makes *.txt fresh for an hour.
    conf.rules.push_str("\n[[cache.rule]]\nmatch = \"*.txt\"\nttl = \"1h\"\noverride = true\n");
    reel.rewrite(&conf);
    let st = reel.sighup_reload();
    assert_eq!(st["reload"]["last_ok"], true, "{st}");
    assert_eq!(st["config"]["generation"], 2);
    eventually("a hit under the new rule", || {
        let r = get(reel.data, "/r/doc.txt");
        assert_eq!(r.status, 200);
        r.cache_status().contains("hit").then_some(())
    });
    let after_rule = a.hits("/r/doc.txt");
    for _ in 0..5 {
        let r = get(reel.data, "/r/doc.txt");
        assert!(r.cache_status().contains("hit"), "{}", r.cache_status());
    }
    assert_eq!(a.hits("/r/doc.txt"), after_rule, "hits do not reach the origin");

    // POST /admin/reload with another origin.
    let b = Origin::start("b");
    b.put("/r/new.txt", Object::ok("from b"));
    conf.origins = vec![b.addr];
    reel.rewrite(&conf);
    let r = reel.admin_req("POST", "/admin/reload");
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["reloaded"], true);
    let r = get(reel.data, "/r/new.txt");
    assert_eq!((r.status, r.text().as_str()), (200, "from b"));
    assert_eq!(a.hits("/r/new.txt"), 0);
    assert_eq!(b.hits("/r/new.txt"), 1);
    let m = reel.metrics();
    assert_eq!(metric(&m, "reel_reloads_total"), Some(2.0));
    assert_eq!(metric(&m, "reel_reload_last_success"), Some(1.0));
}

#[test]
fn invalid_reload_keeps_the_running_config_and_reports_where() {
    let dir = tempfile::tempdir().unwrap();
    let a = Origin::start("a");
    a.put("/i/seg.ts", Object::ok("seg"));
    let mut conf = Conf::new(dir.path(), &a);
    let mut reel = Reel::start(&conf);
    assert_eq!(get(reel.data, "/i/seg.ts").status, 200);
    let before = reel.status();

    let mut broken = conf.clone();
    broken.negative_ttl = "soon".into();
    let text = broken.render();
    let line = text.lines().position(|l| l.starts_with("negative_ttl")).unwrap() + 1;
    reel.rewrite(&broken);
    let file = conf.path().display().to_string();
    let expect = format!("{file}:{line}:");

    let st = reel.sighup_reload();
    assert_eq!(st["reload"]["last_ok"], false, "{st}");
    let err = st["reload"]["last_error"].as_str().unwrap_or_default();
    assert!(err.contains(&expect) && err.contains("cache.negative_ttl"), "{err}");
    assert_eq!(st["config"]["generation"], before["config"]["generation"]);
    assert_eq!(st["config"]["hash"], before["config"]["hash"]);

    let r = reel.admin_req("POST", "/admin/reload");
    assert_eq!(r.status, 400, "{}", r.text());
    let j = r.json();
    assert_eq!(j["reloaded"], false);
    assert!(j["error"].as_str().unwrap_or_default().contains(&expect), "{j}");

    // Still serving with the old config.
    let r = get(reel.data, "/i/seg.ts");
    assert_eq!(r.status, 200);
    assert!(r.cache_status().contains("hit"));
    assert_eq!(get(reel.data, "/healthz").status, 200);
    let m = reel.metrics();
    assert_eq!(metric(&m, "reel_reload_failures_total"), Some(2.0));
    assert_eq!(metric(&m, "reel_reload_last_success"), Some(0.0));

    // Fixed again: the error clears.
    conf.negative_ttl = "1s".into();
    reel.rewrite(&conf);
    let r = reel.admin_req("POST", "/admin/reload");
    assert_eq!(r.status, 200, "{}", r.text());
    let st = reel.status();
    assert_eq!(st["reload"]["last_ok"], true);
    assert!(st["reload"]["last_error"].is_null());
}

#[test]
fn listener_changes_bind_and_close_and_restart_keys_are_reported() {
    let dir = tempfile::tempdir().unwrap();
    let a = Origin::start("a");
    let mut conf = Conf::new(dir.path(), &a);
    let mut reel = Reel::start(&conf);
    let workers = reel.workers();

    conf.listeners.push(("extra".into(), "127.0.0.1:0".into()));
    conf.store_size = "128MiB".into();
    conf.shutdown_timeout = "25s".into();
    reel.rewrite(&conf);
    let r = reel.admin_req("POST", "/admin/reload");
    assert_eq!(r.status, 200, "{}", r.text());
    let st = reel.status();
    let extra = listener_from_status(&st, "extra").expect("the new listener in /status");
    assert_ne!(extra.port(), 0);
    let logged = reel.logs.wait_for("the new listener logged", |v| {
        message(v) == "listening" && v["fields"]["listener"] == "extra"
    });
    assert_eq!(addr_field(&logged, "address"), extra);
    assert_eq!(get(extra, "/healthz").status, 200);
    let restart: Vec<&str> = st["reload"]["needs_restart"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|v| v.as_str())
        .collect();
    assert!(restart.contains(&"store.size"), "{restart:?}");
    assert!(restart.contains(&"server.shutdown_timeout"), "{restart:?}");
    assert!(!restart.iter().any(|k| k.starts_with("listener")), "applied live: {restart:?}");
    let sockets = std::fs::read_to_string("/proc/net/tcp").unwrap();
    let port_hex = format!(":{:04X} ", extra.port());
    let n = sockets.lines().filter(|l| l.contains(&port_hex) && l.contains(" 0A ")).count();
    assert_eq!(n, workers, "one socket per worker for the new listener");

    // An open connection on the old listener keeps working across the change.
    let mut kept = Conn::open(reel.data).unwrap();
    assert_eq!(kept.get("127.0.0.1", "/healthz").unwrap().status, 200);

    conf.listeners.retain(|(n, _)| n != "extra");
    reel.rewrite(&conf);
    let r = reel.admin_req("POST", "/admin/reload");
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(listener_from_status(&reel.status(), "extra").is_none());
    eventually("the removed listener to close", || {
        TcpStream::connect(extra).is_err().then_some(())
    });
    assert_eq!(kept.get("127.0.0.1", "/healthz").unwrap().status, 200);
    assert_eq!(get(reel.data, "/healthz").status, 200);
}

#[test]
fn http_limits_apply_to_new_connections_after_reload() {
    let dir = tempfile::tempdir().unwrap();
    let a = Origin::start("a");
    let mut conf = Conf::new(dir.path(), &a);
    let mut reel = Reel::start(&conf);
    let long = format!("/{}.ts", "l".repeat(3000));
    assert_eq!(get(reel.data, &long).status, 404, "origin 404: the line fits 8KiB");
    conf.http = "max_request_line = \"1KiB\"\n".into();
    reel.rewrite(&conf);
    assert_eq!(reel.admin_req("POST", "/admin/reload").status, 200);
    assert_eq!(get(reel.data, &long).status, 414);
    assert_eq!(get(reel.data, "/short.ts").status, 404);
}

#[test]
fn fifty_reloads_under_keep_alive_load_fail_no_request() {
    let dir = tempfile::tempdir().unwrap();
    let a = Origin::start("a");
    a.put("/load/seg.ts", Object::ok(vec![b's'; 16 * 1024]));
    let mut conf = Conf::new(dir.path(), &a);
    let mut reel = Reel::start(&conf);
    let addr = reel.data;
    let stop = Arc::new(AtomicBool::new(false));
    let ok = Arc::new(AtomicU64::new(0));
    let mut clients = Vec::new();
    for i in 0..4 {
        let (stop, ok) = (stop.clone(), ok.clone());
        clients.push(std::thread::spawn(move || -> Vec<String> {
            let mut failures = Vec::new();
            let mut c = Conn::open(addr).expect("connect");
            while !stop.load(Ordering::Relaxed) {
                let target = if i % 2 == 0 { "/load/seg.ts" } else { "/healthz" };
                match c.get("127.0.0.1", target) {
                    Ok(r) if r.status == 200 => {
                        if target == "/load/seg.ts" && r.body.len() != 16 * 1024 {
                            failures.push(format!("short body {}", r.body.len()));
                        }
                        ok.fetch_add(1, Ordering::Relaxed);
                    }
                    Ok(r) => failures.push(format!("{target}: status {}", r.status)),
                    Err(e) => {
                        failures.push(format!("{target}: {e}"));
                        // Keep measuring on a fresh connection.
                        match Conn::open(addr) {
                            Ok(n) => c = n,
                            Err(e) => {
                                failures.push(format!("reconnect: {e}"));
                                return failures;
                            }
                        }
                    }
                }
            }
            failures
        }));
    }
    eventually("load to start", || (ok.load(Ordering::Relaxed) > 20).then_some(()));
    for i in 0..50u32 {
        // Each reload changes something live, so every one is a new generation.
        conf.negative_ttl = format!("{}s", i + 2);
        conf.rules =
            format!("[[cache.rule]]\nmatch = \"*.ts\"\nttl = \"{}m\"\noverride = true\n", 60 + i);
        reel.rewrite(&conf);
        if i % 2 == 0 {
            let st = reel.sighup_reload();
            assert_eq!(st["reload"]["last_ok"], true, "{st}");
        } else {
            let r = reel.admin_req("POST", "/admin/reload");
            assert_eq!(r.status, 200, "{}", r.text());
        }
    }
    let served_during = ok.load(Ordering::Relaxed);
    stop.store(true, Ordering::Relaxed);
    let failures: Vec<String> = clients.into_iter().flat_map(|c| c.join().unwrap()).collect();
    assert!(failures.is_empty(), "failed requests: {failures:?}");
    assert!(served_during > 20);
    let st = reel.status();
    assert_eq!(st["config"]["generation"], 51);
    assert_eq!(st["reload"]["attempts"], 50);
    assert_eq!(st["reload"]["failures"], 0);
}

#[test]
fn log_level_changes_with_a_reload() {
    let dir = tempfile::tempdir().unwrap();
    let a = Origin::start("a");
    let mut conf = Conf::new(dir.path(), &a);
    let mut reel = Reel::start(&conf);
    let drained =
        |reel: &Reel| reel.logs.with_message("drain state changed by the admin API").len();

    conf.log_level = "warn".into();
    reel.rewrite(&conf);
    assert_eq!(reel.admin_req("POST", "/admin/reload").status, 200);
    assert_eq!(reel.admin_req("POST", "/admin/drain").status, 200);
    // A warning after the drain marks the point up to which the log has been read.
    conf.store_size = "96MiB".into();
    reel.rewrite(&conf);
    assert_eq!(reel.admin_req("POST", "/admin/reload").status, 200);
    reel.logs.wait_for("the restart-key warning", |v| {
        v["fields"]["key"] == "store.size" && v["level"] == "WARN"
    });
    assert_eq!(drained(&reel), 0, "info lines are filtered out at warn");

    conf.log_level = "info".into();
    reel.rewrite(&conf);
    assert_eq!(reel.admin_req("POST", "/admin/reload").status, 200);
    assert_eq!(reel.admin_req("POST", "/admin/resume").status, 200);
    eventually("info lines again", || (drained(&reel) == 1).then_some(()));
}

#[test]
fn origin_connections_survive_a_reload_that_leaves_the_origins_alone() {
    let dir = tempfile::tempdir().unwrap();
    let a = Origin::start("a");
    // Not storable: every request goes to the origin.
    a.put("/p/obj", Object::ok("x").header("cache-control", "no-store"));
    let mut conf = Conf::new(dir.path(), &a);
    let mut reel = Reel::start(&conf);
    // One keep-alive client connection stays on one worker, which pools one origin connection.
    let mut client = Conn::open(reel.data).unwrap();
    let mut fetch = |n: usize| {
        for _ in 0..n {
            let r = client.get("127.0.0.1", "/p/obj").unwrap();
            assert_eq!((r.status, r.text().as_str()), (200, "x"));
        }
    };
    fetch(5);
    let before = a.connections();
    assert_eq!(before, 1, "the worker reuses its origin connection");

    // A reload that changes only the log level keeps the worker's pool.
    conf.log_level = "warn".into();
    reel.rewrite(&conf);
    let st = reel.sighup_reload();
    assert_eq!(st["reload"]["last_ok"], true, "{st}");
    fetch(5);
    assert_eq!(a.connections(), before, "no new origin connection after the reload");

    // Changing the origin group gives the worker a new pool (and so a new connection).
    let text = conf.render().replace("connect_timeout = \"5s\"", "connect_timeout = \"6s\"");
    std::fs::write(conf.path(), text).unwrap();
    let st = reel.sighup_reload();
    assert_eq!(st["reload"]["last_ok"], true, "{st}");
    fetch(5);
    assert_eq!(a.connections(), before + 1, "a changed origin group starts a new pool");
}

#[test]
fn the_connection_cap_closes_at_accept_and_changes_with_a_reload() {
    let dir = tempfile::tempdir().unwrap();
    let a = Origin::start("a");
    let mut conf = Conf::new(dir.path(), &a);
    conf.http = "max_connections_per_worker = 1\n".into();
    let mut reel = Reel::start(&conf);
    let workers = reel.workers();
    let addr = reel.data;
    // Connections that stay open, each having had one answer.
    let open = |n: usize| -> Vec<(Conn, Resp)> {
        (0..n)
            .map(|_| {
                let mut c = Conn::open(addr).expect("connect");
                let r = c.get("127.0.0.1", "/healthz").expect("an answer, not a wait");
                (c, r)
            })
            .collect()
    };
    // One more than workers at a cap of 1: at least one is refused at accept, with a
    // 503 that says why (never left waiting in the backlog).
    let first = open(workers + 1);
    let refused: Vec<&Resp> = first.iter().map(|(_, r)| r).filter(|r| r.status == 503).collect();
    assert!(!refused.is_empty(), "the cap of 1 holds");
    assert!(first.iter().all(|(_, r)| r.status == 200 || r.status == 503));
    for r in &refused {
        assert_eq!(r.header("connection"), Some("close"));
        assert_eq!(r.json()["status"], "overloaded");
        assert!(r.text().contains("max_connections_per_worker"), "{}", r.text());
    }
    let m = reel.metrics();
    let total: f64 = (0..workers)
        .filter_map(|w| metric(&m, &format!("reel_connections_refused_total{{worker=\"{w}\"}}")))
        .sum();
    assert_eq!(total as usize, refused.len(), "{m}");

    conf.http = format!("max_connections_per_worker = {}\n", workers + 2);
    reel.rewrite(&conf);
    let r = reel.admin_req("POST", "/admin/reload");
    assert_eq!(r.status, 200, "{}", r.text());
    let restart = &r.json()["status"]["needs_restart"];
    assert_eq!(restart.as_array().map(Vec::len), Some(0), "applied live: {restart}");
    let more = open(workers + 1);
    assert!(more.iter().all(|(_, r)| r.status == 200), "the raised cap admits them");
    drop((first, more));
}

/// Issue 26.1: a reload makes the checks `reel check` makes (from the same function): an
/// `http.reserved_fds` the descriptor limit cannot hold, or a worker CPU this process may
/// not run on, is refused with the key's file, line and column, and nothing changes.
#[test]
fn a_reload_refuses_what_check_refuses_at_the_key_position() {
    let dir = tempfile::tempdir().unwrap();
    let a = Origin::start("a");
    let conf = Conf::new(dir.path(), &a);
    let reel = Reel::start(&conf);
    let before = reel.status();
    let file = conf.path().display().to_string();
    let mut reserved = conf.clone();
    // More than the kernel lets any process open (fs.nr_open is at most 2^30).
    reserved.http = "reserved_fds = 2000000000\n".into();
    let mut cpu = conf.clone();
    cpu.raw = Some(conf.render().replace("workers = \"auto\"", "workers = [100000]"));
    for (broken, key) in [(reserved, "http.reserved_fds"), (cpu, "cores.workers")] {
        broken.write();
        let text = broken.render();
        let needle = key.rsplit('.').next().unwrap();
        let line = text.lines().position(|l| l.starts_with(needle)).unwrap() + 1;
        let st = reel.sighup_reload();
        assert_eq!(st["reload"]["last_ok"], false, "{st}");
        let err = st["reload"]["last_error"].as_str().unwrap_or_default();
        assert!(err.contains(&format!("{file}:{line}:")) && err.contains(key), "{key}: {err}");
        assert_eq!(st["config"]["generation"], before["config"]["generation"]);
        // `reel check` says the same.
        let out = std::process::Command::new(BIN)
            .arg("check")
            .arg("--config")
            .arg(conf.path())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(64));
        assert!(String::from_utf8_lossy(&out.stderr).contains(&format!("{file}:{line}:")));
    }
    assert_eq!(get(reel.data, "/healthz").status, 200);
}
