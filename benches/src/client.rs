//! A minimal keep-alive HTTP/1.1 client for load generation: writes a
//! pre-built GET, parses the response head with `httparse`, and consumes a
//! `Content-Length`, chunked or close-delimited body (RFC 9112 §6.3) through one
//! reusable buffer per connection, so discarding a 2 MiB body costs only the
//! socket reads. Over TCP or TLS (`https://`, rustls): the TLS client accepts any
//! certificate (targets are loopback only) but checks the handshake signature, so the
//! server does all the work of a real handshake.
//!
//! Every read over plain TCP also asks the kernel when the bytes arrived
//! (`SO_TIMESTAMPNS`, Unix time, see [`crate::arrival`]): one generator task serves
//! hundreds of connections in turn, so the time a task reads a response can be
//! milliseconds after it arrived, and latencies measured against another host's clock
//! (the origin's release times) use the kernel's arrival time instead.

use std::io;
use std::os::fd::AsRawFd;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};
use std::time::Instant;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, Interest, ReadBuf};
use tokio::net::TcpStream;

use crate::arrival;
use crate::stats::ErrorKind;
use crate::target::Endpoint;

/// Read buffer size: large reads keep the per-byte cost of draining big bodies low.
const BUF_SIZE: usize = 256 * 1024;
/// Most response header fields accepted.
const MAX_HEADERS: usize = 64;
/// The demo origin's release time of a playlist version or part (Unix ms), which caches pass
/// on: arrival minus it is the latency added on the way.
pub const RELEASE_HEADER: &str = "x-origin-release-ms";

/// Why a request failed.
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    /// TCP connect failed.
    #[error("connect: {0}")]
    Connect(io::Error),
    /// Connection reset, or closed before the response head was complete.
    #[error("connection reset or closed before the response head: {0}")]
    Reset(String),
    /// Connection ended inside the body.
    #[error("short body: got {got} bytes, framing wanted more")]
    ShortBody {
        /// Body bytes received before the end.
        got: u64,
    },
    /// Malformed head or chunk framing.
    #[error("protocol: {0}")]
    Protocol(String),
}

impl RequestError {
    /// The report bucket for this failure.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Self::Connect(_) => ErrorKind::Connect,
            Self::Reset(_) => ErrorKind::Reset,
            Self::ShortBody { .. } => ErrorKind::ShortBody,
            Self::Protocol(_) => ErrorKind::Protocol,
        }
    }
}

/// A completed response.
#[derive(Debug, Clone, Copy)]
pub struct Response {
    /// Status code.
    pub status: u16,
    /// When the first byte of the response was read.
    pub first_byte: Instant,
    /// When the last body byte was read.
    pub done: Instant,
    /// When the read that brought the first body byte completed (`None`: empty body).
    pub first_body: Option<Instant>,
    /// When the kernel received the bytes of the read that brought the first body byte,
    /// Unix µs (`None`: empty body, or no kernel timestamps).
    pub first_body_unix_us: Option<u64>,
    /// When the kernel received the bytes of the read that completed the response, Unix µs
    /// (`None`: no kernel timestamps).
    pub done_unix_us: Option<u64>,
    /// [`RELEASE_HEADER`], when present and numeric.
    pub release_ms: Option<u64>,
    /// Whether the cache answered from what it had stored: `Cache-Status` (RFC 9211) with
    /// `hit` and no `fwd`, or nginx's `X-Cache: HIT`; `None` without either field.
    pub from_cache: Option<bool>,
    /// Bytes consumed off the connection for this response (head, body, chunk framing).
    pub wire_bytes: u64,
    /// Decoded body bytes.
    pub body_bytes: u64,
    /// False when the server asked to close (`Connection: close`, HTTP/1.0, or a close-delimited body).
    pub keep_alive: bool,
    /// The response carried the connection's mark header (see [`Conn::mark_header`]).
    pub marked: bool,
    /// Its `Content-Encoding`: the body bytes are as sent, still encoded.
    pub coding: Coding,
}

/// A response's `Content-Encoding`, as far as a player decodes it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Coding {
    /// None (or `identity`).
    #[default]
    Identity,
    /// `gzip`.
    Gzip,
    /// `br`.
    Br,
    /// Anything else.
    Other,
}

