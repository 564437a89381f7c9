//! Clients that stop acknowledging: the send budget of a worker and the memory they can pin.

use super::*;

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
