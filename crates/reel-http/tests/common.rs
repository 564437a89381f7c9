//! Test server (a real current_thread runtime + LocalSet on its own thread, like a
//! reel worker), plain or behind TLS, a small routing handler and a blocking HTTP client
//! (plain or TLS, which can record the TLS records it receives).

use std::cell::Cell;
use std::fs::File;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::{AsFd, BorrowedFd};
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::task::{Context, Poll};
use std::thread;
use std::time::Duration;

use bytes::Bytes;
use reel_http::{
    BodyStream, Chunk, ColdRead, ConnOutcome, FileRange, H2Settings, H3Settings, Handler, Limits,
    Method, Request, RequestBody, Response, Version, serve_connection, serve_session,
};
use reel_quic::QuicSettings;
use reel_tls::testing::TestCa;
use tokio::sync::{oneshot, watch};

/// Content of the test file: byte `i` is `(i * 7 + i / 251) % 256`, so offsets matter.
/// Built once per test binary.
pub(crate) fn file_data() -> &'static [u8] {
    static DATA: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    DATA.get_or_init(|| (0..FILE_LEN).map(|i| ((i * 7 + i / 251) % 256) as u8).collect())
}

pub(crate) struct FileSlice {
    file: Rc<File>,
    off: u64,
    len: u64,
}

impl FileRange for FileSlice {
    fn fd(&self) -> BorrowedFd<'_> {
        self.file.as_fd()
    }
    fn offset(&self) -> u64 {
        self.off
    }
    fn len(&self) -> u64 {
        self.len
    }
}

/// A file slice that counts the reads it had to do for bytes not in the page cache.
pub(crate) struct CountingSlice {
    inner: FileSlice,
    cold_reads: Rc<Cell<u64>>,
}

impl FileRange for CountingSlice {
    fn fd(&self) -> BorrowedFd<'_> {
        self.inner.fd()
    }
    fn offset(&self) -> u64 {
        self.inner.off
    }
    fn len(&self) -> u64 {
        self.inner.len
    }
    fn read_cold(&self, offset: u64, len: usize) -> ColdRead<'_> {
        self.cold_reads.set(self.cold_reads.get() + 1);
        let file = self.inner.file.clone();
        Box::pin(async move {
            // Yield like an asynchronous read would, then read.
            tokio::task::yield_now().await;
            let mut buf = vec![0u8; len];
            let n = std::os::unix::fs::FileExt::read_at(&*file, &mut buf, offset)?;
            buf.truncate(n);
            Ok(Bytes::from(buf))
        })
    }
}

/// Yields queued chunks, then an error if `fail` is set, else ends.
struct ScriptStream {
    chunks: Vec<Chunk>,
    fail: bool,
}

