//! HTTP/2 over TLS (real handshakes on 127.0.0.1, ALPN `h2`): the same handler as
//! HTTP/1.1, many streams on one connection byte-exact, HEAD, bodies, limits, and the
//! defences: rapid reset, CONTINUATION flood, PING flood, slow readers, drain; the
//! order in which one connection's responses are sent.

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use reel_http::{CloseReason, H2Settings, Limits};
use reel_test_support::h2::{
    CANCEL, CONTINUATION, DATA, END_HEADERS, END_STREAM, ENHANCE_YOUR_CALM, HEADERS, PING,
    RST_STREAM, RawH2, Reply, WINDOW_UPDATE, client as h2_client, exchange, frame, get_block,
    get_block_with,
};
use reel_test_support::{PATIENCE, skip, wait_until_async, which};
use reel_tls::testing::TestCa;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::common::{FILE_LEN, Server, file_data};

type Tls = tokio_rustls::client::TlsStream<TcpStream>;

async fn tls(addr: SocketAddr, ca: &TestCa, alpn: &[&[u8]]) -> Tls {
    let tcp = TcpStream::connect(addr).await.unwrap();
    let name = rustls::pki_types::ServerName::try_from("test.example").unwrap();
    let s =
        tokio_rustls::TlsConnector::from(ca.client_config(alpn)).connect(name, tcp).await.unwrap();
    assert_eq!(s.get_ref().1.alpn_protocol(), alpn.first().copied());
    s
}

/// An `h2` client connection (ALPN offers `h2`, then `http/1.1`).
async fn client(server: &Server) -> h2::client::SendRequest<Bytes> {
    h2_client(tls(server.addr, server.ca.as_ref().unwrap(), &[b"h2", b"http/1.1"]).await).await
}

async fn request(
    send: &h2::client::SendRequest<Bytes>,
    method: &str,
    path: &str,
    body: Option<&[u8]>,
) -> Result<Reply, h2::Error> {
    let req = http::Request::builder()
        .method(method)
        .uri(format!("https://test.example{path}"))
        .body(())
        .unwrap();
    exchange(send, req, body).await
}

async fn get(send: &h2::client::SendRequest<Bytes>, path: &str) -> Reply {
    request(send, "GET", path, None).await.unwrap()
}

fn server() -> Server {
    Server::start_h2(Limits::default(), H2Settings::default())
}

#[tokio::test(flavor = "current_thread")]
async fn many_multiplexed_streams_return_their_own_bytes() {
    let server = server();
    let c = client(&server).await;
    let mut work = Vec::new();
    for i in 0..120u64 {
        let c = c.clone();
        work.push(tokio::spawn(async move {
            let (off, len) = (i * 104_729 % (FILE_LEN - 300_000), 1000 + i * 2_111);
            let r = get(&c, &format!("/file?off={off}&len={len}")).await;
            assert_eq!(r.status, 200);
            assert_eq!(r.headers["content-length"], len.to_string().as_str());
            assert!(r.body == file_data()[off as usize..(off + len) as usize], "stream {i}");
        }));
    }
    for w in work {
        w.await.unwrap();
    }
    // Memory and streaming bodies, and the request as the handler saw it.
    let r = get(&c, "/hello").await;
    assert_eq!(r.body, b"hello world");
    let r = get(&c, "/stream").await;
    assert_eq!(r.body.len(), 3 + 5000 + 20_000);
    assert!(r.headers.get("transfer-encoding").is_none());
    let r = get(&c, "/info?q=1").await;
    assert_eq!(String::from_utf8(r.body).unwrap(), "GET /info q=q=1 host=test.example v=2 ka=true");
    // The whole 24 MiB file on one stream.
    let r = get(&c, "/file").await;
    assert!(r.body == file_data());
}

