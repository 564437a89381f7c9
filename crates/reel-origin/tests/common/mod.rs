//! A tiny scriptable HTTP/1.1 origin on 127.0.0.1 for the client tests.

#![allow(dead_code)]

pub(crate) mod tls;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use reel_origin::{GroupSpec, HealthSpec, HostSpec};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// What the server does after reading a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fault {
    None,
    /// RST instead of a response.
    ResetBeforeHeaders,
    /// Close (FIN) instead of a response.
    CloseBeforeHeaders,
    /// Write the head and chunks, then close (FIN) without finishing the body.
    CloseAfterChunks,
    /// Write the head and chunks, then RST.
    ResetAfterChunks,
    /// Write a complete response, then close the connection without announcing it.
    CloseAfterResponse,
}

#[derive(Clone, Debug)]
pub(crate) struct Behavior {
    pub status: u16,
    pub head_delay: Duration,
    pub chunks: Vec<Vec<u8>>,
    pub chunk_delay: Duration,
    /// Declared length; `None` means the real length.
    pub content_length: Option<usize>,
    pub chunked: bool,
    pub fault: Fault,
    pub extra_headers: Vec<(String, String)>,
    pub health_status: u16,
    /// Raw interim (1xx) responses written before the head delay.
    pub interim: Vec<u8>,
}

impl Default for Behavior {
    fn default() -> Self {
        Self {
            status: 200,
            head_delay: Duration::ZERO,
            chunks: vec![b"hello".to_vec()],
            chunk_delay: Duration::ZERO,
            content_length: None,
            chunked: false,
            fault: Fault::None,
            extra_headers: Vec::new(),
            health_status: 200,
            interim: Vec::new(),
        }
    }
}

#[derive(Clone, Debug)]
pub(crate) struct Seen {
    pub method: String,
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Seen {
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
}

pub(crate) struct State {
    pub connections: AtomicUsize,
    pub requests: AtomicUsize,
    pub health_requests: AtomicUsize,
    pub behavior: Mutex<Behavior>,
    pub seen: Mutex<Vec<Seen>>,
    /// Body bytes received of the request being read.
    pub progress: watch::Sender<usize>,
}

pub(crate) struct Server {
    pub addr: SocketAddr,
    pub state: Arc<State>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Server {
    pub(crate) async fn start(behavior: Behavior) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        Self::on(listener, behavior)
    }

    pub(crate) fn on(listener: TcpListener, behavior: Behavior) -> Server {
        let addr = listener.local_addr().unwrap();
        let state = Arc::new(State {
            connections: AtomicUsize::new(0),
            requests: AtomicUsize::new(0),
            health_requests: AtomicUsize::new(0),
            behavior: Mutex::new(behavior),
            seen: Mutex::new(Vec::new()),
            progress: watch::channel(0).0,
        });
        let st = state.clone();
        let task = tokio::spawn(async move {
            let mut conns = tokio::task::JoinSet::new();
            while let Ok((s, _)) = listener.accept().await {
                st.connections.fetch_add(1, Ordering::SeqCst);
                // The head and the body are separate writes: Nagle would hold the body back
                // behind a delayed ACK.
                let _ = s.set_nodelay(true);
                conns.spawn(serve(s, st.clone()));
            }
        });
        Server { addr, state, task }
    }

    pub(crate) fn host(&self) -> String {
        self.addr.to_string()
    }

    pub(crate) fn requests(&self) -> usize {
        self.state.requests.load(Ordering::SeqCst)
    }

    pub(crate) fn connections(&self) -> usize {
        self.state.connections.load(Ordering::SeqCst)
    }

    pub(crate) fn set(&self, f: impl FnOnce(&mut Behavior)) {
        f(&mut self.state.behavior.lock().unwrap());
    }