impl BodyStream for ScriptStream {
    fn poll_next(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<io::Result<Chunk>>> {
        if !self.chunks.is_empty() {
            return Poll::Ready(Some(Ok(self.chunks.remove(0))));
        }
        if self.fail {
            self.fail = false;
            return Poll::Ready(Some(Err(io::Error::other("origin went away"))));
        }
        Poll::Ready(None)
    }
}

pub(crate) struct TestHandler {
    file: Rc<File>,
    file_len: u64,
    /// Answers `false` to [`Handler::keep_alive`] once set.
    closing: Arc<AtomicBool>,
    cold_reads: Rc<Cell<u64>>,
    /// `/slow` requests whose handling has begun.
    slow_started: Arc<AtomicUsize>,
    /// What `/gated-head` and `/gated-body` wait for (one permit each).
    gate: Arc<tokio::sync::Semaphore>,
}

fn query_num(req: &Request, key: &str) -> Option<u64> {
    req.query()?.split('&').find_map(|kv| {
        let (k, v) = kv.split_once('=')?;
        (k == key).then(|| v.parse().ok()).flatten()
    })
}

impl Handler for TestHandler {
    async fn handle(&self, req: &Request, body: &mut RequestBody<'_>) -> Response {
        match req.path() {
            "/hello" => {
                Response::new(200).header("content-type", "text/plain").bytes("hello world")
            }
            "/info" => {
                let v = match req.version() {
                    Version::Http10 => "1.0",
                    Version::Http11 => "1.1",
                    Version::Http2 => "2",
                    Version::Http3 => "3",
                };
                let text = format!(
                    "{} {} q={} host={} v={} ka={}",
                    req.method(),
                    req.path(),
                    req.query().unwrap_or("-"),
                    req.host().unwrap_or("-"),
                    v,
                    req.keep_alive()
                );
                Response::new(200).bytes(text)
            }
            "/echo" => {
                let mut all = Vec::new();
                loop {
                    match body.next_chunk().await {
                        Ok(Some(c)) => all.extend_from_slice(&c),
                        Ok(None) => break,
                        Err(e) => return Response::new(500).bytes(e.to_string()),
                    }
                }
                Response::new(200).bytes(all)
            }
            "/file" => {
                let off = query_num(req, "off").unwrap_or(0);
                let len = query_num(req, "len").unwrap_or(self.file_len - off);
                let inner = FileSlice { file: self.file.clone(), off, len };
                match query_num(req, "counted") {
                    Some(_) => Response::new(200)
                        .file(CountingSlice { inner, cold_reads: self.cold_reads.clone() }),
                    None => Response::new(200).file(inner),
                }
            }
            "/evict" => {
                // Drops the test file's pages from the page cache (test only: the server
                // itself never does this), so the next read of it is cold.
                let _ = rustix::fs::fsync(&*self.file);
                let r = rustix::fs::fadvise(&*self.file, 0, None, rustix::fs::Advice::DontNeed);
                Response::new(if r.is_ok() { 200 } else { 500 })
            }
            "/cold-reads" => Response::new(200).bytes(self.cold_reads.get().to_string()),
            "/pool" => Response::new(200).bytes(reel_http::PoolBuf::in_use().to_string()),
            "/lent" => Response::new(200).bytes(reel_http::conn_buffers_lent().to_string()),
            "/head-len" => Response::new(200).bytes(req.raw_head().len().to_string()),
            "/stream" => {
                let fail = query_num(req, "fail").is_some();
                let declared = query_num(req, "len");
                let chunks = vec![
                    Chunk::Bytes(Bytes::from_static(b"abc")),
                    Chunk::File(Box::new(FileSlice {
                        file: self.file.clone(),
                        off: 1000,
                        len: 5000,
                    })),
                    Chunk::Bytes(Bytes::from(vec![b'z'; 20_000])),
                ];
                Response::new(200).stream(ScriptStream { chunks, fail }, declared)
            }
            "/hinted" => {
                // A 103 written while the work (a short sleep) goes on.
                let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
                let link = Bytes::from_static(b"</h.css>; rel=preload");
                let _ = tx
                    .send(reel_http::Interim { status: 103, headers: vec![("link".into(), link)] });
                body.with_interims(&mut rx, tokio::time::sleep(Duration::from_millis(50))).await;
                Response::new(200).bytes("hinted")
            }
            "/gated-head" => {
                // An answer that takes as long as the test wants (a miss at a slow origin).
                if let Ok(p) = self.gate.acquire().await {
                    p.forget();
                }
                let off = query_num(req, "off").unwrap_or(0);
                let len = query_num(req, "len").unwrap_or(self.file_len - off);
                Response::new(200).file(FileSlice { file: self.file.clone(), off, len })
            }
            "/gated-body" => {
                // A body whose first 64 KiB come at once and the rest when the test says
                // (an origin that stalls mid-body).
                let off = query_num(req, "off").unwrap_or(0);
                let len = query_num(req, "len").unwrap_or(self.file_len - off).max(65_536);
                let (tx, rx) = tokio::sync::mpsc::channel(2);
                let (file, gate) = (self.file.clone(), self.gate.clone());
                tokio::task::spawn_local(async move {
                    let first = FileSlice { file: file.clone(), off, len: 65_536 };
                    let _ = tx.send(Ok(Chunk::File(Box::new(first)))).await;
                    if let Ok(p) = gate.acquire().await {
                        p.forget();
                    }
                    let rest = FileSlice { file, off: off + 65_536, len: len - 65_536 };
                    let _ = tx.send(Ok(Chunk::File(Box::new(rest)))).await;
                });
                Response::new(200).stream(rx, Some(len))
            }
            "/slow" => {
                self.slow_started.fetch_add(1, Ordering::SeqCst);
                if query_num(req, "gated").is_some() {
                    // Until the test opens the gate (counted among the slow ones).
                    if let Ok(p) = self.gate.acquire().await {
                        p.forget();
                    }
                } else {
                    tokio::time::sleep(Duration::from_millis(400)).await;
                }
                Response::new(200).bytes("slow done")
            }
            // How the request's body is delimited, as the handler sees it before reading.
            "/framing" => Response::new(200).bytes(format!(
                "{} {:?} complete={}",
                req.method(),
                req.body_framing(),
                body.is_complete()
            )),
            "/methods" => {
                Response::for_unsupported_method(req.method(), &[Method::Get, Method::Head])
                    .unwrap_or_else(|| Response::new(200).bytes("ok"))
            }
            _ => Response::error(404),
        }
    }