#[tokio::test(flavor = "current_thread")]
async fn head_methods_bodies_and_limits() {
    let limits = Limits { max_body_bytes: 10_000, ..Limits::default() };
    let server = Server::start_h2(limits, H2Settings::default());
    let c = client(&server).await;
    let r = request(&c, "HEAD", "/file?len=5000", None).await.unwrap();
    assert_eq!((r.status, r.body.len()), (200, 0));
    assert_eq!(r.headers["content-length"], "5000");
    let r = request(&c, "POST", "/methods", None).await.unwrap();
    assert_eq!(r.status, 405);
    assert_eq!(r.headers["allow"], "GET, HEAD");
    let r = request(&c, "POST", "/echo", Some(b"hello h2")).await.unwrap();
    assert_eq!((r.status, r.body.as_slice()), (200, &b"hello h2"[..]));
    let r = request(&c, "POST", "/echo", Some(&vec![b'x'; 20_000])).await.unwrap();
    assert_eq!(r.status, 413);
    // A head over the limits: the stream is refused, the connection lives on.
    let long = format!("/{}", "a".repeat(9000));
    assert_eq!(get(&c, &long).await.status, 414);
    let r = get(&c, "/file?off=5&len=5").await;
    assert_eq!(r.body, &file_data()[5..10]);
    // A file shorter than its range: the stream is reset, never ended short.
    let e = request(&c, "GET", &format!("/file?off={}&len=100000", FILE_LEN - 40), None).await;
    assert!(e.is_err(), "a short body must not complete");
    assert_eq!(get(&c, "/hello").await.status, 200);
    // HTTP/1.1 still works on the same listener for clients that do not offer h2.
    let mut s = tls(server.addr, server.ca.as_ref().unwrap(), &[b"http/1.1"]).await;
    s.write_all(b"GET /hello HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n").await.unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out).await;
    assert!(String::from_utf8_lossy(&out).ends_with("hello world"));
}

/// A hand-written HTTP/2 connection (ALPN `h2`) for the misbehaving cases.
async fn connect_raw(server: &Server) -> RawH2<Tls> {
    RawH2::handshake(tls(server.addr, server.ca.as_ref().unwrap(), &[b"h2"]).await).await
}

#[tokio::test(flavor = "current_thread")]
async fn rapid_reset_gets_goaway_while_other_connections_are_served() {
    let settings = H2Settings { max_resets_per_second: 20, ..H2Settings::default() };
    let server = Server::start_h2(Limits::default(), settings);
    let good = client(&server).await;
    // Streams accepted and running (/slow), then reset: counted by the server.
    let mut raw = connect_raw(&server).await;
    let mut id = 1u32;
    let mut goaway = None;
    for _ in 0..40 {
        let started = server.slow_started();
        raw.send(HEADERS, END_STREAM | END_HEADERS, id, &get_block("t", "/slow")).await;
        // Reset once the stream's handler runs, unless the server has given up on the
        // connection already (it starts no more handlers then).
        tokio::select! {
            () = wait_until_async("the stream's handler to start", || {
                server.slow_started() > started
            }) => {}
            code = raw.goaway() => {
                goaway = Some(code);
                break;
            }
        }
        raw.send(RST_STREAM, 0, id, &CANCEL.to_be_bytes()).await;
        id += 2;
    }
    let goaway = match goaway {
        Some(code) => code,
        None => raw.goaway().await,
    };
    assert_eq!(goaway, Some(ENHANCE_YOUR_CALM));
    // The classic attack shape: HEADERS and RST_STREAM back to back in one write.
    let mut raw = connect_raw(&server).await;
    let mut burst = Vec::new();
    for i in 0..500u32 {
        let id = 2 * i + 1;
        burst.extend(frame(HEADERS, END_STREAM | END_HEADERS, id, &get_block("t", "/hello")));
        burst.extend(frame(RST_STREAM, 0, id, &CANCEL.to_be_bytes()));
    }
    let _ = raw.write(&burst).await;
    assert_eq!(raw.goaway().await, Some(ENHANCE_YOUR_CALM));
    // Meanwhile, an honest connection is served as usual.
    assert_eq!(get(&good, "/hello").await.body, b"hello world");
    let mut abuse = 0;
    for _ in 0..2 {
        if matches!(server.outcome().close, CloseReason::Abuse(_)) {
            abuse += 1;
        }
    }
    assert_eq!(abuse, 2);
}

