//! The HTTP/1.x connection loop: reads request heads, runs the handler, writes responses
//! through the single response path ([`write`]), and decides keep-alive, timeouts and
//! draining.

mod write;

use std::future::{Future, poll_fn};
use std::net::{Ipv4Addr, SocketAddr};
use std::rc::Rc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Buf;
use tokio::net::TcpStream;
use tokio::sync::watch;

use crate::body::{BodyError, RequestBody};
use crate::bufs;
use crate::client::Peer;
use crate::gone::{self, ClientGone};
use crate::handler::{CloseReason, ConnOutcome, Handler, REFUSAL_EXCERPT, Refusal, Sent};
use crate::io::{ByteStream, Io, Transport};
use crate::limits::Limits;
use crate::method::Method;
use crate::request::{BodyFraming, HeadStatus, Request, Version};
use crate::response::{HeadContext, Response};
use write::{WriteFailure, write_response};

/// Unread `Content-Length` body bytes the loop will read and discard to keep the
/// connection; more than this and the connection closes instead.
pub const DRAIN_LIMIT: u64 = 256 * 1024;
/// Longest time spent reading and discarding client bytes before closing after an
/// error response (so the kernel does not reset the connection under the response).
const LINGER: Duration = Duration::from_secs(2);
const LINGER_BYTES: usize = 256 * 1024;

enum Wait {
    Data,
    Closed(CloseReason),
    /// Idle for the park delay: hand the socket back (see [`serve_parkable`]).
    Park,
}

/// A keep-alive connection that went idle, handed back by [`serve_parkable`] to be kept
/// without a task until its next bytes arrive.
#[derive(Debug)]
pub struct Parked {
    /// The socket, out of the reactor (nonblocking, no unread byte buffered).
    pub stream: std::net::TcpStream,
    /// When its keep-alive idle timeout ends.
    pub idle_until: Instant,
}

/// How a [`serve_parkable`] connection ended.
#[derive(Debug)]
pub struct Served {
    /// Its statistics (up to the park, for a parked one).
    pub outcome: ConnOutcome,
    /// The socket, when it went idle and was handed back rather than closed.
    pub parked: Option<Parked>,
}

/// Serves HTTP/1.x on `stream` until it closes, returning what happened.
///
/// * Keep-alive and pipelining: requests already buffered are answered in order
///   without another read.
/// * `drain`: once it reads `true`, an idle connection closes at once; a request in
///   flight is completed and answered with `Connection: close`. A dropped sender
///   means "never drain".
/// * Timeouts from `limits`: idle keep-alive (silent close), head (408 + close),
///   stalled body reads and writes (close).
///
/// Between requests the returned future holds the connection's state and the wait for
/// its next bytes, and no buffer (see the `bufs` module).
pub fn serve_connection<H: Handler>(
    stream: TcpStream,
    peer: impl Into<Peer>,
    handler: Rc<H>,
    limits: Rc<Limits>,
    drain: watch::Receiver<bool>,
) -> impl Future<Output = ConnOutcome> {
    Outcome { served: serve_io(tcp_conn(stream, peer.into(), handler, limits, drain, false)) }
}

/// A plain TCP connection's state, set up here rather than in an `async` body, which would
/// keep its arguments beside the connection's state for the connection's whole life.
fn tcp_conn<H>(
    stream: TcpStream,
    peer: Peer,
    handler: Rc<H>,
    limits: Rc<Limits>,
    drain: watch::Receiver<bool>,
    parkable: bool,
) -> Conn<H> {
    let local =
        stream.local_addr().unwrap_or_else(|_| SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0)));
    // Responses leave in whole writes (or MSG_MORE + sendfile); Nagle would only delay
    // the last segment of each.
    let _ = stream.set_nodelay(true);
    let io = Io::new(Transport::Tcp(stream), limits.idle_timeout);
    Conn::new(io, peer, local, handler, limits, drain, parkable)
}

