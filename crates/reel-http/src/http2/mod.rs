//! HTTP/2 to clients (RFC 9113) on the `h2` crate, in front of the same [`Handler`] as
//! the HTTP/1.1 codec: each stream's head is parsed by the HTTP/1.1 parser (see
//! [`head`]), its body is a [`RequestBody`], and the handler's [`Response`] is sent with
//! flow control from memory or from pooled file reads (see [`send`]), one response after
//! the other in request order or by RFC 9218 priority (see [`order`]).
//!
//! # Defences
//! * **Concurrency and heads**: at most [`H2Settings::max_concurrent_streams`] open
//!   streams; header lists larger than `Limits::max_header_bytes` are refused, and
//!   the same limits as HTTP/1.1 apply to the rewritten head (414, 431, 400).
//! * **Rapid reset** (CVE-2023-44487): streams the client resets are counted per
//!   connection per second; past [`H2Settings::max_resets_per_second`] the connection
//!   gets GOAWAY `ENHANCE_YOUR_CALM` and closes. A stream reset while its handler runs
//!   stops that handler at once. Independently, `h2` closes a connection that resets
//!   more than 20 streams before they are accepted, or makes the server reset too many.
//! * **CONTINUATION flood** (CVE-2024-27316): `h2` bounds the CONTINUATION frames of one
//!   header block by the header list size and closes the connection past it.
//! * **PING and SETTINGS floods**: `h2` acknowledges each before reading further frames
//!   and keeps at most one acknowledgement pending, so a flood costs no memory and stops
//!   being read as soon as the client stops reading our answers; such a connection has
//!   no open stream, so it is closed at the idle timeout.
//! * **Slow readers**: a stream waits for flow-control capacity, for its body budget or
//!   for a pooled buffer at most the send timeout ([`Limits::send_timeout`]), then is
//!   reset, which gives back the buffers queued for it; body bytes buffered for a stream,
//!   a connection and a client address are bounded ([`H2Settings::stream_buffer`],
//!   [`H2Settings::connection_buffer`], [`crate::pool::CLIENT_BUFFERS`] plus one batch
//!   per connection, so connections of an address that stopped reading cannot hold back
//!   one of the same address that reads).
//! * **Idle connections and drain**: with no open stream for the idle timeout, or when
//!   drain is requested, the connection sends GOAWAY, finishes the streams it has, and
//!   closes (RFC 9113 section 6.8).

pub(crate) mod head;
mod order;
mod send;

use std::cell::Cell;
use std::future::poll_fn;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use h2::Reason;
use h2::server::SendResponse;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::{Semaphore, watch};
use tokio::task::JoinSet;

use crate::body::RequestBody;
use crate::client::Peer;
use crate::exchange::{self, Answering};
use crate::handler::{CloseReason, ConnOutcome, Handler, Sent};
use crate::io::ByteStream;
use crate::limits::Limits;
use crate::pool::BUF_SIZE;
use crate::request::Request;
use crate::streams::{ActiveGuard, Streams};
use order::{Place, Priority, SendOrder};
use send::{Budget, H2Chunk, SendFail};

/// HTTP/2 settings and defences of a listener.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct H2Settings {
    /// SETTINGS_MAX_CONCURRENT_STREAMS we announce. Default 128.
    pub max_concurrent_streams: u32,
    /// Our receive window per stream (request bodies; RFC 9113 section 6.9.2).
    /// Default 256 KiB.
    pub initial_stream_window: u32,
    /// Our receive window for the whole connection. Default 1 MiB.
    pub initial_connection_window: u32,
    /// Streams the client may reset per second before the connection is closed with
    /// `ENHANCE_YOUR_CALM`. Default 100.
    pub max_resets_per_second: u32,
    /// Response body bytes buffered per stream (pooled file buffers, and memory bytes
    /// handed to `h2`), a bit over one flow-control window of a segment. Default 256 KiB.
    pub stream_buffer: usize,
    /// Pooled response body bytes buffered per connection. Default 1 MiB.
    pub connection_buffer: usize,
}

impl Default for H2Settings {
    fn default() -> Self {
        H2Settings {
            max_concurrent_streams: 128,
            initial_stream_window: 256 * 1024,
            initial_connection_window: 1024 * 1024,
            max_resets_per_second: 100,
            stream_buffer: 256 * 1024,
            connection_buffer: 1024 * 1024,
        }
    }
}