#[tokio::test(flavor = "current_thread")]
async fn continuation_flood_gets_goaway() {
    let server = server();
    let good = client(&server).await;
    let mut raw = connect_raw(&server).await;
    // HEADERS without END_HEADERS, then CONTINUATION frames that never end the block.
    let mut block = get_block("t", "/");
    block.extend_from_slice(&[0x40, 0x01, b'x', 0x7f, 0x81, 0x7f]);
    raw.send(HEADERS, END_STREAM, 1, &block).await;
    let mut flood = Vec::new();
    for _ in 0..10_000 {
        flood.extend(frame(CONTINUATION, 0, 1, b"yyyyyyyy"));
    }
    let _ = raw.write(&flood).await;
    let code = raw.goaway().await;
    assert!(code.is_some(), "no GOAWAY");
    assert_eq!(get(&good, "/hello").await.status, 200);
    let o = server.outcome();
    assert!(matches!(o.close, CloseReason::Abuse(_) | CloseReason::Protocol(_)), "{o:?}");
}

#[tokio::test(flavor = "current_thread")]
async fn ping_flood_from_a_client_that_does_not_read_is_bounded_and_closed_when_idle() {
    let limits = Limits { idle_timeout: Duration::from_millis(800), ..Limits::default() };
    let server = Server::start_h2(limits, H2Settings::default());
    let mut raw = connect_raw(&server).await;
    let mut flood = Vec::new();
    for i in 0..2000u64 {
        flood.extend(frame(PING, 0, 0, &i.to_be_bytes()));
    }
    // Written without reading the answers (bounded by the TCP buffers on both sides).
    let writer = tokio::spawn(async move {
        for _ in 0..200 {
            if tokio::time::timeout(Duration::from_millis(200), raw.write(&flood)).await.is_err() {
                break;
            }
        }
        raw
    });
    let good = client(&server).await;
    assert_eq!(get(&good, "/hello").await.status, 200);
    let o = server.outcome();
    assert_eq!(o.close, CloseReason::IdleTimeout);
    drop(writer.await.unwrap());
}

#[tokio::test(flavor = "current_thread")]
async fn a_stream_whose_reader_stalls_is_reset_and_its_buffers_come_back() {
    let limits = Limits { idle_timeout: Duration::from_millis(600), ..Limits::default() };
    let server = Server::start_h2(limits, H2Settings::default());
    let mut raw = connect_raw(&server).await;
    // Open the connection window wide, request the 24 MiB file, never open the stream's
    // own window past its initial 64 KiB: the stream stalls.
    raw.send(WINDOW_UPDATE, 0, 0, &(1u32 << 30).to_be_bytes()).await;
    raw.send(HEADERS, END_STREAM | END_HEADERS, 1, &get_block("t", "/file")).await;
    // The stalled stream holds at most its budget; it is reset after the idle timeout,
    // and once reset, nothing is held.
    assert_eq!(raw.reset_of(1).await, Some(CANCEL), "the stalled stream is reset");
    let good = client(&server).await;
    assert_eq!(get(&good, "/pool").await.body, b"0");
    assert_eq!(get(&good, "/hello").await.status, 200);
    drop(raw);
}

#[tokio::test(flavor = "current_thread")]
async fn drain_sends_goaway_finishes_streams_and_closes() {
    let server = server();
    let c = client(&server).await;
    let slow = {
        let c = c.clone();
        tokio::spawn(async move { get(&c, "/slow").await })
    };
    // The stream is in flight when the drain begins.
    wait_until_async("the /slow handler to start", || server.slow_started() == 1).await;
    server.drain();
    let r = slow.await.unwrap();
    assert_eq!((r.status, r.body.as_slice()), (200, &b"slow done"[..]));
    assert_eq!(server.outcome().close, CloseReason::Drain);
    // New streams on the drained connection are refused.
    assert!(request(&c, "GET", "/hello", None).await.is_err());
}

