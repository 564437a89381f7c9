//! Pooled body buffers and misses per connection over TLS: clients that stop reading cannot take other viewers' buffers, which come back after send_timeout; one connection waits on the origin with at most its misses.

use super::*;

/// A TLS connection from `from` (another loopback address is another client) with a small
/// receive buffer, as a client that means to stop reading sets it.
async fn tls_connect_from(from: &str, to: SocketAddr, cfg: Arc<rustls::ClientConfig>) -> Tls {
    let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    s.bind(&format!("{from}:0").parse::<SocketAddr>().unwrap().into()).unwrap();
    s.set_recv_buffer_size(4096).unwrap();
    s.connect(&to.into()).unwrap();
    s.set_nonblocking(true).unwrap();
    let tcp = TcpStream::from_std(s.into()).unwrap();
    let name = ServerName::try_from("edge.example.test".to_owned()).unwrap();
    tokio_rustls::TlsConnector::from(cfg).connect(name, tcp).await.expect("TLS")
}

/// Stalled HTTP/2 clients on `addr`, from 127.0.0.2: each opens huge flow-control
/// windows, asks for `path` on 8 streams and never reads.
async fn stalled_clients(addr: SocketAddr, pki: &Pki, path: &str, n: usize) -> Vec<RawH2<Tls>> {
    let mut stalled = Vec::new();
    for _ in 0..n {
        let tls = tls_connect_from("127.0.0.2", addr, pki.client(&[b"h2"])).await;
        let mut raw = RawH2::handshake(tls).await;
        // SETTINGS_INITIAL_WINDOW_SIZE 2^31-1, and the connection window as large.
        let mut settings = vec![0, 4];
        settings.extend_from_slice(&0x7fff_ffffu32.to_be_bytes());
        raw.send(SETTINGS, 0, 0, &settings).await;
        raw.send(WINDOW_UPDATE, 0, 0, &(0x7fff_ffffu32 - 65_535).to_be_bytes()).await;
        for i in 0..8u32 {
            raw.send(HEADERS, END_STREAM | END_HEADERS, 2 * i + 1, &get_block(path)).await;
        }
        stalled.push(raw);
    }
    stalled
}

/// A reel over `dir` whose `/big.ts` (2 MiB) is stored, with `send_timeout`.
fn big_hit_reel(dir: &Path, origin: &Origin, pki: &Pki, send_timeout: &str) -> (Reel, Vec<u8>) {
    let big = body(2 << 20, 5);
    origin.put("/big.ts", Object::ok(big.clone()).header("cache-control", "max-age=3600"));
    let mut conf = tls_conf(dir, origin, pki);
    conf.http = format!("send_timeout = \"{send_timeout}\"\nmax_connections_per_client = 0\n");
    let reel = Reel::start(&conf);
    assert_eq!(get(reel.data, "/big.ts").body.len(), big.len());
    eventually("stored", || {
        (get(reel.data, "/big.ts").cache_status() == "reel; hit").then_some(())
    });
    (reel, big)
}

/// Issue 23.1: HTTP/2 clients that open huge flow-control windows, ask for multi-MiB hits
/// and never read keep pooled buffers queued in their connections. One client address may
/// hold at most its share of a worker's pool, so other HTTPS viewers, HTTP/2 and HTTP/1.1
/// alike, are served at once even while those streams wait out a long `send_timeout`.
#[test]
fn clients_that_stop_reading_cannot_take_the_body_buffers_of_other_https_viewers() {
    let dir = tempfile::tempdir().expect("tmp");
    let origin = Origin::start("o");
    let pki = Pki::new(dir.path());
    pki.leaf("edge", &["edge.example.test"]);
    let (reel, big) = big_hit_reel(dir.path(), &origin, &pki, "60s");
    let addr = reel.listener_addr("https").expect("https listener");
    let lent = || metric(&reel.metrics(), "reel_body_buffers_lent").unwrap_or(0.0);
    rt().block_on(async {
        let stalled = stalled_clients(addr, &pki, "/big.ts", 48).await;
        eventually("the stalled clients hold buffers", || (lent() >= 100.0).then_some(()));
        let guard = Duration::from_secs(10);
        let c = h2_client(addr, pki.client(&[b"h2"]), "edge.example.test").await;
        for _ in 0..3 {
            let r = tokio::time::timeout(guard, h2_get(&c, "/big.ts")).await.expect("h2 viewer");
            assert_eq!(r.body.len(), big.len());
        }
        for _ in 0..3 {
            let r = https11_get(addr, pki.client(&[b"http/1.1"]), "/big.ts");
            let r = tokio::time::timeout(guard, r).await.expect("HTTPS/1.1 viewer").expect("TLS");
            assert_eq!(r.1.len(), big.len());
        }
        drop(stalled);
    });
}