/// How long a connection closing on its own (idle, abuse) may take to flush its GOAWAY.
const CLOSE_GRACE: Duration = Duration::from_secs(2);

/// State the connection loop shares with its stream tasks.
struct ConnShared {
    streams: Streams,
    conn_budget: Arc<Semaphore>,
    /// The client address's share of the worker's pooled buffers.
    client_budget: Arc<Semaphore>,
    /// The connection's own batch of pooled buffers beyond the address's share.
    lane: Arc<Semaphore>,
    /// The order in which the streams' bodies take the connection.
    order: Rc<SendOrder>,
}

impl AsRef<Streams> for ConnShared {
    fn as_ref(&self) -> &Streams {
        &self.streams
    }
}

/// Counts the bytes that cross the connection.
struct Counted<S> {
    inner: S,
    read: Rc<Cell<u64>>,
    written: Rc<Cell<u64>>,
}

impl<S: AsyncRead + Unpin> AsyncRead for Counted<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let r = Pin::new(&mut self.inner).poll_read(cx, buf);
        let n = (buf.filled().len() - before) as u64;
        self.read.set(self.read.get() + n);
        r
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Counted<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = r {
            self.written.set(self.written.get() + n as u64);
        }
        r
    }
    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        if let Poll::Ready(Ok(n)) = r {
            self.written.set(self.written.get() + n as u64);
        }
        r
    }
    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

fn close_reason(e: &h2::Error) -> CloseReason {
    if e.reason() == Some(Reason::ENHANCE_YOUR_CALM) {
        return CloseReason::Abuse("h2 flood or reset limit");
    }
    if let Some(io) = e.get_io() {
        return match io.kind() {
            io::ErrorKind::UnexpectedEof | io::ErrorKind::ConnectionReset => {
                CloseReason::PeerClosed
            }
            kind => CloseReason::ReadError(kind),
        };
    }
    if e.is_go_away() && e.is_remote() && e.reason() == Some(Reason::NO_ERROR) {
        return CloseReason::PeerClosed;
    }
    CloseReason::Protocol(e.to_string())
}

