//! Serving: `/healthz`, one socket per worker, worker pinning, routing through the cache,
//! unknown hosts, and a graceful SIGTERM.

use std::time::Duration;

use crate::common::*;

/// `(local port, state)` of every row of `/proc/net/tcp` and `/proc/net/tcp6`.
fn proc_net_tcp() -> Vec<(u16, String)> {
    let mut out = Vec::new();
    for f in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let Ok(text) = std::fs::read_to_string(f) else { continue };
        for l in text.lines().skip(1) {
            let cols: Vec<&str> = l.split_whitespace().collect();
            let (Some(local), Some(st)) = (cols.get(1), cols.get(3)) else { continue };
            let Some(port) = local.rsplit(':').next().and_then(|p| u16::from_str_radix(p, 16).ok())
            else {
                continue;
            };
            out.push((port, st.to_string()));
        }
    }
    out
}

fn listening_sockets(port: u16) -> usize {
    // State 0A is TCP_LISTEN.
    proc_net_tcp().iter().filter(|(p, st)| *p == port && st == "0A").count()
}

#[test]
fn healthz_sockets_pinning_and_routing() {
    let dir = tempfile::tempdir().unwrap();
    let origin = Origin::start("a");
    origin.put("/v/seg1.ts", Object::ok("segment one"));
    let reel = Reel::start(&Conf::new(dir.path(), &origin));
    let status = reel.status();
    let plan: Vec<u64> =
        status["plan"]["workers"].as_array().unwrap().iter().map(|c| c.as_u64().unwrap()).collect();
    assert!(!plan.is_empty());

    // /healthz: 200 with the JSON a balancer reads.
    let h = get(reel.data, "/healthz");
    assert_eq!(h.status, 200, "{}", h.text());
    assert_eq!(h.header("content-type"), Some("application/json"));
    let j = h.json();
    assert_eq!(j["status"], "ok");
    assert_eq!(j["workers"].as_u64(), Some(plan.len() as u64));
    assert_eq!(j["version"], env!("CARGO_PKG_VERSION"));
    assert!(j["load"]["connections"].is_u64(), "{j}");

    // One listening socket per worker, all on the same port (SO_REUSEPORT).
    assert_eq!(listening_sockets(reel.data.port()), plan.len());

    // Each worker thread reel-w<i> is pinned to its planned CPU.
    let pid = reel.pid();
    let mut seen = 0;
    for t in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap().flatten() {
        let comm = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
        let Some(index) = comm.trim().strip_prefix("reel-w").and_then(|i| i.parse::<usize>().ok())
        else {
            continue;
        };
        let st = std::fs::read_to_string(t.path().join("status")).unwrap();
        let allowed =
            st.lines().find_map(|l| l.strip_prefix("Cpus_allowed_list:")).map(str::trim).unwrap();
        assert_eq!(allowed, plan[index].to_string(), "worker {index}");
        seen += 1;
    }
    assert_eq!(seen, plan.len(), "one reel-w thread per planned worker");

    // A known object: a miss, then hits (a request that arrives while the fill is still
    // being committed joins it instead: "collapsed").
    let r = get(reel.data, "/v/seg1.ts");
    assert_eq!((r.status, r.text().as_str()), (200, "segment one"));
    assert!(r.cache_status().contains("fwd=miss"), "{}", r.cache_status());
    eventually("a hit", || {
        let r = get(reel.data, "/v/seg1.ts");
        assert_eq!((r.status, r.text().as_str()), (200, "segment one"));
        let cs = r.cache_status();
        assert!(cs.contains("hit") || cs.contains("collapsed"), "{cs}");
        cs.contains("hit").then_some(())
    });
    assert_eq!(origin.hits("/v/seg1.ts"), 1);

    // An unknown path on a site goes through the cache to the origin, which says 404.
    let r = get(reel.data, "/nope/x.ts");
    assert_eq!(r.status, 404);
    assert!(r.cache_status().contains("fwd=miss"), "{}", r.cache_status());
    assert_eq!(origin.hits("/nope/x.ts"), 1);

    // An unknown Host is not ours: 421, and the origin is not asked.
    let r = request(reel.data, "GET", "elsewhere.invalid", "/v/seg1.ts", &[]);
    assert_eq!(r.status, 421);
    assert_eq!(origin.hits("/v/seg1.ts"), 1);
}

#[test]
fn sigterm_lets_the_in_flight_request_finish_and_exits_0() {
    let dir = tempfile::tempdir().unwrap();
    let origin = Origin::start("a");
    let body = vec![b'x'; 256 * 1024];
    origin.put("/slow.ts", Object::ok(body.clone()).delay(Duration::from_millis(1500)));
    let mut reel = Reel::start(&Conf::new(dir.path(), &origin));
    let addr = reel.data;
    let client = std::thread::spawn(move || {
        let mut c = Conn::open(addr).unwrap();
        c.get("127.0.0.1", "/slow.ts")
    });
    // The request is in flight once the origin has it.
    eventually("the slow request at the origin", || (origin.hits("/slow.ts") == 1).then_some(()));
    reel.signal(libc::SIGTERM);
    let r = client.join().unwrap().expect("the in-flight request is answered");
    assert_eq!(r.status, 200);
    assert_eq!(r.body.len(), body.len());
    let st = reel.wait_exit();
    assert_eq!(st.code(), Some(0), "{}", reel.logs.dump());
    // The log reader may still be draining the pipe when the exit status is in.
    eventually("the stop line", || {
        (!reel.logs.with_message("reel stopped").is_empty()).then_some(())
    });
}

