//! The admin listener: purge (exact, prefix, soft) seen by every worker, the bearer
//! token (inline and from the environment), and the metric families.

use crate::common::*;

/// Keep-alive connections until every worker holds at least one of them.
fn conns_on_every_worker(reel: &Reel) -> Vec<Conn> {
    let workers = reel.workers();
    let mut conns = Vec::new();
    for _ in 0..64 {
        let mut c = Conn::open(reel.data).unwrap();
        assert_eq!(c.get("127.0.0.1", "/healthz").unwrap().status, 200);
        conns.push(c);
        let st = reel.status();
        let busy = st["workers"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|w| w["open_connections"].as_u64().unwrap_or(0) > 0)
            .count();
        if busy == workers && conns.len() >= 2 {
            return conns;
        }
    }
    panic!("64 connections did not reach all {workers} workers");
}

fn bodies(conns: &mut [Conn], path: &str) -> Vec<String> {
    conns
        .iter_mut()
        .map(|c| {
            let r = c.get("127.0.0.1", path).unwrap();
            assert_eq!(r.status, 200, "{path}");
            r.text()
        })
        .collect()
}

#[test]
fn purge_exact_prefix_and_soft_on_every_worker() {
    let dir = tempfile::tempdir().unwrap();
    let o = Origin::start("a");
    for p in ["/p/one.ts", "/p/dir/a.ts", "/p/dir/b.ts"] {
        o.put(p, Object::ok("v1"));
    }
    o.put("/p/soft.ts", Object::ok("v1").header("etag", "\"s1\""));
    let reel = Reel::start(&Conf::new(dir.path(), &o));
    let mut conns = conns_on_every_worker(&reel);
    let n = conns.len();
    let all = |s: &str| vec![s.to_string(); n];
    for p in ["/p/one.ts", "/p/dir/a.ts", "/p/dir/b.ts", "/p/soft.ts"] {
        assert_eq!(bodies(&mut conns, p), all("v1"));
        assert_eq!(o.hits(p), 1, "{p} is cached after the first request");
    }
    for p in ["/p/one.ts", "/p/dir/a.ts", "/p/dir/b.ts"] {
        o.put(p, Object::ok("v2"));
    }
    o.put("/p/soft.ts", Object::ok("v2").header("etag", "\"s2\""));

    // Exact (percent-encoded URL): only that object.
    let r = reel.admin_req("POST", "/admin/purge?url=http%3A%2F%2F127.0.0.1%2Fp%2Fone.ts");
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(r.json()["purged"].as_u64().unwrap() >= 1, "{}", r.text());
    assert_eq!(bodies(&mut conns, "/p/one.ts"), all("v2"));
    assert_eq!(bodies(&mut conns, "/p/dir/a.ts"), all("v1"), "not purged");

    // Prefix: everything under /p/dir/.
    let r = reel.admin_req("POST", "/admin/purge?url=http://127.0.0.1/p/dir/&prefix=1");
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["purged"].as_u64(), Some(2), "{}", r.text());
    assert_eq!(bodies(&mut conns, "/p/dir/a.ts"), all("v2"));
    assert_eq!(bodies(&mut conns, "/p/dir/b.ts"), all("v2"));

    // Soft: the object stays but must be revalidated, which finds the new version.
    let r = reel.admin_req("POST", "/admin/purge?url=http://127.0.0.1/p/soft.ts&soft=1");
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(bodies(&mut conns, "/p/soft.ts"), all("v2"));
    assert!(o.conditional_hits("/p/soft.ts") >= 1, "a soft purge revalidates");

    // Bad requests.
    assert_eq!(reel.admin_req("POST", "/admin/purge").status, 400);
    assert_eq!(reel.admin_req("POST", "/admin/purge?url=http://unknown.invalid/x").status, 400);
}