    pub(crate) fn last_seen(&self) -> Seen {
        self.state.seen.lock().unwrap().last().cloned().expect("a request")
    }
}

/// An address nothing listens on: connecting is refused.
pub(crate) async fn closed_port() -> String {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let a = l.local_addr().unwrap();
    drop(l);
    a.to_string()
}

fn find(buf: &[u8], pat: &[u8]) -> Option<usize> {
    buf.windows(pat.len()).position(|w| w == pat)
}

async fn fill(s: &mut TcpStream, buf: &mut Vec<u8>) -> bool {
    let mut tmp = [0u8; 8192];
    match s.read(&mut tmp).await {
        Ok(0) | Err(_) => false,
        Ok(n) => {
            buf.extend_from_slice(&tmp[..n]);
            true
        }
    }
}

fn reset(s: TcpStream) {
    let _ = socket2::SockRef::from(&s).set_linger(Some(Duration::ZERO));
    drop(s);
}

async fn serve(mut s: TcpStream, st: Arc<State>) {
    let mut buf = Vec::new();
    loop {
        let head_end = loop {
            if let Some(i) = find(&buf, b"\r\n\r\n") {
                break i + 4;
            }
            if !fill(&mut s, &mut buf).await {
                return;
            }
        };
        let mut hs = [httparse::EMPTY_HEADER; 64];
        let mut req = httparse::Request::new(&mut hs);
        if req.parse(&buf[..head_end]).is_err() {
            return;
        }
        let method = req.method.unwrap_or("").to_owned();
        let path = req.path.unwrap_or("").to_owned();
        let headers: Vec<(String, String)> = req
            .headers
            .iter()
            .map(|h| (h.name.to_owned(), String::from_utf8_lossy(h.value).into_owned()))
            .collect();
        buf.drain(..head_end);
        let mut seen = Seen { method, path, headers, body: Vec::new() };
        st.progress.send_replace(0);
        let chunked = seen.header("transfer-encoding").is_some_and(|v| v.contains("chunked"));
        if chunked {
            loop {
                let line_end = loop {
                    if let Some(i) = find(&buf, b"\r\n") {
                        break i;
                    }
                    if !fill(&mut s, &mut buf).await {
                        return;
                    }
                };
                let size_str = String::from_utf8_lossy(&buf[..line_end]).to_string();
                let size = usize::from_str_radix(size_str.split(';').next().unwrap().trim(), 16)
                    .unwrap_or(0);
                buf.drain(..line_end + 2);
                while buf.len() < size + 2 {
                    if !fill(&mut s, &mut buf).await {
                        return;
                    }
                }
                seen.body.extend_from_slice(&buf[..size]);
                buf.drain(..size + 2);
                st.progress.send_replace(seen.body.len());
                if size == 0 {
                    break;
                }
            }
        } else if let Some(cl) = seen.header("content-length").and_then(|v| v.parse::<usize>().ok())
        {
            while buf.len() < cl {
                if !fill(&mut s, &mut buf).await {
                    return;
                }
                st.progress.send_replace(buf.len().min(cl));
            }
            seen.body = buf.drain(..cl).collect();
        }

        let b = st.behavior.lock().unwrap().clone();
        if seen.path == "/health" {
            st.health_requests.fetch_add(1, Ordering::SeqCst);
            let resp = format!("HTTP/1.1 {} X\r\ncontent-length: 0\r\n\r\n", b.health_status);
            if s.write_all(resp.as_bytes()).await.is_err() {
                return;
            }
            continue;
        }
        st.requests.fetch_add(1, Ordering::SeqCst);
        let body_len = seen.body.len();
        st.seen.lock().unwrap().push(seen);
        if b.fault == Fault::ResetBeforeHeaders {
            reset(s);
            return;
        }
        if b.fault == Fault::CloseBeforeHeaders {
            return;
        }
        if !b.interim.is_empty() && s.write_all(&b.interim).await.is_err() {
            return;
        }
        tokio::time::sleep(b.head_delay).await;
        let mut head = format!("HTTP/1.1 {} X\r\nx-body-len: {body_len}\r\n", b.status);
        if b.chunked {
            head.push_str("transfer-encoding: chunked\r\n");
        } else {
            let n = b.content_length.unwrap_or_else(|| b.chunks.iter().map(Vec::len).sum());
            head.push_str(&format!("content-length: {n}\r\n"));
        }
        for (n, v) in &b.extra_headers {
            head.push_str(&format!("{n}: {v}\r\n"));
        }
        head.push_str("\r\n");
        if s.write_all(head.as_bytes()).await.is_err() {
            return;
        }
        for (i, c) in b.chunks.iter().enumerate() {
            if i > 0 {
                tokio::time::sleep(b.chunk_delay).await;
            }
            let r = if b.chunked {
                let mut framed = format!("{:x}\r\n", c.len()).into_bytes();
                framed.extend_from_slice(c);
                framed.extend_from_slice(b"\r\n");
                s.write_all(&framed).await
            } else {
                s.write_all(c).await
            };
            if r.is_err() {
                return;
            }
        }
        match b.fault {
            Fault::CloseAfterChunks => return,
            Fault::ResetAfterChunks => {
                reset(s);
                return;
            }
            _ => {}
        }
        if b.chunked && s.write_all(b"0\r\n\r\n").await.is_err() {
            return;
        }
        if b.fault == Fault::CloseAfterResponse {
            return;
        }
    }
}

/// A group with short timeouts and health checks off.
pub(crate) fn group(name: &str, tiers: Vec<Vec<String>>) -> GroupSpec {
    let mut g = GroupSpec::new(
        name,
        tiers.into_iter().map(|t| t.into_iter().map(HostSpec::new).collect()).collect(),
    );
    g.connect_timeout = Duration::from_secs(5);
    g.first_byte_timeout = Duration::from_secs(5);
    g.idle_timeout = Duration::from_secs(5);
    g.retries = 1;
    g.health = HealthSpec { enabled: false, interval: Duration::from_secs(600), ..g.health };
    g
}

/// Turns on active health checks of `g`: `/health` every 50 ms (2 s timeout), one probe
/// enough to mark a host up or down.
pub(crate) fn fast_health_checks(g: &mut GroupSpec) {
    g.health.enabled = true;
    g.health.path = "/health".into();
    g.health.interval = Duration::from_millis(50);
    g.health.timeout = Duration::from_secs(2);
    g.health.rise = 1;
    g.health.fall = 1;
}