    fn keep_alive(&self) -> bool {
        !self.closing.load(Ordering::SeqCst)
    }
}

/// Total bytes of the served test file.
pub(crate) const FILE_LEN: u64 = 24 * 1024 * 1024;

pub(crate) struct Server {
    pub addr: SocketAddr,
    /// The CA of a TLS server's certificate (for `test.example`).
    pub ca: Option<Arc<TestCa>>,
    drain: watch::Sender<bool>,
    closing: Arc<AtomicBool>,
    slow_started: Arc<AtomicUsize>,
    gate: Arc<tokio::sync::Semaphore>,
    outcomes: mpsc::Receiver<ConnOutcome>,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<thread::JoinHandle<()>>,
}

impl Server {
    pub(crate) fn start() -> Server {
        Server::with_limits(Limits::default())
    }

    pub(crate) fn with_limits(limits: Limits) -> Server {
        Server::spawn(limits, false, None)
    }

    /// A server speaking HTTPS/1.1 (TLS 1.3, certificate for `test.example`).
    pub(crate) fn start_tls() -> Server {
        Server::spawn(Limits::default(), true, None)
    }

    pub(crate) fn with_limits_tls(limits: Limits) -> Server {
        Server::spawn(limits, true, None)
    }

    /// A TLS server offering `h2` then `http/1.1` by ALPN.
    pub(crate) fn start_h2(limits: Limits, h2: H2Settings) -> Server {
        Server::spawn(limits, true, Some(h2))
    }

    /// An HTTP/3 server on a UDP socket of 127.0.0.1 (`addr`), one QUIC endpoint as a
    /// worker runs it, with `quic`'s transport settings.
    pub(crate) fn start_h3(limits: Limits, h3: H3Settings, quic: QuicSettings) -> Server {
        Server::spawn_with(limits, true, None, Some((h3, quic)))
    }

    fn spawn(limits: Limits, tls: bool, h2: Option<H2Settings>) -> Server {
        Server::spawn_with(limits, tls, h2, None)
    }