/// Purge takes the URL as a viewer types it for the site: with the listener's port, any
/// case, `https://` or no scheme, a fragment; the cache key drops the port and lowercases
/// the host, and so does the purge.
#[test]
fn purge_takes_the_url_as_a_viewer_types_it() {
    let dir = tempfile::tempdir().unwrap();
    let o = Origin::start("a");
    let paths = ["/u/a.ts", "/u/b.ts", "/u/c.ts", "/u/dir/d.ts"];
    for p in paths {
        o.put(p, Object::ok("v1"));
    }
    let reel = Reel::start(&Conf::new(dir.path(), &o));
    let port = reel.data.port();
    let viewer_host = format!("localhost:{port}");
    for p in paths {
        assert_eq!(request(reel.data, "GET", &viewer_host, p, &[]).text(), "v1");
        eventually("the object stored", || {
            let r = request(reel.data, "GET", &viewer_host, p, &[]);
            (r.cache_status() == "reel; hit").then_some(())
        });
        o.put(p, Object::ok("v2"));
    }
    for (url, path) in [
        (format!("http://localhost:{port}/u/a.ts"), "/u/a.ts"),
        (format!("https%3A%2F%2FLocalHost%3A{port}%2Fu%2Fb.ts%23t%3D10"), "/u/b.ts"),
        (format!("localhost:{port}/u/c.ts"), "/u/c.ts"),
        (format!("http://localhost:{port}/u/dir/&prefix=1"), "/u/dir/d.ts"),
    ] {
        let r = reel.admin_req("POST", &format!("/admin/purge?url={url}"));
        assert_eq!(r.status, 200, "{url}: {}", r.text());
        assert_eq!(r.json()["purged"].as_u64(), Some(1), "{url}: {}", r.text());
        let r = request(reel.data, "GET", &viewer_host, path, &[]);
        assert_eq!(
            (r.text().as_str(), r.cache_status()),
            ("v2", "reel; fwd=miss; stored"),
            "{url}"
        );
    }
    let r = reel.admin_req("POST", "/admin/purge?url=ftp://localhost/u/a.ts");
    assert_eq!(r.status, 400, "{}", r.text());
}

#[test]
fn admin_token_inline() {
    let dir = tempfile::tempdir().unwrap();
    let o = Origin::start("a");
    let mut conf = Conf::new(dir.path(), &o);
    conf.admin = "token = \"s3cret\"\n".into();
    let mut reel = Reel::start(&conf);
    let r = request(reel.admin, "GET", "127.0.0.1", "/status", &[]);
    assert_eq!(r.status, 401);
    assert_eq!(r.header("www-authenticate"), Some("Bearer"));
    let r = request(reel.admin, "GET", "127.0.0.1", "/metrics", &[("authorization", "Bearer no")]);
    assert_eq!(r.status, 401);
    let r = request(reel.admin, "POST", "127.0.0.1", "/admin/drain", &[]);
    assert_eq!(r.status, 401);
    assert_eq!(get(reel.data, "/healthz").status, 200, "not drained by the refused request");
    reel.token = Some("s3cret".into());
    assert_eq!(reel.admin_req("GET", "/status").status, 200);
    assert_eq!(reel.admin_req("GET", "/metrics").status, 200);
    // The data listeners never ask for the token.
    assert_eq!(get(reel.data, "/healthz").status, 200);

    // A reload changes the token.
    conf.admin = "token = \"other\"\n".into();
    reel.rewrite(&conf);
    assert_eq!(reel.admin_req("POST", "/admin/reload").status, 200);
    assert_eq!(reel.admin_req("GET", "/status").status, 401);
    reel.token = Some("other".into());
    assert_eq!(reel.admin_req("GET", "/status").status, 200);
}

#[test]
fn admin_token_from_the_environment() {
    let dir = tempfile::tempdir().unwrap();
    let o = Origin::start("a");
    let mut conf = Conf::new(dir.path(), &o);
    conf.admin = "token_env = \"REEL_TEST_ADMIN_TOKEN\"\n".into();
    let mut reel = Reel::start_env(&conf, &[("REEL_TEST_ADMIN_TOKEN", "from-env")]);
    assert_eq!(request(reel.admin, "GET", "127.0.0.1", "/status", &[]).status, 401);
    reel.token = Some("from-env".into());
    assert_eq!(reel.admin_req("GET", "/status").status, 200);
    drop(reel);

    // Without the variable, reel refuses to start rather than run an open admin API.
    conf.write();
    let out = std::process::Command::new(BIN)
        .arg("serve")
        .arg("--config")
        .arg(conf.path())
        .env_remove("REEL_TEST_ADMIN_TOKEN")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(64));
    assert!(String::from_utf8_lossy(&out.stderr).contains("REEL_TEST_ADMIN_TOKEN"));
}

