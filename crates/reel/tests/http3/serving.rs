//! The cache over HTTP/3 (hit, miss, coalesced misses, range, 304, HEAD), Alt-Svc, connections that move to a new port (with and without the routing program).

use super::*;

#[test]
fn http3_serves_the_cache_and_the_tcp_side_advertises_it() {
    let dir = tempfile::tempdir().expect("tmp");
    let origin = Origin::start("o");
    let a = body(300_000, 1);
    let slow = body(1_500_000, 2);
    // The origin's own Alt-Svc names its services, not the edge's: never passed on.
    origin.put("/a.ts", cached(&a).header("alt-svc", "h3=\":9999\"; ma=60"));
    origin.put("/slow.ts", cached(&slow).delay(Duration::from_millis(700)));
    let pki = Pki::new(dir.path());
    pki.leaf("edge", &["edge.example.test"]);
    let reel = Reel::start(&h3_conf(dir.path(), &origin, &pki, "alt_svc_max_age = \"1h\"\n"));
    let addr = reel.listener_addr("https").expect("https listener");
    rt().block_on(async {
        let ep = h3::endpoint();
        let (_conn, mut c) = h3::connect(&ep, addr).await.expect("HTTP/3 connection");
        let r = get(&mut c, "/a.ts", &[]).await;
        assert_eq!(r.status, 200);
        assert!(r.cache_status().contains("fwd=miss"), "{}", r.cache_status());
        assert!(r.body == a);
        assert!(r.headers.get("alt-svc").is_none(), "no Alt-Svc over HTTP/3 itself");
        let r = get(&mut c, "/a.ts", &[]).await;
        assert_eq!(r.cache_status(), "reel; hit");
        assert!(r.body == a);
        assert_eq!(origin.hits("/a.ts"), 1);
        let r = get(&mut c, "/a.ts", &[("range", "bytes=1000-1999")]).await;
        assert_eq!(r.status, 206);
        assert!(r.body == a[1000..2000]);
        assert_eq!(r.headers["content-range"], "bytes 1000-1999/300000");
        let r = get(&mut c, "/a.ts", &[("if-none-match", "\"v1\"")]).await;
        assert_eq!((r.status, r.body.len()), (304, 0));
        let r = h3::request_at(&mut c, "edge.example.test", "HEAD", "/a.ts", &[], None)
            .await
            .expect("HEAD");
        assert_eq!((r.status, r.body.len()), (200, 0));
        assert_eq!(r.headers["content-length"], "300000");
        // A slow miss on many streams of two connections: one origin fetch, every stream
        // byte-exact.
        let (_conn2, c2) = h3::connect(&h3::endpoint(), addr).await.expect("second connection");
        let local = tokio::task::LocalSet::new();
        let collapsed = local
            .run_until(async {
                let mut work = Vec::new();
                for i in 0..12 {
                    let mut c = if i % 2 == 0 { c.clone() } else { c2.clone() };
                    work.push(tokio::task::spawn_local(async move {
                        get(&mut c, "/slow.ts", &[]).await
                    }));
                }
                let mut collapsed = 0;
                for w in work {
                    let r = w.await.expect("task");
                    assert_eq!(r.status, 200);
                    assert!(r.body == slow, "a coalesced stream was not byte-exact");
                    collapsed += usize::from(r.cache_status().contains("collapsed"));
                }
                collapsed
            })
            .await;
        assert_eq!(origin.hits("/slow.ts"), 1);
        assert!(collapsed >= 1, "no stream waited on the fill");
        // The TCP side of the listener says HTTP/3 is there, over HTTPS/1.1 and HTTP/2.
        let want = format!("h3=\":{}\"; ma=3600", addr.port());
        let (head, _, _) =
            https11_get(addr, pki.client(&[b"http/1.1"]), "/a.ts").await.expect("HTTPS/1.1");
        assert!(head.to_ascii_lowercase().contains(&format!("alt-svc: {want}")), "{head}");
        let h2 = h2_client(addr, pki.client(&[b"h2"]), "edge.example.test").await;
        let r = h2_get(&h2, "/a.ts").await;
        let all: Vec<_> = r.headers.get_all("alt-svc").iter().collect();
        assert_eq!(all, [want.as_str()]);
    });
    // The plain listener serves no HTTP/3 and says nothing of it.
    let r = crate::common::get(reel.data, "/a.ts");
    assert_eq!(r.status, 200);
    assert_eq!(r.header("alt-svc"), None);
    // Metrics by protocol, and QUIC's own.
    let m = reel.metrics();
    assert!(metric(&m, "reel_requests_by_protocol_total{protocol=\"h3\"}").unwrap_or(0.0) >= 17.0);
    assert!(metric(&m, "reel_requests_by_protocol_total{protocol=\"h2\"}").unwrap_or(0.0) >= 1.0);
    assert!(metric(&m, "reel_quic_handshakes_total{listener=\"https\"}").unwrap_or(0.0) >= 2.0);
    assert_eq!(metric(&m, "reel_quic_routing_by_id{listener=\"https\"}"), Some(1.0));
    let st = reel.status();
    assert_eq!(st["http3"][0]["name"], "https");
    assert_eq!(st["http3"][0]["address"], addr.to_string());
    assert_eq!(st["http3"][0]["routing"], "connection_id");
    // The access log names the protocol.
    let log = dir.path().join("access.log");
    eventually("HTTP/3 lines in the access log", || {
        std::fs::read_to_string(&log).ok().filter(|t| t.contains("\"protocol\":\"HTTP/3\""))
    });
}

