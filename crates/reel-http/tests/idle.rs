//! Idle keep-alive connections hold no buffers: the read and response-head buffers come
//! from the worker's free lists while a request is in progress and go back between
//! requests; the codec still handles split, pipelined and large heads; the connection's
//! future stays small; a parkable connection hands its idle socket back whole.

use std::io::Write;
use std::rc::Rc;
use std::thread::sleep;
use std::time::Duration;

use reel_http::{Limits, Request, RequestBody, Response, serve_connection};

use crate::common::{Client, Server, get};

/// The buffers the server's connections hold, asked on a connection of its own: that
/// connection holds its read buffer while its request is handled, so 1 means every other
/// connection holds none.
fn lent(server: &Server) -> u64 {
    let mut c = server.connect();
    c.send(&get("/lent"));
    let r = c.response(false);
    assert_eq!(r.status, 200);
    String::from_utf8(r.body).unwrap().parse().unwrap()
}

#[test]
fn idle_keep_alive_connections_hold_no_buffers() {
    let server = Server::start();
    let mut idle: Vec<Client> = (0..40).map(|_| server.connect()).collect();
    for c in &mut idle {
        c.send(&get("/hello"));
        assert_eq!(c.response(false).body, b"hello world");
        // A file body and a coalesced in-memory body use the same buffers.
        c.send(&get("/file?off=10&len=5000"));
        assert_eq!(c.response(false).status, 200);
    }
    assert_eq!(lent(&server), 1);
    // They are still open and served.
    for c in &mut idle {
        c.send(&get("/hello"));
        assert_eq!(c.response(false).body, b"hello world");
    }
    assert_eq!(lent(&server), 1);
}

#[test]
fn a_connection_mid_head_keeps_its_bytes() {
    let server = Server::start();
    let mut c = server.connect();
    let raw = get("/info?split=1");
    let (a, b) = raw.split_at(17);
    c.stream.write_all(a).unwrap();
    sleep(Duration::from_millis(50));
    // The partial head is held (its read buffer) while the rest is on its way.
    assert_eq!(lent(&server), 2);
    c.stream.write_all(b).unwrap();
    let r = c.response(false);
    assert_eq!(r.body, b"GET /info q=split=1 host=test v=1.1 ka=true");
    assert_eq!(lent(&server), 1);
}

#[test]
fn pipelined_requests_split_across_reads_after_idle_periods() {
    let server = Server::start();
    let mut c = server.connect();
    for round in 0..3 {
        // Three requests in one write, the third cut in two with a pause in between.
        let mut raw = Vec::new();
        for i in 1..=3 {
            raw.extend_from_slice(&get(&format!("/info?r={round}&n={i}")));
        }
        let cut = raw.len() - 9;
        c.stream.write_all(&raw[..cut]).unwrap();
        sleep(Duration::from_millis(20));
        c.stream.write_all(&raw[cut..]).unwrap();
        for i in 1..=3 {
            let r = c.response(false);
            assert_eq!(
                String::from_utf8(r.body).unwrap(),
                format!("GET /info q=r={round}&n={i} host=test v=1.1 ka=true")
            );
        }
        assert_eq!(lent(&server), 1, "round {round}");
    }
}

#[test]
fn large_header_sections_then_small_requests_on_one_connection() {
    let server = Server::start();
    let mut c = server.connect();
    for size in [20_000usize, 50_000, 300] {
        let big = format!("X-Big: {}\r\n", "b".repeat(size));
        let raw = format!("GET /head-len HTTP/1.1\r\nHost: test\r\n{big}\r\n");
        // Sent in pieces, so the head spans many reads and outgrows one buffer.
        for piece in raw.as_bytes().chunks(7000) {
            c.stream.write_all(piece).unwrap();
            sleep(Duration::from_millis(2));
        }
        let r = c.response(false);
        assert_eq!(r.status, 200);
        assert_eq!(String::from_utf8(r.body).unwrap(), raw.len().to_string());
        c.send(&get("/hello"));
        assert_eq!(c.response(false).body, b"hello world");
    }
    assert_eq!(lent(&server), 1);
}

#[test]
fn over_the_header_limit_is_still_refused() {
    let server = Server::with_limits(Limits { max_header_bytes: 16 * 1024, ..Limits::default() });
    let mut c = server.connect();
    let big = format!("X-Big: {}\r\n", "b".repeat(20_000));
    c.send(format!("GET /hello HTTP/1.1\r\nHost: test\r\n{big}\r\n").as_bytes());
    let r = c.response(false);
    assert_eq!(r.status, 431);
    c.assert_closed();
    assert_eq!(lent(&server), 1);
}

