//! Request heads: parsing with `httparse` plus the strict validation RFC 9112 asks of a
//! server facing untrusted clients (request smuggling shapes are rejected, not repaired).
//!
//! A [`Request`] owns a copy of the head bytes and keeps every field as a range into it.
//! The copy and the field positions live in buffers of the worker's free list (see the
//! `bufs` module): taken by the first parse, given back when the request is dropped, so
//! a request costs no allocation once the worker is warm.

use std::mem::MaybeUninit;
use std::net::SocketAddr;
use std::ops::Range;

use crate::bufs::{self, HeadBufs};
use crate::client::{Peer, TrustedProxies};
use crate::limits::{Limits, MAX_HEADERS_CAP};
use crate::method::Method;

/// Protocol version of a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    /// HTTP/1.0
    Http10,
    /// HTTP/1.1
    Http11,
    /// HTTP/2 (RFC 9113); the head was given as fields of a stream.
    Http2,
    /// HTTP/3 (RFC 9114); the head was given as fields of a QUIC stream.
    Http3,
}

/// How the request body is delimited (RFC 9112 section 6.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyFraming {
    /// No body (no `Content-Length`, no `Transfer-Encoding`).
    None,
    /// `Content-Length: n`.
    Length(u64),
    /// `Transfer-Encoding: chunked`.
    Chunked,
}

/// Progress of [`Request::parse_head`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeadStatus {
    /// A complete, valid head occupies the first `n` bytes of the buffer.
    Complete(usize),
    /// More bytes are needed.
    Partial,
}

/// A request head that must be refused. The connection answers `status` with
/// `Connection: close` and closes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{status}: {reason}")]
pub struct HeadError {
    /// Response status: 400, 413, 414, 417, 431, 501 or 505.
    pub status: u16,
    /// Short diagnostic for logs (never sent to the client).
    pub reason: &'static str,
}

const fn bad(reason: &'static str) -> HeadError {
    HeadError { status: 400, reason }
}

/// One parsed request head.
#[derive(Debug, Clone)]
pub struct Request {
    head: Vec<u8>,
    method: Method,
    target: Range<usize>,
    path: Range<usize>,
    query: Option<Range<usize>>,
    version: Version,
    headers: Vec<(Range<usize>, Range<usize>)>,
    host: Option<Range<usize>>,
    keep_alive: bool,
    framing: BodyFraming,
    expect_continue: bool,
    peer: Peer,
    /// The client a trusted proxy's `X-Forwarded-For`/`Forwarded` named.
    forwarded: Option<SocketAddr>,
    local: SocketAddr,
}

impl Request {
    /// An empty request for a connection from `peer` (a socket address: a client connected
    /// directly) accepted on `local`; fill it with [`Request::parse_head`]. It holds no
    /// buffer until then.
    pub fn new(peer: impl Into<Peer>, local: SocketAddr) -> Self {
        let peer = peer.into();
        Self {
            head: Vec::new(),
            method: Method::Get,
            target: 0..0,
            path: 0..0,
            query: None,
            version: Version::Http11,
            headers: Vec::new(),
            host: None,
            keep_alive: false,
            framing: BodyFraming::None,
            expect_continue: false,
            peer,
            forwarded: None,
            local,
        }
    }

    /// Request method.
    pub fn method(&self) -> &Method {
        &self.method
    }

    /// Protocol version.
    pub fn version(&self) -> Version {
        self.version
    }

    /// The request-target exactly as received (origin-, absolute-, authority- or
    /// asterisk-form, RFC 9112 section 3.2), not percent-decoded.
    pub fn target(&self) -> &str {
        self.str_at(self.target.clone())
    }

    /// The path of the target, not percent-decoded: for origin-form everything before
    /// `?`; for absolute-form the path after the authority (`/` when empty); `*` for
    /// asterisk-form; empty for authority-form (CONNECT).
    pub fn path(&self) -> &str {
        if self.path.is_empty() && self.method != Method::Connect {
            // RFC 9112 section 3.2.2 / RFC 9110 section 4.2.3: an empty path in
            // absolute-form is "/".
            return "/";
        }
        self.str_at(self.path.clone())
    }