impl Coding {
    fn of(headers: &[httparse::Header<'_>]) -> Self {
        let Some(h) = headers.iter().find(|h| h.name.eq_ignore_ascii_case("content-encoding"))
        else {
            return Self::Identity;
        };
        match h.value.trim_ascii() {
            v if v.eq_ignore_ascii_case(b"gzip") => Self::Gzip,
            v if v.eq_ignore_ascii_case(b"br") => Self::Br,
            v if v.is_empty() || v.eq_ignore_ascii_case(b"identity") => Self::Identity,
            _ => Self::Other,
        }
    }

    /// `body` decoded; `None` when it does not decode (or the coding is unknown).
    pub fn decode(self, body: &[u8]) -> Option<std::borrow::Cow<'_, [u8]>> {
        use std::io::Read as _;
        let mut out = Vec::new();
        match self {
            Self::Identity => return Some(std::borrow::Cow::Borrowed(body)),
            Self::Gzip => flate2::read::GzDecoder::new(body).read_to_end(&mut out).ok()?,
            Self::Br => brotli::Decompressor::new(body, 4096).read_to_end(&mut out).ok()?,
            Self::Other => return None,
        };
        Some(std::borrow::Cow::Owned(out))
    }
}

/// Where body bytes go.
pub enum Body<'a> {
    /// Counted and dropped.
    Discard,
    /// Appended to the vector (for playlists).
    Capture(&'a mut Vec<u8>),
}

impl Body<'_> {
    pub(crate) fn take(&mut self, bytes: &[u8]) {
        if let Body::Capture(v) = self {
            v.extend_from_slice(bytes);
        }
    }
}

/// Whether a response came from the cache's store, by `Cache-Status` or `X-Cache`.
fn cache_answer(headers: &[httparse::Header<'_>]) -> Option<bool> {
    let field = |name: &str| headers.iter().find(|h| h.name.eq_ignore_ascii_case(name));
    if let Some(h) = field("cache-status") {
        let v = String::from_utf8_lossy(h.value);
        return Some(v.contains("hit") && !v.contains("fwd="));
    }
    field("x-cache").map(|h| h.value.eq_ignore_ascii_case(b"HIT"))
}

/// Builds `GET path HTTP/1.1` with a Host header and optional extra header lines (`name: value`).
pub fn build_get(host: &str, path: &str, extra_headers: &[String]) -> Vec<u8> {
    let mut r = Vec::with_capacity(64 + path.len() + host.len());
    r.extend_from_slice(b"GET ");
    r.extend_from_slice(path.as_bytes());
    r.extend_from_slice(b" HTTP/1.1\r\nHost: ");
    r.extend_from_slice(host.as_bytes());
    r.extend_from_slice(b"\r\nUser-Agent: reel-load\r\n");
    for h in extra_headers {
        r.extend_from_slice(h.trim().as_bytes());
        r.extend_from_slice(b"\r\n");
    }
    r.extend_from_slice(b"\r\n");
    r
}

/// Accepts the server's certificate whatever it is (loopback benchmarks of servers with
/// self-signed certificates) while still verifying the handshake signatures.
#[derive(Debug)]
pub(crate) struct AnyCertificate(pub(crate) Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }
    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }
    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }
    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// The process's TLS client configuration: ALPN `http/1.1`; with `resume`, tickets are
/// kept and used (resumed handshakes), without, every handshake is a full one.
fn tls_config(resume: bool) -> Result<Arc<rustls::ClientConfig>, RequestError> {
    static RESUMING: OnceLock<Option<Arc<rustls::ClientConfig>>> = OnceLock::new();
    static FULL: OnceLock<Option<Arc<rustls::ClientConfig>>> = OnceLock::new();
    let cell = if resume { &RESUMING } else { &FULL };
    cell.get_or_init(|| {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut c = rustls::ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .ok()?
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AnyCertificate(provider)))
            .with_no_client_auth();
        c.alpn_protocols = vec![b"http/1.1".to_vec()];
        if !resume {
            c.resumption = rustls::client::Resumption::disabled();
        }
        Some(Arc::new(c))
    })
    .clone()
    .ok_or_else(|| RequestError::Protocol("cannot build the TLS client configuration".into()))
}

/// A connection's byte stream.
enum Stream {
    Tcp(TcpStream),
    Tls(Box<tokio_rustls::client::TlsStream<TcpStream>>),
}

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Tcp(s) => Pin::new(s).poll_read(cx, buf),
            Stream::Tls(s) => Pin::new(&mut **s).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, b: &[u8]) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Tcp(s) => Pin::new(s).poll_write(cx, b),
            Stream::Tls(s) => Pin::new(&mut **s).poll_write(cx, b),
        }
    }
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Tcp(s) => Pin::new(s).poll_flush(cx),
            Stream::Tls(s) => Pin::new(&mut **s).poll_flush(cx),
        }
    }
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Tcp(s) => Pin::new(s).poll_shutdown(cx),
            Stream::Tls(s) => Pin::new(&mut **s).poll_shutdown(cx),
        }
    }
}

