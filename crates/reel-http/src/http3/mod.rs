//! HTTP/3 to clients (RFC 9114) on `h3` over a `quinn` connection, in front of the same
//! [`Handler`] as HTTP/1.1 and HTTP/2: each request stream's fields are rewritten as an
//! HTTP/1.1 head and parsed by the same strict parser (the HTTP/2 head module, whose rules
//! RFC 9114 section 4.2 repeats), its body is a [`RequestBody`], and the handler's
//! [`Response`] goes out as DATA frames (see [`send`]).
//!
//! # Defences
//! * **Streams**: the transport bounds concurrent request streams (quinn's
//!   `max_concurrent_bidi_streams`, set by the endpoint); a head larger than
//!   `Limits::max_header_bytes` is refused by `h3` (`max_field_section_size`) and the
//!   same limits as HTTP/1.1 apply to the rewritten head (414, 431, 400).
//! * **QPACK**: `h3` decodes field sections without a dynamic table (it announces a
//!   table capacity of 0), so a client cannot make the server hold table state.
//! * **Malformed heads**: what RFC 9114 sections 4.2 and 4.3 call malformed and `h3`
//!   lets through (repeated or late pseudo-headers, a scheme other than `https`,
//!   connection-specific fields) is a stream error `H3_MESSAGE_ERROR`, as `h2` resets
//!   it (see [`fields`]); such streams count with the client's resets.
//! * **Rapid reset**: streams the client resets or stops (a reset request, a stopped
//!   response) are counted per connection per second; past
//!   [`H3Settings::max_resets_per_second`] the connection is closed with
//!   `H3_EXCESSIVE_LOAD`.
//! * **Slow readers**: a response whose bytes the transport does not take for the send
//!   timeout ([`Limits::send_timeout`]) is reset, and its connection closed: the
//!   transport's send window (shared by the connection's streams) bounds what a
//!   connection holds unacknowledged, and a client that leaves it full that long (one that
//!   stopped acknowledging) gives it all back and sends no more requests on it. File bytes
//!   are read into the worker's pooled buffers one batch at a time and copied into the
//!   transport before the next batch.
//! * **Idle connections and drain**: with no open stream for the idle timeout, or when
//!   drain is requested or the handler ends keep-alive, the connection sends GOAWAY,
//!   finishes the streams it has, and closes (RFC 9114 section 5.2).

mod fields;
mod huffman;
mod send;

use std::cell::Cell;
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::{Duration, Instant};

use h3::error::{Code, ConnectionError, StreamError};
use h3::proto::frame::Frame;
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::body::{self, BodyError, RequestBody};
use crate::exchange::{self, Answering};
use crate::handler::{CloseReason, ConnOutcome, Handler};
use crate::http2::head;
use crate::limits::Limits;
use crate::request::{Request, Version};
use crate::streams::{ActiveGuard, Streams};
pub use send::H3Chunk;

/// HTTP/3 defences of a listener that the transport does not hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct H3Settings {
    /// Streams the client may reset or stop per second before the connection is closed
    /// with `H3_EXCESSIVE_LOAD`. Default 100 (as HTTP/2's).
    pub max_resets_per_second: u32,
}

impl Default for H3Settings {
    fn default() -> Self {
        H3Settings { max_resets_per_second: 100 }
    }
}

/// How long a connection closing on its own (idle, abuse, drain) may take for its
/// streams in flight before it is closed under them.
const CLOSE_GRACE: Duration = Duration::from_secs(2);

/// The request streams of one connection.
type H3Conn = h3::server::Connection<h3_quinn::Connection, H3Chunk>;
type Resolver = h3::server::RequestResolver<h3_quinn::Connection, H3Chunk>;
type BidiStream = h3::server::RequestStream<h3_quinn::BidiStream<H3Chunk>, H3Chunk>;

fn close_reason(e: &ConnectionError) -> CloseReason {
    if e.is_h3_no_error() {
        return CloseReason::PeerClosed;
    }
    match e {
        ConnectionError::Timeout => CloseReason::IdleTimeout,
        ConnectionError::Remote { .. } => CloseReason::PeerClosed,
        other => CloseReason::Protocol(other.to_string()),
    }
}

