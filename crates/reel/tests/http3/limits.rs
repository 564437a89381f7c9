//! Connection limits over QUIC: per client (with TCP, across workers), per worker, idle timeout, no early data, health counting QUIC connections.

use super::*;

/// The existing connection limits bound QUIC too: a client address past
/// `max_connections_per_client` is refused, and an idle connection closes at
/// `idle_timeout`. No 0-RTT is offered: a resuming client cannot send early data.
#[test]
fn client_limits_idle_timeout_and_no_early_data() {
    let dir = tempfile::tempdir().expect("tmp");
    let origin = Origin::start("o");
    origin.put("/a.ts", cached(&body(2000, 7)));
    let pki = Pki::new(dir.path());
    pki.leaf("edge", &["edge.example.test"]);
    let mut conf = h3_conf(dir.path(), &origin, &pki, "");
    conf.http = "max_connections_per_client = 2\nidle_timeout = \"2s\"\n".into();
    let reel = Reel::start_env(&conf, &[("REEL_TEST_WORKERS", "1")]);
    let addr = reel.listener_addr("https").expect("https listener");
    rt().block_on(async {
        let ep = h3::endpoint();
        let (c1, mut s1) = h3::connect(&ep, addr).await.expect("first");
        let (_c2, mut s2) = h3::connect(&ep, addr).await.expect("second");
        assert_eq!(get(&mut s1, "/a.ts", &[]).await.status, 200);
        assert_eq!(get(&mut s2, "/a.ts", &[]).await.status, 200);
        let third = h3::connect(&ep, addr).await;
        assert!(third.is_err(), "a third connection from the address was taken");
        assert!(third.err().unwrap_or_default().contains("refused"));
        // Idle past idle_timeout: closed by the server (GOAWAY, then the close).
        let why =
            tokio::time::timeout(Duration::from_secs(20), c1.closed()).await.expect("idle close");
        assert!(matches!(why, quinn::ConnectionError::ApplicationClosed(_)), "{why}");
        // Resumption works, early data does not: the ticket allows none.
        let (ep2, certificates_shown) = h3::endpoint_counting();
        let (c, mut s) = h3::connect(&ep2, addr).await.expect("first of ep2");
        // The session ticket comes right after the handshake, before any answer.
        assert_eq!(get(&mut s, "/a.ts", &[]).await.status, 200);
        assert_eq!(certificates_shown.load(Ordering::SeqCst), 1, "a full handshake");
        c.close(0u32.into(), b"");
        drop(c);
        // c1 is closed, the second still counts: room for one more.
        let connecting = ep2.connect(addr, "localhost").expect("connect");
        match connecting.into_0rtt() {
            Ok(_) => panic!("0-RTT was accepted"),
            Err(connecting) => {
                connecting.await.expect("resumed without 0-RTT");
            }
        }
        assert_eq!(
            certificates_shown.load(Ordering::SeqCst),
            1,
            "the second handshake resumed the first's session (no certificate shown)"
        );
    });
    let m = reel.metrics();
    assert!(metric(&m, "reel_quic_refused_client_total{listener=\"https\"}").unwrap_or(0.0) >= 1.0);
}

