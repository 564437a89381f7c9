//! Response bodies over an HTTP/3 request stream's sending half ([`H3Send`]).
//!
//! The transport copies each DATA frame's payload into its own send buffer before
//! `send_data` returns, so a chunk is held only while it is being handed over and the
//! transport's flow control (the client's stream and connection windows, the endpoint's
//! send window) is the backpressure. Memory bytes go as they are. File bytes are read
//! (page cache first, cold pages through the range's reader) into up to [`BATCH`] of the
//! worker's pooled buffers by one `preadv2`, then handed over one frame per buffer. A
//! hand-over that makes no progress for the stall timeout fails the response.

use std::io;
use std::time::Duration;

use bytes::{Buf, Bytes};
use h3::error::StreamError;

use crate::fileread;
use crate::pool::{BUF_SIZE, PoolBuf};
use crate::response::{Body, Chunk, FileRange};

/// Pooled buffers read at a time (64 KiB): one `preadv2` per batch.
const BATCH: usize = 4;
const _: () = assert!(BATCH <= fileread::MAX_BUFS);

/// A DATA frame payload: shared memory or a pooled buffer.
pub enum H3Chunk {
    /// Bytes in memory.
    Bytes(Bytes),
    /// File bytes read into one of the worker's pooled buffers.
    Pooled(PoolBuf),
}

impl Buf for H3Chunk {
    fn remaining(&self) -> usize {
        match self {
            H3Chunk::Bytes(b) => b.remaining(),
            H3Chunk::Pooled(buf) => buf.remaining(),
        }
    }
    fn chunk(&self) -> &[u8] {
        match self {
            H3Chunk::Bytes(b) => b.chunk(),
            H3Chunk::Pooled(buf) => buf.chunk(),
        }
    }
    fn advance(&mut self, cnt: usize) {
        match self {
            H3Chunk::Bytes(b) => b.advance(cnt),
            H3Chunk::Pooled(buf) => buf.advance(cnt),
        }
    }
}

/// The sending half of a request stream.
pub(crate) type H3Send = h3::server::RequestStream<h3_quinn::SendStream<H3Chunk>, H3Chunk>;

/// Why a body could not be completed; the stream is reset, never ended short.
#[derive(Debug)]
pub(crate) enum SendFail {
    /// The client reset or stopped the stream, or the connection went away.
    Peer(StreamError),
    /// The transport took nothing for the stall timeout (a slow reader).
    Stalled,
    /// The body failed (stream error, wrong length, file shorter than its range).
    Aborted,
}

async fn hand_over(send: &mut H3Send, chunk: H3Chunk, stall: Duration) -> Result<(), SendFail> {
    match tokio::time::timeout(stall, send.send_data(chunk)).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(SendFail::Peer(e)),
        Err(_) => Err(SendFail::Stalled),
    }
}

async fn send_file(
    send: &mut H3Send,
    range: &dyn FileRange,
    stall: Duration,
) -> Result<u64, SendFail> {
    let mut off = range.offset();
    let end = off.checked_add(range.len()).ok_or(SendFail::Aborted)?;
    while off < end {
        let left = end - off;
        let k = left.div_ceil(BUF_SIZE as u64).min(BATCH as u64) as usize;
        let mut bufs: [Option<PoolBuf>; BATCH] = Default::default();
        let mut lens = [0usize; BATCH];
        let mut at = left;
        for (slot, len) in bufs[..k].iter_mut().zip(lens.iter_mut()) {
            *slot = Some(PoolBuf::acquire_within(stall).await.ok_or(SendFail::Stalled)?);
            *len = at.min(BUF_SIZE as u64) as usize;
            at -= *len as u64;
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
        for (slot, len) in bufs[..k].iter_mut().zip(lens) {
            let Some(mut buf) = slot.take() else { return Err(SendFail::Aborted) };
            buf.set_len(len);
            off += len as u64;
            hand_over(send, H3Chunk::Pooled(buf), stall).await?;
        }
    }
    Ok(range.len())
}

/// Sends a response body whose declared length (if any) is `length`. Returns the body
/// bytes sent; on `Err` the caller resets the stream.
pub(crate) async fn send_body(
    send: &mut H3Send,
    body: Body,
    length: Option<u64>,
    stall: Duration,
) -> Result<u64, SendFail> {
    match body {
        Body::Empty => Ok(0),
        Body::Bytes(data) => {
            let n = data.len() as u64;
            if n > 0 {
                hand_over(send, H3Chunk::Bytes(data), stall).await?;
            }
            Ok(n)
        }
        Body::File(f) => send_file(send, &*f, stall).await,
        Body::Stream(mut s) => {
            let mut sent = 0u64;
            loop {
                let chunk = match std::future::poll_fn(|cx| s.as_mut().poll_next(cx)).await {
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
                    Chunk::Bytes(d) => hand_over(send, H3Chunk::Bytes(d), stall).await?,
                    Chunk::File(f) => {
                        send_file(send, &*f, stall).await?;
                    }
                }
            }
            if let Some(n) = length.filter(|n| sent != *n) {
                tracing::warn!(sent, declared = n, "response stream ended short");
                return Err(SendFail::Aborted);
            }
            Ok(sent)
        }
    }
}