/// The README's `reel serve --config F --origin http://H:P`: every Host, those the config's
/// `[[site]]`s claim included, comes from that one origin, and the demo origin the config
/// enables does not start.
/// `--origin` sends the origin's own host and port in `Host`, as nginx's `proxy_pass` does
/// (a virtual-hosted origin answers by it), `--origin-host viewer` passes the viewer's (as
/// the cache key spells it, without a port), `--origin-host NAME` sends NAME; and
/// `reel --origin URL` runs `serve` without naming it.
#[test]
fn origin_flag_sends_the_origins_own_host_unless_told_otherwise() {
    let dir = tempfile::tempdir().unwrap();
    let origin = Origin::start("own");
    origin.put_default(Object::ok("from the origin"));
    let runs = [
        (None, true, origin.addr.to_string()),
        (Some("viewer"), false, "my.site.example".to_string()),
        (Some("bucket.origin.example"), true, "bucket.origin.example".to_string()),
    ];
    for (i, (host_flag, bare, want)) in runs.into_iter().enumerate() {
        let sub = dir.path().join(format!("run{i}"));
        std::fs::create_dir(&sub).unwrap();
        let mut conf = Conf::new(&sub, &origin);
        conf.serve_args = vec!["--origin".into(), format!("http://{}", origin.addr)];
        if let Some(h) = host_flag {
            conf.serve_args.extend(["--origin-host".into(), h.into()]);
        }
        conf.bare = bare;
        let reel = Reel::start(&conf);
        let path = format!("/own/{i}.ts");
        let r = request(reel.data, "GET", "My.Site.Example:8080", &path, &[]);
        assert_eq!((r.status, r.text().as_str()), (200, "from the origin"), "{host_flag:?}");
        assert_eq!(origin.host(&path), Some(want), "{host_flag:?}");
    }
}

/// `--origin-host` without `--origin`, a bad `--origin-host`, and `serve`'s flags before
/// another subcommand are usage errors.
#[test]
fn origin_host_flag_misuse_is_refused() {
    let out = |args: &[&str]| std::process::Command::new(BIN).args(args).output().unwrap();
    let o = out(&["serve", "--origin-host", "viewer"]);
    assert_eq!(o.status.code(), Some(2), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--origin"));
    let o = out(&["--origin", "http://127.0.0.1:1", "check"]);
    assert_eq!(o.status.code(), Some(2), "{}", String::from_utf8_lossy(&o.stderr));
    let dir = tempfile::tempdir().unwrap();
    let origin = Origin::start("unused");
    let conf = Conf::new(dir.path(), &origin);
    conf.write();
    let cfg = conf.path();
    let cfg = cfg.to_str().unwrap();
    let o = out(&["--config", cfg, "--origin", "http://127.0.0.1:1", "--origin-host", "a b"]);
    assert_eq!(o.status.code(), Some(64), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--origin-host"));
}

#[test]
fn origin_flag_serves_every_host_and_starts_no_demo_origin() {
    let dir = tempfile::tempdir().unwrap();
    let origin = Origin::start("flag");
    origin.put("/live/index.m3u8", Object::ok("#EXTM3U from the flag's origin\n"));
    origin.put("/v/seg.ts", Object::ok("segment from the flag's origin"));
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let mut conf = Conf::new(dir.path(), &origin);
    conf.raw = Some(shipped_demo_config(dead, true));
    conf.serve_args = vec!["--origin".into(), format!("http://{}", origin.addr)];
    let reel = Reel::start(&conf);

    // Hosts the shipped [[site]] claims (127.0.0.1, localhost) and one it does not.
    for host in ["127.0.0.1", "localhost:8080", "unclaimed.example"] {
        for (path, body) in [
            ("/live/index.m3u8", "#EXTM3U from the flag's origin\n"),
            ("/v/seg.ts", "segment from the flag's origin"),
        ] {
            let r = request(reel.data, "GET", host, path, &[]);
            assert_eq!((r.status, r.text().as_str()), (200, body), "{host}{path}");
            assert_eq!(r.header("x-origin"), Some("flag"), "{host}{path}");
        }
    }
    assert!(
        reel.logs.with_message("demo origin listening").is_empty(),
        "the demo origin started:\n{}",
        reel.logs.dump()
    );
    let groups: Vec<String> = reel.status()["origins"]["groups"]
        .as_array()
        .map(|g| g.iter().filter_map(|g| g["name"].as_str().map(String::from)).collect())
        .unwrap_or_default();
    assert_eq!(groups, ["--origin"], "only the flag's origin is used");
}
