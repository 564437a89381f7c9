//! Before address validation: the amplification limit byte for byte, Retry under a flood of Initials, forged Initials that take no places, `quic_retry = "always"`.

use super::*;

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
