//! Responses, their bodies, and response-head serialization (RFC 9112 section 4 and 6,
//! RFC 9110 section 6.4.1 and 8.6).
//!
//! The writer owns message framing: handler-supplied `Content-Length`,
//! `Transfer-Encoding`, `Connection` and `Keep-Alive` fields are dropped and the correct
//! ones are generated. `Date` is generated unless the handler supplies one (a cache
//! replaying a stored response keeps the origin's, RFC 9110 6.6.1); a response never
//! carries two. Fields whose name is not a token or whose value
//! contains CR, LF, NUL or another control byte (other than HTAB) are dropped too, so a
//! handler can never split a response.

use std::borrow::Cow;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;

use crate::date::append_date;
use crate::method::Method;
use crate::request::{Version, is_tchar};

/// A region of an open file to be sent with `sendfile(2)` (plain TCP), or read into
/// pooled buffers (TLS, HTTP/2). The range holds its file open (e.g. with a store lease)
/// and lends the descriptor for as long as it is borrowed, so no implementation can name
/// a descriptor it does not hold; the connection drops the range as soon as the region
/// has been sent or the connection failed.
///
/// A range lends the descriptor of a file it holds; it cannot name a number it does not
/// hold (one closed since, or reused by another file) without `unsafe`:
///
/// ```compile_fail,E0133
/// use std::os::fd::{BorrowedFd, RawFd};
/// struct Stale(RawFd);
/// impl reel_http::FileRange for Stale {
///     fn fd(&self) -> BorrowedFd<'_> {
///         BorrowedFd::borrow_raw(self.0)
///     }
///     fn offset(&self) -> u64 { 0 }
///     fn len(&self) -> u64 { 0 }
/// }
/// ```
///
/// nor lend one it closes before the borrow ends:
///
/// ```compile_fail,E0515
/// use std::os::fd::{AsFd, BorrowedFd};
/// struct Reopens(std::path::PathBuf);
/// impl reel_http::FileRange for Reopens {
///     fn fd(&self) -> BorrowedFd<'_> {
///         let file = std::fs::File::open(&self.0).unwrap();
///         file.as_fd()
///     }
///     fn offset(&self) -> u64 { 0 }
///     fn len(&self) -> u64 { 0 }
/// }
/// ```
pub trait FileRange {
    /// The open file to read from, borrowed from the range.
    fn fd(&self) -> BorrowedFd<'_>;
    /// Start of the region in the file.
    fn offset(&self) -> u64;
    /// Length of the region in bytes.
    fn len(&self) -> u64;
    /// Whether the region is empty.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Reads up to `len` bytes at file offset `offset` (inside the region) that are not
    /// in the page cache, without blocking the worker; used after a
    /// `preadv2(RWF_NOWAIT)` found them cold. An empty result means end of file.
    ///
    /// The default is a blocking `pread(2)`: right for files that live in memory (tmpfs,
    /// tests). A store on disk overrides it with its asynchronous read path.
    fn read_cold(&self, offset: u64, len: usize) -> ColdRead<'_> {
        Box::pin(std::future::ready(pread_bytes(self.fd(), offset, len)))
    }
}

/// The future of [`FileRange::read_cold`].
pub type ColdRead<'a> = Pin<Box<dyn std::future::Future<Output = io::Result<Bytes>> + 'a>>;

/// Reads up to `len` bytes of `fd` at `offset` with blocking `pread(2)` calls (short only
/// at end of file): [`FileRange::read_cold`]'s default.
pub fn pread_bytes(fd: BorrowedFd<'_>, offset: u64, len: usize) -> io::Result<Bytes> {
    let mut buf = vec![0u8; len];
    let mut done = 0;
    while done < len {
        match crate::sys::pread(fd, &mut buf[done..], offset + done as u64) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    buf.truncate(done);
    Ok(Bytes::from(buf))
}

/// One piece of a streaming body: memory or a file region.
pub enum Chunk {
    /// Bytes in memory.
    Bytes(Bytes),
    /// A file region sent with `sendfile(2)`.
    File(Box<dyn FileRange>),
}

impl Chunk {
    /// Length of the chunk in bytes.
    pub fn len(&self) -> u64 {
        match self {
            Chunk::Bytes(b) => b.len() as u64,
            Chunk::File(f) => f.len(),
        }
    }

    /// Whether the chunk is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl std::fmt::Debug for Chunk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Chunk::Bytes(b) => write!(f, "Chunk::Bytes({} bytes)", b.len()),
            Chunk::File(r) => {
                write!(f, "Chunk::File(fd {} @{}+{})", r.fd().as_raw_fd(), r.offset(), r.len())
            }
        }
    }
}

