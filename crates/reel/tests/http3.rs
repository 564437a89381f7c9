//! HTTP/3 against the real binary: QUIC on the UDP side of a TLS listener, the same cache
//! behind it (hit, miss, coalesced miss, range, 304, HEAD, byte-exact), `Alt-Svc` on the
//! TCP side, metrics and the access log by protocol; connections that move to a new
//! client port keep their worker, and concurrent misses on many connections ask the origin
//! once (2 and 4 workers); Retry for every new connection, and
//! under a flood of Initials that never complete, with the amplification limit counted
//! byte for byte; Initials with a forged address take none of its places; clients that
//! stop acknowledging pin bounded memory and are closed at the send timeout; a reload
//! that turns HTTP/3 on and off.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use reel_test_support::h3;

use crate::common::{Conf, Gate, Object, Origin, Reel, eventually, metric};
use crate::tls::{Pki, h2_client, h2_get, https11_get, rt, tls_conf};

fn body(n: usize, seed: u8) -> Vec<u8> {
    (0..n).map(|i| ((i * 31 + i / 977) as u8).wrapping_add(seed)).collect()
}

fn cached(b: &[u8]) -> Object {
    Object::ok(b.to_vec()).header("etag", "\"v1\"").header("cache-control", "max-age=3600")
}

/// A TLS listener `https` serving HTTP/3 too, with `more` listener lines.
fn h3_conf(dir: &std::path::Path, origin: &Origin, pki: &Pki, more: &str) -> Conf {
    let mut c = tls_conf(dir, origin, pki);
    c.listener_lines
        .get_mut("https")
        .expect("https lines")
        .push_str(&format!("http3 = true\n{more}"));
    c
}

async fn get(
    c: &mut h3::SendRequest,
    path: &str,
    fields: &[(&str, &str)],
) -> reel_test_support::h2::Reply {
    h3::request_at(c, "edge.example.test", "GET", path, fields, None).await.expect("h3 request")
}

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

/// Forwards datagrams from a client to `server` and drops every answer: a client that
/// never completes its handshake, as one with a forged source address. Counts the bytes
/// each way, and by how many bytes an answer ever took the server past three times what
/// it had received then (RFC 9000 section 8.1), with the sizes of the answers so far.
struct BlackHole {
    addr: SocketAddr,
    sent: Arc<AtomicU64>,
    answered: Arc<AtomicU64>,
    over: Arc<AtomicU64>,
    sizes: Arc<std::sync::Mutex<Vec<usize>>>,
}

impl BlackHole {
    async fn start(server: SocketAddr) -> BlackHole {
        BlackHole::start_from(server, "127.0.0.1").await
    }

    /// [`BlackHole::start`] whose datagrams reach the server from address `from`.
    async fn start_from(server: SocketAddr, from: &str) -> BlackHole {
        let front = tokio::net::UdpSocket::bind("127.0.0.1:0").await.expect("udp");
        let back = tokio::net::UdpSocket::bind(format!("{from}:0")).await.expect("udp");
        let (sent, answered) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
        let over = Arc::new(AtomicU64::new(0));
        let sizes = Arc::new(std::sync::Mutex::new(Vec::new()));
        let addr = front.local_addr().expect("addr");
        let (s, a, o, z) = (sent.clone(), answered.clone(), over.clone(), sizes.clone());
        tokio::spawn(async move {
            let mut buf = vec![0u8; 65_536];
            let mut buf2 = vec![0u8; 65_536];
            loop {
                tokio::select! {
                    r = front.recv_from(&mut buf) => {
                        let Ok((n, _)) = r else { return };
                        s.fetch_add(n as u64, Ordering::Relaxed);
                        let _ = back.send_to(&buf[..n], server).await;
                    }
                    r = back.recv_from(&mut buf2) => {
                        let Ok((n, _)) = r else { return };
                        let out = a.fetch_add(n as u64, Ordering::Relaxed) + n as u64;
                        o.fetch_max(out.saturating_sub(3 * s.load(Ordering::Relaxed)), Ordering::Relaxed);
                        if let Ok(mut z) = z.lock() {
                            z.push(n);
                        }
                    }
                }
            }
        });
        BlackHole { addr, sent, answered, over, sizes }
    }
}