/// Connections from several client ports (so the hash would spread them over the
/// workers) each move to a new port mid-connection and go on: their packets still reach
/// the worker that owns them.
#[test]
fn connections_that_move_to_a_new_port_keep_their_worker() {
    for n in [2usize, 4] {
        let dir = tempfile::tempdir().expect("tmp");
        let origin = Origin::start("o");
        let big = body(2_000_000, 3);
        origin.put("/big.ts", cached(&big));
        let pki = Pki::new(dir.path());
        pki.leaf("edge", &["edge.example.test"]);
        let conf = h3_conf(dir.path(), &origin, &pki, "");
        let reel = Reel::start_env(&conf, &[("REEL_TEST_WORKERS", &n.to_string())]);
        assert_eq!(reel.workers(), n);
        let addr = reel.listener_addr("https").expect("https listener");
        rt().block_on(async {
            for i in 0..8 {
                let ep = h3::endpoint();
                let (conn, mut c) = h3::connect(&ep, addr).await.expect("connection");
                let r = get(&mut c, "/big.ts", &[("range", "bytes=0-9999")]).await;
                assert_eq!(r.status, 206, "connection {i}");
                // Mid-download: the response's bytes keep coming to the new port.
                let local = tokio::task::LocalSet::new();
                local
                    .run_until(async {
                        let mut c2 = c.clone();
                        let whole =
                            tokio::task::spawn_local(
                                async move { get(&mut c2, "/big.ts", &[]).await },
                            );
                        tokio::time::sleep(Duration::from_millis(5)).await;
                        ep.rebind(std::net::UdpSocket::bind("127.0.0.1:0").expect("udp"))
                            .expect("rebind");
                        let r = whole.await.expect("task");
                        assert_eq!(r.status, 200, "{n} workers, connection {i}");
                        assert!(r.body == big, "{n} workers, connection {i}: not byte-exact");
                    })
                    .await;
                let r = get(&mut c, "/big.ts", &[("range", "bytes=5-9")]).await;
                assert!(r.body == big[5..10]);
                assert_eq!(conn.close_reason(), None, "{n} workers, connection {i}");
            }
        });
        let m = reel.metrics();
        assert_eq!(metric(&m, "reel_quic_routing_by_id{listener=\"https\"}"), Some(1.0));
    }
}

