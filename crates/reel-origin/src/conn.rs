//! Opening origin connections and sending requests on them: TCP (`TCP_NODELAY`), TLS when the
//! host asks for it, then HTTP/1.1 or HTTP/2 as ALPN decided (RFC 7301; plain TCP is always
//! HTTP/1.1). Shared by the worker pools and the health checker, so a probe travels exactly
//! the path live requests do.
//!
//! Per connection: one `connect(2)`, for TLS one handshake (a full one, or a resumption
//! through the group's shared session cache), and one spawned hyper connection task.

use std::time::Duration;

use http::header::{self, HeaderMap, HeaderValue};
use http::uri::{Authority, PathAndQuery, Scheme};
use http::{Method, Request, Response, Uri};
use hyper::body::Incoming;
use hyper::client::conn::{TrySendError, http1, http2};
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpStream;

use crate::body::RequestBody;
use crate::error::{ErrorKind, OriginError, connect_kind};
use crate::host::HostState;
use crate::tls::ALPN_H2;

/// The sending half of one origin connection.
pub(crate) enum Sender {
    /// One request at a time; pooled while idle.
    H1(http1::SendRequest<RequestBody>),
    /// Multiplexed; shared by every request of the worker to that host while it is open.
    H2(http2::SendRequest<RequestBody>),
}

impl Sender {
    pub(crate) fn is_h2(&self) -> bool {
        matches!(self, Sender::H2(_))
    }

    pub(crate) fn is_closed(&self) -> bool {
        match self {
            Sender::H1(s) => s.is_closed(),
            Sender::H2(s) => s.is_closed(),
        }
    }

    pub(crate) fn is_ready(&self) -> bool {
        match self {
            Sender::H1(s) => s.is_ready(),
            Sender::H2(s) => s.is_ready(),
        }
    }

    pub(crate) async fn ready(&mut self) -> Result<(), hyper::Error> {
        match self {
            Sender::H1(s) => s.ready().await,
            Sender::H2(s) => s.ready().await,
        }
    }

    /// Another handle on a multiplexed connection; `None` for HTTP/1.1.
    pub(crate) fn share(&self) -> Option<Sender> {
        match self {
            Sender::H1(_) => None,
            Sender::H2(s) => Some(Sender::H2(s.clone())),
        }
    }

    pub(crate) async fn send(
        &mut self,
        req: Request<RequestBody>,
    ) -> Result<Response<Incoming>, TrySendError<Request<RequestBody>>> {
        match self {
            Sender::H1(s) => s.try_send_request(req).await,
            Sender::H2(s) => s.try_send_request(req).await,
        }
    }

    /// A request for this connection. HTTP/1.1 gets the origin-form target and `Host`;
    /// HTTP/2 gets `:scheme`, `:authority` and `:path` and no `Host` (RFC 9113 section
    /// 8.3.1), with the host's address as the authority when `host` is not a valid one.
    pub(crate) fn request(
        &self,
        method: Method,
        pq: PathAndQuery,
        mut headers: HeaderMap,
        host: HeaderValue,
        fallback_authority: &str,
        body: RequestBody,
    ) -> Request<RequestBody> {
        let uri = match self {
            Sender::H1(_) => {
                headers.insert(header::HOST, host);
                Uri::from(pq)
            }
            Sender::H2(_) => {
                headers.remove(header::HOST);
                let authority = Authority::try_from(host.as_bytes())
                    .or_else(|_| Authority::try_from(fallback_authority));
                let mut parts = http::uri::Parts::default();
                parts.scheme = Some(Scheme::HTTPS);
                parts.authority = authority.ok();
                parts.path_and_query = Some(pq.clone());
                Uri::from_parts(parts).unwrap_or_else(|_| Uri::from(pq))
            }
        };
        let mut req = Request::new(body);
        *req.method_mut() = method;
        *req.uri_mut() = uri;
        *req.headers_mut() = headers;
        req
    }
}

/// Opens a connection to `host` within `budget` (TCP connect plus TLS handshake).
pub(crate) async fn open(host: &HostState, budget: Duration) -> Result<Sender, OriginError> {
    let addr = host.addr.as_str();
    let deadline = tokio::time::Instant::now() + budget;
    let stream = match tokio::time::timeout_at(deadline, TcpStream::connect(addr)).await {
        Err(_) => return Err(OriginError::new(ErrorKind::ConnectTimeout, Some(addr), true)),
        Ok(Err(e)) => {
            return Err(OriginError::new(connect_kind(&e), Some(addr), true).with_source(e));
        }
        Ok(Ok(s)) => s,
    };
    // Request heads are small writes; Nagle would hold them back behind delayed ACKs.
    let _ = stream.set_nodelay(true);
    let Some(tls) = &host.tls else {
        return handshake_h1(host, TokioIo::new(stream)).await;
    };
    let tls_stream =
        match tokio::time::timeout_at(deadline, tls.connector.connect(tls.name.clone(), stream))
            .await
        {
            Err(_) => return Err(OriginError::new(ErrorKind::ConnectTimeout, Some(addr), true)),
            Ok(Err(e)) => {
                let e = OriginError::new(ErrorKind::Tls, Some(addr), true)
                    .with_source(TlsHandshakeError(e));
                // Once per host going down, not once per request while it is down.
                if host.is_healthy() {
                    tracing::warn!(group = %host.group, error = %e, "origin TLS handshake failed");
                }
                return Err(e);
            }
            Ok(Ok(s)) => s,
        };
    let h2 = tls_stream.get_ref().1.alpn_protocol() == Some(ALPN_H2);
    let io = TokioIo::new(tls_stream);
    if !h2 {
        return handshake_h1(host, io).await;
    }
    let (sender, conn) = http2::Builder::new(TokioExecutor::new())
        .handshake(io)
        .await
        .map_err(|e| OriginError::new(ErrorKind::Protocol, Some(addr), true).with_source(e))?;
    spawn_conn(addr, conn);
    Ok(Sender::H2(sender))
}

async fn handshake_h1<T>(host: &HostState, io: TokioIo<T>) -> Result<Sender, OriginError>
where
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin + 'static,
{
    let (sender, conn) = http1::Builder::new().handshake(io).await.map_err(|e| {
        OriginError::new(ErrorKind::ConnectFailed, Some(&host.addr), true).with_source(e)
    })?;
    spawn_conn(&host.addr, conn);
    Ok(Sender::H1(sender))
}

fn spawn_conn<F>(addr: &str, conn: F)
where
    F: std::future::Future<Output = Result<(), hyper::Error>> + Send + 'static,
{
    let addr = addr.to_owned();
    tokio::spawn(async move {
        if let Err(e) = conn.await {
            tracing::debug!(host = %addr, error = %e, "origin connection ended");
        }
    });
}

/// A failed TLS handshake, worded for an operator reading the log.
#[derive(Debug)]
struct TlsHandshakeError(std::io::Error);

impl std::fmt::Display for TlsHandshakeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "TLS handshake failed: {}", self.0)
    }
}

impl std::error::Error for TlsHandshakeError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.0)
    }
}