/// Issue 23.1 and 23.11: the streams of a client that stopped reading are reset after
/// `send_timeout` and the connection closed once it has written nothing for as long with
/// buffers queued, so every pooled buffer comes back while the client is still connected,
/// long before `idle_timeout`.
#[test]
fn buffers_held_by_clients_that_stopped_reading_come_back_after_send_timeout() {
    let dir = tempfile::tempdir().expect("tmp");
    let origin = Origin::start("o");
    let pki = Pki::new(dir.path());
    pki.leaf("edge", &["edge.example.test"]);
    let (reel, _) = big_hit_reel(dir.path(), &origin, &pki, "1s");
    let addr = reel.listener_addr("https").expect("https listener");
    let lent = || metric(&reel.metrics(), "reel_body_buffers_lent").unwrap_or(0.0);
    rt().block_on(async {
        let stalled = stalled_clients(addr, &pki, "/big.ts", 8).await;
        eventually("the stalled clients hold buffers", || (lent() >= 8.0).then_some(()));
        eventually("every buffer back", || (lent() == 0.0).then_some(()));
        drop(stalled);
    });
}

/// Issue 23.3: one HTTP/2 connection's streams cannot each hold an origin connection.
/// With `max_misses_per_connection = 2`, six distinct misses of a slow origin on one
/// connection put two requests on the origin; the others wait `lock_timeout` and get 503,
/// while a miss of another connection is not held back.
#[test]
fn one_connection_waits_on_the_origin_with_at_most_its_misses() {
    let dir = tempfile::tempdir().expect("tmp");
    let origin = Origin::start("o");
    let gate = Gate::default();
    for i in 0..7u8 {
        let obj = Object::ok(body(100, i)).header("cache-control", "max-age=60");
        origin.put(&format!("/m{i}.ts"), obj.gated(&gate));
    }
    let pki = Pki::new(dir.path());
    pki.leaf("edge", &["edge.example.test"]);
    let mut conf = tls_conf(dir.path(), &origin, &pki);
    conf.rules = format!("max_misses_per_connection = 2\nlock_timeout = \"1s\"\n{}", conf.rules);
    let reel = Reel::start(&conf);
    let addr = reel.listener_addr("https").expect("https listener");
    let hits = || (0..6).map(|i| origin.hits(&format!("/m{i}.ts"))).sum::<u64>();
    rt().block_on(async {
        let c = h2_client(addr, pki.client(&[b"h2"]), "edge.example.test").await;
        let streams: Vec<_> = (0..6)
            .map(|i| {
                let c = c.clone();
                tokio::spawn(async move { h2_get(&c, &format!("/m{i}.ts")).await.status })
            })
            .collect();
        wait_until_async("two misses at the origin", || hits() == 2).await;
        // Another connection's miss is not held back by this one's.
        let data = reel.data;
        let other = std::thread::spawn(move || get(data, "/m6.ts").status);
        wait_until_async("the other connection's miss", || origin.hits("/m6.ts") == 1).await;
        // Past lock_timeout the four waiting streams get 503.
        wait_until_async("four 503s", || streams.iter().filter(|s| s.is_finished()).count() == 4)
            .await;
        gate.open();
        let mut statuses = Vec::new();
        for s in streams {
            statuses.push(s.await.expect("stream"));
        }
        statuses.sort_unstable();
        assert_eq!(statuses, [200, 200, 503, 503, 503, 503]);
        assert_eq!(other.join().expect("other"), 200);
    });
    assert_eq!(hits(), 2, "no more than two of the connection's misses reached the origin");
}