    fn spawn_with(
        limits: Limits,
        tls: bool,
        h2: Option<H2Settings>,
        h3: Option<(H3Settings, QuicSettings)>,
    ) -> Server {
        let http2 = h2.is_some();
        let h2 = h2.unwrap_or_default();
        let ca = tls.then(|| Arc::new(TestCa::new()));
        let tls = ca.as_ref().map(|ca| {
            let dir = tempfile::tempdir().unwrap();
            let (c, k) = ca.write_leaf(dir.path(), "leaf", &["test.example"]);
            let spec = reel_tls::CertSpec {
                source: reel_tls::CertSource::Files { cert: c, key: k },
                names: Vec::new(),
                cert_key: "c".into(),
                key_key: "k".into(),
            };
            let cert = Arc::new(reel_tls::cert::load(&spec).unwrap());
            let tickets = reel_tls::Tickets::new().unwrap();
            let l = Arc::new(
                reel_tls::server_config(
                    "l",
                    cert,
                    &[],
                    false,
                    http2,
                    reel_tls::TlsVersion::Tls12,
                    reel_tls::KtlsMode::Auto,
                    &tickets,
                )
                .unwrap(),
            );
            let quic = l.quic_config(&tickets, false).unwrap();
            (l, quic)
        });
        let (tls, quic_tls) = match tls {
            Some((l, q)) => (Some(l), Some(q)),
            None => (None, None),
        };
        let mut tmp = tempfile::tempfile().unwrap();
        tmp.write_all(file_data()).unwrap();
        let (addr_tx, addr_rx) = mpsc::channel();
        let (out_tx, outcomes) = mpsc::channel();
        let (drain, drain_rx) = watch::channel(false);
        let (stop, mut stop_rx) = oneshot::channel::<()>();
        let closing = Arc::new(AtomicBool::new(false));
        let handler_closing = closing.clone();
        let slow_started = Arc::new(AtomicUsize::new(0));
        let handler_slow_started = slow_started.clone();
        let gate = Arc::new(tokio::sync::Semaphore::new(0));
        let handler_gate = gate.clone();
        let thread = thread::Builder::new().name("reel-srv".into()).spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            let local = tokio::task::LocalSet::new();
            local.block_on(&rt, async move {
                let h2 = Rc::new(h2);
                let handler = Rc::new(TestHandler {
                    file: Rc::new(tmp),
                    file_len: FILE_LEN,
                    closing: handler_closing,
                    cold_reads: Rc::new(Cell::new(0)),
                    slow_started: handler_slow_started,
                    gate: handler_gate,
                });
                let limits = Rc::new(limits);
                if let (Some((h3, quic)), Some(tls)) = (h3, quic_tls) {
                    let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
                    let local = socket.local_addr().unwrap();
                    addr_tx.send(local).unwrap();
                    let keys = reel_quic::Keys::new().unwrap();
                    let server = reel_quic::server_config(tls, &quic, &keys).unwrap();
                    let config = reel_quic::QuicConfig { server, settings: quic };
                    let (_config_tx, config_rx) = watch::channel(config);
                    let h3 = Rc::new(h3);
                    let on_conn = move |conn: quinn::Connection| {
                        let (h, l, s, d, tx) =
                            (handler.clone(), limits.clone(), h3.clone(), drain_rx.clone(), out_tx.clone());
                        async move {
                            let outcome = reel_http::serve_h3(conn, local, h, l, s, d).await;
                            let _ = tx.send(outcome);
                        }
                    };
                    let counters = Arc::new(reel_quic::QuicCounters::default());
                    let (_stop_drain, endpoint_drain) = watch::channel(false);
                    let serve = reel_quic::serve_worker(
                        socket, 0, config_rx, keys, counters, |_, _| Some(()), endpoint_drain, on_conn,
                    );
                    tokio::select! {
                        _ = &mut stop_rx => {}
                        r = serve => r.unwrap(),
                    }
                    return;
                }
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
                addr_tx.send(listener.local_addr().unwrap()).unwrap();
                loop {
                    tokio::select! {
                        _ = &mut stop_rx => break,
                        accepted = listener.accept() => {
                            let Ok((stream, peer)) = accepted else { continue };
                            let (h, l, d, tx) = (handler.clone(), limits.clone(), drain_rx.clone(), out_tx.clone());
                            let (tls, h2) = (tls.clone(), h2.clone());
                            tokio::task::spawn_local(async move {
                                let outcome = match tls {
                                    None => serve_connection(stream, peer, h, l, d).await,
                                    Some(tls) => {
                                        let local = stream.local_addr().unwrap();
                                        let timeout = l.header_timeout;
                                        let Ok((s, info)) = reel_tls::accept(&tls, stream, timeout).await else {
                                            return;
                                        };
                                        let h2_alpn = info.alpn == reel_tls::Alpn::H2;
                                        serve_session(s, h2_alpn, peer, local, h, l, h2, d).await
                                    }
                                };
                                let _ = tx.send(outcome);
                            });
                        }
                    }
                }
            });
        }).unwrap();
        let addr = addr_rx.recv().unwrap();
        Server {
            addr,
            ca,
            drain,
            closing,
            slow_started,
            gate,
            outcomes,
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    /// A client over TCP, or over TLS for a TLS server.
    pub(crate) fn connect(&self) -> Client {
        match &self.ca {
            None => Client::connect(self.addr),
            Some(ca) => Client::connect_tls(self.addr, ca),
        }
    }

    pub(crate) fn drain(&self) {
        self.drain.send_replace(true);
    }

    /// From now on the handler asks for every response to close its connection.
    pub(crate) fn close_after_responses(&self) {
        self.closing.store(true, Ordering::SeqCst);
    }

    /// How many `/slow` requests the handler has begun to answer (it then takes 400 ms).
    pub(crate) fn slow_started(&self) -> usize {
        self.slow_started.load(Ordering::SeqCst)
    }

    /// Lets `n` of the `/gated-head` and `/gated-body` requests waiting (or to come) go on.
    pub(crate) fn open_gate(&self, n: usize) {
        self.gate.add_permits(n);
    }

    /// Next finished connection's outcome (generous timeout: the machine is loaded).
    pub(crate) fn outcome(&self) -> ConnOutcome {
        self.outcomes.recv_timeout(Duration::from_secs(20)).expect("connection outcome")
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[derive(Debug)]
pub(crate) struct Resp {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Resp {
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
    pub(crate) fn closes(&self) -> bool {
        self.header("connection") == Some("close")
    }
}

/// The client's side of the connection: TCP, or TLS over a TCP socket that keeps a copy
/// of the raw bytes it received (to look at the TLS records).
pub(crate) enum ClientStream {
    Tcp(TcpStream),
    Tls(Box<rustls::StreamOwned<rustls::ClientConnection, Tee>>),
}

/// A TCP socket that records what it reads.
pub(crate) struct Tee {
    pub tcp: TcpStream,
    pub seen: Arc<Mutex<Vec<u8>>>,
}

impl Read for Tee {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.tcp.read(buf)?;
        self.seen.lock().unwrap().extend_from_slice(&buf[..n]);
        Ok(n)
    }
}

impl Write for Tee {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.tcp.write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.tcp.flush()
    }
}

impl ClientStream {
    pub(crate) fn tcp(&self) -> &TcpStream {
        match self {
            ClientStream::Tcp(s) => s,
            ClientStream::Tls(s) => &s.sock.tcp,
        }
    }
}

impl Read for ClientStream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            ClientStream::Tcp(s) => s.read(buf),
            ClientStream::Tls(s) => match s.read(buf) {
                // A peer that closes without close_notify (an aborted body) is EOF here.
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => Ok(0),
                r => r,
            },
        }
    }
}