/// One keep-alive connection.
pub struct Conn {
    stream: Stream,
    buf: Box<[u8]>,
    start: usize,
    end: usize,
    /// When the last read returned bytes.
    last_read: Instant,
    /// When the kernel received the bytes of the last read, Unix µs.
    last_read_unix_us: Option<u64>,
    /// Whether the socket reports arrival times (plain TCP only).
    kernel_time: bool,
    /// When the first body byte of the current response was read.
    first_body: Option<Instant>,
    /// When the kernel received the first body byte's read, Unix µs.
    first_body_unix_us: Option<u64>,
    /// `(name, substring)`: a response whose field `name` contains `substring` (ASCII case
    /// insensitive) is marked, e.g. `("x-cache", "hit")` to tell hits from misses.
    pub mark_header: Option<Arc<(String, String)>>,
    /// Keep the last response's head (status line and fields) for [`Conn::head`].
    pub keep_head: bool,
    head: Vec<u8>,
}

enum Framing {
    Length(u64),
    Chunked,
    Close,
}

fn io_to_head_err(e: io::Error) -> RequestError {
    RequestError::Reset(e.to_string())
}

impl Conn {
    /// Opens a connection with `TCP_NODELAY` (requests are single small writes), and the
    /// TLS handshake for an `https://` endpoint (resuming a session when it can).
    pub async fn connect(to: Endpoint) -> Result<Self, RequestError> {
        Self::connect_with(to, true).await
    }

    /// [`Conn::connect`], choosing whether TLS sessions are resumed.
    pub async fn connect_with(to: Endpoint, resume: bool) -> Result<Self, RequestError> {
        Self::connect_buffered(to, resume, BUF_SIZE).await
    }

    /// [`Conn::connect_with`] with a read buffer of `buf` bytes (at least 4 KiB): small for
    /// many mostly idle connections, large to drain big bodies in few reads.
    pub async fn connect_buffered(
        to: Endpoint,
        resume: bool,
        buf: usize,
    ) -> Result<Self, RequestError> {
        let tcp = TcpStream::connect(to.addr).await.map_err(RequestError::Connect)?;
        tcp.set_nodelay(true).map_err(RequestError::Connect)?;
        let stream = if to.tls {
            let name = ServerName::IpAddress(to.addr.ip().into());
            let tls = tokio_rustls::TlsConnector::from(tls_config(resume)?)
                .connect(name, tcp)
                .await
                .map_err(RequestError::Connect)?;
            Stream::Tls(Box::new(tls))
        } else {
            Stream::Tcp(tcp)
        };
        let kernel_time = match &stream {
            Stream::Tcp(t) => arrival::enable(t.as_raw_fd()),
            Stream::Tls(_) => false,
        };
        Ok(Self {
            stream,
            buf: vec![0u8; buf.max(4096)].into_boxed_slice(),
            start: 0,
            end: 0,
            last_read: Instant::now(),
            last_read_unix_us: None,
            kernel_time,
            first_body: None,
            first_body_unix_us: None,
            mark_header: None,
            keep_head: false,
            head: Vec::new(),
        })
    }

    /// The head of the last response, as received (empty unless [`Conn::keep_head`]).
    pub fn head(&self) -> &[u8] {
        &self.head
    }

    /// Waits until the server sends something or closes while no request is outstanding;
    /// returns the bytes read (0: the server closed the connection).
    pub async fn wait_idle(&mut self) -> io::Result<usize> {
        self.fill().await
    }