/// `curl --http2` (Debian's curl is built with nghttp2), skipped visibly when absent.
#[test]
fn curl_http2_interoperates() {
    let Some(curl) = which("curl") else {
        return skip("curl is not installed");
    };
    let server = server();
    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("ca.pem");
    std::fs::write(&ca, server.ca.as_ref().unwrap().pem()).unwrap();
    let out = std::process::Command::new(curl)
        .args(["-sS", "--http2", "--cacert"])
        .arg(&ca)
        .args(["--resolve", &format!("test.example:{}:127.0.0.1", server.addr.port())])
        .args(["-w", "\n%{http_version} %{http_code}"])
        .arg(format!("https://test.example:{}/file?off=100&len=300000", server.addr.port()))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let (body, tail) = out.stdout.split_at(300_000);
    assert!(body == &file_data()[100..300_100]);
    assert_eq!(String::from_utf8_lossy(tail), "\n2 200");
}

#[tokio::test(flavor = "current_thread")]
async fn a_handler_that_ends_keep_alive_gets_goaway_after_the_next_request() {
    let server = server();
    let c = client(&server).await;
    assert_eq!(get(&c, "/hello").await.status, 200);
    server.close_after_responses();
    // The request that arrives next is answered in full; the connection then goes.
    let r = get(&c, "/slow").await;
    assert_eq!((r.status, r.body.as_slice()), (200, &b"slow done"[..]));
    assert_eq!(server.outcome().close, CloseReason::NotKeepAlive);
    assert!(request(&c, "GET", "/hello", None).await.is_err(), "new streams go elsewhere");
}

const MIB: u64 = 1024 * 1024;

/// What a raw client saw of some streams: every DATA frame in arrival order.
#[derive(Default)]
struct DataLog {
    /// (stream, payload bytes, END_STREAM) of each DATA frame.
    frames: Vec<(u32, usize, bool)>,
    /// Each stream's body so far.
    bodies: std::collections::HashMap<u32, Vec<u8>>,
}

impl DataLog {
    /// Reads frames until every stream of `streams` has ended (a reset fails the test).
    async fn read_until_ended(&mut self, raw: &mut RawH2<Tls>, streams: &[u32]) {
        while !streams.iter().all(|s| self.ended(*s)) {
            let f = raw.read().await.expect("the connection ended early");
            assert_ne!(f.kind, RST_STREAM, "stream {} was reset", f.stream);
            if f.kind == DATA {
                self.frames.push((f.stream, f.payload.len(), f.flags & END_STREAM != 0));
                self.bodies.entry(f.stream).or_default().extend_from_slice(&f.payload);
            }
        }
    }

    fn ended(&self, stream: u32) -> bool {
        self.frames.iter().any(|&(s, _, end)| s == stream && end)
    }

    /// The streams in the order they ended.
    fn completion_order(&self) -> Vec<u32> {
        self.frames.iter().filter(|f| f.2).map(|f| f.0).collect()
    }

    /// Body bytes of `later` that arrived before `earlier` ended.
    fn sent_before_end(&self, later: u32, earlier: u32) -> usize {
        self.frames
            .iter()
            .take_while(|&&(s, _, end)| !(s == earlier && end))
            .filter(|f| f.0 == later)
            .map(|f| f.1)
            .sum()
    }

    fn assert_body(&self, stream: u32, off: u64, len: u64) {
        let body = &self.bodies[&stream];
        assert!(body == &file_data()[off as usize..(off + len) as usize], "stream {stream}");
    }
}

/// Writes the HEADERS of several GETs (with their extra fields) in one write, as streams
/// 1, 3, 5...
async fn request_all(raw: &mut RawH2<Tls>, requests: &[(&str, &[(&str, &str)])]) {
    let mut burst = Vec::new();
    for (i, (path, fields)) in requests.iter().enumerate() {
        let id = 2 * i as u32 + 1;
        burst.extend(frame(
            HEADERS,
            END_STREAM | END_HEADERS,
            id,
            &get_block_with("t", path, fields),
        ));
    }
    raw.write(&burst).await.unwrap();
}

/// How much of the next response may arrive before the previous one ends: at most what
/// the previous one had handed to the connection (one stream buffer).
const INTERLEAVE_BOUND: usize = 256 * 1024;

