//! Response bodies over an HTTP/2 stream, under flow control (RFC 9113 section 5.2).
//!
//! Memory bytes ([`Body::Bytes`]) are cut into frames without copying. File bytes are
//! read (page cache first, cold pages through the range's reader) into the worker's
//! pooled buffers, one DATA frame per buffer: 16 375 bytes of payload plus the 9-byte
//! frame header fill one 16 KiB TLS record. Each buffer also holds a permit of its
//! stream's, its connection's and its client address's budget until h2 has written it,
//! so a client that stops reading pins at most those budgets, never the worker's pool,
//! and only until the send timeout resets its streams.
//!
//! Body bytes are handed to `h2` only on the stream's turn ([`Place::turn`]); waiting for
//! flow control or for the next chunk of a streamed body marks it idle ([`Place::idle`]).

use std::future::poll_fn;
use std::io;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Buf, Bytes};
use h2::SendStream;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::order::Place;
use crate::fileread;
use crate::pool::{BUF_SIZE, PoolBuf};
use crate::response::{Body, Chunk, FileRange};

/// Payload of one DATA frame made from a pooled buffer: with the 9-byte frame header
/// it is exactly one full TLS record.
pub(crate) const FRAME_PAYLOAD: usize = BUF_SIZE - 9;

/// Pooled frames of a finished body that may still wait to be written when the next
/// response takes the connection: enough to keep the writer busy while it starts.
const TAIL_FRAMES: usize = 2;

/// A DATA frame payload: shared memory or a pooled buffer with its budget permits.
pub(crate) enum H2Chunk {
    Bytes(Bytes),
    Pooled {
        buf: PoolBuf,
        _stream: OwnedSemaphorePermit,
        _conn: OwnedSemaphorePermit,
        _client: OwnedSemaphorePermit,
    },
}

impl Buf for H2Chunk {
    fn remaining(&self) -> usize {
        match self {
            H2Chunk::Bytes(b) => b.remaining(),
            H2Chunk::Pooled { buf, .. } => buf.remaining(),
        }
    }
    fn chunk(&self) -> &[u8] {
        match self {
            H2Chunk::Bytes(b) => b.chunk(),
            H2Chunk::Pooled { buf, .. } => buf.chunk(),
        }
    }
    fn advance(&mut self, cnt: usize) {
        match self {
            H2Chunk::Bytes(b) => b.advance(cnt),
            H2Chunk::Pooled { buf, .. } => buf.advance(cnt),
        }
    }
}

/// Why a body could not be completed; the stream is reset, never ended short.
#[derive(Debug)]
pub(crate) enum SendFail {
    /// The peer reset the stream or the connection went away.
    Peer(h2::Error),
    /// No flow-control capacity or budget for the stall timeout (a slow reader).
    Stalled,
    /// The body failed (stream error, wrong length, file shorter than its range).
    Aborted,
}

impl From<h2::Error> for SendFail {
    fn from(e: h2::Error) -> Self {
        SendFail::Peer(e)
    }
}

/// Budgets and limits of one stream's body.
pub(crate) struct Budget {
    pub(crate) stream: Arc<Semaphore>,
    /// The stream budget's permits (pooled buffers).
    pub(crate) stream_permits: usize,
    pub(crate) conn: Arc<Semaphore>,
    /// The client address's share of the worker's pool, across its connections.
    pub(crate) client: Arc<Semaphore>,
    pub(crate) stall: Duration,
    /// Capacity requested at a time (the per-stream buffer budget).
    pub(crate) window: usize,
}

/// Waits for the stream's turn and until it may send at least one byte; returns how many
/// (at most `want`).
async fn capacity(
    send: &mut SendStream<H2Chunk>,
    want: usize,
    b: &Budget,
    place: &Place,
) -> Result<usize, SendFail> {
    loop {
        place.turn().await;
        send.reserve_capacity(want.min(b.window).max(1));
        let cap = send.capacity();
        if cap > 0 {
            return Ok(cap.min(want));
        }
        // Nothing to send until the client opens its window: the streams behind may go.
        place.idle();
        match tokio::time::timeout(b.stall, poll_fn(|cx| send.poll_capacity(cx))).await {
            Err(_) => return Err(SendFail::Stalled),
            Ok(None) => return Err(SendFail::Aborted),
            Ok(Some(Err(e))) => return Err(e.into()),
            Ok(Some(Ok(_))) => {}
        }
    }
}

async fn permit(sem: &Arc<Semaphore>, stall: Duration) -> Result<OwnedSemaphorePermit, SendFail> {
    match tokio::time::timeout(stall, sem.clone().acquire_owned()).await {
        Ok(Ok(p)) => Ok(p),
        Ok(Err(_)) => Err(SendFail::Aborted),
        Err(_) => Err(SendFail::Stalled),
    }
}