/// Before a client's address is validated the server sends at most three times the bytes
/// it received from it, counted at every datagram (RFC 9000 section 8.1): the handshake
/// flight and whatever rides with it (connection IDs, retransmissions) stay inside it,
/// for certificates that end the first flight at different lengths: with 88 to 100 more
/// names it ends just under the limit, where the transport alone let the next packet (the
/// first NEW_CONNECTION_ID frames) go past it.
#[test]
fn before_address_validation_the_server_sends_at_most_three_times_what_it_received() {
    for extra_names in [0, 88, 92, 96, 100] {
        let dir = tempfile::tempdir().expect("tmp");
        let origin = Origin::start("o");
        let pki = Pki::new(dir.path());
        let padding: Vec<String> =
            (0..extra_names).map(|i| format!("n{i:03}.padding.example.test")).collect();
        let mut names = vec!["edge.example.test"];
        names.extend(padding.iter().map(String::as_str));
        pki.leaf("edge", &names);
        let mut conf = h3_conf(dir.path(), &origin, &pki, "quic_retry = \"never\"\n");
        conf.http = "header_timeout = \"2s\"\n".into();
        let reel = Reel::start_env(&conf, &[("REEL_TEST_WORKERS", "1")]);
        let addr = reel.listener_addr("https").expect("https listener");
        rt().block_on(async {
            let mut holes = Vec::new();
            let mut tries = Vec::new();
            for _ in 0..4 {
                let hole = BlackHole::start(addr).await;
                let ep = h3::endpoint();
                let connecting = ep.connect(hole.addr, "localhost").expect("connect");
                tries.push(tokio::spawn(async move {
                    let _ = tokio::time::timeout(Duration::from_secs(30), connecting).await;
                }));
                holes.push((hole, ep));
            }
            // Every handshake given up by the server (its timeout): nothing more is sent.
            let mut waited = 0;
            while metric(&reel.metrics(), "reel_quic_handshake_failures_total{listener=\"https\"}")
                .unwrap_or(0.0)
                < 4.0
            {
                waited += 1;
                assert!(waited < 300, "the handshakes were not given up");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            for (h, _) in &holes {
                let (sent, answered) =
                    (h.sent.load(Ordering::Relaxed), h.answered.load(Ordering::Relaxed));
                let sizes = h.sizes.lock().map(|z| z.clone()).unwrap_or_default();
                assert!(sent > 0 && answered > 0, "sent {sent}, answered {answered}");
                assert_eq!(
                    h.over.load(Ordering::Relaxed),
                    0,
                    "{extra_names} more names: past 3x: received {sent} bytes, answered \
                     {answered} in datagrams of {sizes:?}"
                );
            }
            for t in tries {
                t.abort();
            }
        });
    }
}

#[test]
fn a_flood_of_initials_that_never_complete_gets_retry_within_the_amplification_limit() {
    let dir = tempfile::tempdir().expect("tmp");
    let origin = Origin::start("o");
    origin.put("/a.ts", cached(&body(1000, 4)));
    let pki = Pki::new(dir.path());
    pki.leaf("edge", &["edge.example.test"]);
    let conf = h3_conf(dir.path(), &origin, &pki, "");
    let reel = Reel::start_env(&conf, &[("REEL_TEST_WORKERS", "1")]);
    let addr = reel.listener_addr("https").expect("https listener");
    rt().block_on(async {
        // 80 handshakes left hanging: more than a worker takes before it asks for Retry.
        let mut holes = Vec::new();
        let mut flood = Vec::new();
        for _ in 0..80 {
            let hole = BlackHole::start(addr).await;
            let ep = h3::endpoint();
            let connecting = ep.connect(hole.addr, "localhost").expect("connect");
            flood.push(tokio::spawn(async move {
                let _ = tokio::time::timeout(Duration::from_secs(30), connecting).await;
            }));
            holes.push((hole, ep));
        }
        // Waited for without blocking this thread, which runs the flood's clients.
        let mut waited = 0;
        while metric(&reel.metrics(), "reel_quic_retries_total{listener=\"https\"}").unwrap_or(0.0)
            == 0.0
        {
            waited += 1;
            assert!(waited < 300, "no Retry under the flood");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        // A real client is asked to validate its address, does, and is served.
        let ep = h3::endpoint();
        let (_conn, mut c) = h3::connect(&ep, addr).await.expect("connection after Retry");
        let r = get(&mut c, "/a.ts", &[]).await;
        assert_eq!(r.status, 200);
        // Before validation the server sent at most three times what it received.
        for (h, _) in &holes {
            let (sent, answered) =
                (h.sent.load(Ordering::Relaxed), h.answered.load(Ordering::Relaxed));
            assert!(sent > 0);
            assert!(answered <= 3 * sent, "sent {sent} bytes, answered {answered}");
        }
        for f in flood {
            f.abort();
        }
    });
}

/// Initials from an address that never completes a handshake (as a flood with that
/// address forged) take none of the places its real connections need: with
/// `max_connections_per_client = 8`, twenty handshakes left hanging "from" 127.0.0.9
/// leave it seven TCP connections and one over QUIC, all served; past a few handshakes in
/// flight from the address, it is asked to Retry.
#[test]
fn initials_that_never_complete_take_no_places_of_their_address() {
    let dir = tempfile::tempdir().expect("tmp");
    let origin = Origin::start("o");
    origin.put("/a.ts", cached(&body(3000, 6)));
    let pki = Pki::new(dir.path());
    pki.leaf("edge", &["edge.example.test"]);
    let mut conf = h3_conf(dir.path(), &origin, &pki, "");
    conf.http = "max_connections_per_client = 8\n".into();
    let reel = Reel::start_env(&conf, &[("REEL_TEST_WORKERS", "1")]);
    let addr = reel.listener_addr("https").expect("https listener");
    let decided = |m: &str| {
        ["connections_open", "retries_total", "refused_client_total"]
            .iter()
            .map(|f| metric(m, &format!("reel_quic_{f}{{listener=\"https\"}}")).unwrap_or(0.0))
            .sum::<f64>()
    };
    rt().block_on(async {
        let mut holes = Vec::new();
        for _ in 0..20 {
            let hole = BlackHole::start_from(addr, "127.0.0.9").await;
            let ep = h3::endpoint();
            let connecting = ep.connect(hole.addr, "localhost").expect("connect");
            let t = tokio::spawn(async move {
                let _ = tokio::time::timeout(Duration::from_secs(30), connecting).await;
            });
            holes.push((hole, ep, t));
        }
        let mut waited = 0;
        while decided(&reel.metrics()) < 20.0 {
            waited += 1;
            assert!(waited < 300, "the Initials were not all decided: {}", reel.metrics());
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        // The address's own connections: seven over TCP, one over QUIC.
        let host = format!("127.0.0.1:{}", reel.data.port());
        let mut tcp = Vec::new();
        for i in 0..7 {
            let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)
                .expect("socket");
            s.bind(&"127.0.0.9:0".parse::<SocketAddr>().expect("addr").into()).expect("bind");
            s.connect(&reel.data.into()).expect("connect");
            let mut c = crate::common::Conn::from_stream(s.into()).expect("conn");
            let r = c.get(&host, "/a.ts");
            assert_eq!(r.map(|r| r.status).ok(), Some(200), "TCP connection {i} from 127.0.0.9");
            tcp.push(c);
        }
        let mut ep = quinn::Endpoint::client("127.0.0.9:0".parse().expect("addr")).expect("ep");
        ep.set_default_client_config(h3::client_config());
        let (_conn, mut c) = h3::connect(&ep, addr).await.expect("QUIC connection from 127.0.0.9");
        assert_eq!(get(&mut c, "/a.ts", &[]).await.status, 200);
        for (_, _, t) in holes {
            t.abort();
        }
    });
    let m = reel.metrics();
    assert!(
        metric(&m, "reel_quic_retries_total{listener=\"https\"}").unwrap_or(0.0) >= 1.0,
        "no Retry for twenty handshakes in flight from one address"
    );
}

#[test]
fn quic_retry_always_validates_every_new_connection() {
    let dir = tempfile::tempdir().expect("tmp");
    let origin = Origin::start("o");
    origin.put("/a.ts", cached(&body(5000, 5)));
    let pki = Pki::new(dir.path());
    pki.leaf("edge", &["edge.example.test"]);
    let reel = Reel::start(&h3_conf(dir.path(), &origin, &pki, "quic_retry = \"always\"\n"));
    let addr = reel.listener_addr("https").expect("https listener");
    rt().block_on(async {
        for _ in 0..3 {
            let (_conn, mut c) = h3::connect(&h3::endpoint(), addr).await.expect("connection");
            assert_eq!(get(&mut c, "/a.ts", &[]).await.status, 200);
        }
    });
    let m = reel.metrics();
    assert_eq!(metric(&m, "reel_quic_retries_total{listener=\"https\"}"), Some(3.0));
}

#[test]
fn a_reload_turns_http3_on_and_off() {
    let dir = tempfile::tempdir().expect("tmp");
    let origin = Origin::start("o");
    let a = body(100_000, 6);
    origin.put("/a.ts", cached(&a));
    let pki = Pki::new(dir.path());
    pki.leaf("edge", &["edge.example.test"]);
    let off = tls_conf(dir.path(), &origin, &pki);
    let mut reel = Reel::start(&off);
    let addr = reel.listener_addr("https").expect("https listener");
    let quick = |ep: &quinn::Endpoint| {
        let ep = ep.clone();
        async move {
            tokio::time::timeout(Duration::from_secs(3), h3::connect(&ep, addr))
                .await
                .ok()
                .and_then(Result::ok)
        }
    };
    rt().block_on(async {
        assert!(quick(&h3::endpoint()).await.is_none(), "HTTP/3 answered while off");
        let (head, _, _) =
            https11_get(addr, pki.client(&[b"http/1.1"]), "/a.ts").await.expect("HTTPS");
        assert!(!head.to_ascii_lowercase().contains("alt-svc"), "{head}");
    });
    reel.rewrite(&h3_conf(dir.path(), &origin, &pki, ""));
    assert_eq!(reel.sighup_reload()["reload"]["last_ok"], true);
    let conn = rt().block_on(async {
        let (conn, mut c) = quick(&h3::endpoint()).await.expect("HTTP/3 after the reload");
        assert!(get(&mut c, "/a.ts", &[]).await.body == a);
        let (head, _, _) =
            https11_get(addr, pki.client(&[b"http/1.1"]), "/a.ts").await.expect("HTTPS");
        assert!(head.to_ascii_lowercase().contains("alt-svc: h3="), "{head}");
        conn
    });
    // New certificates reach new HTTP/3 connections.
    let leaf2 = pki.leaf("edge2", &["edge.example.test"]);
    let mut rotated = h3_conf(dir.path(), &origin, &pki, "");
    rotated
        .listener_lines
        .insert("https".into(), format!("{}http3 = true\n", crate::tls::tls_lines(&pki, "edge2")));
    reel.rewrite(&rotated);
    assert_eq!(reel.sighup_reload()["reload"]["last_ok"], true);
    rt().block_on(async {
        let (c, _) = quick(&h3::endpoint()).await.expect("HTTP/3 after the rotation");
        let certs = c
            .peer_identity()
            .and_then(|i| i.downcast::<Vec<rustls::pki_types::CertificateDer<'static>>>().ok())
            .expect("peer certificates");
        assert_eq!(certs.first(), Some(&leaf2), "the new certificate");
    });
    reel.rewrite(&off);
    assert_eq!(reel.sighup_reload()["reload"]["last_ok"], true);
    rt().block_on(async {
        // The open connection is told to go (GOAWAY, then closed); new ones find nothing.
        tokio::time::timeout(Duration::from_secs(10), conn.closed()).await.expect("closed");
        assert!(quick(&h3::endpoint()).await.is_none(), "HTTP/3 answered after the reload");
    });
}

/// HTTP/3 viewers through a binary upgrade: the UDP sockets are handed over with the TCP
/// ones; the old process's connections are told to go (GOAWAY) and finish what they
/// have, a viewer reconnects and the new process answers. No response is short or
/// wrong, and every request is answered.
#[test]
fn an_upgrade_under_http3_load_hands_over_the_udp_sockets() {
    use crate::restarts::{Successor, become_subreaper, install, status};
    become_subreaper();
    let dir = tempfile::tempdir().expect("tmp");
    let origin = Origin::start("o");
    let objects: Vec<Vec<u8>> = (0..8).map(|i| body(150_000 + i * 1000, i as u8)).collect();
    for (i, b) in objects.iter().enumerate() {
        origin.put(&format!("/seg/{i}.ts"), cached(b));
    }
    let pki = Pki::new(dir.path());
    pki.leaf("edge", &["edge.example.test"]);
    let conf = h3_conf(dir.path(), &origin, &pki, "");
    let bin = install(dir.path(), std::path::Path::new(crate::common::BIN));
    let mut reel = Reel::start_with(&conf, &bin, &[]);
    let (addr, admin) = (reel.listener_addr("https").expect("https"), reel.admin);
    let old_pid = reel.pid();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let served = Arc::new(AtomicU64::new(0));
    let objects = Arc::new(objects);
    // Two viewers, each on its own connection, asking in turn; a viewer whose connection
    // is closed (or refuses a request after GOAWAY) opens a new one and asks again.
    let viewers: Vec<_> = (0..2)
        .map(|v| {
            let (stop, served, objects) = (stop.clone(), served.clone(), objects.clone());
            std::thread::spawn(move || {
                rt().block_on(async move {
                    let ep = h3::endpoint();
                    let mut conn = None;
                    let (mut i, mut retries, mut failed) = (v, 0u64, Vec::new());
                    while !stop.load(Ordering::SeqCst) {
                        if conn.is_none() {
                            let c = tokio::time::timeout(
                                Duration::from_secs(10),
                                h3::connect(&ep, addr),
                            )
                            .await;
                            match c {
                                Ok(Ok(c)) => conn = Some(c),
                                _ => {
                                    retries += 1;
                                    continue;
                                }
                            }
                        }
                        let Some((_, c)) = conn.as_mut() else { continue };
                        let n = i % objects.len();
                        match h3::request_at(
                            c,
                            "edge.example.test",
                            "GET",
                            &format!("/seg/{n}.ts"),
                            &[],
                            None,
                        )
                        .await
                        {
                            Ok(r) if r.status == 200 && r.body == objects[n] => {
                                served.fetch_add(1, Ordering::SeqCst);
                                i += 1;
                            }
                            Ok(r) => failed.push(format!(
                                "/seg/{n}.ts: {} {} bytes",
                                r.status,
                                r.body.len()
                            )),
                            Err(_) => {
                                // Asked again on a new connection.
                                retries += 1;
                                conn = None;
                            }
                        }
                    }
                    (retries, failed)
                })
            })
        })
        .collect();
    eventually("HTTP/3 load before the upgrade", || {
        (served.load(Ordering::SeqCst) > 50).then_some(())
    });
    install(dir.path(), std::path::Path::new(crate::common::BIN));
    reel.signal(libc::SIGUSR2);
    let new_pid = eventually("the new process on the admin socket", || {
        let pid = status(admin)["pid"].as_u64()? as i32;
        (pid != old_pid as i32).then_some(pid)
    });
    let successor = Successor { pid: new_pid, reaped: false };
    let exit = reel.wait_exit();
    assert!(exit.success(), "the old process drains and exits 0: {exit:?}");
    // The new process serves HTTP/3 on the same sockets.
    let at_exit = served.load(Ordering::SeqCst);
    eventually("HTTP/3 served by the new process", || {
        (served.load(Ordering::SeqCst) > at_exit + 50).then_some(())
    });
    stop.store(true, Ordering::SeqCst);
    for v in viewers {
        let (retries, failed) = v.join().expect("viewer");
        assert!(failed.is_empty(), "short or wrong responses: {failed:?}");
        assert!(retries < 50, "{retries} retries");
        println!("viewer retries: {retries}");
    }
    // The very sockets: taken over, not bound anew, and only once the old process let go
    // of them (it says so, or it exits first and the end of the channel says it).
    reel.logs.wait_for("the HTTP/3 sockets taken over", |v| {
        crate::common::message(v) == "took over the HTTP/3 sockets"
    });
    let lines = reel.logs.dump();
    let (took, gone) = (
        lines.find("took over the HTTP/3 sockets").expect("taken over"),
        lines
            .find("let go of its HTTP/3 sockets")
            .or_else(|| lines.find("the replaced process has exited"))
            .expect("the old process let go or exited"),
    );
    assert!(gone < took, "the sockets were read by both processes at once");
    let m = crate::common::request(admin, "GET", "127.0.0.1", "/metrics", &[]).text();
    assert!(metric(&m, "reel_requests_by_protocol_total{protocol=\"h3\"}").unwrap_or(0.0) > 0.0);
    assert_eq!(successor.stop(), 0);
}

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

/// SIGTERM with an HTTP/3 response in flight: it is finished byte-exact, then the
/// process exits 0.
#[test]
fn sigterm_finishes_an_http3_response_in_flight() {
    let dir = tempfile::tempdir().expect("tmp");
    let origin = Origin::start("o");
    let slow = body(800_000, 9);
    origin.put("/slow.ts", cached(&slow).delay(Duration::from_millis(1500)));
    let pki = Pki::new(dir.path());
    pki.leaf("edge", &["edge.example.test"]);
    let mut reel = Reel::start(&h3_conf(dir.path(), &origin, &pki, ""));
    let addr = reel.listener_addr("https").expect("https listener");
    let r = rt().block_on(async {
        let (_conn, c) = h3::connect(&h3::endpoint(), addr).await.expect("connection");
        let local = tokio::task::LocalSet::new();
        local
            .run_until(async {
                let mut c2 = c.clone();
                let req =
                    tokio::task::spawn_local(async move { get(&mut c2, "/slow.ts", &[]).await });
                let mut waited = 0;
                while origin.hits("/slow.ts") == 0 {
                    waited += 1;
                    assert!(waited < 1000, "the origin was never asked");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                reel.signal(libc::SIGTERM);
                req.await.expect("task")
            })
            .await
    });
    assert_eq!(r.status, 200);
    assert!(r.body == slow, "not byte-exact");
    let exit = reel.wait_exit();
    assert!(exit.success(), "{exit:?}");
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

/// Relays one QUIC client to `server` from address `from`; once `mute` is set, drops
/// everything the client sends (its acknowledgements, its requests) and still delivers
/// what the server sends: a client that stopped acknowledging.
struct Mute {
    addr: SocketAddr,
    mute: Arc<std::sync::atomic::AtomicBool>,
}

impl Mute {
    async fn start(server: SocketAddr, from: &str) -> Mute {
        let front = tokio::net::UdpSocket::bind("127.0.0.1:0").await.expect("udp");
        let back = tokio::net::UdpSocket::bind(format!("{from}:0")).await.expect("udp");
        let mute = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let addr = front.local_addr().expect("addr");
        let m = mute.clone();
        tokio::spawn(async move {
            let (mut buf, mut buf2) = (vec![0u8; 65_536], vec![0u8; 65_536]);
            let mut client = None;
            loop {
                tokio::select! {
                    r = front.recv_from(&mut buf) => {
                        let Ok((n, from)) = r else { return };
                        client = Some(from);
                        if !m.load(Ordering::Relaxed) {
                            let _ = back.send_to(&buf[..n], server).await;
                        }
                    }
                    r = back.recv_from(&mut buf2) => {
                        let Ok((n, _)) = r else { return };
                        if let Some(c) = client {
                            let _ = front.send_to(&buf2[..n], c).await;
                        }
                    }
                }
            }
        });
        Mute { addr, mute }
    }
}

/// A client that asked for `/big.ts`, got the head, and stopped acknowledging: its relay,
/// endpoint, connection, request side and the response stream.
type Silent = (Mute, quinn::Endpoint, quinn::Connection, h3::SendRequest, h3::RequestStream);

/// `n` clients from address `from` that ask `server` for `/big.ts` and, once its head
/// arrived, stop acknowledging; those that got that far.
async fn silent_clients(server: SocketAddr, from: &str, n: usize) -> Vec<Silent> {
    let mut tries = tokio::task::JoinSet::new();
    for _ in 0..n {
        let relay = Mute::start(server, from).await;
        tries.spawn(async move {
            let ep = h3::endpoint();
            let (conn, mut c) = h3::connect(&ep, relay.addr).await.ok()?;
            let req = http::Request::get("https://edge.example.test/big.ts").body(()).ok()?;
            let mut st = c.send_request(req).await.ok()?;
            st.finish().await.ok()?;
            st.recv_response().await.ok()?;
            relay.mute.store(true, Ordering::Relaxed);
            Some((relay, ep, conn, c, st))
        });
    }
    let mut silent = Vec::new();
    while let Some(t) = tries.join_next().await {
        if let Ok(Some(s)) = t {
            silent.push(s);
        }
    }
    silent
}

/// The connections of a worker share `http.h3_send_budget`: with a 1 MiB budget, 40
/// clients that stop acknowledging are given send windows of 1 MiB and some between them
/// (their share when each arrived), not 40 full windows of 256 KiB (10 MiB).
#[test]
fn the_connections_of_a_worker_share_its_send_budget() {
    let dir = tempfile::tempdir().expect("tmp");
    let origin = Origin::start("o");
    origin.put("/big.ts", cached(&body(2 << 20, 10)));
    let pki = Pki::new(dir.path());
    pki.leaf("edge", &["edge.example.test"]);
    let mut conf = h3_conf(dir.path(), &origin, &pki, "");
    conf.http = "h3_send_budget = \"1MiB\"\n".into();
    let reel = Reel::start_env(&conf, &[("REEL_TEST_WORKERS", "1")]);
    let addr = reel.listener_addr("https").expect("https listener");
    rt().block_on(async {
        let silent = silent_clients(addr, "127.0.0.3", 40).await;
        assert_eq!(silent.len(), 40, "every client served");
        let m = reel.metrics();
        let windows = metric(&m, "reel_quic_send_window_bytes{listener=\"https\"}")
            .expect("reel_quic_send_window_bytes");
        // 1 MiB x (1 + ln(40 / 4)) = 3.3 MiB when they arrive one after the other.
        assert!(
            (40.0 * 16384.0..=3.4 * 1048576.0).contains(&windows),
            "the send windows of 40 connections: {} KiB",
            windows / 1024.0
        );
    });
}

/// The resident set of process `pid`, in bytes.
fn rss(pid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    let kb = s
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .expect("VmRSS");
    kb * 1024
}

/// HTTP/3 clients that ask for a large segment and then stop acknowledging pin a bounded
/// amount of memory: one address has at most 64 QUIC connections (the rest are refused),
/// each holding at most its 256 KiB send window, so 150 such clients from one address
/// leave reel's resident set well under 48 MiB larger (it was over 1 MiB each). A client
/// from another address is served meanwhile; at the send timeout the stalled connections
/// are closed, their responses never completed and no new request taken on them.
#[test]
fn clients_that_stop_acknowledging_pin_a_bounded_amount_of_memory() {
    const SILENT: usize = 150;
    let dir = tempfile::tempdir().expect("tmp");
    let origin = Origin::start("o");
    let big = body(2 << 20, 9);
    origin.put("/big.ts", cached(&big));
    let pki = Pki::new(dir.path());
    pki.leaf("edge", &["edge.example.test"]);
    let mut conf = h3_conf(dir.path(), &origin, &pki, "");
    conf.http = "send_timeout = \"8s\"\n".into();
    let reel = Reel::start_env(&conf, &[("REEL_TEST_WORKERS", "1")]);
    let addr = reel.listener_addr("https").expect("https listener");
    let open = |m: &str| metric(m, "reel_quic_connections_open{listener=\"https\"}").unwrap_or(0.0);
    rt().block_on(async {
        // Warm: the object cached, the HTTP/3 path's allocations made.
        let (_w, mut warm) = h3::connect(&h3::endpoint(), addr).await.expect("warm connection");
        for _ in 0..3 {
            let r = get(&mut warm, "/big.ts", &[]).await;
            assert!(r.status == 200 && r.body == big);
        }
        drop(warm);
        let before = rss(reel.pid());
        let mut silent = silent_clients(addr, "127.0.0.1", SILENT).await;
        let served = silent.len();
        assert!(served > 0, "no client from the address was served");
        // Another address is served meanwhile; by then the worker has also copied into the
        // transport what each silent connection's window takes.
        let mut ep = quinn::Endpoint::client("127.0.0.2:0".parse().expect("addr")).expect("ep");
        ep.set_default_client_config(h3::client_config());
        let (_ok, mut c) = h3::connect(&ep, addr).await.expect("a client of another address");
        let r = get(&mut c, "/big.ts", &[]).await;
        assert!(r.status == 200 && r.body == big, "status {}", r.status);
        let grown = rss(reel.pid()).saturating_sub(before);
        let m = reel.metrics();
        eprintln!("{served} of {SILENT} silent connections served: +{} KiB resident", grown >> 10);
        assert!(
            grown < 48 << 20,
            "{served} silent connections of one address (of {SILENT}; {} open) grew reel's \
             resident set by {} MiB",
            open(&m),
            grown >> 20
        );
        assert!(open(&m) <= 65.0, "one address holds {} QUIC connections", open(&m) - 1.0);
        let windows = metric(&m, "reel_quic_send_window_bytes{listener=\"https\"}")
            .expect("reel_quic_send_window_bytes");
        assert!(
            (served as f64 * 16384.0..=65.0 * 256.0 * 1024.0).contains(&windows),
            "the send windows of {served} connections: {windows} bytes"
        );
        // At the send timeout the stalled connections close (the served one stays).
        let deadline = std::time::Instant::now() + 2 * reel_test_support::PATIENCE;
        while open(&reel.metrics()) > 1.0 {
            assert!(
                std::time::Instant::now() < deadline,
                "stalled connections still open: {}",
                open(&reel.metrics())
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        // One of them heard again: its response was cut short, and no new request is taken.
        let (relay, _ep, conn, mut c, mut st) = silent.pop().expect("a silent client");
        relay.mute.store(false, Ordering::Relaxed);
        let mut got = 0usize;
        let ended = async {
            while let Some(mut d) = st.recv_data().await.map_err(|e| e.to_string())? {
                let n = bytes::Buf::remaining(&d);
                got += n;
                bytes::Buf::advance(&mut d, n);
            }
            Ok::<_, String>(())
        };
        let r = tokio::time::timeout(reel_test_support::PATIENCE, ended).await;
        assert!(!matches!(r, Ok(Ok(()))), "a stalled response ended as if complete ({got} bytes)");
        let again = tokio::time::timeout(
            reel_test_support::PATIENCE,
            h3::request(&mut c, "GET", "/big.ts", &[], None),
        )
        .await;
        assert!(!matches!(again, Ok(Ok(_))), "a new request was served on a stalled connection");
        drop(conn);
    });
}
