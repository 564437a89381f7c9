//! The HTTP/3 (RFC 9114) client of the load generator, over QUIC (RFC 9000) with `quinn`
//! and `h3`: the `--h3` path of `fixed` and `open`, and `reel-load get --h3`.
//!
//! - [`endpoint`]: one `quinn::Endpoint` (one UDP socket) per generator runtime; every
//!   connection of a run goes out through it.
//! - [`H3Conn`]: one QUIC connection and its HTTP/3 request sender. A clone opens its
//!   requests on the same connection, so `--streams M` runs M requests at once on each
//!   connection by giving each of M tasks a clone.
//! - [`H3Client`]: a connection shared by those tasks that is opened again when it dies,
//!   with the per-request timeout, as the HTTP/1.1 keep-alive client does.
//! - [`build_request`]: a GET prepared once and cloned per request.
//!
//! Responses are read to the end of their stream and their body chunks dropped as they come
//! (or kept, for `get` and playlists); each completed response becomes a
//! [`crate::client::Response`], so the scenarios count bytes, statuses and errors in the
//! same [`crate::stats::Stats`] as over HTTP/1.1. The bytes counted for a response are its
//! body plus its field section as HTTP/1.1 would write it (QUIC and HTTP/3 framing and
//! QPACK compression are not seen from here).
//!
//! TLS 1.3 with ALPN `h3` (RFC 9114 §3.1): like the HTTP/1.1 client, any certificate is
//! accepted (targets are loopback only) but the handshake signature is checked, so the
//! server does all the work of a real handshake.

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use bytes::{Buf, Bytes};
use http::header::{HeaderName, HeaderValue};
use quinn::crypto::rustls::QuicClientConfig;
use socket2::{Domain, Protocol, Socket, Type};
use tokio::sync::Mutex;

use crate::client::{AnyCertificate, Body, RELEASE_HEADER, RequestError, Response};
use crate::stats::ErrorKind;
use crate::target::Target;

/// Largest response field section accepted (the `SETTINGS_MAX_FIELD_SECTION_SIZE` sent).
const MAX_FIELD_SECTION: u64 = 64 * 1024;
/// Flow-control window per stream: a 2 MiB body fits without waiting for window updates.
const STREAM_WINDOW: u32 = 4 << 20;
/// UDP receive buffer asked for (the kernel caps it at `net.core.rmem_max`): a server
/// sending several 2 MiB bodies at once overflows the 208 KiB default, and every dropped
/// datagram costs a loss recovery.
const UDP_RECV_BUFFER: usize = 8 << 20;
/// How long closing connections may take at the end of a run.
const CLOSE_WAIT: Duration = Duration::from_millis(500);
/// Fields that are connection-specific in HTTP/1.1 and malformed in HTTP/3 (RFC 9114
/// §4.2): left out of extra request headers.
const CONNECTION_FIELDS: [&str; 5] =
    ["connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade"];

/// The request side of an HTTP/3 connection.
type Sender = ::h3::client::SendRequest<h3_quinn::OpenStreams, Bytes>;

/// The process's QUIC client configuration: TLS 1.3, ALPN `h3`, any certificate with
/// checked signatures, and stream windows large enough for a video segment.
fn client_config() -> Result<quinn::ClientConfig, RequestError> {
    static CONFIG: OnceLock<Option<Arc<QuicClientConfig>>> = OnceLock::new();
    let crypto = CONFIG
        .get_or_init(|| {
            let provider = Arc::new(rustls::crypto::ring::default_provider());
            let mut tls = rustls::ClientConfig::builder_with_provider(provider.clone())
                .with_protocol_versions(&[&rustls::version::TLS13])
                .ok()?
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(AnyCertificate(provider)))
                .with_no_client_auth();
            tls.alpn_protocols = vec![b"h3".to_vec()];
            QuicClientConfig::try_from(Arc::new(tls)).ok().map(Arc::new)
        })
        .clone()
        .ok_or_else(|| {
            RequestError::Protocol("cannot build the QUIC client configuration".into())
        })?;
    let mut transport = quinn::TransportConfig::default();
    transport.stream_receive_window(STREAM_WINDOW.into());
    let mut config = quinn::ClientConfig::new(crypto);
    config.transport_config(Arc::new(transport));
    Ok(config)
}

/// A client endpoint on a new UDP socket of the loopback address of `target`'s family,
/// with a large receive buffer, for every connection the runtime opens. Must be called
/// inside a tokio runtime.
pub fn endpoint(target: SocketAddr) -> Result<quinn::Endpoint, RequestError> {
    let local = match target {
        SocketAddr::V4(_) => SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
        SocketAddr::V6(_) => SocketAddr::from((Ipv6Addr::LOCALHOST, 0)),
    };
    let socket = Socket::new(Domain::for_address(local), Type::DGRAM, Some(Protocol::UDP))
        .map_err(RequestError::Connect)?;
    // Best effort: a smaller buffer still works, with more losses under large bodies.
    let _ = socket.set_recv_buffer_size(UDP_RECV_BUFFER);
    socket.bind(&local.into()).map_err(RequestError::Connect)?;
    let mut ep = quinn::Endpoint::new(
        quinn::EndpointConfig::default(),
        None,
        socket.into(),
        Arc::new(quinn::TokioRuntime),
    )
    .map_err(RequestError::Connect)?;
    ep.set_default_client_config(client_config()?);
    Ok(ep)
}