/// Sends `data`; with `last`, the final frame ends the stream.
async fn send_bytes(
    send: &mut SendStream<H2Chunk>,
    mut data: Bytes,
    last: bool,
    b: &Budget,
    place: &Place,
) -> Result<u64, SendFail> {
    let total = data.len() as u64;
    while !data.is_empty() {
        let n = capacity(send, data.len(), b, place).await?;
        let piece = data.split_to(n);
        send.send_data(H2Chunk::Bytes(piece), last && data.is_empty())?;
    }
    Ok(total)
}

/// Sends the whole file region; with `last`, the final frame ends the stream.
async fn send_file(
    send: &mut SendStream<H2Chunk>,
    range: &dyn FileRange,
    last: bool,
    b: &Budget,
    place: &Place,
) -> Result<u64, SendFail> {
    let mut off = range.offset();
    let end = off.checked_add(range.len()).ok_or(SendFail::Aborted)?;
    while off < end {
        let want = ((end - off) as usize).min(FRAME_PAYLOAD);
        let n =
            capacity(send, (end - off).min(usize::MAX as u64) as usize, b, place).await?.min(want);
        let stream = permit(&b.stream, b.stall).await?;
        let conn = permit(&b.conn, b.stall).await?;
        let client = permit(&b.client, b.stall).await?;
        let mut buf = PoolBuf::acquire_within(b.stall).await.ok_or(SendFail::Stalled)?;
        match fileread::read_exact(range, off, &mut buf.space()[..n]).await {
            Ok(()) => {}
            Err(e) => {
                if e.kind() == io::ErrorKind::UnexpectedEof {
                    tracing::warn!("file body shorter than its range; resetting the stream");
                } else {
                    tracing::warn!(error = %e, "reading a file body failed; resetting the stream");
                }
                return Err(SendFail::Aborted);
            }
        }
        buf.set_len(n);
        off += n as u64;
        let chunk = H2Chunk::Pooled { buf, _stream: stream, _conn: conn, _client: client };
        send.send_data(chunk, last && off == end)?;
    }
    Ok(range.len())
}

/// Sends a response body whose declared length (if any) is `length`. Returns the body
/// bytes sent; on `Err` the caller resets the stream.
pub(crate) async fn send_body(
    send: &mut SendStream<H2Chunk>,
    body: Body,
    length: Option<u64>,
    b: &Budget,
    place: &Place,
) -> Result<u64, SendFail> {
    match body {
        Body::Empty => {
            send.send_data(H2Chunk::Bytes(Bytes::new()), true)?;
            Ok(0)
        }
        Body::Bytes(data) => send_bytes(send, data, true, b, place).await,
        Body::File(f) => send_file(send, &*f, true, b, place).await,
        Body::Stream(mut s) => {
            let mut sent = 0u64;
            loop {
                let next = poll_fn(|cx| {
                    let r = s.as_mut().poll_next(cx);
                    if r.is_pending() {
                        // No chunk yet (a slow origin): the streams behind may go.
                        place.idle();
                    }
                    r
                });
                let chunk = match next.await {
                    None => break,
                    Some(Ok(c)) => c,
                    Some(Err(e)) => {
                        tracing::debug!(error = %e, "response stream failed; resetting the stream");
                        return Err(SendFail::Aborted);
                    }
                };
                let len = chunk.len();
                if len == 0 {
                    continue;
                }
                sent += len;
                if length.is_some_and(|n| sent > n) {
                    tracing::warn!("response stream longer than its Content-Length");
                    return Err(SendFail::Aborted);
                }
                match chunk {
                    Chunk::Bytes(d) => send_bytes(send, d, false, b, place).await?,
                    Chunk::File(f) => send_file(send, &*f, false, b, place).await?,
                };
            }
            if let Some(n) = length.filter(|n| sent != *n) {
                tracing::warn!(sent, declared = n, "response stream ended short");
                return Err(SendFail::Aborted);
            }
            send.send_data(H2Chunk::Bytes(Bytes::new()), true)?;
            Ok(sent)
        }
    }
}

/// Waits (at most the stall timeout) until no more than [`TAIL_FRAMES`] of the stream's
/// pooled frames are still unwritten: until then the response keeps its place, so the
/// next one does not share the connection with its tail.
pub(crate) async fn drained(b: &Budget) {
    let Some(n) = b.stream_permits.checked_sub(TAIL_FRAMES).filter(|n| *n > 0) else { return };
    let n = u32::try_from(n).unwrap_or(u32::MAX);
    let _ = tokio::time::timeout(b.stall, b.stream.acquire_many(n)).await;
}