/// Serves HTTP/3 on an established QUIC connection until it closes. `local` is the
/// address the listener is bound to. `drain` as for
/// [`serve_connection`](crate::serve_connection): GOAWAY, then close when the streams in
/// flight are done. Byte counts are the connection's UDP payload bytes.
pub async fn serve_h3<H: Handler>(
    conn: quinn::Connection,
    local: SocketAddr,
    handler: Rc<H>,
    limits: Rc<Limits>,
    settings: Rc<H3Settings>,
    mut drain: watch::Receiver<bool>,
) -> ConnOutcome {
    let peer = conn.remote_address();
    let quic = conn.clone();
    let outcome = |requests, close| {
        let s = quic.stats();
        ConnOutcome { requests, bytes_read: s.udp_rx.bytes, bytes_written: s.udp_tx.bytes, close }
    };
    let mut builder = h3::server::builder();
    builder
        .max_field_section_size(u64::try_from(limits.max_header_bytes).unwrap_or(u64::MAX))
        .send_grease(false);
    let build = builder.build::<_, H3Chunk>(h3_quinn::Connection::new(conn.clone()));
    let mut h3c: H3Conn = match tokio::time::timeout(limits.header_timeout, build).await {
        Err(_) => {
            conn.close(code(Code::H3_NO_ERROR), b"");
            return outcome(0, CloseReason::HeaderTimeout);
        }
        Ok(Err(e)) => return outcome(0, close_reason(&e)),
        Ok(Ok(c)) => c,
    };
    let shared = Rc::new(Streams::new(settings.max_resets_per_second));
    // Set by a stream whose response the transport took nothing of for the send timeout.
    let stalled = Rc::new(Cell::new(false));
    let mut tasks = JoinSet::new();
    let mut drain_live = true;
    let mut accepting = true;
    // Why the connection is closing, and when it is closed regardless: a drain lets the
    // streams in flight finish (the shutdown deadline bounds them), an idle connection or
    // one the client said goodbye to gets a short grace.
    let mut closing: Option<(CloseReason, Option<tokio::time::Instant>)> = None;
    let grace = || Some(tokio::time::Instant::now() + CLOSE_GRACE);
    let close = loop {
        // Finished streams leave the set here (a JoinSet keeps each task until joined).
        while let Some(done) = tasks.try_join_next() {
            if let Err(e) = done
                && e.is_panic()
            {
                tracing::error!(%peer, error = %e, "an HTTP/3 stream's task panicked");
            }
        }
        if stalled.get() {
            // What the transport holds for it goes with the connection, at once: the
            // client takes nothing, so there is nothing to wait for.
            tracing::debug!(%peer, "HTTP/3 client took nothing for the send timeout; closing");
            conn.close(code(Code::H3_EXCESSIVE_LOAD), b"send timeout");
            drop(tasks);
            return outcome(
                shared.requests.get(),
                CloseReason::WriteError(std::io::ErrorKind::TimedOut),
            );
        }
        if closing.is_none() && (!handler.keep_alive() || (drain_live && *drain.borrow())) {
            let why =
                if handler.keep_alive() { CloseReason::Drain } else { CloseReason::NotKeepAlive };
            // GOAWAY names the first stream not served: every stream accepted so far is.
            let _ = h3c.shutdown(1).await;
            closing = Some((why, None));
        }
        let idle_at = tokio::time::Instant::from_std(shared.idle_since() + limits.idle_timeout);
        let idle = shared.active() == 0 && closing.is_none();
        if closing.is_some() && shared.active() == 0 {
            break closing.map_or(CloseReason::Drain, |c| c.0);
        }
        let deadline = closing.as_ref().and_then(|c| c.1);
        tokio::select! {
            accepted = h3c.accept(), if accepting => match accepted {
                Ok(Some(resolver)) => {
                    let task = stream_task(
                        handler.clone(),
                        shared.clone(),
                        stalled.clone(),
                        resolver,
                        limits.clone(),
                        peer,
                        local,
                    );
                    tasks.spawn_local(task);
                }
                // No more requests (GOAWAY either way): the streams in flight finish.
                Ok(None) => {
                    accepting = false;
                    if closing.is_none() {
                        closing = Some((CloseReason::PeerClosed, grace()));
                    }
                }
                Err(e) => break closing.map_or_else(|| close_reason(&e), |c| c.0),
            },
            changed = drain.changed(), if drain_live && closing.is_none() => {
                if changed.is_err() {
                    drain_live = false;
                }
            }
            () = tokio::time::sleep_until(idle_at), if idle => {
                let _ = h3c.shutdown(1).await;
                closing = Some((CloseReason::IdleTimeout, grace()));
            }
            () = shared.abuse.notified(), if !matches!(closing, Some((CloseReason::Abuse(_), _))) => {
                tracing::info!(%peer, "HTTP/3 client resets too many streams; closing");
                conn.close(code(Code::H3_EXCESSIVE_LOAD), b"too many resets");
                break CloseReason::Abuse("rapid reset");
            }
            () = shared.changed.notified() => {}
            () = sleep_until_opt(deadline) => {
                break closing.map_or(CloseReason::IdleTimeout, |c| c.0);
            }
        }
    };
    // Streams still running cannot be answered any more: the JoinSet aborts them.
    drop(tasks);
    if !matches!(close, CloseReason::Abuse(_)) {
        // A CONNECTION_CLOSE discards what the transport has not sent yet: the last
        // responses' tails are given time to be delivered (the client closes once it has
        // them, after our GOAWAY) before the connection is closed under them.
        let until = shared.idle_since() + CLOSE_GRACE;
        let _ = tokio::time::timeout_at(until.into(), conn.closed()).await;
    }
    conn.close(code(Code::H3_NO_ERROR), b"");
    outcome(shared.requests.get(), close)
}