/// Serves HTTP/2 on `stream` (after ALPN chose `h2`) until it closes. `local` is the
/// address the underlying connection was accepted on. `drain` as for
/// [`serve_connection`](crate::serve_connection): GOAWAY, then close when the streams
/// in flight are done.
pub async fn serve_h2<H: Handler, S: ByteStream + 'static>(
    stream: S,
    peer: impl Into<Peer>,
    local: SocketAddr,
    handler: Rc<H>,
    limits: Rc<Limits>,
    settings: Rc<H2Settings>,
    mut drain: watch::Receiver<bool>,
) -> ConnOutcome {
    let peer: Peer = peer.into();
    let (read, written) = (Rc::new(Cell::new(0)), Rc::new(Cell::new(0)));
    let io = Counted { inner: stream, read: read.clone(), written: written.clone() };
    let outcome = |requests, close| ConnOutcome {
        requests,
        bytes_read: read.get(),
        bytes_written: written.get(),
        close,
    };
    let mut builder = h2::server::Builder::new();
    builder
        .max_concurrent_streams(settings.max_concurrent_streams)
        .max_header_list_size(u32::try_from(limits.max_header_bytes).unwrap_or(u32::MAX))
        .initial_window_size(settings.initial_stream_window)
        .initial_connection_window_size(settings.initial_connection_window)
        .max_send_buffer_size(settings.stream_buffer.min(u32::MAX as usize))
        .max_pending_accept_reset_streams(20)
        .max_local_error_reset_streams(Some(256));
    let handshake = builder.handshake::<_, H2Chunk>(io);
    let mut conn = match tokio::time::timeout(limits.header_timeout, handshake).await {
        Err(_) => return outcome(0, CloseReason::HeaderTimeout),
        Ok(Err(e)) => return outcome(0, close_reason(&e)),
        Ok(Ok(c)) => c,
    };
    let conn_buffers = (settings.connection_buffer / BUF_SIZE).max(1);
    let stall = limits.send_timeout.min(limits.idle_timeout);
    // Bytes written when the connection last made progress, and when.
    let mut progress = (written.get(), tokio::time::Instant::now());
    let shared = Rc::new(ConnShared {
        streams: Streams::new(settings.max_resets_per_second),
        conn_budget: Arc::new(Semaphore::new(conn_buffers)),
        client_budget: crate::pool::client_budget(peer.client.ip()),
        lane: Arc::new(Semaphore::new(send::BATCH)),
        order: Rc::new(SendOrder::default()),
    });
    let mut tasks = JoinSet::new();
    let mut drain_live = true;
    let mut closing: Option<(CloseReason, Option<tokio::time::Instant>)> = None;
    if *drain.borrow_and_update() {
        conn.graceful_shutdown();
        closing = Some((CloseReason::Drain, None));
    }
    let close = loop {
        // Finished streams leave the set here: a JoinSet keeps each task's memory (its
        // whole future's size) until it is joined, so a connection that lives for
        // thousands of requests would otherwise grow by every one of them.
        while let Some(done) = tasks.try_join_next() {
            if let Err(e) = done
                && e.is_panic()
            {
                tracing::error!(peer = %peer.client, error = %e, "an HTTP/2 stream's task panicked");
            }
        }
        // A handler that ends keep-alive (a server about to stop) sends GOAWAY at the
        // connection's next event: the streams in flight finish, new ones go to a new
        // connection (a stream the client opened meanwhile is refused, which it retries).
        if closing.is_none() && !handler.keep_alive() {
            conn.graceful_shutdown();
            closing = Some((CloseReason::NotKeepAlive, None));
        }
        let idle_at =
            tokio::time::Instant::from_std(shared.streams.idle_since() + limits.idle_timeout);
        let idle = shared.streams.active() == 0 && closing.is_none();
        let deadline = closing.as_ref().and_then(|c| c.1);
        // Pooled buffers queued and no byte written for `send_timeout`: a client that
        // stopped reading. Its streams are reset by then, but h2 keeps the frame it is
        // writing; closing gives that back too, long before the idle timeout.
        let holding = shared.conn_budget.available_permits() < conn_buffers;
        if !holding || written.get() != progress.0 {
            progress = (written.get(), tokio::time::Instant::now());
        }
        tokio::select! {
            accepted = conn.accept() => match accepted {
                Some(Ok((request, respond))) => {
                    // Queued now, in the order the requests came.
                    let id = u32::from(respond.stream_id());
                    let place = shared.order.join(id, Priority::of_request(request.headers()));
                    let task = stream_task(
                        handler.clone(),
                        shared.clone(),
                        request,
                        respond,
                        place,
                        limits.clone(),
                        settings.clone(),
                        peer,
                        local,
                    );
                    tasks.spawn_local(task);
                }
                Some(Err(e)) => {
                    break closing.map_or_else(|| close_reason(&e), |c| c.0);
                }
                None => break closing.map_or(CloseReason::PeerClosed, |c| c.0),
            },
            changed = drain.changed(), if drain_live && closing.is_none() => {
                if changed.is_err() {
                    drain_live = false;
                } else if *drain.borrow() {
                    conn.graceful_shutdown();
                    closing = Some((CloseReason::Drain, None));
                }
            }
            () = tokio::time::sleep_until(idle_at), if idle => {
                conn.graceful_shutdown();
                let grace = tokio::time::Instant::now() + CLOSE_GRACE;
                closing = Some((CloseReason::IdleTimeout, Some(grace)));
            }
            () = shared.streams.abuse.notified(), if !matches!(closing, Some((CloseReason::Abuse(_), _))) => {
                tracing::info!(peer = %peer.client, "HTTP/2 client resets too many streams; closing");
                conn.abrupt_shutdown(Reason::ENHANCE_YOUR_CALM);
                let grace = tokio::time::Instant::now() + CLOSE_GRACE;
                closing = Some((CloseReason::Abuse("rapid reset"), Some(grace)));
            }
            () = shared.streams.changed.notified() => {}
            () = tokio::time::sleep_until(progress.1 + stall), if holding => {
                if written.get() == progress.0 {
                    tracing::debug!(peer = %peer.client, "HTTP/2 client stopped reading; closing");
                    break CloseReason::WriteError(io::ErrorKind::TimedOut);
                }
            }
            () = sleep_until_opt(deadline) => {
                break closing.map_or(CloseReason::IdleTimeout, |c| c.0);
            }
        }
    };
    // Streams still running cannot be answered any more: the JoinSet aborts them.
    drop(tasks);
    outcome(shared.streams.requests.get(), close)
}