/// Four 1 MiB segments asked for at once on one connection arrive one after the other in
/// request order, not shared frame by frame (a player needs each whole, in order).
#[tokio::test(flavor = "current_thread")]
async fn one_connections_responses_are_sent_whole_in_request_order() {
    let server = server();
    let mut raw = connect_raw(&server).await;
    raw.open_windows().await;
    let paths: Vec<String> = (0..4).map(|i| format!("/file?off={}&len={MIB}", i * MIB)).collect();
    let requests: Vec<(&str, &[(&str, &str)])> =
        paths.iter().map(|p| (p.as_str(), &[][..])).collect();
    request_all(&mut raw, &requests).await;
    let mut log = DataLog::default();
    log.read_until_ended(&mut raw, &[1, 3, 5, 7]).await;
    assert_eq!(log.completion_order(), [1, 3, 5, 7]);
    for (earlier, later) in [(1, 3), (3, 5), (5, 7)] {
        let early = log.sent_before_end(later, earlier);
        assert!(
            early <= INTERLEAVE_BOUND,
            "{early} bytes of stream {later} before {earlier} ended"
        );
    }
    for (i, s) in [1u32, 3, 5, 7].into_iter().enumerate() {
        log.assert_body(s, i as u64 * MIB, MIB);
    }
}

/// Responses that have nothing to send (a handler still waiting for its origin, a body
/// stalled mid-way) hold back none of the ready ones behind them, and those still go
/// one after the other.
#[tokio::test(flavor = "current_thread")]
async fn responses_waiting_for_their_body_do_not_hold_back_the_ones_behind() {
    let server = server();
    let mut raw = connect_raw(&server).await;
    raw.open_windows().await;
    let gated_body = format!("/gated-body?off=0&len={MIB}");
    let gated_head = format!("/gated-head?off={MIB}&len={MIB}");
    let (a, b) =
        (format!("/file?off={}&len={MIB}", 2 * MIB), format!("/file?off={}&len={MIB}", 3 * MIB));
    let none: &[(&str, &str)] = &[];
    request_all(&mut raw, &[(&gated_body, none), (&gated_head, none), (&a, none), (&b, none)])
        .await;
    let mut log = DataLog::default();
    log.read_until_ended(&mut raw, &[5, 7]).await;
    assert!(!log.ended(1) && !log.ended(3), "the gated responses cannot have ended");
    assert_eq!(log.completion_order(), [5, 7]);
    let early = log.sent_before_end(7, 5);
    assert!(early <= INTERLEAVE_BOUND, "{early} bytes of stream 7 before 5 ended");
    // The stalled body had started (its first 64 KiB).
    assert_eq!(log.bodies.get(&1).map_or(0, Vec::len), 65_536);
    server.open_gate(2);
    log.read_until_ended(&mut raw, &[1, 3]).await;
    for (s, i) in [(1, 0), (3, 1), (5, 2), (7, 3)] {
        log.assert_body(s, i * MIB, MIB);
    }
}

/// RFC 9218: a later request with a more urgent `priority` (u=0) is answered first; the
/// others keep their request order.
#[tokio::test(flavor = "current_thread")]
async fn a_more_urgent_later_request_is_sent_first() {
    let server = server();
    let mut raw = connect_raw(&server).await;
    raw.open_windows().await;
    let paths: Vec<String> = (0..4).map(|i| format!("/file?off={}&len={MIB}", i * MIB)).collect();
    let urgent: &[(&str, &str)] = &[("priority", "u=0")];
    let none: &[(&str, &str)] = &[];
    request_all(
        &mut raw,
        &[(&paths[0], none), (&paths[1], none), (&paths[2], none), (&paths[3], urgent)],
    )
    .await;
    let mut log = DataLog::default();
    log.read_until_ended(&mut raw, &[1, 3, 5, 7]).await;
    assert_eq!(log.completion_order(), [7, 1, 3, 5]);
    let early = log.sent_before_end(1, 7);
    assert!(early <= INTERLEAVE_BOUND, "{early} bytes of stream 1 before the urgent one ended");
}