/// Closes every connection of `ep` and waits (briefly) until the server was told.
pub async fn close(ep: &quinn::Endpoint) {
    ep.close(0u32.into(), b"done");
    let _ = tokio::time::timeout(CLOSE_WAIT, ep.wait_idle()).await;
}

/// A GET of `target` with extra header lines (`name: value`). A `Host` line becomes the
/// `:authority` (otherwise the URL's); connection-specific fields are left out.
pub fn build_request(
    target: &Target,
    extra_headers: &[String],
) -> Result<http::Request<()>, RequestError> {
    let bad = |what: &str| RequestError::Protocol(format!("request header {what:?}"));
    let mut authority = target.host_header.clone();
    let mut fields = Vec::new();
    for h in extra_headers {
        let (name, value) = h.split_once(':').ok_or_else(|| bad(h))?;
        let name = name.trim().to_ascii_lowercase();
        let value = value.trim();
        if name == "host" {
            authority = value.to_string();
            continue;
        }
        if CONNECTION_FIELDS.contains(&name.as_str()) {
            continue;
        }
        let name = HeaderName::from_bytes(name.as_bytes()).map_err(|_| bad(h))?;
        let value = HeaderValue::from_str(value).map_err(|_| bad(h))?;
        fields.push((name, value));
    }
    let uri = format!("https://{authority}{}", target.path);
    let mut b = http::Request::get(uri).header(http::header::USER_AGENT, "reel-load");
    for (n, v) in fields {
        b = b.header(n, v);
    }
    b.body(()).map_err(|e| RequestError::Protocol(format!("request: {e}")))
}

/// Whether a response came from the cache's store: `Cache-Status` (RFC 9211) with `hit`
/// and no `fwd=`, or `X-Cache: HIT`; `None` without either field.
fn cache_answer(headers: &http::HeaderMap) -> Option<bool> {
    if let Some(v) = headers.get("cache-status") {
        let v = String::from_utf8_lossy(v.as_bytes());
        return Some(v.contains("hit") && !v.contains("fwd="));
    }
    headers.get("x-cache").map(|v| v.as_bytes().eq_ignore_ascii_case(b"HIT"))
}

/// Whether field `name` of `headers` contains `sub` (ASCII case insensitive).
fn has_field(headers: &http::HeaderMap, name: &str, sub: &str) -> bool {
    headers.get_all(name).iter().any(|v| {
        let v = v.as_bytes();
        v.len() >= sub.len() && v.windows(sub.len()).any(|w| w.eq_ignore_ascii_case(sub.as_bytes()))
    })
}

/// What a failed stream means: before the response head, the connection or stream was
/// lost (or the head was malformed); after it, the body is short.
fn stream_error(e: ::h3::error::StreamError, got: Option<u64>) -> RequestError {
    if let Some(got) = got {
        return RequestError::ShortBody { got };
    }
    match e {
        ::h3::error::StreamError::StreamError { .. }
        | ::h3::error::StreamError::HeaderTooBig { .. } => RequestError::Protocol(e.to_string()),
        e => RequestError::Reset(e.to_string()),
    }
}

/// One HTTP/3 connection. Cheap to clone: every clone sends its requests on the same QUIC
/// connection, concurrently with the others.
#[derive(Clone)]
pub struct H3Conn {
    quic: quinn::Connection,
    send: Sender,
}

impl H3Conn {
    /// Opens a QUIC connection to `addr` through `ep` and starts HTTP/3 on it; the
    /// connection's control stream runs as a task of the current runtime until it closes.
    pub async fn connect(ep: &quinn::Endpoint, addr: SocketAddr) -> Result<Self, RequestError> {
        let connect_err = |e: String| RequestError::Connect(std::io::Error::other(e));
        let quic = ep
            .connect(addr, &addr.ip().to_string())
            .map_err(|e| connect_err(e.to_string()))?
            .await
            .map_err(|e| connect_err(e.to_string()))?;
        let (mut driver, send) = ::h3::client::builder()
            .max_field_section_size(MAX_FIELD_SECTION)
            .build(h3_quinn::Connection::new(quic.clone()))
            .await
            .map_err(|e| connect_err(e.to_string()))?;
        tokio::spawn(async move {
            let _ = std::future::poll_fn(|cx| driver.poll_close(cx)).await;
        });
        Ok(Self { quic, send })
    }

    /// Whether the QUIC connection has ended (no request can succeed on it).
    pub fn is_closed(&self) -> bool {
        self.quic.close_reason().is_some()
    }