/// A body produced piece by piece (e.g. a coalesced cache miss read while the object is
/// still being written). Need not be `Send`.
///
/// Yielding `Err` or ending before a declared `Content-Length` was reached makes the
/// connection close without completing the body, so a client never sees a silently
/// short response.
pub trait BodyStream {
    /// Polls for the next chunk; `Ready(None)` ends the body.
    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<io::Result<Chunk>>>;
}

/// A channel receiver is a body stream: the producer sends chunks, an `Err` aborts the
/// response, and dropping all senders ends the body.
impl BodyStream for tokio::sync::mpsc::Receiver<io::Result<Chunk>> {
    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<io::Result<Chunk>>> {
        self.get_mut().poll_recv(cx)
    }
}

/// A channel receiver is a body stream (unbounded variant).
impl BodyStream for tokio::sync::mpsc::UnboundedReceiver<io::Result<Chunk>> {
    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<io::Result<Chunk>>> {
        self.get_mut().poll_recv(cx)
    }
}

/// A response body.
#[derive(Default)]
pub enum Body {
    /// No body (`Content-Length: 0` unless the status forbids it, or the
    /// [`Response::content_length`] declared for a HEAD answer).
    #[default]
    Empty,
    /// In-memory bytes, sent together with the head.
    Bytes(Bytes),
    /// A file region, sent with `send(MSG_MORE)` for the head and then `sendfile(2)`.
    File(Box<dyn FileRange>),
    /// A streaming body. With [`Response::content_length`] set it is sent with that
    /// `Content-Length`; without, chunked on HTTP/1.1 and close-delimited on HTTP/1.0.
    Stream(Pin<Box<dyn BodyStream>>),
}

impl std::fmt::Debug for Body {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Body::Empty => f.write_str("Body::Empty"),
            Body::Bytes(b) => write!(f, "Body::Bytes({} bytes)", b.len()),
            Body::File(r) => {
                write!(f, "Body::File(fd {} @{}+{})", r.fd().as_raw_fd(), r.offset(), r.len())
            }
            Body::Stream(_) => f.write_str("Body::Stream"),
        }
    }
}

/// Header field name: usually a `&'static str`, so building a response does not
/// allocate for names.
pub type HeaderName = Cow<'static, str>;

/// A response to one request.
#[derive(Debug)]
pub struct Response {
    /// Status code, 200..=999 (a 1xx here is sent as 500: interim responses go out
    /// through [`RequestBody::with_interims`](crate::RequestBody::with_interims)).
    pub status: u16,
    /// Fields in the order they are written, after the generated `Date`,
    /// `Content-Length`/`Transfer-Encoding` and `Connection`.
    pub headers: Vec<(HeaderName, Bytes)>,
    /// The body.
    pub body: Body,
    /// Declared length for [`Body::Stream`], and for [`Body::Empty`] answers to HEAD
    /// or 304 (the length a GET would have had, RFC 9110 sections 8.6 and 9.3.2).
    /// Ignored for [`Body::Bytes`] and [`Body::File`], whose length is known.
    pub content_length: Option<u64>,
    /// Pre-encoded `name: value\r\n` lines written after the generated fields and before
    /// [`Response::headers`], as they are: for a cache replaying a stored header section
    /// without copying it field by field. The producer must have validated the lines and
    /// left out the fields the writer generates, `Date` included (a `Date` to keep goes in
    /// [`Response::headers`]).
    pub raw_headers: Bytes,
    /// An opaque value handed back to [`Handler::on_response`](crate::Handler::on_response)
    /// (e.g. how the response was produced, for logs and metrics).
    pub tag: u64,
}

impl Response {
    /// A response with `status`, no fields and an empty body.
    pub fn new(status: u16) -> Self {
        Self {
            status,
            headers: Vec::new(),
            body: Body::Empty,
            content_length: None,
            raw_headers: Bytes::new(),
            tag: 0,
        }
    }

