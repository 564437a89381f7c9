//! The in-test origin: a small HTTP/1.1 server on 127.0.0.1:0 serving the objects a test
//! puts into it, counting what it is asked.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::SocketAddr;
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

/// One object the origin serves.
#[derive(Clone, Debug)]
pub(crate) struct Object {
    /// Status code.
    pub status: u16,
    /// Extra response headers.
    pub headers: Vec<(String, String)>,
    /// Body.
    pub body: Vec<u8>,
    /// Delay before the response head is sent.
    pub delay: Duration,
    /// Raw interim (1xx) responses sent first, before the delay and the gate.
    pub interim: Vec<u8>,
    /// Held back (after the interim responses) until the test opens this gate.
    pub gate: Option<Gate>,
    /// Sent chunked, without a length, in two chunks.
    pub chunked: bool,
}

/// A gate an origin response waits at until the test opens it.
#[derive(Clone, Debug, Default)]
pub(crate) struct Gate(Arc<(Mutex<bool>, Condvar)>);

impl Gate {
    /// Lets every response waiting at the gate (and later ones) go.
    pub(crate) fn open(&self) {
        *self.0.0.lock().unwrap() = true;
        self.0.1.notify_all();
    }

    fn wait(&self) {
        let mut open = self.0.0.lock().unwrap();
        while !*open {
            open = self.0.1.wait(open).unwrap();
        }
    }
}

impl Object {
    /// A 200 with this body and no caching headers.
    pub(crate) fn ok(body: impl Into<Vec<u8>>) -> Object {
        Object {
            status: 200,
            headers: Vec::new(),
            body: body.into(),
            delay: Duration::ZERO,
            interim: Vec::new(),
            gate: None,
            chunked: false,
        }
    }

    /// Sends the body chunked (no `Content-Length`), in two chunks.
    pub(crate) fn chunked(mut self) -> Object {
        self.chunked = true;
        self
    }

    /// Sends these raw interim responses first.
    pub(crate) fn interim(mut self, raw: &str) -> Object {
        self.interim.extend_from_slice(raw.as_bytes());
        self
    }

    /// Holds the final response back until `gate` opens.
    pub(crate) fn gated(mut self, gate: &Gate) -> Object {
        self.gate = Some(gate.clone());
        self
    }

    /// Adds a response header.
    pub(crate) fn header(mut self, name: &str, value: &str) -> Object {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// Delays the response.
    pub(crate) fn delay(mut self, d: Duration) -> Object {
        self.delay = d;
        self
    }

    fn etag(&self) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case("etag")).map(|(_, v)| v.as_str())
    }
}

#[derive(Default)]
struct OriginState {
    objects: HashMap<String, Object>,
    /// Served for paths without an object of their own (else 404).
    default: Option<Object>,
    hits: HashMap<String, u64>,
    conditional: HashMap<String, u64>,
    /// The last `CDN-Loop` received per path, its field lines joined by ", ".
    cdn_loop: HashMap<String, String>,
    /// The `Cookie` field lines of the last request per path, one entry a line.
    cookies: HashMap<String, Vec<String>>,
    /// The `Host` of the last request per path.
    hosts: HashMap<String, String>,
    /// Every request target received, in order.
    targets: Vec<String>,
    /// The field lines (name lowercase, value trimmed) of the last request per path.
    fields: HashMap<String, Vec<(String, String)>>,
    /// The request-target of the last request per path.
    last_targets: HashMap<String, String>,
}

/// A small HTTP/1.1 origin on 127.0.0.1:0: serves the objects put into it (404 otherwise,
/// 200 on `/healthz`), answers `If-None-Match` with 304, counts requests per path and
/// accepted connections.
pub(crate) struct Origin {
    /// Where it listens.
    pub addr: SocketAddr,
    state: Arc<Mutex<OriginState>>,
    accepted: Arc<AtomicU64>,
}

impl Origin {
    /// Starts an origin whose responses carry `x-origin: NAME`.
    pub(crate) fn start(name: &str) -> Origin {
        let l = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).expect("bind origin");
        let addr = l.local_addr().expect("origin addr");
        let state = Arc::new(Mutex::new(OriginState::default()));
        let st = state.clone();
        let n = name.to_string();
        let accepted = Arc::new(AtomicU64::new(0));
        let count = accepted.clone();
        std::thread::spawn(move || {
            for s in l.incoming().flatten() {
                count.fetch_add(1, Ordering::SeqCst);
                let st = st.clone();
                let n = n.clone();
                std::thread::spawn(move || origin_conn(s, &st, &n));
            }
        });
        Origin { addr, state, accepted }
    }

    /// Connections accepted so far.
    pub(crate) fn connections(&self) -> u64 {
        self.accepted.load(Ordering::SeqCst)
    }

    /// Serves `obj` at `path` from now on.
    pub(crate) fn put(&self, path: &str, obj: Object) {
        self.state.lock().unwrap().objects.insert(path.into(), obj);
    }

    /// Serves `obj` for every path without an object of its own, from now on.
    pub(crate) fn put_default(&self, obj: Object) {
        self.state.lock().unwrap().default = Some(obj);
    }

    /// Requests received so far, per path.
    pub(crate) fn all_hits(&self) -> HashMap<String, u64> {
        self.state.lock().unwrap().hits.clone()
    }

    /// The `CDN-Loop` of the last request for `path` (field lines joined by ", ").
    pub(crate) fn cdn_loop(&self, path: &str) -> Option<String> {
        self.state.lock().unwrap().cdn_loop.get(path).cloned()
    }

    /// The `Cookie` field lines of the last request for `path`, one entry a line.
    pub(crate) fn cookies(&self, path: &str) -> Vec<String> {
        self.state.lock().unwrap().cookies.get(path).cloned().unwrap_or_default()
    }

    /// The `Host` of the last request for `path`.
    pub(crate) fn host(&self, path: &str) -> Option<String> {
        self.state.lock().unwrap().hosts.get(path).cloned()
    }

    /// Every request target received so far (path and query), in order.
    pub(crate) fn targets(&self) -> Vec<String> {
        self.state.lock().unwrap().targets.clone()
    }

    /// The value of field `name` (lowercase) in the last request for `path`.
    pub(crate) fn field(&self, path: &str, name: &str) -> Option<String> {
        let st = self.state.lock().unwrap();
        st.fields.get(path)?.iter().find(|(n, _)| n == name).map(|(_, v)| v.clone())
    }

    /// The request-target (path and query) of the last request for `path`.
    pub(crate) fn target(&self, path: &str) -> Option<String> {
        self.state.lock().unwrap().last_targets.get(path).cloned()
    }

    /// Requests received for `path` so far.
    pub(crate) fn hits(&self, path: &str) -> u64 {
        self.state.lock().unwrap().hits.get(path).copied().unwrap_or(0)
    }

    /// Conditional (`If-None-Match`) requests received for `path` so far.
    pub(crate) fn conditional_hits(&self, path: &str) -> u64 {
        self.state.lock().unwrap().conditional.get(path).copied().unwrap_or(0)
    }
}