/// [`serve_connection`] for a server that keeps idle connections without a task: once the
/// connection has waited [`Limits::park_after`] for its next request (and neither drain nor
/// the idle timeout came first), the future ends with the socket in [`Served::parked`],
/// taken out of the reactor. The caller watches it for bytes and serves it again with this
/// function (its `requests` count starts over), or closes it at [`Parked::idle_until`].
/// Between requests of a busy connection nothing changes: a park costs a deregistration and
/// a registration, so only connections idle for `park_after` pay it.
pub fn serve_parkable<H: Handler>(
    stream: TcpStream,
    peer: impl Into<Peer>,
    handler: Rc<H>,
    limits: Rc<Limits>,
    drain: watch::Receiver<bool>,
) -> impl Future<Output = Served> {
    serve_io(tcp_conn(stream, peer.into(), handler, limits, drain, true))
}

pin_project_lite::pin_project! {
    /// [`serve_io`]'s future with only the outcome as output, stored in place.
    struct Outcome<F> {
        #[pin]
        served: F,
    }
}

impl<F: Future<Output = Served>> Future for Outcome<F> {
    type Output = ConnOutcome;
    fn poll(self: std::pin::Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<ConnOutcome> {
        self.project().served.poll(cx).map(|s| s.outcome)
    }
}

/// [`serve_connection`] over any byte stream, e.g. TLS over TCP (HTTPS/1.1): the same
/// codec, limits and smuggling defences; file bodies are read into pooled 16 KiB buffers
/// and written whole instead of by `sendfile(2)` (see the `io` module). `local` is the
/// address the underlying connection was accepted on.
pub async fn serve_stream<H: Handler, S: ByteStream + 'static>(
    stream: S,
    peer: impl Into<Peer>,
    local: SocketAddr,
    handler: Rc<H>,
    limits: Rc<Limits>,
    drain: watch::Receiver<bool>,
) -> ConnOutcome {
    let io = Io::new(Transport::Stream(Box::new(stream)), limits.idle_timeout);
    serve_io(Conn::new(io, peer.into(), local, handler, limits, drain, false)).await.outcome
}

/// Serves a TLS connection after its handshake: HTTP/2 when ALPN chose it (`h2`),
/// HTTP/1.1 otherwise, on whichever record layer the session has (the kernel's, with
/// `sendfile` for file bodies; reel's, sealing file bodies in place; rustls').
#[allow(clippy::too_many_arguments)]
pub async fn serve_session<H: Handler>(
    session: reel_tls::Session,
    h2: bool,
    peer: impl Into<Peer>,
    local: SocketAddr,
    handler: Rc<H>,
    limits: Rc<Limits>,
    settings: Rc<crate::H2Settings>,
    drain: watch::Receiver<bool>,
) -> ConnOutcome {
    use reel_tls::Session;
    let peer = peer.into();
    let transport = match (session, h2) {
        (Session::Kernel(k), true) => {
            return crate::serve_h2(k, peer, local, handler, limits, settings, drain).await;
        }
        (Session::Sealed(s), true) => {
            return crate::serve_h2(*s, peer, local, handler, limits, settings, drain).await;
        }
        (Session::Rustls(s), true) => {
            return crate::serve_h2(*s, peer, local, handler, limits, settings, drain).await;
        }
        (Session::Kernel(k), false) => Transport::Ktls(Box::new(k)),
        (Session::Sealed(s), false) => Transport::Sealed(s),
        (Session::Rustls(s), false) => Transport::Stream(s),
    };
    let io = Io::new(transport, limits.idle_timeout);
    serve_io(Conn::new(io, peer, local, handler, limits, drain, false)).await.outcome
}

