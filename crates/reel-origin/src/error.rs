//! Origin failures, classified by kind so callers never match on strings.

use std::error::Error as StdError;
use std::fmt;
use std::io;
use std::sync::Arc;

/// What went wrong talking to an origin.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ErrorKind {
    /// The host actively refused the TCP connection (RST to our SYN).
    ConnectRefused,
    /// Any other connect failure: unreachable network, DNS failure, ...
    ConnectFailed,
    /// The TCP connection and TLS handshake were not done within `connect_timeout`.
    ConnectTimeout,
    /// The TLS handshake failed: the certificate did not verify (unknown issuer, wrong name,
    /// expired), no common protocol version or cipher, or the peer does not speak TLS.
    Tls,
    /// No response head within `first_byte_timeout` of sending the request.
    FirstByteTimeout,
    /// No response head within the bound of a request the origin holds on purpose until
    /// its media exists (an LL-HLS blocking request,
    /// [`OriginRequest::first_byte_timeout`](crate::OriginRequest::first_byte_timeout)):
    /// the media did not appear in time, which says nothing of the origin's health. Not
    /// retried, not held against the host.
    BlockingTimeout,
    /// No body chunk within `idle_timeout` of the previous one.
    IdleTimeout,
    /// The connection was reset or closed (before the response head, or mid-body by RST).
    Reset,
    /// The body ended before its declared length (Content-Length or the last chunk).
    Truncated,
    /// The origin spoke something that is not valid HTTP/1.1 (or HTTP/2).
    Protocol,
    /// The caller abandoned the streamed request body ([`crate::BodySender`] dropped without
    /// `finish`); not held against the host.
    RequestBodyAborted,
    /// No host of the group may be used (every tier unhealthy and fail-open disabled).
    NoHealthyHost,
    /// The group name is not configured.
    UnknownGroup,
    /// Every connection the host may have at once (`max_connections`) stayed busy for
    /// `connect_timeout`: no connection was opened. Answered 503, not held against the host.
    ConnectionLimit,
}

impl ErrorKind {
    /// Every kind, in a stable order (the index order of per-kind counters).
    pub const ALL: [ErrorKind; 14] = [
        ErrorKind::ConnectRefused,
        ErrorKind::ConnectFailed,
        ErrorKind::ConnectTimeout,
        ErrorKind::Tls,
        ErrorKind::FirstByteTimeout,
        ErrorKind::BlockingTimeout,
        ErrorKind::IdleTimeout,
        ErrorKind::Reset,
        ErrorKind::Truncated,
        ErrorKind::Protocol,
        ErrorKind::RequestBodyAborted,
        ErrorKind::NoHealthyHost,
        ErrorKind::UnknownGroup,
        ErrorKind::ConnectionLimit,
    ];

    /// Stable snake_case label, suitable for metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::ConnectRefused => "connect_refused",
            ErrorKind::ConnectFailed => "connect_failed",
            ErrorKind::ConnectTimeout => "connect_timeout",
            ErrorKind::Tls => "tls",
            ErrorKind::FirstByteTimeout => "first_byte_timeout",
            ErrorKind::BlockingTimeout => "blocking_timeout",
            ErrorKind::IdleTimeout => "idle_timeout",
            ErrorKind::Reset => "reset",
            ErrorKind::Truncated => "truncated",
            ErrorKind::Protocol => "protocol",
            ErrorKind::RequestBodyAborted => "request_body_aborted",
            ErrorKind::NoHealthyHost => "no_healthy_host",
            ErrorKind::UnknownGroup => "unknown_group",
            ErrorKind::ConnectionLimit => "connection_limit",
        }
    }

    pub(crate) fn index(self) -> usize {
        self as usize
    }

    /// Whether this kind is a timeout (mapped to 504 rather than 502).
    pub fn is_timeout(self) -> bool {
        matches!(
            self,
            ErrorKind::ConnectTimeout
                | ErrorKind::FirstByteTimeout
                | ErrorKind::BlockingTimeout
                | ErrorKind::IdleTimeout
        )
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A failed origin exchange.
#[derive(Debug, Clone)]
pub struct OriginError {
    kind: ErrorKind,
    host: Option<String>,
    before_response: bool,
    source: Option<Arc<dyn StdError + Send + Sync>>,
}

impl OriginError {
    pub(crate) fn new(kind: ErrorKind, host: Option<&str>, before_response: bool) -> Self {
        Self { kind, host: host.map(str::to_owned), before_response, source: None }
    }

    pub(crate) fn with_source(mut self, e: impl StdError + Send + Sync + 'static) -> Self {
        self.source = Some(Arc::new(e));
        self
    }

    /// The classification.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The origin address (`host:port` from the spec) involved, if one was chosen.
    pub fn host(&self) -> Option<&str> {
        self.host.as_deref()
    }

    /// Whether the failure happened before any response byte arrived.
    pub fn before_response(&self) -> bool {
        self.before_response
    }

    /// Whether an idempotent request may be sent again to another host: true for connect
    /// and TLS handshake failures, first-byte timeouts and resets before the response head. Whether a request
    /// is idempotent is the caller's knowledge ([`crate::OriginRequest::idempotent`]).
    pub fn is_retryable(&self) -> bool {
        self.before_response
            && matches!(
                self.kind,
                ErrorKind::ConnectRefused
                    | ErrorKind::ConnectFailed
                    | ErrorKind::ConnectTimeout
                    | ErrorKind::Tls
                    | ErrorKind::FirstByteTimeout
                    | ErrorKind::Reset
            )
    }

    /// Status for the edge's own client: 504 for timeouts, 502 for everything else.
    pub fn client_status(&self) -> u16 {
        match self.kind {
            ErrorKind::ConnectionLimit => 503,
            k if k.is_timeout() => 504,
            _ => 502,
        }
    }
}

impl fmt::Display for OriginError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "origin {}", self.kind)?;
        if let Some(h) = &self.host {
            write!(f, " at {h}")?;
        }
        if let Some(s) = &self.source {
            write!(f, ": {s}")?;
        }
        Ok(())
    }
}

