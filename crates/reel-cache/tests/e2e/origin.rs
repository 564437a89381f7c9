//! A scriptable test origin: raw HTTP/1.1 over tokio on 127.0.0.1:0, on its own thread.
//!
//! Each route says what to answer (status, header fields, body), how (Content-Length or
//! chunked, in how many pieces, after which delays, held at a [`Gate`], reset after N body
//! bytes) and whether to answer 304 to a matching `If-None-Match`. Every request received is
//! recorded with its header fields and body, so tests can count what reached the origin.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, watch};

/// Holds a route's body after its first piece until the test lets pieces through.
pub struct Gate {
    sem: Semaphore,
}

impl Gate {
    /// A closed gate.
    pub fn new() -> Arc<Gate> {
        Arc::new(Gate { sem: Semaphore::new(0) })
    }

    /// Lets `n` more pieces through.
    pub fn open(&self, n: usize) {
        self.sem.add_permits(n);
    }
}

/// What the origin does with a request that carries a given header field.
#[derive(Clone)]
pub enum OnHeader {
    /// Wait for one permit of the gate before the response head.
    Hold(Arc<Gate>),
    /// Wait for one permit of the gate, then close the connection without an answer.
    HoldThenClose(Arc<Gate>),
}

/// What the origin answers for one path.
#[derive(Clone)]
pub struct Route {
    /// Status code.
    pub status: u16,
    /// Header fields (besides Date and the framing, which the origin adds).
    pub headers: Vec<(String, String)>,
    /// The body (shared: requests do not copy it).
    pub body: Arc<[u8]>,
    /// Wait before the response head.
    pub delay: Duration,
    /// Chunked framing instead of Content-Length.
    pub chunked: bool,
    /// The body leaves in this many writes.
    pub pieces: usize,
    /// Wait between two pieces.
    pub piece_delay: Duration,
    /// Every piece after the first waits for one permit of this gate.
    pub gate: Option<Arc<Gate>>,
    /// Reset the connection after this many body bytes.
    pub reset_after: Option<usize>,
    /// Answer 304 when the request's If-None-Match names this route's ETag.
    pub honour_inm: bool,
    /// Requests carrying this field (lowercase name) get this treatment.
    pub on_header: Option<(String, OnHeader)>,
}

impl Route {
    /// 200 with `body` and the given header fields.
    pub fn ok(body: impl Into<Vec<u8>>, headers: &[(&str, &str)]) -> Route {
        Route {
            status: 200,
            headers: headers.iter().map(|(n, v)| (n.to_string(), v.to_string())).collect(),
            body: body.into().into(),
            delay: Duration::ZERO,
            chunked: false,
            pieces: 1,
            piece_delay: Duration::ZERO,
            gate: None,
            reset_after: None,
            honour_inm: true,
            on_header: None,
        }
    }

    /// `status` with `body` and the given header fields.
    pub fn status(status: u16, body: impl Into<Vec<u8>>, headers: &[(&str, &str)]) -> Route {
        Route { status, ..Route::ok(body, headers) }
    }

    fn etag(&self) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case("etag")).map(|(_, v)| v.as_str())
    }
}

/// A request the origin received.
#[derive(Debug, Clone)]
pub struct Seen {
    /// Method.
    pub method: String,
    /// Request target as received.
    pub target: String,
    /// Header fields, names lowercased.
    pub headers: Vec<(String, String)>,
    /// The request body.
    pub body: Vec<u8>,
}

impl Seen {
    /// The first value of `name`.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }
}

#[derive(Default)]
struct State {
    routes: Mutex<HashMap<String, Route>>,
    seen: Mutex<Vec<Seen>>,
    finished: Mutex<HashMap<String, usize>>,
    connections: AtomicUsize,
    /// Connections being served right now.
    live: AtomicUsize,
    /// Whether the listener is bound.
    listening: std::sync::atomic::AtomicBool,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Up,
    Down,
    Exit,
}