    /// Reads into `buf[end..]`, with the kernel's arrival time when the socket gives one.
    async fn read_more(&mut self) -> io::Result<usize> {
        if !self.kernel_time {
            return self.stream.read(&mut self.buf[self.end..]).await;
        }
        let Stream::Tcp(tcp) = &self.stream else {
            return self.stream.read(&mut self.buf[self.end..]).await;
        };
        let fd = tcp.as_raw_fd();
        loop {
            tcp.readable().await?;
            let buf = &mut self.buf[self.end..];
            match tcp.try_io(Interest::READABLE, || arrival::recv(fd, buf)) {
                Ok((n, at)) => {
                    if at.is_some() {
                        self.last_read_unix_us = at;
                    }
                    return Ok(n);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// Reads more bytes after the buffered ones; returns how many (0 = EOF).
    async fn fill(&mut self) -> io::Result<usize> {
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        } else if self.end == self.buf.len() {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        let n = self.read_more().await?;
        self.end += n;
        if n > 0 {
            self.last_read = Instant::now();
        }
        Ok(n)
    }

    /// Sends `request` (a complete request, e.g. from [`build_get`]) and reads the whole response.
    pub async fn send(
        &mut self,
        request: &[u8],
        mut body: Body<'_>,
    ) -> Result<Response, RequestError> {
        self.stream.write_all(request).await.map_err(io_to_head_err)?;
        self.first_body = None;
        self.first_body_unix_us = None;
        let mut first_byte = if self.end > self.start { Some(Instant::now()) } else { None };
        let (status, framing, keep_alive, head_len, release_ms, from_cache, marked, coding) = loop {
            if self.end > self.start {
                let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
                let mut resp = httparse::Response::new(&mut headers);
                match resp.parse(&self.buf[self.start..self.end]) {
                    Ok(httparse::Status::Complete(n)) => {
                        let status = resp.code.unwrap_or(0);
                        let (framing, keep_alive) = framing_of(&resp, status)?;
                        let release_ms = resp
                            .headers
                            .iter()
                            .find(|h| h.name.eq_ignore_ascii_case(RELEASE_HEADER))
                            .and_then(|h| std::str::from_utf8(h.value).ok()?.trim().parse().ok());
                        let from_cache = cache_answer(resp.headers);
                        let coding = Coding::of(resp.headers);
                        let marked = self.mark_header.as_deref().is_some_and(|(name, sub)| {
                            resp.headers.iter().any(|h| {
                                h.name.eq_ignore_ascii_case(name)
                                    && h.value.len() >= sub.len()
                                    && h.value
                                        .windows(sub.len())
                                        .any(|w| w.eq_ignore_ascii_case(sub.as_bytes()))
                            })
                        });
                        if self.keep_head {
                            self.head.clear();
                            self.head.extend_from_slice(&self.buf[self.start..self.start + n]);
                        }
                        self.start += n;
                        if (100..200).contains(&status) {
                            // Interim response (RFC 9110 §15.2): the real one follows.
                            continue;
                        }
                        break (
                            status, framing, keep_alive, n as u64, release_ms, from_cache, marked,
                            coding,
                        );
                    }
                    Ok(httparse::Status::Partial) if self.end - self.start == self.buf.len() => {
                        return Err(RequestError::Protocol(
                            "response head larger than buffer".into(),
                        ));
                    }
                    Ok(httparse::Status::Partial) => {}
                    Err(e) => {
                        return Err(RequestError::Protocol(format!("bad response head: {e}")));
                    }
                }
            }
            let n = self.fill().await.map_err(io_to_head_err)?;
            if n == 0 {
                return Err(RequestError::Reset("closed before the response head".into()));
            }
            first_byte.get_or_insert_with(Instant::now);
        };
        let first_byte = first_byte.unwrap_or_else(Instant::now);
        let mut wire = head_len;
        let mut got = 0u64;
        let keep_alive = match framing {
            Framing::Length(len) => {
                wire += self.data(len, &mut got, &mut body, true).await?;
                keep_alive
            }
            Framing::Close => {
                wire += self.data(u64::MAX, &mut got, &mut body, false).await?;
                false
            }
            Framing::Chunked => {
                wire += self.chunked(&mut got, &mut body).await?;
                keep_alive
            }
        };
        Ok(Response {
            status,
            first_byte,
            done: Instant::now(),
            first_body: self.first_body,
            first_body_unix_us: self.first_body_unix_us,
            done_unix_us: self.last_read_unix_us,
            release_ms,
            from_cache,
            wire_bytes: wire,
            body_bytes: got,
            keep_alive,
            marked,
            coding,
        })
    }

    /// Consumes up to `len` body bytes; with `exact`, EOF before `len` is a short body,
    /// otherwise EOF ends the body. Returns bytes consumed.
    async fn data(
        &mut self,
        len: u64,
        got: &mut u64,
        body: &mut Body<'_>,
        exact: bool,
    ) -> Result<u64, RequestError> {
        let mut remaining = len;
        loop {
            let avail = (self.end - self.start) as u64;
            let take = avail.min(remaining) as usize;
            if take > 0 && self.first_body.is_none() {
                self.first_body = Some(self.last_read);
                self.first_body_unix_us = self.last_read_unix_us;
            }
            body.take(&self.buf[self.start..self.start + take]);
            self.start += take;
            *got += take as u64;
            remaining -= take as u64;
            if remaining == 0 {
                return Ok(len);
            }
            match self.fill().await {
                Ok(0) if !exact => return Ok(len - remaining),
                Ok(0) | Err(_) => return Err(RequestError::ShortBody { got: *got }),
                Ok(_) => {}
            }
        }
    }

    /// Ensures at least one more byte is buffered inside a body; EOF is a short body.
    async fn more(&mut self, got: u64) -> Result<(), RequestError> {
        match self.fill().await {
            Ok(0) | Err(_) => Err(RequestError::ShortBody { got }),
            Ok(_) => Ok(()),
        }
    }

    /// Consumes a chunked body (RFC 9112 §7.1) including trailers. Returns bytes consumed.
    async fn chunked(&mut self, got: &mut u64, body: &mut Body<'_>) -> Result<u64, RequestError> {
        let mut wire = 0u64;
        loop {
            let size = loop {
                match httparse::parse_chunk_size(&self.buf[self.start..self.end]) {
                    Ok(httparse::Status::Complete((used, size))) => {
                        self.start += used;
                        wire += used as u64;
                        break size;
                    }
                    Ok(httparse::Status::Partial) => self.more(*got).await?,
                    Err(_) => return Err(RequestError::Protocol("bad chunk size line".into())),
                }
            };
            if size == 0 {
                // Trailer section ends with an empty line (RFC 9112 §7.1.2).
                loop {
                    let pending = &self.buf[self.start..self.end];
                    if let Some(i) = memchr::memmem::find(pending, b"\r\n") {
                        self.start += i + 2;
                        wire += i as u64 + 2;
                        if i == 0 {
                            return Ok(wire);
                        }
                    } else {
                        self.more(*got).await?;
                    }
                }
            }
            wire += self.data(size, got, body, true).await?;
            while self.end - self.start < 2 {
                self.more(*got).await?;
            }
            if &self.buf[self.start..self.start + 2] != b"\r\n" {
                return Err(RequestError::Protocol("chunk not followed by CRLF".into()));
            }
            self.start += 2;
            wire += 2;
        }
    }
}

/// Body framing and persistence from a parsed head (RFC 9112 §6.3, §9.3).
fn framing_of(
    resp: &httparse::Response<'_, '_>,
    status: u16,
) -> Result<(Framing, bool), RequestError> {
    let mut length = None;
    let mut chunked = false;
    let mut close = resp.version == Some(0);
    for h in resp.headers.iter() {
        if h.name.eq_ignore_ascii_case("content-length") {
            let v = std::str::from_utf8(h.value)
                .ok()
                .and_then(|s| s.trim().parse::<u64>().ok())
                .ok_or_else(|| RequestError::Protocol("bad Content-Length".into()))?;
            if length.is_some_and(|l| l != v) {
                return Err(RequestError::Protocol("conflicting Content-Length".into()));
            }
            length = Some(v);
        } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
            chunked = h
                .value
                .rsplit(|&b| b == b',')
                .next()
                .is_some_and(|last| last.trim_ascii().eq_ignore_ascii_case(b"chunked"));
        } else if h.name.eq_ignore_ascii_case("connection") {
            let v = h.value;
            if v.split(|&b| b == b',').any(|t| t.trim_ascii().eq_ignore_ascii_case(b"close")) {
                close = true;
            }
        }
    }
    let framing = if status == 204 || status == 304 || (100..200).contains(&status) {
        Framing::Length(0)
    } else if chunked {
        Framing::Chunked
    } else if let Some(l) = length {
        Framing::Length(l)
    } else {
        Framing::Close
    };
    Ok((framing, !close))
}

#[cfg(test)]
mod tests {
    use std::io::Write as _;

    use super::Coding;

    fn coding(value: &str) -> Coding {
        let h = [httparse::Header { name: "Content-Encoding", value: value.as_bytes() }];
        Coding::of(&h)
    }

    #[test]
    fn bodies_decode_as_their_content_encoding_says() {
        let text = b"#EXTM3U\n#EXT-X-VERSION:9\n".repeat(20);
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(&text).unwrap();
        let gz = gz.finish().unwrap();
        let mut br = Vec::new();
        {
            let mut w = brotli::CompressorWriter::new(&mut br, 4096, 5, 22);
            w.write_all(&text).unwrap();
        }
        assert_eq!(coding(" GZIP").decode(&gz).as_deref(), Some(&text[..]));
        assert_eq!(coding("br").decode(&br).as_deref(), Some(&text[..]));
        assert_eq!(Coding::of(&[]).decode(&text).as_deref(), Some(&text[..]));
        assert_eq!(coding("identity"), Coding::Identity);
        assert_eq!(coding("zstd").decode(&text), None);
        assert_eq!(coding("gzip").decode(&text), None, "not gzip");
    }
}
