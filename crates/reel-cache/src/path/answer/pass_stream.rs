//! Streaming an origin body that is not stored to its one client, with a bound on the
//! bytes reel holds for it between the origin and the client's socket.

use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use bytes::{Buf, Bytes};
use reel_http::Chunk;
use reel_origin::OriginResponse;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};

/// At most this many bytes of one pass-through body are held at a time.
pub const PASS_BUFFER: usize = 256 * 1024;

/// Bytes of pass-through bodies held (read from origins, not yet written to clients), all
/// connections of all workers: a gauge.
#[derive(Default)]
pub struct PassBuffered(AtomicU64);

impl PassBuffered {
    /// Bytes held right now.
    pub fn get(&self) -> u64 {
        self.0.load(Relaxed)
    }
}

/// Body bytes counted in [`PassBuffered`] and holding their share of the response's
/// budget until the codec has written and dropped them.
struct Held {
    bytes: Bytes,
    gauge: Arc<PassBuffered>,
    _room: OwnedSemaphorePermit,
}

impl AsRef<[u8]> for Held {
    fn as_ref(&self) -> &[u8] {
        &self.bytes
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.gauge.0.fetch_sub(self.bytes.len() as u64, Relaxed);
    }
}

/// Pieces handed to the codec: small enough that the budget holds several, so the origin
/// is read while the client is written to.
const PIECE: usize = 64 * 1024;

/// The body of `resp` as a stream for the codec, at most [`PASS_BUFFER`] bytes held.
///
/// Each piece takes its size from a per-response budget and gives it back when the codec
/// drops it, once written. The origin is read only when a whole piece fits: while the
/// client does not read, reel stops reading the origin and TCP flow control holds the
/// origin back. Pieces are copies, not slices, of what the origin client read, so a held
/// piece never keeps the origin client's whole read buffer alive.
pub(in crate::path) fn stream_body(
    mut resp: OriginResponse,
    gauge: Arc<PassBuffered>,
) -> mpsc::Receiver<io::Result<Chunk>> {
    let budget = Arc::new(Semaphore::new(PASS_BUFFER));
    let (tx, rx) = mpsc::channel(PASS_BUFFER / PIECE);
    tokio::task::spawn_local(async move {
        loop {
            // Read the origin only once a whole piece fits in the budget.
            let Ok(first) = budget.clone().acquire_many_owned(PIECE as u32).await else {
                return;
            };
            let mut room = Some(first);
            let mut chunk = match resp.next_chunk().await {
                Ok(Some(c)) => c,
                Ok(None) => return,
                Err(e) => {
                    let _ = tx.send(Err(io::Error::other(e.to_string()))).await;
                    return;
                }
            };
            while !chunk.is_empty() {
                let n = chunk.len().min(PIECE);
                let mut permit = match room.take() {
                    Some(p) => p,
                    None => match budget.clone().acquire_many_owned(n as u32).await {
                        Ok(p) => p,
                        Err(_) => return,
                    },
                };
                // Hold exactly this piece's share; the rest goes back to the budget.
                drop(permit.split(permit.num_permits() - n));
                let piece = Bytes::copy_from_slice(&chunk[..n]);
                chunk.advance(n);
                gauge.0.fetch_add(n as u64, Relaxed);
                let held = Held { bytes: piece, gauge: gauge.clone(), _room: permit };
                if tx.send(Ok(Chunk::Bytes(Bytes::from_owner(held)))).await.is_err() {
                    return;
                }
            }
        }
    });
    rx
}