/// The connection loop. `c` is captured and used in place (not moved into a local), so
/// the future stores it once: as an `async fn` it would be stored twice (the argument and
/// its binding), the size of a `Conn` more per connection.
#[allow(clippy::manual_async_fn)]
fn serve_io<H: Handler>(mut c: Conn<H>) -> impl Future<Output = Served> {
    async move {
        let mut parked = None;
        let close = loop {
            // Wait for the first byte of the next head, holding no buffer meanwhile (a
            // pipelined request already buffered is parsed at once).
            if c.io.rbuf.is_empty() {
                c.io.release_rbuf();
                // Written out here rather than as a function taking references: they
                // would be stored in the idle connection's future too. One timer: the
                // park delay instead when it comes before the idle timeout (the parked
                // socket is given the rest of the idle timeout).
                // Only `serve_parkable` sets `parkable`, always over TCP.
                let parking =
                    c.parkable && c.limits.park_after.is_some_and(|p| p < c.limits.idle_timeout);
                let idle = tokio::time::sleep(match c.limits.park_after {
                    Some(p) if parking => p,
                    _ => c.limits.idle_timeout,
                });
                tokio::pin!(idle);
                let wait = loop {
                    if c.drain_live && *c.drain.borrow_and_update() {
                        // A connection that has not sent its first request was opened to
                        // send one (it may have been accepted a moment before a drain or
                        // an upgrade's hand-over): closing it would fail that request, so
                        // it gets a short grace. Boxed: only a draining connection pays.
                        break if c.requests == 0 {
                            Box::pin(first_request_grace(&mut c.io)).await
                        } else {
                            drain_now(&mut c.io).await
                        };
                    }
                    tokio::select! {
                        r = poll_fn(|cx| c.io.poll_read(cx)) => break match r {
                            Ok(0) => Wait::Closed(CloseReason::PeerClosed),
                            Ok(_) => Wait::Data,
                            Err(e) => Wait::Closed(CloseReason::ReadError(e.kind())),
                        },
                        () = &mut idle => break if parking {
                            Wait::Park
                        } else {
                            Wait::Closed(CloseReason::IdleTimeout)
                        },
                        changed = c.drain.changed(), if c.drain_live => {
                            if changed.is_err() {
                                c.drain_live = false;
                            }
                        }
                    }
                };
                match wait {
                    Wait::Data => {}
                    Wait::Closed(r) => break r,
                    Wait::Park => match c.io.take_tcp().map(tokio::net::TcpStream::into_std) {
                        Some(Ok(stream)) => {
                            let idle_until = Instant::now() + idle_after_park(&c.limits);
                            parked = Some(Parked { stream, idle_until });
                            break CloseReason::Parked;
                        }
                        _ => break CloseReason::IdleTimeout,
                    },
                }
            }
            // Boxed: a request's future (its `Request`, the handler's future) exists only
            // while the request is in progress, so an idle connection's task stays small.
            if let Some(r) = Box::pin(one_request(&mut c)).await {
                break r;
            }
        };
        let io = &c.io;
        let outcome = ConnOutcome {
            requests: c.requests,
            bytes_read: io.bytes_read,
            bytes_written: io.bytes_written,
            close,
        };
        Served { outcome, parked }
    }
}

/// What is left of the idle timeout once a connection has waited `park_after`.
fn idle_after_park(limits: &Limits) -> Duration {
    limits.idle_timeout.saturating_sub(limits.park_after.unwrap_or_default())
}

/// A connection's state between requests.
struct Conn<H> {
    io: Io,
    handler: Rc<H>,
    limits: Rc<Limits>,
    peer: ConnPeer,
    local: SocketAddr,
    drain: watch::Receiver<bool>,
    /// `false` once the drain sender is gone ("never drain").
    drain_live: bool,
    requests: u64,
    /// Served by [`serve_parkable`]: an idle connection may be handed back.
    parkable: bool,
}

/// A connection's [`Peer`], as small as a socket address when its client is its socket's
/// peer: what an idle connection holds does not grow for the clients a balancer names.
#[derive(Debug)]
enum ConnPeer {
    Direct(SocketAddr),
    Named(Box<Peer>),
}