    /// Sends `req` and reads the whole response; `mark` as [`crate::client::Conn::mark_header`].
    pub async fn send(
        &mut self,
        req: &http::Request<()>,
        body: Body<'_>,
        mark: Option<&(String, String)>,
    ) -> Result<Response, RequestError> {
        self.send_head(req, body, mark).await.map(|(r, _)| r)
    }

    /// [`H3Conn::send`], also returning the response head (status and fields).
    pub async fn send_head(
        &mut self,
        req: &http::Request<()>,
        mut body: Body<'_>,
        mark: Option<&(String, String)>,
    ) -> Result<(Response, http::Response<()>), RequestError> {
        let mut stream =
            self.send.send_request(req.clone()).await.map_err(|e| stream_error(e, None))?;
        stream.finish().await.map_err(|e| stream_error(e, None))?;
        let head = stream.recv_response().await.map_err(|e| stream_error(e, None))?;
        let first_byte = Instant::now();
        let headers = head.headers();
        let status = head.status().as_u16();
        // The head as HTTP/1.1 would write it: `HTTP/1.1 200 OK\r\n`, `name: value\r\n`, `\r\n`.
        let head_len =
            19 + headers.iter().map(|(n, v)| n.as_str().len() + v.len() + 4).sum::<usize>() as u64;
        let length = headers
            .get(http::header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok()?.trim().parse::<u64>().ok());
        let release_ms =
            headers.get(RELEASE_HEADER).and_then(|v| v.to_str().ok()?.trim().parse().ok());
        let from_cache = cache_answer(headers);
        let marked = mark.is_some_and(|(name, sub)| has_field(headers, name, sub));
        let mut got = 0u64;
        let mut first_body = None;
        while let Some(mut chunk) =
            stream.recv_data().await.map_err(|e| stream_error(e, Some(got)))?
        {
            if first_body.is_none() && chunk.has_remaining() {
                first_body = Some(Instant::now());
            }
            while chunk.has_remaining() {
                let c = chunk.chunk();
                body.take(c);
                let n = c.len();
                got += n as u64;
                chunk.advance(n);
            }
        }
        if length.is_some_and(|l| l != got) && status != 304 && status != 204 {
            return Err(RequestError::ShortBody { got });
        }
        let response = Response {
            status,
            first_byte,
            done: Instant::now(),
            first_body,
            first_body_unix_us: None,
            done_unix_us: None,
            release_ms,
            from_cache,
            wire_bytes: head_len + got,
            body_bytes: got,
            keep_alive: !self.is_closed(),
            marked,
            coding: crate::client::Coding::Identity,
        };
        Ok((response, head))
    }
}

/// An HTTP/3 connection to one server shared by the tasks that send on it, opened on first
/// use and again after it died, with a timeout on every request (connect included).
pub struct H3Client {
    ep: quinn::Endpoint,
    addr: SocketAddr,
    timeout: Duration,
    /// Marks responses carrying this field value (see `Mark::header` in the scenarios).
    mark: Option<Arc<(String, String)>>,
    conn: Mutex<Option<H3Conn>>,
}

impl H3Client {
    /// A client of `addr` through `ep`; no connection is opened yet.
    pub fn new(
        ep: quinn::Endpoint,
        addr: SocketAddr,
        timeout: Duration,
        mark: Option<Arc<(String, String)>>,
    ) -> Self {
        Self { ep, addr, timeout, mark, conn: Mutex::new(None) }
    }

    /// The live connection, opened if there is none (one task connects, the others wait
    /// for it).
    async fn conn(&self) -> Result<H3Conn, ErrorKind> {
        let mut slot = self.conn.lock().await;
        if let Some(c) = slot.as_ref().filter(|c| !c.is_closed()) {
            return Ok(c.clone());
        }
        *slot = None;
        let c = tokio::time::timeout(self.timeout, H3Conn::connect(&self.ep, self.addr))
            .await
            .map_err(|_| ErrorKind::Timeout)?
            .map_err(|e| e.kind())?;
        *slot = Some(c.clone());
        Ok(c)
    }

    /// Opens the connection ahead of the first request.
    pub async fn connect(&self) -> Result<(), ErrorKind> {
        self.conn().await.map(drop)
    }

    /// Sends `req` on the shared connection and reads the whole response, within the timeout.
    pub async fn get(
        &self,
        req: &http::Request<()>,
        body: Body<'_>,
    ) -> Result<Response, ErrorKind> {
        let deadline = tokio::time::Instant::now() + self.timeout;
        let mut conn = tokio::time::timeout_at(deadline, self.conn())
            .await
            .map_err(|_| ErrorKind::Timeout)??;
        match tokio::time::timeout_at(deadline, conn.send(req, body, self.mark.as_deref())).await {
            Err(_) => Err(ErrorKind::Timeout),
            Ok(r) => r.map_err(|e| e.kind()),
        }
    }
}