#[test]
fn metrics_have_every_family() {
    let dir = tempfile::tempdir().unwrap();
    let o = Origin::start("a");
    o.put("/m/seg.ts", Object::ok(vec![b'm'; 4096]));
    let reel = Reel::start(&Conf::new(dir.path(), &o));
    assert_eq!(get(reel.data, "/m/seg.ts").status, 200);
    eventually("a hit", || {
        get(reel.data, "/m/seg.ts").cache_status().contains("hit").then_some(())
    });
    assert_eq!(get(reel.data, "/m/missing.ts").status, 404);
    assert_eq!(request(reel.data, "GET", "nobody.invalid", "/", &[]).status, 421);
    let mut held = Conn::open(reel.data).unwrap();
    assert_eq!(held.get("127.0.0.1", "/healthz").unwrap().status, 200);
    // Counters are recorded once a response is written, which may be just after the client
    // read it.
    let m = eventually("the requests in the counters", || {
        let m = reel.metrics();
        let at_least = |k: &str, v: f64| metric(&m, k).is_some_and(|x| x >= v);
        (at_least("reel_requests_total{status=\"2xx\",cache=\"miss\"}", 1.0)
            && at_least("reel_requests_total{status=\"2xx\",cache=\"hit\"}", 1.0)
            && at_least("reel_requests_total{status=\"4xx\",cache=\"local\"}", 1.0)
            && at_least("reel_requests_total{status=\"4xx\",cache=\"miss\"}", 1.0))
        .then_some(m)
    });
    for family in [
        "reel_requests_total",
        "reel_bytes_out_total",
        "reel_request_duration_seconds",
        "reel_hit_duration_seconds",
        "reel_first_byte_seconds",
        "reel_hit_first_byte_seconds",
        "reel_origin_requests_total",
        "reel_origin_responses_total",
        "reel_origin_errors_total",
        "reel_origin_first_byte_seconds",
        "reel_origin_healthy",
        "reel_store_bytes",
        "reel_store_objects",
        "reel_store_evictions_total",
        "reel_store_write_errors_total",
        "reel_connections_open",
        "reel_connections_accepted_total",
        "reel_coalesced_waiters",
        "reel_reloads_total",
        "reel_reload_failures_total",
        "reel_reload_last_success",
        "reel_draining",
        "reel_access_log_dropped_lines_total",
        "reel_slice_fetches_total",
        "reel_slice_waits_total",
    ] {
        assert!(m.contains(&format!("# TYPE {family} ")), "{family} missing:\n{m}");
    }
    assert!(metric(&m, "reel_bytes_out_total").unwrap() >= 8192.0);
    let origin_label = format!("reel_origin_requests_total{{group=\"o\",host=\"{}\"}}", o.addr);
    assert!(metric(&m, &origin_label).unwrap() >= 2.0, "{origin_label}\n{m}");
    assert!(metric(&m, "reel_store_objects").unwrap() >= 1.0);
    assert!(metric(&m, "reel_store_bytes").unwrap() >= 4096.0);
    assert_eq!(metric(&m, "reel_store_write_errors_total"), Some(0.0));
    for w in 0..reel.workers() {
        assert!(metric(&m, &format!("reel_connections_open{{worker=\"{w}\"}}")).is_some());
    }
    let open: f64 = (0..reel.workers())
        .filter_map(|w| metric(&m, &format!("reel_connections_open{{worker=\"{w}\"}}")))
        .sum();
    assert!(open >= 1.0, "the held connection is open");
    assert_eq!(metric(&m, "reel_reloads_total"), Some(0.0));
}

/// A raw HTTP/1.0 request without a Host field; returns the status.
fn status_without_host(addr: std::net::SocketAddr, target: &str) -> u16 {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(PATIENCE)).unwrap();
    s.write_all(format!("GET {target} HTTP/1.0\r\n\r\n").as_bytes()).unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    let text = String::from_utf8_lossy(&out);
    text.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0)
}