impl ConnPeer {
    fn new(p: Peer) -> ConnPeer {
        if p.client == p.socket { ConnPeer::Direct(p.socket) } else { ConnPeer::Named(Box::new(p)) }
    }

    fn get(&self) -> Peer {
        match self {
            ConnPeer::Direct(a) => Peer::from(*a),
            ConnPeer::Named(p) => **p,
        }
    }
}

impl<H> Conn<H> {
    fn new(
        io: Io,
        peer: Peer,
        local: SocketAddr,
        handler: Rc<H>,
        limits: Rc<Limits>,
        drain: watch::Receiver<bool>,
        parkable: bool,
    ) -> Self {
        let peer = ConnPeer::new(peer);
        Conn { io, handler, limits, peer, local, drain, drain_live: true, requests: 0, parkable }
    }
}

/// Reads, answers and reports one request whose first bytes are in the read buffer;
/// `Some` when the connection must close.
async fn one_request<H: Handler>(c: &mut Conn<H>) -> Option<CloseReason> {
    let Conn { io, handler, limits, peer, local, drain, drain_live, requests, .. } = c;
    let (handler, limits, peer) = (&**handler, &**limits, peer.get());
    // Taken from the worker's free list by the first write, given back when dropped.
    let mut wbuf = WriteBuf(Vec::new());
    let wbuf = &mut wbuf.0;
    // Its head buffers come from the worker's free list and go back when it is dropped.
    let mut req = Request::new(peer, *local);
    let req = &mut req;
    // TLS: the head's timer starts with the first byte of the record that brought its
    // first bytes (a client cannot stretch the head by sending that record slowly).
    let head_started = io.take_record_since().unwrap_or_else(Instant::now);
    let deadline = tokio::time::Instant::from_std(head_started) + limits.header_timeout;
    let head_len = loop {
        match req.parse_head(&io.rbuf, limits) {
            Ok(HeadStatus::Complete(n)) => break n,
            Ok(HeadStatus::Partial) => {}
            Err(e) => {
                tracing::debug!(peer = %peer.client, status = e.status, reason = e.reason, "request refused");
                let refused = (e.status, e.reason, head_started);
                refuse(io, wbuf, handler, peer, refused).await;
                return Some(CloseReason::Rejected(e.status));
            }
        }
        match tokio::time::timeout_at(deadline, io.read_more()).await {
            Err(_) => {
                let refused = (408, "header timeout", head_started);
                refuse(io, wbuf, handler, peer, refused).await;
                return Some(CloseReason::HeaderTimeout);
            }
            Ok(Ok(0)) => return Some(CloseReason::PeerClosedMidRequest),
            Ok(Ok(_)) => {}
            Ok(Err(e)) => return Some(CloseReason::ReadError(e.kind())),
        }
    };
    io.rbuf.advance(head_len);
    req.apply_trusted(limits);
    let started = Instant::now();
    let written_before = io.bytes_written;

    let watch = ClientGone::for_request(io, req.body_framing() != BodyFraming::None);
    let mut body = RequestBody::new(
        io,
        req.body_framing(),
        req.expects_continue(),
        limits.max_body_bytes,
        limits.max_header_bytes,
        limits.body_timeout,
    );
    if req.version() == Version::Http11 {
        // RFC 9110 section 15.2: never a 1xx to an HTTP/1.0 client.
        body.allow_interims();
    }
    // Boxed: the handler's future exists only while it runs, so the connection's own
    // future (what an idle connection costs) does not carry its size.
    let work = Box::pin(handler.handle(req, &mut body));
    let mut resp = match watch {
        None => work.await,
        // A client that leaves while its request waits (a slow miss) ends the work, as a
        // reset stream does on HTTP/2: what the handler waited on no longer has a viewer.
        // `biased`: the work goes first, so an answer ready at once arms no timer.
        Some(watch) => tokio::select! {
            biased;
            resp = work => resp,
            () = watch.wait(gone::CHECK_EVERY) => {
                handler.on_response(req, &Sent::nothing(started.elapsed(), 0));
                return Some(CloseReason::PeerClosedMidRequest);
            }
        },
    };

    // Decide what happens to the rest of the body before answering, so a client
    // still sending its body is never blocked against our response.
    let mut must_close = false;
    let mut body_failure = None;
    let mut failed = body.error().cloned();
    if failed.is_none() && !body.is_complete() {
        let small = body.length_remaining().is_some_and(|n| n <= DRAIN_LIMIT);
        if body.continue_pending() || !small {
            // The client may or may not send the rest; only closing is safe.
            must_close = true;
            body_failure = Some(BodyError::Incomplete);
        } else if let Err(e) = body.discard().await {
            // The handler answered without the body (a hit, an origin that did not wait
            // for it): a body that then stalls is refused as if the handler had read it.
            failed = Some(e);
        }
    }
    if let Some(err) = failed {
        must_close = true;
        // The refusal replaces the handler's answer, tag included: it is the codec's own
        // response (a local one), never the cache's hit or miss.
        resp = match err.status() {
            Some(status) => Response::error(status),
            None => {
                handler.on_response(req, &Sent::nothing(started.elapsed(), resp.tag));
                return Some(CloseReason::Body(err));
            }
        };
        body_failure = Some(err);
    }

    let draining = *drain_live && *drain.borrow();
    let keep_alive = req.keep_alive() && !must_close && !draining && handler.keep_alive();
    let ctx = HeadContext {
        version: req.version(),
        head_request: *req.method() == Method::Head,
        keep_alive,
    };
    let tag = resp.tag;
    let first_byte = started.elapsed();
    let result = write_response(io, wbuf, resp, &ctx).await;
    *requests += 1;
    let (status, write_result) = result;
    handler.on_response(
        req,
        &Sent {
            status,
            bytes: io.bytes_written - written_before,
            first_byte: Some(first_byte),
            total: started.elapsed(),
            tag,
        },
    );
    match write_result {
        Ok(true) => {}
        Ok(false) => {
            let reason = match (body_failure, draining) {
                (Some(BodyError::Incomplete), _) => CloseReason::UnreadBody,
                (Some(e), _) => CloseReason::Body(e),
                (None, true) => CloseReason::Drain,
                (None, false) => CloseReason::NotKeepAlive,
            };
            linger(io).await;
            return Some(reason);
        }
        Err(WriteFailure::Aborted) => return Some(CloseReason::ResponseAborted),
        Err(WriteFailure::Io(kind)) => return Some(CloseReason::WriteError(kind)),
    }
    None
}