/// `max_connections_per_client` counts a client's QUIC and TCP connections together,
/// across the workers: with 4 workers and a cap of 4, one keep-alive TCP connection and
/// three QUIC ones (from ports the kernel's hash spreads over the workers) fill it, the
/// next QUIC connection is refused, and closing the TCP one makes room.
#[test]
fn the_client_limit_counts_quic_and_tcp_together_across_workers() {
    let dir = tempfile::tempdir().expect("tmp");
    let origin = Origin::start("o");
    origin.put("/a.ts", cached(&body(2000, 8)));
    let pki = Pki::new(dir.path());
    pki.leaf("edge", &["edge.example.test"]);
    let mut conf = h3_conf(dir.path(), &origin, &pki, "");
    conf.http = "max_connections_per_client = 4\n".into();
    let reel = crate::workers::start_n(&conf, 4);
    let addr = reel.listener_addr("https").expect("https listener");
    let mut tcp = crate::common::Conn::open(reel.data).expect("TCP connection");
    let host = format!("127.0.0.1:{}", reel.data.port());
    assert_eq!(tcp.get(&host, "/a.ts").expect("GET over TCP").status, 200);
    rt().block_on(async {
        let mut open = Vec::new();
        for i in 0..3 {
            let ep = h3::endpoint();
            let (conn, mut c) = h3::connect(&ep, addr).await.expect("QUIC connection");
            assert_eq!(get(&mut c, "/a.ts", &[]).await.status, 200, "connection {i}");
            open.push((ep, conn, c));
        }
        let fourth = h3::connect(&h3::endpoint(), addr).await;
        let why = fourth.err().expect("a fifth connection of the address was taken");
        assert!(why.contains("refused"), "{why}");
        drop(tcp);
        let deadline = std::time::Instant::now() + reel_test_support::PATIENCE;
        loop {
            match h3::connect(&h3::endpoint(), addr).await {
                Ok((_conn, mut c)) => {
                    assert_eq!(get(&mut c, "/a.ts", &[]).await.status, 200);
                    break;
                }
                Err(e) => assert!(
                    std::time::Instant::now() < deadline,
                    "no room after the TCP connection closed: {e}"
                ),
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    });
    let m = reel.metrics();
    assert!(metric(&m, "reel_quic_refused_client_total{listener=\"https\"}").unwrap_or(0.0) >= 1.0);
}

/// `max_connections_per_worker` bounds QUIC connections too; `/healthz` answers over
/// HTTP/3 like over TCP.
#[test]
fn the_worker_limit_and_health_over_http3() {
    let dir = tempfile::tempdir().expect("tmp");
    let origin = Origin::start("o");
    let pki = Pki::new(dir.path());
    pki.leaf("edge", &["edge.example.test"]);
    let mut conf = h3_conf(dir.path(), &origin, &pki, "");
    conf.http = "max_connections_per_worker = 2\n".into();
    let reel = Reel::start_env(&conf, &[("REEL_TEST_WORKERS", "1")]);
    let addr = reel.listener_addr("https").expect("https listener");
    rt().block_on(async {
        let (ep1, ep2, ep3) = (h3::endpoint(), h3::endpoint(), h3::endpoint());
        let (_c1, mut s1) = h3::connect(&ep1, addr).await.expect("first");
        let (_c2, _s2) = h3::connect(&ep2, addr).await.expect("second");
        let r = h3::request_at(&mut s1, "edge.example.test", "GET", "/healthz", &[], None)
            .await
            .expect("healthz");
        assert_eq!(r.status, 200);
        assert!(String::from_utf8_lossy(&r.body).contains("\"status\""), "{:?}", r.body);
        let third = h3::connect(&ep3, addr).await;
        assert!(
            third.err().unwrap_or_default().contains("refused"),
            "a third connection was taken"
        );
    });
    let m = reel.metrics();
    assert!(metric(&m, "reel_quic_refused_worker_total{listener=\"https\"}").unwrap_or(0.0) >= 1.0);
}

/// Health counts QUIC connections with the TCP ones: past `max_connections` the node says
/// it is overloaded, and `load.connections` shows them.
#[test]
fn health_counts_http3_connections() {
    let dir = tempfile::tempdir().expect("tmp");
    let origin = Origin::start("o");
    let pki = Pki::new(dir.path());
    pki.leaf("edge", &["edge.example.test"]);
    let mut conf = h3_conf(dir.path(), &origin, &pki, "");
    conf.health = "max_connections = 3\nresume_connections = 1\nmax_cpu_percent = 100\n\
                   resume_cpu_percent = 99\nmax_hit_p99 = \"1h\"\nresume_hit_p99 = \"30m\"\n"
        .into();
    let reel = Reel::start(&conf);
    let addr = reel.listener_addr("https").expect("https listener");
    let healthz = || {
        let r = crate::common::get(reel.data, "/healthz");
        (r.status, r.json())
    };
    rt().block_on(async {
        let mut held = Vec::new();
        for _ in 0..4 {
            let ep = h3::endpoint();
            let (c, s) = h3::connect(&ep, addr).await.expect("connection");
            held.push((ep, c, s));
        }
        let mut waited = 0;
        loop {
            let (s, j) = healthz();
            if s == 503 {
                assert_eq!(j["status"], "overloaded", "{j}");
                assert!(j["load"]["connections"].as_u64().unwrap_or(0) >= 4, "{j}");
                break;
            }
            waited += 1;
            assert!(waited < 300, "never overloaded: {j}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    });
}