#[test]
fn admin_without_a_token_refuses_foreign_hosts_and_cross_site_posts() {
    let dir = tempfile::tempdir().unwrap();
    let o = Origin::start("a");
    let reel = Reel::start(&Conf::new(dir.path(), &o));
    let port = reel.admin.port();
    let admin = |method: &str, host: &str, target: &str, headers: &[(&str, &str)]| {
        request(reel.admin, method, host, target, headers)
    };
    let healthz = || get(reel.data, "/healthz").status;

    // DNS rebinding: a page on a name that resolves to 127.0.0.1 sends its own name.
    for host in [format!("rebind.attacker.example:{port}"), "rebind.attacker.example".into()] {
        let r = admin("GET", &host, "/status", &[]);
        assert_eq!(r.status, 421, "{host}: {}", r.text());
        assert!(r.text().contains("Host"), "{}", r.text());
        let r = admin("POST", &host, "/admin/drain", &[("x-reel-admin", "1")]);
        assert_eq!(r.status, 421, "{host}");
    }
    assert_eq!(healthz(), 200, "not drained through a foreign Host");
    assert_eq!(status_without_host(reel.admin, "/status"), 421, "a Host is required");
    // The listener's own address and localhost, with or without a port (an ssh tunnel may
    // use another one): Prometheus and curl keep working.
    for host in [
        format!("127.0.0.1:{port}"),
        "127.0.0.1".into(),
        format!("localhost:{port}"),
        "LocalHost".into(),
        "localhost:19090".into(),
    ] {
        assert_eq!(admin("GET", &host, "/metrics", &[]).status, 200, "{host}");
        assert_eq!(admin("GET", &host, "/status", &[]).status, 200, "{host}");
    }

    // What a cross-site form or a simple fetch can send does not change state.
    for (target, headers) in [
        ("/admin/drain", vec![]),
        ("/admin/drain", vec![("content-type", "application/x-www-form-urlencoded")]),
        ("/admin/drain", vec![("content-type", "text/plain")]),
        ("/admin/drain", vec![("content-type", "multipart/form-data; boundary=x")]),
        ("/admin/reload", vec![]),
        ("/admin/purge?url=http://127.0.0.1/x.ts", vec![]),
        ("/admin/resume", vec![]),
    ] {
        let r = admin("POST", "127.0.0.1", target, &headers);
        assert_eq!(r.status, 403, "{target} {headers:?}: {}", r.text());
        assert!(r.text().contains("X-Reel-Admin"), "{}", r.text());
    }
    assert_eq!(healthz(), 200, "not drained by a simple request");
    assert_eq!(reel.status()["reload"]["attempts"], 0, "no reload by a simple request");

    // A request a browser only sends cross-site after a CORS preflight reel never grants.
    let r = admin("POST", &format!("127.0.0.1:{port}"), "/admin/drain", &[("x-reel-admin", "1")]);
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(healthz(), 503);
    let r = admin("POST", "localhost", "/admin/resume", &[("content-type", "application/json")]);
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(healthz(), 200);
    let r = admin(
        "POST",
        "127.0.0.1",
        "/admin/purge?url=http://127.0.0.1/x.ts",
        &[("content-type", "Application/JSON; charset=utf-8")],
    );
    assert_eq!(r.status, 200, "{}", r.text());
    // The admin's own helper (as the docs' ADMIN alias) sends the header.
    assert_eq!(reel.admin_req("POST", "/admin/reload").status, 200);
}

/// An admin API on a non-loopback address without a token is refused by `reel check` (and
/// so by `serve`); with `insecure_no_token = true` it starts, and says so at every start.
#[test]
fn a_non_loopback_admin_without_a_token_is_refused_and_insecure_no_token_warns() {
    let dir = tempfile::tempdir().unwrap();
    let origin = Origin::start("o");
    let mut conf = Conf::new(dir.path(), &origin);
    conf.admin = "address = \"0.0.0.0:0\"\nallow_non_loopback = true\n".into();
    conf.write();
    let out = std::process::Command::new(BIN)
        .arg("check")
        .arg("--config")
        .arg(conf.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(64));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("admin.token") && err.contains("insecure_no_token"), "{err}");
    conf.admin.push_str("insecure_no_token = true\n");
    let reel = Reel::start(&conf);
    reel.logs.wait_for("the warning", |v| {
        message(v).contains("admin API") && message(v).contains("without a token")
    });
}
