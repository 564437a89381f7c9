//! Per-listener resource limits applied by the codec and the connection loop.

use std::sync::Arc;
use std::time::Duration;

use crate::client::TrustedProxies;

/// Hard cap on `Limits::max_headers`: header slots are parsed into a fixed stack array
/// of this size, so a larger configured value is clamped to it.
pub const MAX_HEADERS_CAP: usize = 256;

/// Limits enforced on every connection.
///
/// Build with struct-update syntax so new fields keep defaults:
/// `Limits { idle_timeout: Duration::from_secs(5), ..Limits::default() }`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Longest accepted request line (method, target and version, without the CRLF).
    /// Longer lines are answered with 414 and the connection is closed.
    pub max_request_line: usize,
    /// Largest accepted header section (everything after the request line up to and
    /// including the empty line). Larger sections are answered with 431 and a close.
    pub max_header_bytes: usize,
    /// Most header fields accepted in one request (clamped to [`MAX_HEADERS_CAP`]).
    /// More fields are answered with 431 and a close.
    pub max_headers: usize,
    /// Largest accepted request body. A larger `Content-Length` is answered with 413
    /// before the handler runs; a chunked body crossing it fails
    /// [`RequestBody::next_chunk`](crate::RequestBody::next_chunk) and the connection
    /// answers 413 and closes.
    pub max_body_bytes: u64,
    /// Time allowed to receive a complete request head, measured from its first byte
    /// (slowloris protection). On expiry the connection gets 408 and is closed.
    pub header_timeout: Duration,
    /// Time a keep-alive connection may sit idle between requests before it is closed
    /// silently. It also bounds how long a single body read, or a write that makes no
    /// progress (a client that stopped reading), may wait.
    pub idle_timeout: Duration,
    /// Time allowed to receive a whole request body, from the end of its head: a client
    /// dripping a byte per `idle_timeout` cannot hold a request open longer. On expiry
    /// the connection gets 408 and is closed.
    pub body_timeout: Duration,
    /// [`serve_parkable`](crate::serve_parkable) only: how long a keep-alive connection
    /// waits for its next request before it is handed back to be kept without a task
    /// (`None`: never).
    pub park_after: Option<Duration>,
    /// Longest an HTTP/2 response stream waits without progress (flow-control capacity,
    /// its body budget or a pooled buffer) before it is reset: a client that stops reading
    /// gives its buffers back after this, not after `idle_timeout`. Capped by
    /// `idle_timeout`, which bounds an HTTP/1.1 file body's wait for a pooled buffer.
    pub send_timeout: Duration,
    /// Proxies whose `X-Forwarded-For`/`Forwarded` names the client of their requests
    /// ([`Request::apply_forwarded`](crate::Request::apply_forwarded)); `None`: no proxy
    /// is, and a request pays one branch.
    pub trusted_proxies: Option<Arc<TrustedProxies>>,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_request_line: 8 * 1024,
            max_header_bytes: 64 * 1024,
            max_headers: 100,
            max_body_bytes: 64 * 1024 * 1024,
            header_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            body_timeout: Duration::from_secs(120),
            park_after: None,
            send_timeout: Duration::from_secs(10),
            trusted_proxies: None,
        }
    }
}

impl Limits {
    /// Effective header slot count (`max_headers` clamped to [`MAX_HEADERS_CAP`]).
    pub fn header_slots(&self) -> usize {
        self.max_headers.min(MAX_HEADERS_CAP)
    }
}