fn origin_conn(s: TcpStream, state: &Mutex<OriginState>, name: &str) {
    let _ = s.set_read_timeout(Some(Duration::from_secs(120)));
    let Ok(mut w) = s.try_clone() else { return };
    let mut r = BufReader::new(s);
    loop {
        let mut line = String::new();
        match r.read_line(&mut line) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        let mut parts = line.split_whitespace();
        let method = parts.next().unwrap_or("").to_string();
        let target = parts.next().unwrap_or("/").to_string();
        let mut inm = None;
        let mut cdn_loop: Vec<String> = Vec::new();
        let mut cookies: Vec<String> = Vec::new();
        let mut host = None;
        let mut fields = Vec::new();
        let mut body_len = 0usize;
        loop {
            let mut h = String::new();
            if r.read_line(&mut h).unwrap_or(0) == 0 {
                return;
            }
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            if let Some((k, v)) = h.split_once(':') {
                fields.push((k.to_ascii_lowercase(), v.trim().to_string()));
                if k.eq_ignore_ascii_case("if-none-match") {
                    inm = Some(v.trim().to_string());
                } else if k.eq_ignore_ascii_case("cdn-loop") {
                    cdn_loop.push(v.trim().to_string());
                } else if k.eq_ignore_ascii_case("host") {
                    host = Some(v.trim().to_string());
                } else if k.eq_ignore_ascii_case("cookie") {
                    cookies.push(v.trim().to_string());
                } else if k.eq_ignore_ascii_case("content-length") {
                    body_len = v.trim().parse().unwrap_or(0);
                }
            }
        }
        let mut sink = vec![0; body_len];
        if r.read_exact(&mut sink).is_err() {
            return;
        }
        let path = target.split('?').next().unwrap_or("/").to_string();
        let obj = {
            let mut st = state.lock().unwrap();
            *st.hits.entry(path.clone()).or_default() += 1;
            st.targets.push(target.clone());
            if inm.is_some() {
                *st.conditional.entry(path.clone()).or_default() += 1;
            }
            if !cdn_loop.is_empty() {
                st.cdn_loop.insert(path.clone(), cdn_loop.join(", "));
            }
            st.cookies.insert(path.clone(), cookies);
            st.fields.insert(path.clone(), fields);
            st.last_targets.insert(path.clone(), target.clone());
            if let Some(h) = host {
                st.hosts.insert(path.clone(), h);
            }
            match st.objects.get(&path).or(st.default.as_ref()) {
                Some(o) => o.clone(),
                None if path == "/healthz" => Object::ok("ok"),
                None => Object { status: 404, ..Object::ok("not found at the origin") },
            }
        };
        if !obj.interim.is_empty() && w.write_all(&obj.interim).is_err() {
            return;
        }
        if let Some(g) = &obj.gate {
            g.wait();
        }
        if !obj.delay.is_zero() {
            std::thread::sleep(obj.delay);
        }
        let not_modified = obj.status == 200 && inm.is_some() && inm.as_deref() == obj.etag();
        let status = if not_modified { 304 } else { obj.status };
        let mut head = format!("HTTP/1.1 {status} X\r\nx-origin: {name}\r\n");
        for (k, v) in &obj.headers {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        let send_body = !not_modified && method != "HEAD";
        let chunked = obj.chunked && !not_modified;
        if chunked {
            head.push_str("transfer-encoding: chunked\r\n");
        } else if !not_modified {
            head.push_str(&format!("content-length: {}\r\n", obj.body.len()));
        }
        head.push_str("\r\n");
        let mut out = head.into_bytes();
        if send_body && chunked {
            let (a, b) = obj.body.split_at(obj.body.len() / 2);
            for c in [a, b].into_iter().filter(|c| !c.is_empty()) {
                out.extend_from_slice(format!("{:x}\r\n", c.len()).as_bytes());
                out.extend_from_slice(c);
                out.extend_from_slice(b"\r\n");
            }
            out.extend_from_slice(b"0\r\n\r\n");
        } else if send_body {
            out.extend_from_slice(&obj.body);
        }
        if w.write_all(&out).is_err() {
            return;
        }
    }
}