    /// Appends a field.
    pub fn header(mut self, name: impl Into<HeaderName>, value: impl Into<Bytes>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// Sets the pre-encoded header block (see [`Response::raw_headers`]).
    pub fn raw_headers(mut self, block: Bytes) -> Self {
        self.raw_headers = block;
        self
    }

    /// Sets the tag handed back to `on_response`.
    pub fn tagged(mut self, tag: u64) -> Self {
        self.tag = tag;
        self
    }

    /// Sets an in-memory body.
    pub fn bytes(mut self, body: impl Into<Bytes>) -> Self {
        self.body = Body::Bytes(body.into());
        self
    }

    /// Sets a file-region body.
    pub fn file(mut self, range: impl FileRange + 'static) -> Self {
        self.body = Body::File(Box::new(range));
        self
    }

    /// Sets a streaming body with an optional declared length.
    pub fn stream(mut self, stream: impl BodyStream + 'static, len: Option<u64>) -> Self {
        self.body = Body::Stream(Box::pin(stream));
        self.content_length = len;
        self
    }

    /// Sets the declared length (see [`Response::content_length`]).
    pub fn with_content_length(mut self, len: u64) -> Self {
        self.content_length = Some(len);
        self
    }

    /// A small `text/plain` error response whose body is the reason phrase.
    pub fn error(status: u16) -> Self {
        let reason = reason_phrase(status);
        Response::new(status)
            .header("content-type", "text/plain; charset=utf-8")
            .bytes(Bytes::from_static(reason.as_bytes()))
    }

    /// 405 with `Allow` listing `allowed` (RFC 9110 section 15.5.6).
    pub fn method_not_allowed(allowed: &[Method]) -> Self {
        let mut allow = String::new();
        for (i, m) in allowed.iter().enumerate() {
            if i > 0 {
                allow.push_str(", ");
            }
            allow.push_str(m.as_str());
        }
        Response::error(405).header("allow", allow)
    }

    /// 501 for a method the server does not recognise (RFC 9110 section 15.6.2).
    pub fn not_implemented() -> Self {
        Response::error(501)
    }

    /// `None` when `method` is in `allowed`; otherwise 405 + `Allow` for a known method
    /// or 501 for an unknown one.
    pub fn for_unsupported_method(method: &Method, allowed: &[Method]) -> Option<Self> {
        if allowed.contains(method) {
            None
        } else if method.is_known() {
            Some(Response::method_not_allowed(allowed))
        } else {
            Some(Response::not_implemented())
        }
    }
}

/// How the body following an encoded head is delimited on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// No body bytes follow (HEAD, 1xx/204/304, or an empty body).
    NoBody,
    /// Exactly this many bytes follow.
    Length(u64),
    /// Chunked transfer coding (RFC 9112 section 7.1).
    Chunked,
    /// Body runs until the connection closes (HTTP/1.0 stream of unknown length).
    CloseDelimited,
}

/// What the head encoder needs to know about the request being answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeadContext {
    /// Version of the request.
    pub version: Version,
    /// Whether the request was HEAD (no body is sent).
    pub head_request: bool,
    /// Whether the connection stays open after this response.
    pub keep_alive: bool,
}

/// Result of [`encode_head`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EncodedHead {
    /// How the body must be framed.
    pub framing: Framing,
    /// Whether the connection must close after the body (`Connection: close` was sent).
    pub close: bool,
    /// The status actually written (a 1xx or out-of-range status becomes 500).
    pub status: u16,
}

