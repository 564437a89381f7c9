//! What the connection loop reports to the handler's hooks: the time to first byte apart
//! from the total of each response, and every refused head with what was known of it.

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use bytes::Bytes;
use reel_http::{
    Handler, Limits, REFUSAL_EXCERPT, Refusal, Request, RequestBody, Response, Sent,
    serve_connection,
};
use tokio::sync::watch;

/// Length of `/big`: far more than the client's receive buffer and the server's send buffer
/// together, so the response cannot end before the client reads.
const BIG: usize = 24 << 20;

/// What a hook saw, with the instant it was called.
#[derive(Debug)]
enum Event {
    Response { path: String, sent: Sent, at: Instant },
    Refused { peer: SocketAddr, status: u16, reason: &'static str, line: Vec<u8>, bytes: u64 },
}

struct Recorder {
    events: mpsc::Sender<Event>,
    big: Bytes,
}

impl Handler for Recorder {
    async fn handle(&self, req: &Request, _body: &mut RequestBody<'_>) -> Response {
        match req.path() {
            "/big" => Response::new(200).bytes(self.big.clone()),
            _ => Response::new(200).bytes("small"),
        }
    }

    fn on_response(&self, req: &Request, sent: &Sent) {
        let _ = self.events.send(Event::Response {
            path: req.path().to_string(),
            sent: *sent,
            at: Instant::now(),
        });
    }

    fn on_reject(&self, r: &Refusal<'_>) {
        let _ = self.events.send(Event::Refused {
            peer: r.peer,
            status: r.status,
            reason: r.reason,
            line: r.request_line.to_vec(),
            bytes: r.bytes,
        });
    }
}

/// A one-thread server (like a reel worker) whose hooks report to the returned receiver.
fn start() -> (SocketAddr, mpsc::Receiver<Event>) {
    start_with(Limits::default())
}

fn start_with(limits: Limits) -> (SocketAddr, mpsc::Receiver<Event>) {
    let (tx, rx) = mpsc::channel();
    let (addr_tx, addr_rx) = mpsc::channel();
    thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let local = tokio::task::LocalSet::new();
        local.block_on(&rt, async move {
            let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            addr_tx.send(l.local_addr().unwrap()).unwrap();
            let h = Rc::new(Recorder { events: tx, big: Bytes::from(vec![b'b'; BIG]) });
            let limits = Rc::new(limits);
            let (_keep, drain) = watch::channel(false);
            loop {
                let Ok((s, peer)) = l.accept().await else { continue };
                let (h, lim, d) = (h.clone(), limits.clone(), drain.clone());
                tokio::task::spawn_local(async move {
                    serve_connection(s, peer, h, lim, d).await;
                });
            }
        });
    });
    (addr_rx.recv().unwrap(), rx)
}

fn next(rx: &mpsc::Receiver<Event>) -> Event {
    rx.recv_timeout(Duration::from_secs(20)).expect("a hook call")
}

#[test]
fn first_byte_is_reported_apart_from_a_slow_clients_total() {
    let (addr, events) = start();
    let sock = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    sock.set_recv_buffer_size(32 * 1024).unwrap();
    sock.connect(&addr.into()).unwrap();
    let mut c: std::net::TcpStream = sock.into();
    c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    c.write_all(b"GET /big HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n").unwrap();

    // The head has arrived (so it went out before this instant); the client has not read a
    // byte yet, and only resumes after `resumed`.
    let mut one = [0u8; 1];
    assert_eq!(c.peek(&mut one).unwrap(), 1);
    let head_seen = Instant::now();
    thread::sleep(Duration::from_millis(50));
    let resumed = Instant::now();
    let mut got = Vec::new();
    c.read_to_end(&mut got).unwrap();
    assert!(got.len() > BIG, "the whole response arrived");

    let Event::Response { path, sent, at } = next(&events) else { panic!("a response") };
    assert_eq!((path.as_str(), sent.status), ("/big", 200));
    assert_eq!(sent.bytes, got.len() as u64);
    let start = at - sent.total;
    let first_byte = sent.first_byte.expect("a head was written");
    assert!(start + first_byte <= head_seen, "first byte counted up to the head: {sent:?}");
    assert!(at > resumed, "the total covers the client's reading: {sent:?}");
    assert!(first_byte < sent.total);
}

