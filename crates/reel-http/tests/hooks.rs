//! What the connection loop reports to the handler's hooks: the time to first byte apart
//! from the total of each response.

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use bytes::Bytes;
use reel_http::{Handler, Limits, Request, RequestBody, Response, Sent, serve_connection};
use tokio::sync::watch;

/// Length of `/big`: far more than the client's receive buffer and the server's send buffer
/// together, so the response cannot end before the client reads.
const BIG: usize = 24 << 20;

/// What a hook saw, with the instant it was called.
#[derive(Debug)]
enum Event {
    Response { path: String, sent: Sent, at: Instant },
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
}

/// A one-thread server (like a reel worker) whose hooks report to the returned receiver.
fn start() -> (SocketAddr, mpsc::Receiver<Event>) {
    let (tx, rx) = mpsc::channel();
    let (addr_tx, addr_rx) = mpsc::channel();
    thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let local = tokio::task::LocalSet::new();
        local.block_on(&rt, async move {
            let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            addr_tx.send(l.local_addr().unwrap()).unwrap();
            let h = Rc::new(Recorder { events: tx, big: Bytes::from(vec![b'b'; BIG]) });
            let limits = Rc::new(Limits::default());
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

    let Event::Response { path, sent, at } = next(&events);
    assert_eq!((path.as_str(), sent.status), ("/big", 200));
    assert_eq!(sent.bytes, got.len() as u64);
    let start = at - sent.total;
    let first_byte = sent.first_byte.expect("a head was written");
    assert!(start + first_byte <= head_seen, "first byte counted up to the head: {sent:?}");
    assert!(at > resumed, "the total covers the client's reading: {sent:?}");
    assert!(first_byte < sent.total);
}