impl Write for ClientStream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            ClientStream::Tcp(s) => s.write(buf),
            ClientStream::Tls(s) => s.write(buf),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        match self {
            ClientStream::Tcp(s) => s.flush(),
            ClientStream::Tls(s) => s.flush(),
        }
    }
}

pub(crate) struct Client {
    pub stream: ClientStream,
    buf: Vec<u8>,
    /// Raw bytes received (TLS clients only).
    pub seen: Arc<Mutex<Vec<u8>>>,
}

impl Client {
    pub(crate) fn connect(addr: SocketAddr) -> Client {
        let stream = TcpStream::connect(addr).unwrap();
        stream.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        stream.set_nodelay(true).unwrap();
        Client { stream: ClientStream::Tcp(stream), buf: Vec::new(), seen: Arc::default() }
    }

    pub(crate) fn connect_tls(addr: SocketAddr, ca: &TestCa) -> Client {
        let tcp = TcpStream::connect(addr).unwrap();
        tcp.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        tcp.set_nodelay(true).unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let name = rustls::pki_types::ServerName::try_from("test.example").unwrap();
        let conn = rustls::ClientConnection::new(ca.client_config(&[b"http/1.1"]), name).unwrap();
        let tee = Tee { tcp, seen: seen.clone() };
        let stream = ClientStream::Tls(Box::new(rustls::StreamOwned::new(conn, tee)));
        Client { stream, buf: Vec::new(), seen }
    }

