//! Response bodies over an HTTP/2 stream, under flow control (RFC 9113 section 5.2).
//!
//! Memory bytes ([`Body::Bytes`]) are cut into frames without copying. File bytes are
//! read (page cache first, cold pages through the range's reader) into the worker's
//! pooled buffers, one DATA frame per buffer: 16 375 bytes of payload plus the 9-byte
//! frame header fill one 16 KiB TLS record; a body's odd remainder is its first frame,
//! written together with the head. Each buffer also holds a permit of its
//! stream's, its connection's and its client address's budget until h2 has written it,
//! so a client that stops reading pins at most those budgets, never the worker's pool,
//! and only until the send timeout resets its streams. Once the address's share is used
//! up, each connection still has one batch of its own ([`Budget::lane`]): connections of
//! the address that stopped reading keep what they hold, and one that reads goes on a
//! batch at a time, as an HTTPS/1.1 connection would, instead of waiting for them. Buffers go in batches of
//! [`BATCH`]: permits taken together, one `preadv2` for all, so the stream's task and
//! the connection's writer wake once per batch; timers are armed only for waits that
//! actually happen.
//!
//! Body bytes are handed to `h2` only on the stream's turn ([`Place::turn`]); waiting for
//! flow control or for the next chunk of a streamed body marks it idle ([`Place::idle`]).

use std::future::poll_fn;
use std::io;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Buf, Bytes};
use h2::SendStream;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, TryAcquireError};

use super::order::Place;
use crate::fileread;
use crate::pool::{BUF_SIZE, PoolBuf};
use crate::response::{Body, Chunk, FileRange};

/// Payload of one DATA frame made from a pooled buffer: with the 9-byte frame header
/// it is exactly one full TLS record.
pub(crate) const FRAME_PAYLOAD: usize = BUF_SIZE - 9;

/// Pooled frames read and handed to `h2` at a time (64 KiB): one `preadv2`, one wakeup of
/// the writer and one of this task per batch instead of per frame, while the bytes read
/// are still in the CPU's cache when the writer encrypts them.
pub(crate) const BATCH: usize = 4;
const _: () = assert!(BATCH <= fileread::MAX_BUFS);

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
    /// The connection's own batch ([`BATCH`] permits), taken instead of the address's
    /// share when that has none left.
    pub(crate) lane: Arc<Semaphore>,
    pub(crate) stall: Duration,
    /// Capacity requested at a time (the per-stream buffer budget).
    pub(crate) window: usize,
    /// Pooled frames read and handed over at a time: at least 1, at most [`BATCH`] and
    /// any budget's size.
    pub(crate) batch: usize,
}