/// With `REEL_QUIC_BPF=0` the group is routed by address hash: the log, the metric and
/// `/status` say so, a connection that keeps its address is served, and at 4 workers
/// connections that move to a new port are lost (each lands on another worker 3 times in
/// 4), which is what the routing program prevents in the test above.
#[test]
fn without_the_routing_program_connections_that_move_are_lost() {
    let dir = tempfile::tempdir().expect("tmp");
    let origin = Origin::start("o");
    let big = body(2_000_000, 5);
    origin.put("/big.ts", cached(&big));
    let pki = Pki::new(dir.path());
    pki.leaf("edge", &["edge.example.test"]);
    let conf = h3_conf(dir.path(), &origin, &pki, "");
    let reel = Reel::start_env(&conf, &[("REEL_TEST_WORKERS", "4"), ("REEL_QUIC_BPF", "0")]);
    assert_eq!(reel.workers(), 4);
    let addr = reel.listener_addr("https").expect("https listener");
    reel.logs.wait_for("the hash-routing warning", |v| {
        crate::common::message(v).starts_with("HTTP/3: no connection-ID routing program")
            && v["fields"]["reason"] == "REEL_QUIC_BPF=0"
    });
    let m = reel.metrics();
    assert_eq!(metric(&m, "reel_quic_routing_by_id{listener=\"https\"}"), Some(0.0));
    let st = reel.status();
    assert_eq!(st["http3"][0]["routing"], "hash");
    assert_eq!(st["http3"][0]["routing_problem"], "REEL_QUIC_BPF=0");
    let lost = rt().block_on(async {
        let mut lost = 0;
        for _ in 0..8 {
            let ep = h3::endpoint();
            let (conn, mut c) = h3::connect(&ep, addr).await.expect("connection");
            let r = get(&mut c, "/big.ts", &[]).await;
            assert!(r.body == big, "a connection that keeps its address is served");
            ep.rebind(std::net::UdpSocket::bind("127.0.0.1:0").expect("udp")).expect("rebind");
            let after = tokio::time::timeout(
                Duration::from_secs(5),
                h3::request_at(&mut c, "edge.example.test", "GET", "/big.ts", &[], None),
            )
            .await;
            match after {
                Ok(Ok(r)) if r.body == big => {}
                _ => lost += 1,
            }
            conn.close(0u32.into(), b"");
        }
        lost
    });
    assert!(lost >= 1, "8 connections moved without the program and none was lost");
}

/// Viewers on many HTTP/3 connections, which the kernel's hash of their ports spreads over
/// the workers, miss one object at once while its origin answer is held: at 2 and 4
/// workers the origin is asked once, every stream gets the whole body, and more than one
/// worker answered.
#[test]
fn concurrent_http3_misses_ask_the_origin_once_at_any_worker_count() {
    const VIEWERS: usize = 16;
    for n in [2usize, 4] {
        let dir = tempfile::tempdir().expect("tmp");
        let origin = Origin::start("o");
        let b = body(400_000, 4);
        let gate = Gate::default();
        origin.put("/live.ts", cached(&b).gated(&gate));
        let pki = Pki::new(dir.path());
        pki.leaf("edge", &["edge.example.test"]);
        let reel = crate::workers::start_n(&h3_conf(dir.path(), &origin, &pki, ""), n);
        let addr = reel.listener_addr("https").expect("https listener");
        let before = crate::workers::per_worker(&reel);
        // The viewers run on a thread of their own, so this one can watch them wait.
        let viewers = std::thread::spawn(move || {
            rt().block_on(async {
                let local = tokio::task::LocalSet::new();
                local
                    .run_until(async {
                        let mut work = Vec::new();
                        for _ in 0..VIEWERS {
                            work.push(tokio::task::spawn_local(async move {
                                let ep = h3::endpoint();
                                let (_conn, mut c) =
                                    h3::connect(&ep, addr).await.expect("connection");
                                get(&mut c, "/live.ts", &[]).await
                            }));
                        }
                        let mut out = Vec::new();
                        for w in work {
                            out.push(w.await.expect("viewer"));
                        }
                        out
                    })
                    .await
            })
        });
        eventually("every viewer but the leader waiting on the leader", || {
            (origin.hits("/live.ts") >= 1 && crate::workers::waiters(&reel) >= (VIEWERS - 1) as f64)
                .then_some(())
        });
        gate.open();
        let answers = viewers.join().expect("viewers");
        for r in &answers {
            assert_eq!(r.status, 200, "{n} workers");
            assert!(r.body == b, "{n} workers: a stream was not byte-exact");
        }
        let stored = answers.iter().filter(|r| r.cache_status().contains("stored")).count();
        assert_eq!(stored, 1, "{n} workers: one leader");
        assert_eq!(origin.hits("/live.ts"), 1, "{n} workers: one origin request");
        crate::workers::assert_spread(&reel, &before, &format!("{n} workers over HTTP/3"));
    }
}