    /// The query after the first `?`, without the `?`, if the target has one.
    pub fn query(&self) -> Option<&str> {
        self.query.clone().map(|r| self.str_at(r))
    }

    /// Value of the first field named `name` (ASCII case-insensitive), with surrounding
    /// whitespace removed.
    pub fn header(&self, name: &str) -> Option<&[u8]> {
        self.headers().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v)
    }

    /// All header fields in received order as `(name, value)`.
    pub fn headers(&self) -> impl DoubleEndedIterator<Item = (&str, &[u8])> + Clone + '_ {
        self.headers.iter().map(|(n, v)| (self.str_at(n.clone()), &self.head[v.clone()]))
    }

    /// The authority the request is for: the authority of an absolute-form target if
    /// present (RFC 9112 section 3.2.2), else the `Host` field. `None` only for an
    /// HTTP/1.0 request without `Host`.
    pub fn host(&self) -> Option<&str> {
        self.host.clone().map(|r| self.str_at(r))
    }

    /// Whether the client asked to keep the connection open (HTTP/1.1 unless
    /// `Connection: close`; HTTP/1.0 only with `Connection: keep-alive`, RFC 9112 9.3).
    pub fn keep_alive(&self) -> bool {
        self.keep_alive
    }

    /// How the body is delimited.
    pub fn body_framing(&self) -> BodyFraming {
        self.framing
    }

    /// Whether the client sent `Expect: 100-continue` (answered lazily when the handler
    /// first reads the body).
    pub fn expects_continue(&self) -> bool {
        self.expect_continue
    }

    /// The client's address: what every per-client rule uses. The connection's PROXY
    /// protocol header named it, or a trusted proxy's `X-Forwarded-For`/`Forwarded` did
    /// ([`Request::apply_forwarded`]: its port is then 0), else it is the socket's peer.
    pub fn peer(&self) -> SocketAddr {
        self.forwarded.unwrap_or(self.peer.client)
    }

    /// The connection's client: the address its PROXY protocol header named, else the
    /// socket's peer; what this request came from before any `X-Forwarded-For` was read
    /// (the entry a proxy adds to `X-Forwarded-For` when it forwards the request).
    pub fn connection_client(&self) -> SocketAddr {
        self.peer.client
    }

    /// The socket's peer (TCP, or UDP for HTTP/3): the client itself, or the balancer or
    /// proxy it came through.
    pub fn socket_peer(&self) -> SocketAddr {
        self.peer.socket
    }

    /// Sets the client's address (see [`Request::peer`]), as a trusted proxy named it.
    pub fn set_client(&mut self, client: SocketAddr) {
        self.forwarded = Some(client);
    }

    /// [`Request::apply_forwarded`] with `limits`' trusted proxies, when there are any (one
    /// branch otherwise).
    #[inline]
    pub(crate) fn apply_trusted(&mut self, limits: &Limits) {
        if let Some(t) = &limits.trusted_proxies {
            self.apply_forwarded(t);
        }
    }

    /// When the connection's client is a proxy in `trusted`, takes the client its
    /// `X-Forwarded-For` (or `Forwarded`) names instead (see the `client` module); the
    /// connection's client stays when no such field names one.
    pub fn apply_forwarded(&mut self, trusted: &TrustedProxies) {
        if !trusted.contains(self.peer.client.ip()) {
            return;
        }
        if let Some(ip) = crate::client::forwarded_client(self.headers(), trusted) {
            self.forwarded = Some(SocketAddr::new(ip, 0));
        }
    }

    /// The local address the connection was accepted on.
    pub fn local(&self) -> SocketAddr {
        self.local
    }

    /// The raw head bytes of the current request (request line through the empty line).
    pub fn raw_head(&self) -> &[u8] {
        &self.head
    }

    /// Marks a head parsed from an HTTP/2 or HTTP/3 stream's fields: that `version`, the
    /// body framing the stream has (`Chunked` standing for "delimited by the stream,
    /// length unknown"), no `100-continue` to send, and keep-alive (streams do not close
    /// the connection).
    pub(crate) fn set_stream_version(&mut self, version: Version, framing: BodyFraming) {
        self.version = version;
        self.framing = framing;
        self.expect_continue = false;
        self.keep_alive = true;
    }

    fn str_at(&self, r: Range<usize>) -> &str {
        // Every stored range covers bytes httparse or this module validated as ASCII
        // visible characters, so this never fails; "" is a safe fallback regardless.
        std::str::from_utf8(&self.head[r]).unwrap_or("")
    }

    /// Gives the head's buffers back to the worker's free list: the request is empty (no
    /// fields, an empty target) until the next [`Request::parse_head`].
    pub(crate) fn release(&mut self) {
        let head = std::mem::take(&mut self.head);
        let fields = std::mem::take(&mut self.headers);
        (self.target, self.path, self.query, self.host) = (0..0, 0..0, None, None);
        if head.capacity() > 0 {
            bufs::give(HeadBufs { head, fields });
        }
    }

    /// Parses one request head from the start of `buf` into `self`, enforcing `limits`.
    ///
    /// On [`HeadStatus::Complete(n)`](HeadStatus::Complete) the first `n` bytes of `buf`
    /// were the head; any body follows. On error `self` is left in an unspecified state.
    pub fn parse_head(&mut self, buf: &[u8], limits: &Limits) -> Result<HeadStatus, HeadError> {
        // RFC 9112 section 2.2: ignore at least one empty line before the request line.
        let lead = buf.iter().take_while(|&&b| b == b'\r' || b == b'\n').count();
        let line = &buf[lead..];
        let line_len = match memchr::memchr(b'\n', line) {
            Some(i) => i.saturating_sub(usize::from(i > 0 && line[i - 1] == b'\r')),
            None if line.len() > limits.max_request_line => {
                return Err(HeadError { status: 414, reason: "request line too long" });
            }
            None if lead > 16 => return Err(bad("too many empty lines before request")),
            None => return Ok(HeadStatus::Partial),
        };
        if line_len > limits.max_request_line {
            return Err(HeadError { status: 414, reason: "request line too long" });
        }
        if lead > 16 {
            return Err(bad("too many empty lines before request"));
        }
        let head_cap = lead + line_len + 2 + limits.max_header_bytes;

        let mut slots = [const { MaybeUninit::<httparse::Header<'_>>::uninit() }; MAX_HEADERS_CAP];
        let slots = &mut slots[..limits.header_slots()];
        let mut parsed = httparse::Request::new(&mut []);
        let n = match parsed.parse_with_uninit_headers(buf, slots) {
            Ok(httparse::Status::Complete(n)) => n,
            Ok(httparse::Status::Partial) => {
                if buf.len() > head_cap {
                    return Err(HeadError { status: 431, reason: "header section too large" });
                }
                return Ok(HeadStatus::Partial);
            }
            Err(httparse::Error::TooManyHeaders) => {
                return Err(HeadError { status: 431, reason: "too many header fields" });
            }
            Err(httparse::Error::Version) => {
                // A well-formed line naming another version gets 505 (RFC 9110
                // section 15.6.6); anything else that trips the version parser is 400.
                let l = &line[..line_len];
                let spaces = l.iter().filter(|&&b| b == b' ').count();
                let v = l.rsplit(|&b| b == b' ').next().unwrap_or(b"");
                let versioned = v.len() == 8
                    && v.starts_with(b"HTTP/")
                    && v[5].is_ascii_digit()
                    && v[6] == b'.'
                    && v[7].is_ascii_digit();
                if spaces == 2 && versioned {
                    return Err(HeadError { status: 505, reason: "unsupported HTTP version" });
                }
                return Err(bad("malformed request line"));
            }
            Err(httparse::Error::HeaderName) => return Err(bad("invalid header name or obs-fold")),
            Err(httparse::Error::HeaderValue) => return Err(bad("invalid byte in header value")),
            Err(httparse::Error::NewLine) | Err(httparse::Error::Token) => {
                return Err(bad("malformed request line or line ending"));
            }
            Err(_) => return Err(bad("malformed request head")),
        };
        if n > head_cap {
            return Err(HeadError { status: 431, reason: "header section too large" });
        }

        // Copy the head once so the request can outlive the read buffer's next refill;
        // all later accessors index into this copy.
        if self.head.capacity() == 0 {
            let b: HeadBufs = bufs::take();
            (self.head, self.headers) = (b.head, b.fields);
        }
        self.head.clear();
        self.head.extend_from_slice(&buf[..n]);
        self.headers.clear();
        let base = buf.as_ptr() as usize;
        let range_of = |s: &[u8]| {
            let start = s.as_ptr() as usize - base;
            start..start + s.len()
        };

        let method = parsed.method.unwrap_or("");
        self.method = Method::from_token(method);
        self.version = if parsed.version == Some(0) { Version::Http10 } else { Version::Http11 };
        let target = parsed.path.unwrap_or("");
        self.target = range_of(target.as_bytes());

        let mut host_count = 0usize;
        let mut host_field = None;
        let mut content_length: Option<u64> = None;
        let mut cl_count = 0usize;
        let mut te = TeState::default();
        let mut conn_close = false;
        let mut conn_keep_alive = false;
        self.expect_continue = false;
        let mut expect_other = false;

        for h in parsed.headers.iter() {
            let name = h.name;
            let value = h.value;
            self.headers.push((range_of(name.as_bytes()), range_of(value)));
            if name.eq_ignore_ascii_case("host") {
                host_count += 1;
                host_field = Some(range_of(value));
            } else if name.eq_ignore_ascii_case("content-length") {
                cl_count += 1;
                content_length = Some(parse_content_length(value)?);
            } else if name.eq_ignore_ascii_case("transfer-encoding") {
                te.add_field(value)?;
            } else if name.eq_ignore_ascii_case("connection") {
                for opt in list_elements(value) {
                    if opt.eq_ignore_ascii_case(b"close") {
                        conn_close = true;
                    } else if opt.eq_ignore_ascii_case(b"keep-alive") {
                        conn_keep_alive = true;
                    }
                }
            } else if name.eq_ignore_ascii_case("expect") {
                if value.eq_ignore_ascii_case(b"100-continue") {
                    self.expect_continue = true;
                } else {
                    expect_other = true;
                }
            }
        }

        // RFC 9112 section 6.1 / 6.3: smuggling shapes are rejected, never reconciled.
        if cl_count > 1 {
            return Err(bad("duplicate Content-Length"));
        }
        if te.present {
            if self.version == Version::Http10 {
                return Err(bad("Transfer-Encoding in HTTP/1.0 request"));
            }
            if cl_count > 0 {
                return Err(bad("both Content-Length and Transfer-Encoding"));
            }
            te.finish()?;
        }
        // RFC 9112 section 3.2: exactly one valid Host in HTTP/1.1, at most one in 1.0.
        if host_count > 1 {
            return Err(bad("more than one Host"));
        }
        if host_count == 0 && self.version == Version::Http11 {
            return Err(bad("missing Host"));
        }
        if let Some(r) = &host_field
            && !valid_authority(&buf[r.clone()], true)
        {
            return Err(bad("invalid Host"));
        }
        self.host = host_field;
        self.classify_target(target.as_bytes(), range_of(target.as_bytes()).start)?;

        self.framing = if te.present {
            BodyFraming::Chunked
        } else {
            match content_length {
                Some(n) if n > limits.max_body_bytes => {
                    return Err(HeadError {
                        status: 413,
                        reason: "Content-Length over max_body_bytes",
                    });
                }
                Some(0) | None => BodyFraming::None,
                Some(n) => BodyFraming::Length(n),
            }
        };
        if expect_other && self.version == Version::Http11 {
            // RFC 9110 section 10.1.1: only 100-continue is defined.
            return Err(HeadError { status: 417, reason: "unsupported expectation" });
        }
        if self.version == Version::Http10 {
            // RFC 9110 section 10.1.1: a server MUST ignore 100-continue from HTTP/1.0.
            self.expect_continue = false;
        }
        if self.framing == BodyFraming::None {
            self.expect_continue = false;
        }
        self.keep_alive = !conn_close
            && match self.version {
                Version::Http11 | Version::Http2 | Version::Http3 => true,
                Version::Http10 => conn_keep_alive,
            };
        Ok(HeadStatus::Complete(n))
    }

    /// Splits the target into path and query and checks its form against the method
    /// (RFC 9112 section 3.2). `start` is the target's offset in the head.
    fn classify_target(&mut self, t: &[u8], start: usize) -> Result<(), HeadError> {
        let end = start + t.len();
        self.query = None;
        if t.contains(&b'#') {
            return Err(bad("fragment in request-target"));
        }
        if self.method == Method::Connect {
            // authority-form only (RFC 9112 section 3.2.3).
            if !valid_authority(t, false) || t.is_empty() {
                return Err(bad("CONNECT needs authority-form"));
            }
            self.path = end..end;
            return Ok(());
        }
        if t == b"*" {
            if self.method != Method::Options {
                return Err(bad("asterisk-form only for OPTIONS"));
            }
            self.path = start..end;
            return Ok(());
        }
        let path_start = if t.first() == Some(&b'/') {
            start
        } else {
            // absolute-form: only http(s) URIs are meaningful here (RFC 9112 3.2.2).
            let rest = if t.len() > 7 && t[..7].eq_ignore_ascii_case(b"http://") {
                7
            } else if t.len() > 8 && t[..8].eq_ignore_ascii_case(b"https://") {
                8
            } else {
                return Err(bad("unsupported request-target form or scheme"));
            };
            let auth_len =
                t[rest..].iter().position(|&b| b == b'/' || b == b'?').unwrap_or(t.len() - rest);
            let auth = &t[rest..rest + auth_len];
            if auth.is_empty() || auth.contains(&b'@') || !valid_authority(auth, false) {
                return Err(bad("invalid authority in absolute-form"));
            }
            // The target's authority replaces Host (RFC 9112 section 3.2.2).
            self.host = Some(start + rest..start + rest + auth_len);
            start + rest + auth_len
        };
        let rel = &self.head[path_start..end];
        match memchr::memchr(b'?', rel) {
            Some(q) => {
                self.path = path_start..path_start + q;
                self.query = Some(path_start + q + 1..end);
            }
            None => self.path = path_start..end,
        }
        Ok(())
    }
}

impl Drop for Request {
    fn drop(&mut self) {
        self.release();
    }
}

/// Elements of a comma-separated list field (RFC 9110 section 5.6.1), OWS-trimmed.
fn list_elements(v: &[u8]) -> impl Iterator<Item = &[u8]> {
    v.split(|&b| b == b',').map(|e| e.trim_ascii())
}

/// `Content-Length = 1*DIGIT` (RFC 9110 section 8.6); signs, inner spaces, lists (even
/// `5, 5`) and overflow are rejected.
fn parse_content_length(v: &[u8]) -> Result<u64, HeadError> {
    if v.is_empty() {
        return Err(bad("invalid Content-Length"));
    }
    let mut n: u64 = 0;
    for &b in v {
        if !b.is_ascii_digit() {
            return Err(bad("invalid Content-Length"));
        }
        n = n
            .checked_mul(10)
            .and_then(|n| n.checked_add(u64::from(b - b'0')))
            .ok_or(bad("Content-Length overflow"))?;
    }
    Ok(n)
}

#[derive(Default)]
struct TeState {
    present: bool,
    chunked_count: usize,
    last_is_chunked: bool,
    others: usize,
}

impl TeState {
    fn add_field(&mut self, v: &[u8]) -> Result<(), HeadError> {
        self.present = true;
        for coding in list_elements(v) {
            if coding.is_empty() || !coding.iter().all(|&b| is_tchar(b)) {
                return Err(bad("invalid Transfer-Encoding"));
            }
            if coding.eq_ignore_ascii_case(b"chunked") {
                self.chunked_count += 1;
                self.last_is_chunked = true;
            } else {
                self.others += 1;
                self.last_is_chunked = false;
            }
        }
        Ok(())
    }

    /// RFC 9112 section 6.3 item 4: `chunked` must be the final coding and appear once
    /// (section 7); other codings before it are valid but not implemented (501).
    fn finish(&self) -> Result<(), HeadError> {
        if self.chunked_count != 1 || !self.last_is_chunked {
            return Err(bad("Transfer-Encoding must end in a single chunked"));
        }
        if self.others > 0 {
            return Err(HeadError { status: 501, reason: "unsupported transfer coding" });
        }
        Ok(())
    }
}

/// RFC 9110 section 5.6.2 `tchar`.
pub(crate) fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// `uri-host [ ":" port ]` (RFC 3986 reg-name / IPv4 / IP-literal characters).
fn valid_authority(v: &[u8], allow_empty: bool) -> bool {
    if v.is_empty() {
        // RFC 9112 section 3.2: an empty Host is allowed when the target has no authority.
        return allow_empty;
    }
    v.iter().all(|&b| b.is_ascii_alphanumeric() || b"-._~!$&'()*+,;=%:[]".contains(&b))
}

mod strip;

#[cfg(test)]
mod tests {
    use super::*;

    fn addr() -> SocketAddr {
        "127.0.0.1:1".parse().unwrap()
    }

    fn parse(raw: &[u8]) -> Result<(HeadStatus, Request), HeadError> {
        let mut r = Request::new(addr(), addr());
        let s = r.parse_head(raw, &Limits::default())?;
        Ok((s, r))
    }

    #[test]
    fn parses_origin_form_with_query() {
        let raw = b"GET /a/b.ts?x=1&y HTTP/1.1\r\nHost: cdn.example:8080\r\nX-A:  v \r\n\r\nBODY";
        let (s, r) = parse(raw).unwrap();
        assert_eq!(s, HeadStatus::Complete(raw.len() - 4));
        assert_eq!(r.method(), &Method::Get);
        assert_eq!((r.path(), r.query()), ("/a/b.ts", Some("x=1&y")));
        assert_eq!(r.host(), Some("cdn.example:8080"));
        assert_eq!(r.header("x-a"), Some(&b"v"[..]));
        assert!(r.keep_alive());
        assert_eq!(r.headers().count(), 2);
    }

    #[test]
    fn absolute_form_overrides_host() {
        let (_, r) =
            parse(b"GET http://origin.test/seg.m4s?q HTTP/1.1\r\nHost: other\r\n\r\n").unwrap();
        assert_eq!((r.host(), r.path(), r.query()), (Some("origin.test"), "/seg.m4s", Some("q")));
        let (_, r) = parse(b"GET HTTPS://origin.test HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        assert_eq!((r.host(), r.path()), (Some("origin.test"), "/"));
    }

    #[test]
    fn content_length_grammar() {
        assert_eq!(parse_content_length(b"0").unwrap(), 0);
        assert_eq!(parse_content_length(b"18446744073709551615").unwrap(), u64::MAX);
        for bad in [
            &b"+5"[..],
            b"-5",
            b"5 5",
            b"5,5",
            b"0x5",
            b"",
            b"18446744073709551616",
            b"99999999999999999999",
        ] {
            assert!(parse_content_length(bad).is_err(), "{:?}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn unknown_method_is_parsed() {
        let (_, r) = parse(b"PURGE /x HTTP/1.1\r\nHost: h\r\n\r\n").unwrap();
        assert_eq!(r.method(), &Method::Other("PURGE".into()));
        assert!(!r.method().is_known());
    }
}