/// A request's response-head buffer: given back to the worker's free list when dropped.
struct WriteBuf(Vec<u8>);

impl Drop for WriteBuf {
    fn drop(&mut self) {
        if self.0.capacity() > 0 {
            bufs::give(std::mem::take(&mut self.0));
        }
    }
}

/// How long a new connection may take to send its first request once draining began.
const FIRST_REQUEST_GRACE: Duration = Duration::from_secs(1);

/// Drain was asked before a new connection's first request: waits up to
/// [`FIRST_REQUEST_GRACE`] for its first bytes (a silent one is closed when it passes).
async fn first_request_grace(io: &mut Io) -> Wait {
    match tokio::time::timeout(FIRST_REQUEST_GRACE, poll_fn(|cx| io.poll_read(cx))).await {
        Ok(Ok(n)) if n > 0 => Wait::Data,
        _ => Wait::Closed(CloseReason::Drain),
    }
}

/// Drain was asked while the connection is idle. A request the client already sent is
/// answered (with `Connection: close`) rather than dropped; only a truly idle connection
/// closes at once. The yield lets the reactor poll epoll so readiness for bytes already in
/// the kernel is known.
async fn drain_now(io: &mut Io) -> Wait {
    tokio::task::yield_now().await;
    match io.try_read_now() {
        Ok(n) if n > 0 => Wait::Data,
        _ => Wait::Closed(CloseReason::Drain),
    }
}