/// Sends `raw` on a new connection and reads the answer until the server closes.
fn exchange(addr: SocketAddr, raw: &[u8]) -> (SocketAddr, Vec<u8>) {
    let mut c = std::net::TcpStream::connect(addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let me = c.local_addr().unwrap();
    // The server may refuse before it has read everything: a reset then is fine.
    let _ = c.write_all(raw);
    let _ = c.shutdown(std::net::Shutdown::Write);
    let mut out = Vec::new();
    let _ = c.read_to_end(&mut out);
    (me, out)
}

#[test]
fn refused_heads_reach_on_reject_with_their_request_line_and_reason() {
    let (addr, events) = start();
    let long_target = format!("/{}", "a".repeat(20_000));
    let many_fields: String = (0..200).map(|i| format!("x-f{i}: v\r\n")).collect();
    let cases: Vec<(Vec<u8>, u16, &[u8], &str)> = vec![
        (
            b"GET /x HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n"
                .to_vec(),
            400,
            b"GET /x HTTP/1.1",
            "Content-Length",
        ),
        (
            b"\r\nGET /\xff\x01bin HTTP/1.1\r\nHost: h\r\nbad header\r\n\r\n".to_vec(),
            400,
            b"GET /\xff\x01bin HTTP/1.1",
            "",
        ),
        (format!("GET {long_target} HTTP/1.1\r\n").into_bytes(), 414, b"GET /aaaa", "request line"),
        (
            format!("GET /h HTTP/1.1\r\nHost: h\r\n{many_fields}\r\n").into_bytes(),
            431,
            b"GET /h HTTP/1.1",
            "header",
        ),
        (b"GET /v HTTP/2.0\r\nHost: h\r\n\r\n".to_vec(), 505, b"GET /v HTTP/2.0", "version"),
        (
            b"PUT /b HTTP/1.1\r\nHost: h\r\nContent-Length: 99999999999999\r\n\r\n".to_vec(),
            413,
            b"PUT /b HTTP/1.1",
            "max_body_bytes",
        ),
        (
            b"POST /u HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip, chunked\r\n\r\n".to_vec(),
            501,
            b"POST /u HTTP/1.1",
            "transfer coding",
        ),
    ];
    for (raw, status, line, reason) in cases {
        let (me, answer) = exchange(addr, &raw);
        let text = String::from_utf8_lossy(&answer).to_string();
        assert!(text.starts_with(&format!("HTTP/1.1 {status} ")), "{text}");
        let Event::Refused { peer, status: s, reason: r, line: l, bytes } = next(&events) else {
            panic!("a refusal for {status}");
        };
        assert_eq!((peer, s), (me, status));
        assert!(l.starts_with(line), "{status}: {:?}", String::from_utf8_lossy(&l));
        assert!(l.len() <= REFUSAL_EXCERPT, "{status}: {} bytes", l.len());
        assert!(!l.contains(&b'\n'), "the line only");
        assert!(r.contains(reason), "{status}: {r}");
        assert_eq!(bytes, answer.len() as u64, "{status}: bytes of the refusal");
    }
}

#[test]
fn a_head_that_never_completes_is_reported_as_408_with_its_first_bytes() {
    let limits = Limits { header_timeout: Duration::from_millis(300), ..Limits::default() };
    let (addr, events) = start_with(limits);
    let mut c = std::net::TcpStream::connect(addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    c.write_all(b"GET /slow HTTP/1.1\r\nHost: h\r\nX-Half").unwrap();
    let mut out = Vec::new();
    let _ = c.read_to_end(&mut out);
    assert!(out.starts_with(b"HTTP/1.1 408 "), "{}", String::from_utf8_lossy(&out));
    let Event::Refused { status, line, reason, .. } = next(&events) else { panic!("a refusal") };
    assert_eq!(status, 408);
    assert_eq!(line, b"GET /slow HTTP/1.1");
    assert!(reason.contains("timeout"), "{reason}");

    // Nothing but the start of a request line: its first bytes.
    let mut c = std::net::TcpStream::connect(addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    c.write_all(b"GET /par").unwrap();
    let _ = c.read_to_end(&mut Vec::new());
    let Event::Refused { status, line, .. } = next(&events) else { panic!("a refusal") };
    assert_eq!((status, line.as_slice()), (408, &b"GET /par"[..]));
}