    pub(crate) fn send(&mut self, raw: &[u8]) {
        self.stream.write_all(raw).unwrap();
    }

    fn fill(&mut self) -> usize {
        let mut tmp = [0u8; 65536];
        let n = self.stream.read(&mut tmp).unwrap();
        self.buf.extend_from_slice(&tmp[..n]);
        n
    }

    fn need(&mut self, n: usize) {
        while self.buf.len() < n {
            assert!(self.fill() > 0, "EOF while {n} bytes were expected");
        }
    }

    fn take_line(&mut self) -> Vec<u8> {
        loop {
            if let Some(i) = self.buf.windows(2).position(|w| w == b"\r\n") {
                let line = self.buf[..i].to_vec();
                self.buf.drain(..i + 2);
                return line;
            }
            assert!(self.fill() > 0, "EOF inside a line");
        }
    }

    /// Reads one response; `head` means it answers a HEAD request (no body).
    pub(crate) fn response(&mut self, head: bool) -> Resp {
        let (status, headers, n) = loop {
            let mut hs = [httparse::EMPTY_HEADER; 64];
            let mut r = httparse::Response::new(&mut hs);
            match r.parse(&self.buf).unwrap() {
                httparse::Status::Complete(n) => {
                    let headers = r
                        .headers
                        .iter()
                        .map(|h| {
                            (h.name.to_string(), String::from_utf8_lossy(h.value).into_owned())
                        })
                        .collect::<Vec<_>>();
                    break (r.code.unwrap(), headers, n);
                }
                httparse::Status::Partial => {
                    assert!(self.fill() > 0, "EOF before a response head");
                }
            }
        };
        self.buf.drain(..n);
        let mut resp = Resp { status, headers, body: Vec::new() };
        if head || status == 204 || status == 304 || status < 200 {
            return resp;
        }
        if let Some(cl) = resp.header("content-length") {
            let cl: usize = cl.parse().unwrap();
            self.need(cl);
            resp.body = self.buf.drain(..cl).collect();
        } else if resp.header("transfer-encoding") == Some("chunked") {
            loop {
                let line = self.take_line();
                let size = usize::from_str_radix(std::str::from_utf8(&line).unwrap(), 16).unwrap();
                if size == 0 {
                    assert!(self.take_line().is_empty());
                    break;
                }
                self.need(size + 2);
                resp.body.extend(self.buf.drain(..size));
                assert_eq!(self.buf.drain(..2).collect::<Vec<_>>(), b"\r\n");
            }
        } else {
            resp.body = self.read_to_eof();
        }
        resp
    }

    /// Reads everything until EOF (buffered bytes included). A reset after the data
    /// counts as EOF.
    pub(crate) fn read_to_eof(&mut self) -> Vec<u8> {
        let mut out = std::mem::take(&mut self.buf);
        let mut tmp = [0u8; 65536];
        loop {
            match self.stream.read(&mut tmp) {
                Ok(0) => return out,
                Ok(n) => out.extend_from_slice(&tmp[..n]),
                Err(e) if e.kind() == io::ErrorKind::ConnectionReset => return out,
                Err(e) => panic!("read failed: {e}"),
            }
        }
    }

    /// Asserts the server closes the connection without sending anything more, then
    /// closes the client side (so the server stops lingering).
    pub(crate) fn assert_closed(mut self) {
        let rest = self.read_to_eof();
        assert!(rest.is_empty(), "unexpected bytes: {:?}", String::from_utf8_lossy(&rest));
    }
}

pub(crate) fn get(path: &str) -> Vec<u8> {
    format!("GET {path} HTTP/1.1\r\nHost: test\r\n\r\n").into_bytes()
}