/// A running test origin. Dropping it stops its thread.
pub struct Origin {
    /// Where it listens.
    pub addr: SocketAddr,
    state: Arc<State>,
    mode: watch::Sender<Mode>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Origin {
    /// Starts an origin on 127.0.0.1:0.
    pub fn start() -> Origin {
        let std_listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind origin");
        std_listener.set_nonblocking(true).expect("nonblocking");
        let addr = std_listener.local_addr().expect("origin addr");
        let state = Arc::new(State::default());
        let (mode, mode_rx) = watch::channel(Mode::Up);
        let st = state.clone();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("origin runtime");
            rt.block_on(run(std_listener, addr, st, mode_rx));
        });
        Origin { addr, state, mode, thread: Some(thread) }
    }

    /// Sets what `path` (a path, or a path with query for an exact target) answers.
    pub fn route(&self, path: &str, r: Route) {
        self.state.routes.lock().unwrap().insert(path.to_string(), r);
    }

    /// Requests received for exactly this target (path and query).
    pub fn count(&self, target: &str) -> usize {
        self.state.seen.lock().unwrap().iter().filter(|s| s.target == target).count()
    }

    /// Requests received whose path (without query) is `path`.
    pub fn count_path(&self, path: &str) -> usize {
        self.state.seen.lock().unwrap().iter().filter(|s| path_of(&s.target) == path).count()
    }

    /// Every request received for this target.
    pub fn seen(&self, target: &str) -> Vec<Seen> {
        self.state.seen.lock().unwrap().iter().filter(|s| s.target == target).cloned().collect()
    }

    /// Every request received.
    pub fn all_seen(&self) -> Vec<Seen> {
        self.state.seen.lock().unwrap().clone()
    }

    /// Responses to `path` whose body was written completely.
    pub fn finished(&self, path: &str) -> usize {
        self.state.finished.lock().unwrap().get(path).copied().unwrap_or(0)
    }

    /// Connections accepted so far.
    pub fn connections(&self) -> usize {
        self.state.connections.load(Ordering::SeqCst)
    }

    /// Closes the listener and every connection: the host refuses connections.
    pub fn down(&self) {
        self.mode.send_replace(Mode::Down);
        // The origin thread closes its listener and connections asynchronously: wait until
        // it has, so the next request really finds the host down.
        self.settle("the origin to go down", |st| {
            !st.listening.load(Ordering::SeqCst) && st.live.load(Ordering::SeqCst) == 0
        });
    }

    fn settle(&self, what: &str, done: impl Fn(&State) -> bool) {
        reel_test_support::wait_until(what, || done(&self.state));
    }

    /// Listens again on the same address.
    pub fn up(&self) {
        self.mode.send_replace(Mode::Up);
        self.settle("the origin to listen again", |st| st.listening.load(Ordering::SeqCst));
    }
}

