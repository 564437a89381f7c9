//! The application contract every protocol serves: the [`Handler`] a server implements,
//! and what a connection reports to it and to its caller ([`Sent`], [`Refusal`],
//! [`CloseReason`], [`ConnOutcome`]). HTTP/1.1 (`http1`), HTTP/2 (`http2`) and HTTP/3
//! (`http3`) all point down to it; it depends on none of them.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use crate::body::{BodyError, RequestBody};
use crate::request::Request;
use crate::response::Response;

/// Application logic. Runs on the connection's worker thread: neither the handler nor
/// its futures need to be `Send`.
pub trait Handler: 'static {
    /// Answers one request. The body may be read through `body`; whatever is left
    /// unread is handled by the connection loop. Every syntactically valid request
    /// reaches this method, whatever its method (see
    /// [`Response::for_unsupported_method`]).
    fn handle(&self, req: &Request, body: &mut RequestBody<'_>) -> impl Future<Output = Response>;

    /// Called after each response to a parsed request was written (or failed); see
    /// [`Sent`]. Default: no-op.
    fn on_response(&self, req: &Request, sent: &Sent) {
        let _ = (req, sent);
    }

    /// Called when a request head was refused before reaching [`Handler::handle`] (400,
    /// 408, 413, 414, 417, 431, 501, 505), once the refusal was written; see [`Refusal`].
    /// Default: no-op.
    fn on_reject(&self, refusal: &Refusal<'_>) {
        let _ = refusal;
    }

    /// Asked before each response is written: `false` sends it with `Connection: close`
    /// and closes the connection after it, while idle connections stay open until their
    /// next request (a server about to stop tells keep-alive clients to go elsewhere
    /// without closing under a request already on its way). On HTTP/2 the connection sends
    /// GOAWAY and closes once its streams are done. Default: `true`.
    fn keep_alive(&self) -> bool {
        true
    }
}

/// Most bytes of a refused request's line handed to [`Handler::on_reject`].
pub const REFUSAL_EXCERPT: usize = 512;

/// What the connection loop knows of a request head it refused ([`Handler::on_reject`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refusal<'a> {
    /// The client's address (as [`Request::peer`](crate::Request::peer) without a
    /// forwarded field: the head was not read).
    pub peer: SocketAddr,
    /// The socket's peer ([`Request::socket_peer`](crate::Request::socket_peer)).
    pub socket_peer: SocketAddr,
    /// The status answered.
    pub status: u16,
    /// The rule or limit the head broke (`"request line too long"`, `"duplicate
    /// Content-Length"`, `"header timeout"`, ...).
    pub reason: &'static str,
    /// The request line as received, without its line ending (empty lines before it
    /// skipped), or the first bytes received when no line ended; at most
    /// [`REFUSAL_EXCERPT`] bytes. Raw client bytes: escape them before logging.
    pub request_line: &'a [u8],
    /// Bytes written for the refusal.
    pub bytes: u64,
    /// From the head's first byte to the refusal written.
    pub elapsed: Duration,
}

/// What the connection loop reports to [`Handler::on_response`] about one answered request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sent {
    /// Status as sent; 0 when no response was written (the request body failed).
    pub status: u16,
    /// Bytes written for the whole response, head included.
    pub bytes: u64,
    /// Time to first byte: from the complete request head until the response head went out
    /// (its first write was issued). What the server took to answer, whatever the client's
    /// link; `None` when no response was written.
    pub first_byte: Option<Duration>,
    /// From the complete request head to the end of the response: includes the time the
    /// client took to receive the body.
    pub total: Duration,
    /// The [`Response::tag`] the handler set (0 when the connection loop replaced the
    /// response, e.g. with a 413).
    pub tag: u64,
}

impl Sent {
    /// Nothing was written: the request failed before its response.
    pub(crate) fn nothing(total: Duration, tag: u64) -> Sent {
        Sent { status: 0, bytes: 0, first_byte: None, total, tag }
    }
}

/// Why a connection ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CloseReason {
    /// The client closed the connection between requests.
    PeerClosed,
    /// The client closed mid-head, or while its request was being answered.
    PeerClosedMidRequest,
    /// The request or response asked for the close (`Connection: close`, HTTP/1.0
    /// without keep-alive, close-delimited body).
    NotKeepAlive,
    /// The keep-alive idle timeout expired.
    IdleTimeout,
    /// The head did not arrive within `header_timeout` (408 was sent).
    HeaderTimeout,
    /// Drain was requested.
    Drain,
    /// The head was refused with this status.
    Rejected(u16),
    /// The request body failed (see [`BodyError`]).
    Body(BodyError),
    /// The handler left more body unread than [`DRAIN_LIMIT`](crate::DRAIN_LIMIT), or a
    /// `100 Continue` was never sent.
    UnreadBody,
    /// The response body could not be completed (stream error, stream shorter or
    /// longer than declared, file shorter than its range); the connection was closed
    /// mid-body so the client sees a truncated message.
    ResponseAborted,
    /// Writing failed (peer reset, stalled peer, ...).
    WriteError(io::ErrorKind),
    /// Reading failed.
    ReadError(io::ErrorKind),
    /// HTTP/2: the connection was closed with GOAWAY `ENHANCE_YOUR_CALM` for abuse (rapid
    /// reset, floods); the text says which.
    Abuse(&'static str),
    /// HTTP/2: the client broke the protocol (connection error).
    Protocol(String),
    /// Not closed: idle, handed back to be kept without a task
    /// ([`serve_parkable`](crate::serve_parkable)).
    Parked,
}

/// Statistics of one finished connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnOutcome {
    /// Responses written to parsed requests (not counting rejections).
    pub requests: u64,
    /// Bytes read from the socket.
    pub bytes_read: u64,
    /// Bytes written to the socket (heads and bodies).
    pub bytes_written: u64,
    /// Why the connection ended.
    pub close: CloseReason,
}