/// File pages that are not in the page cache reach the body through the range's own
/// reader, stitched in order with what one `preadv2` got for a batch of frames.
#[tokio::test(flavor = "current_thread")]
async fn cold_file_pages_are_read_through_the_ranges_reader_over_h2() {
    let server = server();
    let c = client(&server).await;
    let (off, len) = (4096 * 3 + 17, 1_000_000usize);
    let path = format!("/file?off={off}&len={len}&counted=1");
    // As in the HTTPS/1.1 test: a few just-written pages may survive one eviction on a
    // loaded machine, so evict again before each of a few tries.
    let mut n = 0u64;
    for _ in 0..5 {
        assert_eq!(get(&c, "/evict").await.status, 200);
        let r = get(&c, &path).await;
        assert!(r.body == file_data()[off..off + len]);
        n = String::from_utf8(get(&c, "/cold-reads").await.body).unwrap().parse().unwrap();
        if n > 0 {
            break;
        }
    }
    assert!(n > 0, "no read went through read_cold");
    let r = get(&c, &path).await;
    assert!(r.body == file_data()[off..off + len]);
}

/// A raw HTTP/2 connection from 127.0.0.1 with a small receive buffer that opens the
/// largest windows, asks for the whole file and never reads.
async fn stalled_raw(server: &Server) -> RawH2<Tls> {
    let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    s.set_recv_buffer_size(4096).unwrap();
    s.connect(&server.addr.into()).unwrap();
    s.set_nonblocking(true).unwrap();
    let tcp = TcpStream::from_std(s.into()).unwrap();
    let name = rustls::pki_types::ServerName::try_from("test.example").unwrap();
    let cfg = server.ca.as_ref().unwrap().client_config(&[b"h2"]);
    let tls = tokio_rustls::TlsConnector::from(cfg).connect(name, tcp).await.unwrap();
    let mut raw = RawH2::handshake(tls).await;
    raw.open_windows().await;
    raw.send(HEADERS, END_STREAM | END_HEADERS, 1, &get_block("t", "/file")).await;
    raw
}

/// Issue 36.4: connections of one address that stop reading use up the address's share of
/// the pooled buffers; another connection of the same address (a viewer behind the same
/// NAT) still gets its 1 MiB body while they hold their buffers, and the stalled ones
/// hold no more than the share and one batch each.
#[tokio::test(flavor = "current_thread")]
async fn a_connection_that_reads_is_served_while_stalled_ones_of_its_address_hold_the_share() {
    let limits = Limits {
        send_timeout: Duration::from_secs(120),
        idle_timeout: Duration::from_secs(120),
        ..Limits::default()
    };
    let server = Server::start_h2(limits, H2Settings::default());
    // Each holds at most a stream's budget (16 buffers): fourteen take the share.
    let mut stalled = Vec::new();
    for _ in 0..14 {
        stalled.push(stalled_raw(&server).await);
    }
    let probe = client(&server).await;
    let deadline = tokio::time::Instant::now() + PATIENCE;
    let held = loop {
        let n: usize = String::from_utf8(get(&probe, "/pool").await.body).unwrap().parse().unwrap();
        // Less than a batch (4 buffers) left in the share: no stream can take one.
        if n > reel_http::CLIENT_BUFFERS - 4 {
            break n;
        }
        assert!(tokio::time::Instant::now() < deadline, "the stalled connections hold {n}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    // A guard against a hang only: the stalled streams wait far longer than this.
    let viewer = client(&server).await;
    let reply = tokio::time::timeout(PATIENCE, get(&viewer, "/file?len=1048576"))
        .await
        .expect("a reading connection of the same address is served while the share is held");
    assert_eq!(reply.status, 200);
    assert!(reply.body == file_data()[..1 << 20], "the 1 MiB body, byte-exact");
    let still: usize = String::from_utf8(get(&probe, "/pool").await.body).unwrap().parse().unwrap();
    assert!(still > reel_http::CLIENT_BUFFERS - 4, "the stalled connections still hold {still}");
    // The stalled connections took the share and one batch of their own each, no more.
    let bound = reel_http::CLIENT_BUFFERS + 14 * 4;
    assert!(held.max(still) <= bound, "stalled connections held {held}, then {still}");
    drop(stalled);
}