async fn sleep_until_opt(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Answers one stream.
#[allow(clippy::too_many_arguments)]
async fn stream_task<H: Handler>(
    handler: Rc<H>,
    shared: Rc<ConnShared>,
    request: http::Request<h2::RecvStream>,
    mut respond: SendResponse<H2Chunk>,
    place: Place,
    limits: Rc<Limits>,
    settings: Rc<H2Settings>,
    peer: Peer,
    local: SocketAddr,
) {
    let _active = ActiveGuard::new(&shared);
    let started = Instant::now();
    let (parts, mut recv) = request.into_parts();
    let mut req = Request::new(peer, local);
    let mut scratch = Vec::new();
    let end_stream = recv.is_end_stream();
    if let Err(e) = head::request_from_parts(
        &mut req,
        &parts,
        end_stream,
        &mut scratch,
        &limits,
        crate::request::Version::Http2,
    ) {
        tracing::debug!(peer = %peer.client, status = e.status, reason = e.reason, "HTTP/2 request refused");
        let (h, body) = exchange::refusal(e.status);
        let mut bytes = 0;
        if let Ok(mut send) = respond.send_response(h.head, false) {
            bytes = h.head_bytes + body.len() as u64;
            let _ = send.send_data(H2Chunk::Bytes(body), true);
        }
        exchange::report_refusal(&*handler, peer, &parts, "HTTP/2", &e, bytes, started);
        return;
    }
    drop(scratch);
    req.apply_trusted(&limits);
    let mut body =
        RequestBody::h2(&mut recv, limits.max_body_bytes, limits.idle_timeout, limits.body_timeout);
    let handled = {
        // Boxed: a handler's future can be large, and the stream's task is allocated
        // cache-aligned (zeroed fresh pages per stream); a plain heap block is reused.
        let work = Box::pin(handler.handle(&req, &mut body));
        let reset = poll_fn(|cx| respond.poll_reset(cx));
        tokio::select! {
            resp = work => Some(resp),
            _ = reset => None,
        }
    };
    let Some(resp) = handled else {
        // Reset while the handler worked: stop the work, count the reset.
        shared.streams.note_reset();
        handler.on_response(&req, &Sent::nothing(started.elapsed(), 0));
        return;
    };
    let reset = || respond.send_reset(Reason::CANCEL);
    let Some(resp) = exchange::final_response(&*handler, &req, body.error(), resp, started, reset)
    else {
        return;
    };
    let (h, mut answer) = Answering::head(&resp, &req, started);
    let result = match respond.send_response(h.head, !h.has_body) {
        Err(e) => Err(SendFail::Peer(e)),
        Ok(_) if !h.has_body => Ok(0),
        Ok(mut send) => {
            let frames = (settings.stream_buffer / BUF_SIZE).max(1);
            // Permits are taken a batch at a time, so a batch must fit every budget.
            let conn_frames = (settings.connection_buffer / BUF_SIZE).max(1);
            let batch = send::BATCH.min(frames).min(conn_frames).min(crate::pool::CLIENT_BUFFERS);
            let budget = Budget {
                batch,
                stream: Arc::new(Semaphore::new(frames)),
                stream_permits: frames,
                conn: shared.conn_budget.clone(),
                client: shared.client_budget.clone(),
                lane: shared.lane.clone(),
                stall: limits.send_timeout.min(limits.idle_timeout),
                window: settings.stream_buffer,
            };
            let r = send::send_body(&mut send, resp.body, h.length, &budget, &place).await;
            if r.is_ok() {
                send::drained(&budget).await;
            }
            if let Err(f) = &r {
                let reason = match f {
                    SendFail::Stalled => Reason::CANCEL,
                    _ => Reason::INTERNAL_ERROR,
                };
                send.send_reset(reason);
            }
            r
        }
    };
    match result {
        Ok(n) => answer.bytes += n,
        Err(SendFail::Peer(e)) => {
            if e.is_reset() && e.is_remote() {
                shared.streams.note_reset();
            }
        }
        Err(_) => {}
    }
    answer.report(&*handler, &shared.streams, &req);
}