impl StdError for OriginError {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        self.source.as_deref().map(|e| e as &(dyn StdError + 'static))
    }
}

/// The first `io::Error` in an error's source chain.
pub(crate) fn find_io<'a>(e: &'a (dyn StdError + 'static)) -> Option<&'a io::Error> {
    let mut cur: Option<&(dyn StdError + 'static)> = Some(e);
    while let Some(err) = cur {
        if let Some(io) = err.downcast_ref::<io::Error>() {
            return Some(io);
        }
        cur = err.source();
    }
    None
}

/// Classifies a connect error.
pub(crate) fn connect_kind(e: &io::Error) -> ErrorKind {
    match e.kind() {
        io::ErrorKind::ConnectionRefused => ErrorKind::ConnectRefused,
        io::ErrorKind::TimedOut => ErrorKind::ConnectTimeout,
        _ => ErrorKind::ConnectFailed,
    }
}

/// Classifies an error from hyper while waiting for the response head.
pub(crate) fn head_kind(e: &hyper::Error) -> ErrorKind {
    let mut cur: Option<&(dyn StdError + 'static)> = Some(e);
    while let Some(err) = cur {
        if err.is::<crate::body::BodyAborted>() {
            return ErrorKind::RequestBodyAborted;
        }
        cur = err.source();
    }
    // `is_parse` covers every parse error (a bad status, a head too large, ...).
    if e.is_parse() || e.is_user() {
        ErrorKind::Protocol
    } else {
        // Closed, canceled, incomplete message, I/O errors: the connection went away before a
        // response head, which for HTTP/1.1 means the request may not have been processed.
        ErrorKind::Reset
    }
}

/// Classifies an error from hyper while reading the response body.
pub(crate) fn body_kind(e: &hyper::Error) -> ErrorKind {
    if let Some(io) = find_io(e) {
        return match io.kind() {
            io::ErrorKind::UnexpectedEof => ErrorKind::Truncated,
            io::ErrorKind::TimedOut => ErrorKind::IdleTimeout,
            _ => ErrorKind::Reset,
        };
    }
    if e.is_parse() {
        ErrorKind::Protocol
    } else {
        // An incomplete message without an I/O cause: the peer closed before the declared end.
        ErrorKind::Truncated
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_and_retry() {
        let e = OriginError::new(ErrorKind::FirstByteTimeout, Some("h:1"), true);
        assert_eq!(e.client_status(), 504);
        assert!(e.is_retryable());
        assert_eq!(e.host(), Some("h:1"));
        let e = OriginError::new(ErrorKind::Reset, Some("h:1"), false);
        assert_eq!(e.client_status(), 502);
        assert!(!e.is_retryable());
        let e = OriginError::new(ErrorKind::Protocol, None, true);
        assert!(!e.is_retryable());
        for (i, k) in ErrorKind::ALL.iter().enumerate() {
            assert_eq!(k.index(), i);
        }
    }

    #[test]
    fn source_chain_and_display() {
        let io = io::Error::new(io::ErrorKind::ConnectionRefused, "nope");
        assert_eq!(connect_kind(&io), ErrorKind::ConnectRefused);
        let e = OriginError::new(ErrorKind::ConnectRefused, Some("h:1"), true).with_source(io);
        assert!(e.to_string().contains("connect_refused at h:1: nope"));
        assert!(find_io(&e).is_some());
    }
}