/// Answers a refused head (`status`, `reason`, the head's first byte at `started`) with
/// `Connection: close`, reports it to the handler, then lingers.
async fn refuse<H: Handler>(
    io: &mut Io,
    wbuf: &mut Vec<u8>,
    handler: &H,
    peer: Peer,
    (status, reason, started): (u16, &'static str, Instant),
) {
    let line = request_line_excerpt(&io.rbuf);
    let before = io.bytes_written;
    let ctx = HeadContext { version: Version::Http11, head_request: false, keep_alive: false };
    let (_, r) = write_response(io, wbuf, Response::error(status), &ctx).await;
    handler.on_reject(&Refusal {
        peer: peer.client,
        socket_peer: peer.socket,
        status,
        reason,
        request_line: &io.rbuf[line],
        bytes: io.bytes_written - before,
        elapsed: started.elapsed(),
    });
    if r.is_ok() {
        linger(io).await;
    }
}

/// Where the request line of `buf` lies: after the empty lines a client may send first
/// (RFC 9112 section 2.2), up to its line ending or, when none arrived, to the end of what
/// was received; at most [`REFUSAL_EXCERPT`] bytes.
fn request_line_excerpt(buf: &[u8]) -> std::ops::Range<usize> {
    let start = buf.iter().position(|&b| b != b'\r' && b != b'\n').unwrap_or(buf.len());
    let rest = &buf[start..];
    let mut len = memchr::memchr(b'\n', rest).unwrap_or(rest.len());
    if len > 0 && rest[len - 1] == b'\r' {
        len -= 1;
    }
    start..start + len.min(REFUSAL_EXCERPT)
}

/// Half-closes and reads (discarding) until the client closes, for at most [`LINGER`]:
/// closing a socket with unread input makes the kernel send RST, which can destroy the
/// response before the client read it.
async fn linger(io: &mut Io) {
    if io.shutdown().await.is_err() {
        return;
    }
    let _ = tokio::time::timeout(LINGER, async {
        let mut total = 0usize;
        loop {
            io.rbuf.clear();
            match io.read_more().await {
                Ok(0) | Err(_) => return,
                Ok(n) => {
                    total += n;
                    if total > LINGER_BYTES {
                        return;
                    }
                }
            }
        }
    })
    .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A connection whose client is its socket's peer holds a socket address, no more.
    #[test]
    fn a_connection_peer_is_one_socket_address() {
        assert_eq!(std::mem::size_of::<ConnPeer>(), std::mem::size_of::<SocketAddr>());
        let (a, b) = ("192.0.2.1:1".parse().unwrap(), "198.51.100.1:2".parse().unwrap());
        assert_eq!(ConnPeer::new(Peer::from(a)).get(), Peer::from(a));
        let named = Peer { client: a, socket: b };
        assert_eq!(ConnPeer::new(named).get(), named);
    }

    #[test]
    fn request_line_excerpts() {
        let ex = |b: &[u8]| b[request_line_excerpt(b)].to_vec();
        assert_eq!(ex(b"GET / HTTP/1.1\r\nHost: h\r\n"), b"GET / HTTP/1.1");
        assert_eq!(ex(b"\r\n\nGET /a HTTP/1.0\nX: y"), b"GET /a HTTP/1.0");
        assert_eq!(ex(b"GET /partial"), b"GET /partial");
        assert_eq!(ex(b"GET /cr\r"), b"GET /cr");
        assert_eq!(ex(b"\r\n"), b"");
        assert_eq!(ex(b""), b"");
        assert_eq!(ex(&[b'a'; 2000]).len(), REFUSAL_EXCERPT);
    }
}