struct Tiny;

impl reel_http::Handler for Tiny {
    async fn handle(&self, _req: &Request, _body: &mut RequestBody<'_>) -> Response {
        // A handler future far larger than the connection's own.
        let scratch = [0u8; 16 * 1024];
        tokio::task::yield_now().await;
        Response::new(200).bytes(scratch[..1].to_vec())
    }
}

#[test]
fn the_connection_future_does_not_carry_the_handler_future() {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let _client = std::net::TcpStream::connect(addr).unwrap();
        let (stream, peer) = listener.accept().await.unwrap();
        let (_tx, drain) = tokio::sync::watch::channel(false);
        let fut = serve_connection(stream, peer, Rc::new(Tiny), Rc::new(Limits::default()), drain);
        let size = std::mem::size_of_val(&fut);
        // The handler's 16 KiB stays out; what is left is the connection's state and its
        // wait for the next request (472 bytes in a release build).
        assert!(size < 1024, "the connection future is {size} bytes");
    });
}

/// Writes one request on `client` and reads the 1-byte answer of [`Tiny`].
fn ask(client: &mut std::net::TcpStream) {
    use std::io::Read;
    client.write_all(&get("/x")).unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 512];
    while !got.ends_with(b"\r\n\r\n\0") {
        let n = client.read(&mut buf).unwrap();
        assert!(n > 0, "closed before the answer: {:?}", String::from_utf8_lossy(&got));
        got.extend_from_slice(&buf[..n]);
    }
    assert!(got.starts_with(b"HTTP/1.1 200"), "{:?}", String::from_utf8_lossy(&got));
}

#[test]
fn a_parkable_connection_hands_its_socket_back_once_idle_and_serves_again_from_it() {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let mut client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        client.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let (stream, peer) = listener.accept().await.unwrap();
        let (_tx, drain) = tokio::sync::watch::channel(false);
        let limits = Rc::new(Limits {
            idle_timeout: Duration::from_secs(30),
            park_after: Some(Duration::from_millis(200)),
            ..Limits::default()
        });
        let asker = std::thread::spawn(move || {
            ask(&mut client);
            client
        });
        let started = std::time::Instant::now();
        let served =
            reel_http::serve_parkable(stream, peer, Rc::new(Tiny), limits.clone(), drain.clone())
                .await;
        let mut client = asker.join().unwrap();
        assert_eq!(served.outcome.requests, 1);
        assert_eq!(served.outcome.close, reel_http::CloseReason::Parked);
        let parked = served.parked.expect("handed back");
        assert!(started.elapsed() >= Duration::from_millis(200), "parked before park_after");
        // The rest of the idle timeout goes with it.
        let left = parked.idle_until - std::time::Instant::now();
        assert!(left > Duration::from_secs(25) && left <= Duration::from_secs(30), "{left:?}");
        // The socket is whole: the next request is served from it.
        let stream = tokio::net::TcpStream::from_std(parked.stream).unwrap();
        let asker = std::thread::spawn(move || {
            ask(&mut client);
            client
        });
        let served = reel_http::serve_parkable(stream, peer, Rc::new(Tiny), limits, drain).await;
        let _client = asker.join().unwrap();
        assert_eq!(served.outcome.requests, 1);
        assert!(served.parked.is_some());
    });
}

#[test]
fn without_park_after_a_connection_is_never_handed_back() {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let _client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (stream, peer) = listener.accept().await.unwrap();
        let (_tx, drain) = tokio::sync::watch::channel(false);
        let limits =
            Rc::new(Limits { idle_timeout: Duration::from_millis(300), ..Limits::default() });
        let served = reel_http::serve_parkable(stream, peer, Rc::new(Tiny), limits, drain).await;
        assert_eq!(served.outcome.close, reel_http::CloseReason::IdleTimeout);
        assert!(served.parked.is_none());
        // A park delay as long as the idle timeout, or the largest a config can name, never
        // parks either: the idle timeout comes first.
        for park_after in [Duration::from_millis(300), Duration::from_nanos(u64::MAX)] {
            let _client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
            let (stream, peer) = listener.accept().await.unwrap();
            let (_tx, drain) = tokio::sync::watch::channel(false);
            let limits = Rc::new(Limits {
                idle_timeout: Duration::from_millis(300),
                park_after: Some(park_after),
                ..Limits::default()
            });
            let served =
                reel_http::serve_parkable(stream, peer, Rc::new(Tiny), limits, drain).await;
            assert_eq!(served.outcome.close, reel_http::CloseReason::IdleTimeout, "{park_after:?}");
            assert!(served.parked.is_none());
        }
    });
}
