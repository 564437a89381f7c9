//! Test server (a real current_thread runtime + LocalSet on its own thread, like a
//! reel worker), a small routing handler and a blocking HTTP client.

use std::fs::File;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::{AsRawFd, RawFd};
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, mpsc};
use std::task::{Context, Poll};
use std::thread;
use std::time::Duration;

use bytes::Bytes;
use reel_http::{
    BodyStream, Chunk, ConnOutcome, FileRange, Handler, Limits, Method, Request, RequestBody,
    Response, Version, serve_connection,
};
use tokio::sync::{oneshot, watch};

/// Content of the test file: byte `i` is `(i * 7 + i / 251) % 256`, so offsets matter.
/// Built once per test binary.
pub fn file_data() -> &'static [u8] {
    static DATA: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    DATA.get_or_init(|| (0..FILE_LEN).map(|i| ((i * 7 + i / 251) % 256) as u8).collect())
}

pub struct FileSlice {
    file: Rc<File>,
    off: u64,
    len: u64,
}

impl FileRange for FileSlice {
    fn fd(&self) -> RawFd {
        self.file.as_raw_fd()
    }
    fn offset(&self) -> u64 {
        self.off
    }
    fn len(&self) -> u64 {
        self.len
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

pub struct TestHandler {
    file: Rc<File>,
    file_len: u64,
    /// Answers `false` to [`Handler::keep_alive`] once set.
    closing: Arc<AtomicBool>,
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
                let v = if req.version() == Version::Http10 { "1.0" } else { "1.1" };
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
                Response::new(200).file(FileSlice { file: self.file.clone(), off, len })
            }
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
            "/slow" => {
                tokio::time::sleep(Duration::from_millis(400)).await;
                Response::new(200).bytes("slow done")
            }
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
pub const FILE_LEN: u64 = 24 * 1024 * 1024;

pub struct Server {
    pub addr: SocketAddr,
    drain: watch::Sender<bool>,
    closing: Arc<AtomicBool>,
    outcomes: mpsc::Receiver<ConnOutcome>,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<thread::JoinHandle<()>>,
}

impl Server {
    pub fn start() -> Server {
        Server::with_limits(Limits::default())
    }

    pub fn with_limits(limits: Limits) -> Server {
        let mut tmp = tempfile::tempfile().unwrap();
        tmp.write_all(file_data()).unwrap();
        let (addr_tx, addr_rx) = mpsc::channel();
        let (out_tx, outcomes) = mpsc::channel();
        let (drain, drain_rx) = watch::channel(false);
        let (stop, mut stop_rx) = oneshot::channel::<()>();
        let closing = Arc::new(AtomicBool::new(false));
        let handler_closing = closing.clone();
        let thread = thread::Builder::new().name("reel-srv".into()).spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            let local = tokio::task::LocalSet::new();
            local.block_on(&rt, async move {
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
                addr_tx.send(listener.local_addr().unwrap()).unwrap();
                let handler = Rc::new(TestHandler {
                    file: Rc::new(tmp),
                    file_len: FILE_LEN,
                    closing: handler_closing,
                });
                let limits = Rc::new(limits);
                loop {
                    tokio::select! {
                        _ = &mut stop_rx => break,
                        accepted = listener.accept() => {
                            let Ok((stream, peer)) = accepted else { continue };
                            let (h, l, d, tx) = (handler.clone(), limits.clone(), drain_rx.clone(), out_tx.clone());
                            tokio::task::spawn_local(async move {
                                let outcome = serve_connection(stream, peer, h, l, d).await;
                                let _ = tx.send(outcome);
                            });
                        }
                    }
                }
            });
        }).unwrap();
        let addr = addr_rx.recv().unwrap();
        Server { addr, drain, closing, outcomes, stop: Some(stop), thread: Some(thread) }
    }

    pub fn connect(&self) -> Client {
        Client::connect(self.addr)
    }

    pub fn drain(&self) {
        self.drain.send_replace(true);
    }

    /// From now on the handler asks for every response to close its connection.
    pub fn close_after_responses(&self) {
        self.closing.store(true, Ordering::SeqCst);
    }

    /// Next finished connection's outcome (generous timeout: the machine is loaded).
    pub fn outcome(&self) -> ConnOutcome {
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
pub struct Resp {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Resp {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
    pub fn closes(&self) -> bool {
        self.header("connection") == Some("close")
    }
}

pub struct Client {
    pub stream: TcpStream,
    buf: Vec<u8>,
}

impl Client {
    pub fn connect(addr: SocketAddr) -> Client {
        let stream = TcpStream::connect(addr).unwrap();
        stream.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        stream.set_nodelay(true).unwrap();
        Client { stream, buf: Vec::new() }
    }

    pub fn send(&mut self, raw: &[u8]) {
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
    pub fn response(&mut self, head: bool) -> Resp {
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
    pub fn read_to_eof(&mut self) -> Vec<u8> {
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
    pub fn assert_closed(mut self) {
        let rest = self.read_to_eof();
        assert!(rest.is_empty(), "unexpected bytes: {:?}", String::from_utf8_lossy(&rest));
    }
}

pub fn get(path: &str) -> Vec<u8> {
    format!("GET {path} HTTP/1.1\r\nHost: test\r\n\r\n").into_bytes()
}