impl Drop for Origin {
    fn drop(&mut self) {
        self.mode.send_replace(Mode::Exit);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn path_of(target: &str) -> &str {
    target.split('?').next().unwrap_or(target)
}

async fn run(
    first: std::net::TcpListener,
    addr: SocketAddr,
    state: Arc<State>,
    mut mode: watch::Receiver<Mode>,
) {
    let mut listener = Some(TcpListener::from_std(first).expect("tokio listener"));
    let conn_mode = mode.clone();
    loop {
        let l = match listener.take() {
            Some(l) => l,
            None => {
                // Rebinding the same port: std sets SO_REUSEADDR, so TIME_WAIT does not
                // stop it; retry briefly in case the kernel has not released it yet.
                let mut bound = None;
                for _ in 0..200 {
                    if let Ok(l) = TcpListener::bind(addr).await {
                        bound = Some(l);
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(25)).await;
                }
                bound.expect("rebind origin port")
            }
        };
        state.listening.store(true, Ordering::SeqCst);
        loop {
            tokio::select! {
                a = l.accept() => {
                    if let Ok((s, _)) = a {
                        // A head and its body leave in two writes: without this, Nagle
                        // holds the body for the client's delayed ACK on a reused
                        // connection.
                        let _ = s.set_nodelay(true);
                        state.connections.fetch_add(1, Ordering::SeqCst);
                        state.live.fetch_add(1, Ordering::SeqCst);
                        tokio::spawn(conn(s, state.clone(), conn_mode.clone()));
                    }
                }
                _ = mode.wait_for(|m| *m != Mode::Up) => break,
            }
        }
        drop(l);
        state.listening.store(false, Ordering::SeqCst);
        let next = match mode.wait_for(|m| *m != Mode::Down).await {
            Ok(m) => *m,
            Err(_) => Mode::Exit,
        };
        if next == Mode::Exit {
            return;
        }
    }
}

async fn conn(mut s: TcpStream, state: Arc<State>, mut mode: watch::Receiver<Mode>) {
    tokio::select! {
        _ = serve(&mut s, &state) => {}
        _ = mode.wait_for(|m| *m != Mode::Up) => {}
    }
    drop(s);
    state.live.fetch_sub(1, Ordering::SeqCst);
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

async fn fill(s: &mut TcpStream, buf: &mut Vec<u8>) -> bool {
    let mut tmp = [0u8; 16 * 1024];
    match s.read(&mut tmp).await {
        Ok(0) | Err(_) => false,
        Ok(n) => {
            buf.extend_from_slice(&tmp[..n]);
            true
        }
    }
}

async fn serve(s: &mut TcpStream, state: &State) {
    let mut buf = Vec::new();
    loop {
        let end = loop {
            if let Some(i) = find(&buf, b"\r\n\r\n") {
                break i;
            }
            if !fill(s, &mut buf).await {
                return;
            }
        };
        let head = String::from_utf8_lossy(&buf[..end]).to_string();
        buf.drain(..end + 4);
        let mut lines = head.split("\r\n");
        let mut rl = lines.next().unwrap_or("").split(' ');
        let method = rl.next().unwrap_or("").to_string();
        let target = rl.next().unwrap_or("").to_string();
        let headers: Vec<(String, String)> = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_string()))
            .collect();
        let hv = |n: &str| headers.iter().find(|(k, _)| k == n).map(|(_, v)| v.clone());
        let mut body = Vec::new();
        if let Some(cl) = hv("content-length").and_then(|v| v.parse::<usize>().ok()) {
            while buf.len() < cl {
                if !fill(s, &mut buf).await {
                    return;
                }
            }
            body = buf.drain(..cl).collect();
        } else if hv("transfer-encoding")
            .is_some_and(|v| v.to_ascii_lowercase().contains("chunked"))
        {
            loop {
                let le = loop {
                    if let Some(i) = find(&buf, b"\r\n") {
                        break i;
                    }
                    if !fill(s, &mut buf).await {
                        return;
                    }
                };
                let line = String::from_utf8_lossy(&buf[..le]).to_string();
                let size = usize::from_str_radix(line.split(';').next().unwrap_or("").trim(), 16)
                    .unwrap_or(0);
                buf.drain(..le + 2);
                if size == 0 {
                    // Trailer section: up to the empty line.
                    loop {
                        if let Some(i) = find(&buf, b"\r\n") {
                            let empty = i == 0;
                            buf.drain(..i + 2);
                            if empty {
                                break;
                            }
                        } else if !fill(s, &mut buf).await {
                            return;
                        }
                    }
                    break;
                }
                while buf.len() < size + 2 {
                    if !fill(s, &mut buf).await {
                        return;
                    }
                }
                body.extend_from_slice(&buf[..size]);
                buf.drain(..size + 2);
            }
        }
        let inm = hv("if-none-match");
        state.seen.lock().unwrap().push(Seen {
            method: method.clone(),
            target: target.clone(),
            headers: headers.clone(),
            body,
        });
        let route = {
            let routes = state.routes.lock().unwrap();
            routes.get(&target).or_else(|| routes.get(path_of(&target))).cloned()
        };
        let route = match route {
            Some(r) => r,
            None if path_of(&target) == "/healthz" => Route::ok("ok", &[]),
            None => Route::status(404, "no such route", &[]),
        };
        if let Some((name, action)) = &route.on_header
            && headers.iter().any(|(n, _)| n == name)
        {
            let (OnHeader::Hold(g) | OnHeader::HoldThenClose(g)) = action;
            match g.sem.acquire().await {
                Ok(p) => p.forget(),
                Err(_) => return,
            }
            if matches!(action, OnHeader::HoldThenClose(_)) {
                return;
            }
        }
        if !route.delay.is_zero() {
            tokio::time::sleep(route.delay).await;
        }
        let not_modified = route.honour_inm
            && match (route.etag(), inm.as_deref()) {
                (Some(e), Some(i)) => i.split(',').any(|t| t.trim() == e || t.trim() == "*"),
                _ => false,
            };
        let head_only = method == "HEAD" || not_modified || matches!(route.status, 204 | 304);
        let status = if not_modified { 304 } else { route.status };
        let mut out = format!("HTTP/1.1 {status} X\r\n");
        if !route.headers.iter().any(|(n, _)| n.eq_ignore_ascii_case("date")) {
            out.push_str(&format!("date: {}\r\n", httpdate::fmt_http_date(SystemTime::now())));
        }
        for (n, v) in &route.headers {
            out.push_str(&format!("{n}: {v}\r\n"));
        }
        if !not_modified {
            if route.chunked {
                out.push_str("transfer-encoding: chunked\r\n");
            } else {
                out.push_str(&format!("content-length: {}\r\n", route.body.len()));
            }
        }
        out.push_str("\r\n");
        if s.write_all(out.as_bytes()).await.is_err() {
            return;
        }
        if head_only {
            continue;
        }
        let pieces = route.pieces.max(1);
        let per = route.body.len().div_ceil(pieces).max(1);
        let mut sent = 0usize;
        for (i, piece) in route.body.chunks(per).enumerate() {
            if i > 0 {
                if let Some(g) = &route.gate {
                    match g.sem.acquire().await {
                        Ok(p) => p.forget(),
                        Err(_) => return,
                    }
                }
                if !route.piece_delay.is_zero() {
                    tokio::time::sleep(route.piece_delay).await;
                }
            }
            let piece = match route.reset_after {
                Some(r) if sent + piece.len() >= r => &piece[..r - sent],
                _ => piece,
            };
            let mut w = Vec::new();
            if route.chunked && !piece.is_empty() {
                w.extend_from_slice(format!("{:x}\r\n", piece.len()).as_bytes());
                w.extend_from_slice(piece);
                w.extend_from_slice(b"\r\n");
            } else {
                w.extend_from_slice(piece);
            }
            if s.write_all(&w).await.is_err() {
                return;
            }
            sent += piece.len();
            if route.reset_after.is_some_and(|r| sent >= r) {
                // A hard reset mid-body: SO_LINGER 0 turns the close into an RST.
                let _ = socket2::SockRef::from(&*s).set_linger(Some(Duration::ZERO));
                return;
            }
        }
        if route.chunked && s.write_all(b"0\r\n\r\n").await.is_err() {
            return;
        }
        *state.finished.lock().unwrap().entry(path_of(&target).to_string()).or_default() += 1;
    }
}