/// Serializes the status line and fields of `resp` into `out` (appending), generating
/// the framing fields, `Connection` and, unless `resp` carries a valid one, `Date`.
///
/// The status line is always `HTTP/1.1` (RFC 9110 section 6.2). `Content-Length` is
/// sent on every response except 1xx/204 (forbidden, RFC 9110 section 8.6), chunked
/// streams and close-delimited streams; for HEAD it carries the length a GET would have.
pub fn encode_head(resp: &Response, ctx: &HeadContext, out: &mut Vec<u8>) -> EncodedHead {
    let status = if (200..=999).contains(&resp.status) { resp.status } else { 500 };
    let bodiless_status = status == 204 || status == 304;
    let known_len = match &resp.body {
        Body::Empty => resp.content_length.filter(|_| ctx.head_request || status == 304),
        Body::Bytes(b) => Some(b.len() as u64),
        Body::File(f) => Some(f.len()),
        Body::Stream(_) => resp.content_length,
    };
    let mut close = !ctx.keep_alive;
    let (framing, cl_field) = if status == 204 {
        (Framing::NoBody, None)
    } else if bodiless_status || ctx.head_request {
        (Framing::NoBody, known_len)
    } else {
        match (&resp.body, known_len) {
            (Body::Empty, _) => (Framing::NoBody, Some(0)),
            (_, Some(n)) => (Framing::Length(n), Some(n)),
            (_, None) if ctx.version != Version::Http10 => (Framing::Chunked, None),
            (_, None) => {
                close = true;
                (Framing::CloseDelimited, None)
            }
        }
    };

    out.extend_from_slice(b"HTTP/1.1 ");
    let mut num = itoa::Buffer::new();
    out.extend_from_slice(num.format(status).as_bytes());
    out.push(b' ');
    out.extend_from_slice(reason_phrase(status).as_bytes());
    out.extend_from_slice(b"\r\ndate: ");
    // The first valid Date the handler supplies (an intermediary forwards the origin's,
    // RFC 9110 6.6.1); any other Date field is dropped below.
    match resp.headers.iter().find(|(n, v)| is_date(n) && !v.is_empty() && valid_value(v)) {
        Some((_, v)) => out.extend_from_slice(v),
        None => append_date(out),
    }
    out.extend_from_slice(b"\r\n");
    if let Some(n) = cl_field {
        out.extend_from_slice(b"content-length: ");
        out.extend_from_slice(num.format(n).as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    if framing == Framing::Chunked {
        out.extend_from_slice(b"transfer-encoding: chunked\r\n");
    }
    if close {
        out.extend_from_slice(b"connection: close\r\n");
    } else if ctx.version == Version::Http10 {
        // RFC 9112 section 9.3: a 1.0 client only keeps the connection if told so.
        out.extend_from_slice(b"connection: keep-alive\r\n");
    }
    out.extend_from_slice(&resp.raw_headers);
    for (name, value) in &resp.headers {
        if is_date(name) {
            continue;
        }
        if is_generated(name) || !valid_name(name) || !valid_value(value) {
            tracing::warn!(field = %name, "dropping invalid or framing response field");
            continue;
        }
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"\r\n");
    EncodedHead { framing, close, status }
}

pub(crate) fn is_generated(name: &str) -> bool {
    ["content-length", "transfer-encoding", "connection", "keep-alive"]
        .iter()
        .any(|g| name.eq_ignore_ascii_case(g))
}

pub(crate) fn is_date(name: &str) -> bool {
    name.eq_ignore_ascii_case("date")
}

pub(crate) fn valid_name(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(is_tchar)
}

/// RFC 9110 section 5.5: field-value is VCHAR / obs-text / SP / HTAB.
pub(crate) fn valid_value(v: &[u8]) -> bool {
    v.iter().all(|&b| b == b'\t' || (b >= 0x20 && b != 0x7f))
}

/// The standard reason phrase for `status` (RFC 9110 section 15), or `""`.
pub fn reason_phrase(status: u16) -> &'static str {
    match status {
        100 => "Continue",
        102 => "Processing",
        103 => "Early Hints",
        200 => "OK",
        201 => "Created",
        202 => "Accepted",
        204 => "No Content",
        206 => "Partial Content",
        301 => "Moved Permanently",
        302 => "Found",
        303 => "See Other",
        304 => "Not Modified",
        307 => "Temporary Redirect",
        308 => "Permanent Redirect",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        406 => "Not Acceptable",
        408 => "Request Timeout",
        409 => "Conflict",
        410 => "Gone",
        411 => "Length Required",
        412 => "Precondition Failed",
        413 => "Content Too Large",
        414 => "URI Too Long",
        415 => "Unsupported Media Type",
        416 => "Range Not Satisfiable",
        417 => "Expectation Failed",
        421 => "Misdirected Request",
        429 => "Too Many Requests",
        431 => "Request Header Fields Too Large",
        // RFC 7725.
        451 => "Unavailable For Legal Reasons",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        505 => "HTTP Version Not Supported",
        508 => "Loop Detected",
        _ => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx(head: bool, keep: bool) -> HeadContext {
        HeadContext { version: Version::Http11, head_request: head, keep_alive: keep }
    }

    fn enc(resp: &Response, c: HeadContext) -> (String, EncodedHead) {
        let mut out = Vec::new();
        let e = encode_head(resp, &c, &mut out);
        (String::from_utf8(out).unwrap(), e)
    }

    #[test]
    fn bytes_response_has_length_date_and_fields() {
        let r = Response::new(200).header("x-a", "1").bytes("hello");
        let (s, e) = enc(&r, ctx(false, true));
        assert!(s.starts_with("HTTP/1.1 200 OK\r\ndate: "), "{s}");
        assert!(s.contains("\r\ncontent-length: 5\r\n"));
        assert!(s.ends_with("x-a: 1\r\n\r\n"));
        assert!(!s.contains("connection"));
        assert_eq!(e.framing, Framing::Length(5));
    }

    #[test]
    fn raw_header_block_goes_between_generated_and_handler_fields() {
        let r = Response::new(200)
            .raw_headers(Bytes::from_static(b"etag: \"v1\"\r\ncache-control: max-age=60\r\n"))
            .header("age", "3")
            .bytes("x")
            .tagged(7);
        let (s, _) = enc(&r, ctx(false, true));
        assert!(
            s.ends_with(
                "content-length: 1\r\netag: \"v1\"\r\ncache-control: max-age=60\r\nage: 3\r\n\r\n"
            ),
            "{s}"
        );
        assert_eq!(r.tag, 7);
    }

    #[test]
    fn framing_rules() {
        let (s, e) = enc(&Response::new(204).bytes("x"), ctx(false, true));
        assert!(!s.contains("content-length") && e.framing == Framing::NoBody);
        let (s, e) = enc(&Response::new(200).with_content_length(42), ctx(true, true));
        assert!(s.contains("content-length: 42") && e.framing == Framing::NoBody);
        let (s, _) = enc(&Response::new(200).with_content_length(42), ctx(false, true));
        assert!(s.contains("content-length: 0"));
        let (rx_tx, rx) = tokio::sync::mpsc::channel::<io::Result<Chunk>>(1);
        drop(rx_tx);
        let r = Response::new(200).stream(rx, None);
        let (s, e) = enc(&r, ctx(false, true));
        assert!(s.contains("transfer-encoding: chunked") && e.framing == Framing::Chunked);
        let c10 = HeadContext { version: Version::Http10, ..ctx(false, true) };
        let (s, e) = enc(&r, c10);
        assert!(s.contains("connection: close") && e.close && e.framing == Framing::CloseDelimited);
        let (s, _) = enc(&Response::new(200), c10);
        assert!(s.contains("connection: keep-alive"));
    }

    #[test]
    fn smuggling_fields_from_handler_are_dropped() {
        let r = Response::new(200)
            .header("content-length", "99")
            .header("x-evil", "a\r\nset-cookie: x")
            .header("bad name", "v")
            .header("transfer-encoding", "chunked");
        let (s, _) = enc(&r, ctx(false, false));
        assert!(!s.contains("99") && !s.contains("evil") && !s.contains("bad name"));
        assert!(!s.contains("chunked") && s.contains("connection: close"));
    }

    #[test]
    fn a_supplied_date_replaces_the_generated_one_and_is_never_doubled() {
        let d = "Sun, 06 Nov 1994 08:49:37 GMT";
        let r =
            Response::new(200).header("Date", d).header("date", "Mon, 07 Nov 1994 08:49:37 GMT");
        let (s, _) = enc(&r, ctx(false, true));
        assert_eq!(s.matches("date: ").count() + s.matches("Date: ").count(), 1, "{s}");
        assert!(s.starts_with(&format!("HTTP/1.1 200 OK\r\ndate: {d}\r\n")), "{s}");
        // An empty or invalid Date is not used: the writer's own goes out instead.
        for bad in ["", "a\r\nx-evil: 1"] {
            let (s, _) = enc(&Response::new(200).header("date", bad), ctx(false, true));
            assert_eq!(s.matches("date: ").count(), 1, "{s}");
            assert!(s.contains(" GMT\r\n") && !s.contains("evil"), "{s}");
        }
    }

    #[test]
    fn method_helpers() {
        assert!(Response::for_unsupported_method(&Method::Get, &[Method::Get]).is_none());
        let r =
            Response::for_unsupported_method(&Method::Post, &[Method::Get, Method::Head]).unwrap();
        assert_eq!(r.status, 405);
        assert!(r.headers.iter().any(|(n, v)| n == "allow" && v == "GET, HEAD"));
        let r = Response::for_unsupported_method(&Method::Other("BREW".into()), &[Method::Get])
            .unwrap();
        assert_eq!(r.status, 501);
    }
}