impl Budget {
    fn batch_bytes(&self) -> usize {
        self.batch * FRAME_PAYLOAD
    }
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
        // Capacity is asked for again only when what is left runs short of this batch.
        let cap = send.capacity();
        if cap >= want.min(b.batch_bytes()) {
            return Ok(cap.min(want));
        }
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

/// `k` permits of `sem` as one, and whether they had to be waited for (at most `stall`,
/// with a timer only then).
async fn permits(
    sem: &Arc<Semaphore>,
    k: usize,
    stall: Duration,
) -> Result<(OwnedSemaphorePermit, bool), SendFail> {
    let k = u32::try_from(k).unwrap_or(u32::MAX);
    match sem.clone().try_acquire_many_owned(k) {
        Ok(p) => return Ok((p, false)),
        Err(TryAcquireError::Closed) => return Err(SendFail::Aborted),
        Err(TryAcquireError::NoPermits) => {}
    }
    match tokio::time::timeout(stall, sem.clone().acquire_many_owned(k)).await {
        Ok(Ok(p)) => Ok((p, true)),
        Ok(Err(_)) => Err(SendFail::Aborted),
        Err(_) => Err(SendFail::Stalled),
    }
}

/// `k` permits of the client address: from its share, or when the share has none left,
/// from the connection's own batch, whichever comes first (at most `stall`, with a timer
/// only when both must be waited for). Stalled connections of the address then hold the
/// share and their own batch, and a connection that reads still gets a batch each time it
/// has written its last.
async fn address_permits(b: &Budget, k: usize) -> Result<(OwnedSemaphorePermit, bool), SendFail> {
    let k = u32::try_from(k).unwrap_or(u32::MAX);
    for sem in [&b.client, &b.lane] {
        match sem.clone().try_acquire_many_owned(k) {
            Ok(p) => return Ok((p, false)),
            Err(TryAcquireError::Closed) => return Err(SendFail::Aborted),
            Err(TryAcquireError::NoPermits) => {}
        }
    }
    let either = async {
        tokio::select! {
            p = b.client.clone().acquire_many_owned(k) => p,
            p = b.lane.clone().acquire_many_owned(k) => p,
        }
    };
    match tokio::time::timeout(b.stall, either).await {
        Ok(Ok(p)) => Ok((p, true)),
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

/// One permit of a batch's: split off, or the rest of it for the batch's final frame.
fn one(p: &mut Option<OwnedSemaphorePermit>, final_one: bool) -> Option<OwnedSemaphorePermit> {
    if final_one { p.take() } else { p.as_mut().and_then(|p| p.split(1)) }
}

/// Sends the whole file region; with `last`, the final frame ends the stream.
///
/// Frames go in batches (up to [`Budget::batch`]): the budgets' permits taken at once, the
/// pooled buffers filled by one read, then handed to `h2` together, so the task and the
/// writer wake once per batch, not once per frame.
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
        let left = (end - off).min(usize::MAX as u64) as usize;
        let n = capacity(send, left, b, place).await?;
        // Frame sizes: each leaves a whole number of full frames behind it, so the odd
        // remainder goes first (written with the head and the next frame, one write) and
        // the body ends on a full frame instead of a lone small record.
        let mut lens = [0usize; BATCH];
        let (mut k, mut at, mut cap) = (0, left, n);
        while k < b.batch && cap > 0 && at > 0 {
            let len = match at % FRAME_PAYLOAD {
                0 => FRAME_PAYLOAD,
                odd => odd,
            }
            .min(cap);
            lens[k] = len;
            (k, at, cap) = (k + 1, at - len, cap - len);
        }
        let (stream, waited_s) = permits(&b.stream, k, b.stall).await?;
        let (conn, waited_c) = permits(&b.conn, k, b.stall).await?;
        let (client, waited_a) = address_permits(b, k).await?;
        if (waited_s || waited_c || waited_a) && !place.is_turn() {
            // An earlier response became ready meanwhile: it goes first.
            continue;
        }
        let (mut stream, mut conn, mut client) = (Some(stream), Some(conn), Some(client));
        let mut bufs: [Option<PoolBuf>; BATCH] = Default::default();
        for slot in &mut bufs[..k] {
            *slot = Some(PoolBuf::acquire_within(b.stall).await.ok_or(SendFail::Stalled)?);
        }
        {
            let mut spaces: [&mut [u8]; BATCH] = Default::default();
            for ((space, buf), len) in spaces.iter_mut().zip(bufs.iter_mut().flatten()).zip(lens) {
                *space = &mut buf.space()[..len];
            }
            if let Err(e) = fileread::read_exact_bufs(range, off, &mut spaces[..k]).await {
                if e.kind() == io::ErrorKind::UnexpectedEof {
                    tracing::warn!("file body shorter than its range; resetting the stream");
                } else {
                    tracing::warn!(error = %e, "reading a file body failed; resetting the stream");
                }
                return Err(SendFail::Aborted);
            }
        }
        for (i, (slot, len)) in bufs[..k].iter_mut().zip(lens).enumerate() {
            let final_one = i + 1 == k;
            let (Some(mut buf), Some(s), Some(c), Some(a)) = (
                slot.take(),
                one(&mut stream, final_one),
                one(&mut conn, final_one),
                one(&mut client, final_one),
            ) else {
                return Err(SendFail::Aborted);
            };
            buf.set_len(len);
            off += len as u64;
            let chunk = H2Chunk::Pooled { buf, _stream: s, _conn: c, _client: a };
            send.send_data(chunk, last && off == end)?;
        }
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
    if b.stream.try_acquire_many(n).is_ok() {
        return;
    }
    let _ = tokio::time::timeout(b.stall, b.stream.acquire_many(n)).await;
}