/// An HTTP/3 error code as a QUIC application close code.
fn code(c: Code) -> quinn::VarInt {
    quinn::VarInt::from_u64(c.value()).unwrap_or(quinn::VarInt::from_u32(0x100))
}

async fn sleep_until_opt(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Whether a stream error means the client reset or stopped the stream.
fn is_client_reset(e: &StreamError) -> bool {
    matches!(e, StreamError::RemoteTerminate { .. })
}

/// Answers one request stream.
async fn stream_task<H: Handler>(
    handler: Rc<H>,
    shared: Rc<Streams>,
    stalled: Rc<Cell<bool>>,
    resolver: Resolver,
    limits: Rc<Limits>,
    peer: SocketAddr,
    local: SocketAddr,
) {
    let _active = ActiveGuard::new(&shared);
    let started = Instant::now();
    let (request, mut stream, seen) =
        match tokio::time::timeout(limits.header_timeout, resolve(resolver)).await {
            Err(_) => return,
            Ok(Err(e)) => {
                if is_client_reset(&e) {
                    shared.note_reset();
                }
                tracing::debug!(%peer, error = %e, "HTTP/3 request head failed");
                return;
            }
            Ok(Ok(r)) => r,
        };
    let (parts, ()) = request.into_parts();
    if let Err(m) = seen.and_then(|seen| fields::check(&parts, &seen)) {
        // Malformed (RFC 9114 section 4.1.2): a stream error, as `h3` answers what it
        // finds malformed itself; counted with the resets, as `h2` bounds the streams it
        // has to reset.
        tracing::debug!(%peer, reason = m.0, "malformed HTTP/3 request");
        stream.stop_stream(Code::H3_MESSAGE_ERROR);
        stream.stop_sending(Code::H3_MESSAGE_ERROR);
        shared.note_reset();
        return;
    }
    let (mut send, mut recv) = stream.split();
    let mut req = Request::new(peer, local);
    let mut scratch = Vec::new();
    // A stream's end is not known with its head. A request without a declared length is
    // taken as bodiless when its method defines no body semantics (GET, HEAD: what the
    // client still sends is not read); for any other method (an extension one such as
    // `get` included) the first read tells, as END_STREAM on HTTP/2's HEADERS does.
    let declared = parts.headers.contains_key(http::header::CONTENT_LENGTH);
    let bodiless_method = matches!(parts.method, http::Method::GET | http::Method::HEAD);
    let mut ahead = None;
    let no_body = if declared {
        false
    } else if bodiless_method {
        true
    } else {
        let stall = limits.idle_timeout.min(limits.body_timeout);
        let first = match tokio::time::timeout(stall, body::h3_read(&mut recv)).await {
            Err(_) => Err(BodyError::Timeout),
            Ok(r) => r,
        };
        let ended = matches!(first, Ok(None));
        ahead = (!ended).then_some(first);
        ended
    };
    if let Err(e) =
        head::request_from_parts(&mut req, &parts, no_body, &mut scratch, &limits, Version::Http3)
    {
        tracing::debug!(%peer, status = e.status, reason = e.reason, "HTTP/3 request refused");
        let (h, body) = exchange::refusal(e.status);
        let mut bytes = 0;
        if send.send_response(h.head).await.is_ok() {
            bytes = h.head_bytes + body.len() as u64;
            let _ = send.send_data(H3Chunk::Bytes(body)).await;
            let _ = send.finish().await;
        }
        exchange::report_refusal(&*handler, peer.into(), &parts, "HTTP/3", &e, bytes, started);
        return;
    }
    // A QUIC datagram carries no PROXY header: the UDP peer is the client, unless it is a
    // trusted proxy that names one.
    req.apply_trusted(&limits);
    drop(scratch);
    if no_body && bodiless_method {
        // Whatever the client still sends on a GET or HEAD is not read.
        recv.stop_sending(Code::H3_NO_ERROR);
    }
    let mut body = RequestBody::h3(
        &mut recv,
        no_body,
        ahead,
        limits.max_body_bytes,
        limits.idle_timeout,
        limits.body_timeout,
    );
    // Boxed: a handler's future can be large; a plain heap block is reused.
    let resp = Box::pin(handler.handle(&req, &mut body)).await;
    let reset = || send.stop_stream(Code::H3_REQUEST_INCOMPLETE);
    let Some(resp) = exchange::final_response(&*handler, &req, body.error(), resp, started, reset)
    else {
        return;
    };
    let (h, mut answer) = Answering::head(&resp, &req, started);
    let stall = limits.send_timeout.min(limits.idle_timeout);
    let result = match tokio::time::timeout(stall, send.send_response(h.head)).await {
        Err(_) => Err(send::SendFail::Stalled),
        Ok(Err(e)) => Err(send::SendFail::Peer(e)),
        Ok(Ok(())) if !h.has_body => Ok(0),
        Ok(Ok(())) => send::send_body(&mut send, resp.body, h.length, stall).await,
    };
    let result = match result {
        Ok(n) => match tokio::time::timeout(stall, send.finish()).await {
            Ok(Ok(())) => Ok(n),
            Ok(Err(e)) => Err(send::SendFail::Peer(e)),
            Err(_) => Err(send::SendFail::Stalled),
        },
        Err(e) => Err(e),
    };
    match result {
        Ok(n) => answer.bytes += n,
        Err(send::SendFail::Peer(e)) => {
            if is_client_reset(&e) {
                shared.note_reset();
            }
        }
        Err(f) => {
            tracing::debug!(%peer, failure = ?f, "HTTP/3 response not completed; resetting");
            let code = match f {
                send::SendFail::Stalled => Code::H3_REQUEST_CANCELLED,
                _ => Code::H3_INTERNAL_ERROR,
            };
            send.stop_stream(code);
            if matches!(f, send::SendFail::Stalled) {
                stalled.set(true);
                shared.changed.notify_one();
            }
        }
    }
    answer.report(&*handler, &shared, &req);
}

/// Reads a request stream's head as `h3` does (`RequestResolver::resolve_request`), and
/// the pseudo-headers of its QPACK field section, which the decoded request no longer
/// shows ([`fields::scan`]).
async fn resolve(
    mut resolver: Resolver,
) -> Result<(http::Request<()>, BidiStream, Result<fields::Pseudos, fields::Malformed>), StreamError>
{
    let frame = std::future::poll_fn(|cx| resolver.frame_stream.poll_next(cx)).await;
    let seen = match &frame {
        Ok(Some(Frame::Headers(section))) => fields::scan(section),
        // `accept_with_frame` fails for anything but a HEADERS frame.
        _ => Err(fields::Malformed("no HEADERS frame")),
    };
    let (request, stream) = resolver.accept_with_frame(frame)?.resolve().await?;
    Ok((request, stream, seen))
}
