//! `/healthz` for load balancers: drain and resume through the admin API, and the
//! overload hysteresis on open connections (thresholds changed by a reload).

use crate::common::*;

fn healthz_on(c: &mut Conn) -> (u16, serde_json::Value) {
    let r = c.get("127.0.0.1", "/healthz").expect("healthz");
    let j = r.json();
    (r.status, j)
}

#[test]
fn drain_and_resume() {
    let dir = tempfile::tempdir().unwrap();
    let a = Origin::start("a");
    let reel = Reel::start(&Conf::new(dir.path(), &a));
    assert_eq!(get(reel.data, "/healthz").status, 200);
    let m = reel.metrics();
    assert_eq!(metric(&m, "reel_draining"), Some(0.0));

    let r = reel.admin_req("POST", "/admin/drain");
    assert_eq!(r.status, 200, "{}", r.text());
    let h = get(reel.data, "/healthz");
    assert_eq!(h.status, 503);
    assert_eq!(h.json()["status"], "draining");
    assert_eq!(metric(&reel.metrics(), "reel_draining"), Some(1.0));
    assert_eq!(reel.status()["health"]["status"], "draining");
    // Draining only changes the health answer: requests are still served.
    assert_eq!(get(reel.data, "/x.ts").status, 404);

    let r = reel.admin_req("POST", "/admin/resume");
    assert_eq!(r.status, 200);
    let h = get(reel.data, "/healthz");
    assert_eq!(h.status, 200);
    assert_eq!(h.json()["status"], "ok");
    assert_eq!(metric(&reel.metrics(), "reel_draining"), Some(0.0));

    // Wrong methods on admin endpoints.
    assert_eq!(reel.admin_req("GET", "/admin/drain").status, 405);
    assert_eq!(reel.admin_req("GET", "/nope").status, 404);
}

#[test]
fn overload_on_connections_with_hysteresis() {
    let dir = tempfile::tempdir().unwrap();
    let a = Origin::start("a");
    let mut conf = Conf::new(dir.path(), &a);
    let reel_conf = conf.clone();
    let mut reel = Reel::start(&reel_conf);

    // Low thresholds arrive by reload; CPU and latency limits are out of reach.
    conf.health = "max_connections = 5\nresume_connections = 2\nmax_cpu_percent = 100\n\
                   resume_cpu_percent = 99\nmax_hit_p99 = \"1h\"\nresume_hit_p99 = \"30m\"\n"
        .into();
    reel.rewrite(&conf);
    assert_eq!(reel.admin_req("POST", "/admin/reload").status, 200);

    // Probes go over the first held connection, so they add no connection of their own.
    let mut conns: Vec<Conn> = (0..6).map(|_| Conn::open(reel.data).unwrap()).collect();
    for c in conns.iter_mut() {
        // Make sure every connection was accepted by a worker.
        let s = c.get("127.0.0.1", "/healthz").unwrap().status;
        assert!(s == 200 || s == 503, "{s}");
    }
    let j = eventually("503 with six connections", || {
        let (s, j) = healthz_on(&mut conns[0]);
        (s == 503).then_some(j)
    });
    assert_eq!(j["status"], "overloaded");
    assert!(j["reasons"][0].as_str().unwrap_or_default().contains("connections"), "{j}");

    // Three connections: under max but not under resume, still overloaded.
    conns.truncate(3);
    let (s, j) = eventually("the sampler to see three connections", || {
        let (s, j) = healthz_on(&mut conns[0]);
        (j["load"]["connections"] == 3).then_some((s, j))
    });
    assert_eq!(s, 503, "{j}");
    assert_eq!(j["status"], "overloaded");

    // One connection: under resume, healthy again.
    conns.truncate(1);
    let j = eventually("200 with one connection", || {
        let (s, j) = healthz_on(&mut conns[0]);
        (s == 200).then_some(j)
    });
    assert_eq!(j["status"], "ok");
    assert_eq!(j["load"]["connections"], 1);
}

/// A viewer on a slow link reading `path` (an object of `len` bytes): a small receive
/// buffer and a paced read, so the transfer takes seconds while reel's send buffer stays
/// full. Returns the body length received.
fn slow_download(addr: std::net::SocketAddr, path: &str, len: usize) -> usize {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).expect("connect");
    rustix::net::sockopt::set_socket_recv_buffer_size(&s, 32 * 1024).expect("SO_RCVBUF");
    s.set_read_timeout(Some(PATIENCE)).unwrap();
    s.write_all(
        format!("GET {path} HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: close\r\n\r\n").as_bytes(),
    )
    .unwrap();
    let mut got = Vec::with_capacity(len + 1024);
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) => panic!("slow download of {path}: {e}"),
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let head_end = got.windows(4).position(|w| w == b"\r\n\r\n").expect("a response head") + 4;
    let head = String::from_utf8_lossy(&got[..head_end]).to_string();
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(head.contains("cache-status") && head.contains("hit"), "a cache hit: {head}");
    got.len() - head_end
}

#[test]
fn slow_viewers_of_a_large_hit_keep_the_node_healthy() {
    const LEN: usize = 8 << 20;
    let dir = tempfile::tempdir().unwrap();
    let a = Origin::start("a");
    a.put("/big/seg.ts", Object::ok(vec![b'v'; LEN]));
    let mut conf = Conf::new(dir.path(), &a);
    conf.store_size = "64MiB".into();
    conf.volume_size = "16MiB".into();
    // A hit whose head takes half a second to leave is overload; CPU is out of reach on a
    // shared test machine.
    conf.health = "max_hit_p99 = \"500ms\"\nresume_hit_p99 = \"250ms\"\nmax_cpu_percent = 100\n\
                   resume_cpu_percent = 99\n"
        .into();
    let reel = Reel::start(&conf);

    assert_eq!(get(reel.data, "/big/seg.ts").body.len(), LEN);
    eventually("the object to be a hit", || {
        get(reel.data, "/big/seg.ts").cache_status().contains("hit").then_some(())
    });

    // Three viewers on slow links: each transfer takes seconds, far over max_hit_p99.
    let viewers: Vec<_> = (0..3)
        .map(|_| {
            let addr = reel.data;
            std::thread::spawn(move || slow_download(addr, "/big/seg.ts", LEN))
        })
        .collect();
    for v in viewers {
        assert_eq!(v.join().unwrap(), LEN, "every viewer gets the whole object");
    }

    // Once the sampler's window holds the slow hits (their total time shows), the verdict
    // is still ok: the hits' heads left at once.
    let j = eventually("the sampler to see the slow hits", || {
        let r = get(reel.data, "/healthz");
        let j = r.json();
        assert_eq!(r.status, 200, "slow viewers made the node unhealthy: {j}");
        (j["load"]["hit_total_p99_ms"].as_f64().unwrap_or(0.0) >= 1000.0).then_some(j)
    });
    assert_eq!(j["status"], "ok", "{j}");
    assert!(j["load"]["hit_p99_ms"].as_f64().unwrap() < 500.0, "{j}");
    let m = reel.metrics();
    assert!(metric(&m, "reel_hit_first_byte_seconds_count").unwrap_or(0.0) >= 4.0, "{m}");
    assert!(metric(&m, "reel_hit_duration_seconds_count").unwrap_or(0.0) >= 4.0, "{m}");
}
