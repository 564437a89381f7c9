//! A minimal blocking HTTP/1.1 client over raw TCP, strict about framing: it reports
//! whether a body ended where its framing said it would.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use crate::server::{HOST, Server};

/// Failure guard for every read: far above anything a passing test needs.
pub(crate) const GUARD: Duration = Duration::from_secs(30);

/// A response as the client saw it.
#[derive(Debug, Clone)]
pub(crate) struct Resp {
    /// Status code.
    pub status: u16,
    /// Header fields, names lowercased.
    pub headers: Vec<(String, String)>,
    /// The body bytes received.
    pub body: Vec<u8>,
    /// Whether the body ended as framed (a connection closed short is `false`).
    pub complete: bool,
}

impl Resp {
    /// The first value of `name`.
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }

    /// The Cache-Status value ("" if absent).
    pub(crate) fn cache_status(&self) -> &str {
        self.header("cache-status").unwrap_or("")
    }
}

/// One connection, for requests that need to watch a response as it arrives.
pub(crate) struct Conn {
    s: TcpStream,
    buf: Vec<u8>,
    eof: bool,
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

impl Conn {
    /// Connects to `addr`.
    pub(crate) fn open(addr: SocketAddr) -> Conn {
        let s = loop {
            match TcpStream::connect(addr) {
                Ok(s) => break s,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => panic!("connect {addr}: {e}"),
            }
        };
        s.set_read_timeout(Some(GUARD)).expect("timeout");
        s.set_nodelay(true).expect("nodelay");
        Conn { s, buf: Vec::new(), eof: false }
    }

    /// Sends raw bytes.
    pub(crate) fn send(&mut self, raw: &[u8]) {
        self.s.write_all(raw).expect("send request");
    }

    /// Reads more; false at EOF or on a reset.
    fn more(&mut self) -> bool {
        if self.eof {
            return false;
        }
        let mut tmp = [0u8; 64 * 1024];
        match self.s.read(&mut tmp) {
            Ok(0) => {
                self.eof = true;
                false
            }
            Ok(n) => {
                self.buf.extend_from_slice(&tmp[..n]);
                true
            }
            Err(e)
                if e.kind() == std::io::ErrorKind::WouldBlock
                    || e.kind() == std::io::ErrorKind::TimedOut =>
            {
                panic!("no data within {GUARD:?}: {:?}", String::from_utf8_lossy(&self.buf))
            }
            // The thread that opened the store may see EINTR (io_uring task work).
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => true,
            Err(_) => {
                self.eof = true;
                false
            }
        }
    }

    /// Reads a response head: status and header fields.
    pub(crate) fn read_head(&mut self) -> (u16, Vec<(String, String)>) {
        let end = loop {
            if let Some(i) = find(&self.buf, b"\r\n\r\n") {
                break i;
            }
            assert!(self.more(), "connection closed before a response head");
        };
        let head = String::from_utf8_lossy(&self.buf[..end]).to_string();
        self.buf.drain(..end + 4);
        let mut lines = head.split("\r\n");
        let status = lines
            .next()
            .and_then(|l| l.split(' ').nth(1))
            .and_then(|c| c.parse().ok())
            .expect("status line");
        let headers = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_string()))
            .collect();
        (status, headers)
    }

    /// Raw body bytes received so far past the head (chunk framing included), reading
    /// until at least `n` are there or the connection ends.
    pub(crate) fn raw_at_least(&mut self, n: usize) -> &[u8] {
        while self.buf.len() < n && self.more() {}
        &self.buf
    }

    /// Reads the body that follows a head, per its framing.
    pub(crate) fn read_body(
        &mut self,
        headers: &[(String, String)],
        no_body: bool,
    ) -> (Vec<u8>, bool) {
        if no_body {
            return (Vec::new(), true);
        }
        let h = |n: &str| headers.iter().find(|(k, _)| k == n).map(|(_, v)| v.as_str());
        if let Some(cl) = h("content-length").and_then(|v| v.parse::<usize>().ok()) {
            while self.buf.len() < cl && self.more() {}
            let take = cl.min(self.buf.len());
            let body: Vec<u8> = self.buf.drain(..take).collect();
            let ok = body.len() == cl;
            return (body, ok);
        }
        if h("transfer-encoding").is_some_and(|v| v.contains("chunked")) {
            let mut body = Vec::new();
            loop {
                let le = loop {
                    if let Some(i) = find(&self.buf, b"\r\n") {
                        break i;
                    }
                    if !self.more() {
                        return (body, false);
                    }
                };
                let line = String::from_utf8_lossy(&self.buf[..le]).to_string();
                let Ok(size) =
                    usize::from_str_radix(line.split(';').next().unwrap_or("").trim(), 16)
                else {
                    return (body, false);
                };
                self.buf.drain(..le + 2);
                if size == 0 {
                    while find(&self.buf, b"\r\n").is_none() {
                        if !self.more() {
                            return (body, false);
                        }
                    }
                    let i = find(&self.buf, b"\r\n").unwrap_or(0);
                    self.buf.drain(..i + 2);
                    return (body, true);
                }
                while self.buf.len() < size + 2 {
                    if !self.more() {
                        body.extend_from_slice(&self.buf);
                        return (body, false);
                    }
                }
                body.extend_from_slice(&self.buf[..size]);
                self.buf.drain(..size + 2);
            }
        }
        // Close-delimited.
        while self.more() {}
        (std::mem::take(&mut self.buf), true)
    }

    /// Reads one complete response.
    pub(crate) fn read_response(&mut self, head_request: bool) -> Resp {
        let (status, headers) = self.read_head();
        let no_body =
            head_request || status == 304 || status == 204 || (100..200).contains(&status);
        let (body, complete) = self.read_body(&headers, no_body);
        Resp { status, headers, body, complete }
    }
}

/// Sends one request (`Connection: close`) and reads its response.
pub(crate) fn request(
    addr: SocketAddr,
    method: &str,
    target: &str,
    headers: &[(&str, &str)],
) -> Resp {
    request_body(addr, method, target, headers, None)
}

/// Like [`request`], with a Content-Length body.
pub(crate) fn request_body(
    addr: SocketAddr,
    method: &str,
    target: &str,
    headers: &[(&str, &str)],
    body: Option<&[u8]>,
) -> Resp {
    let mut raw = format!("{method} {target} HTTP/1.1\r\n");
    if !headers.iter().any(|(n, _)| n.eq_ignore_ascii_case("host")) {
        raw.push_str(&format!("Host: {HOST}\r\n"));
    }
    for (n, v) in headers {
        raw.push_str(&format!("{n}: {v}\r\n"));
    }
    if let Some(b) = body {
        raw.push_str(&format!("Content-Length: {}\r\n", b.len()));
    }
    raw.push_str("Connection: close\r\n\r\n");
    let mut c = Conn::open(addr);
    let mut bytes = raw.into_bytes();
    if let Some(b) = body {
        bytes.extend_from_slice(b);
    }
    c.send(&bytes);
    c.read_response(method == "HEAD")
}

/// GET `target` with extra header fields, then waits until no origin fetch is in
/// flight, so what the response started (a fill's commit, a background refresh) is done
/// before the next step.
pub(crate) fn get(s: &Server, target: &str, headers: &[(&str, &str)]) -> Resp {
    let r = request(s.addr, "GET", target, headers);
    s.settle();
    r
}

/// Deterministic test body of `n` bytes, distinct per `seed`.
pub(crate) fn body_of(n: usize, seed: u8) -> Vec<u8> {
    (0..n).map(|i| (i as u32).wrapping_mul(2_654_435_761).wrapping_add(seed as u32) as u8).collect()
}
