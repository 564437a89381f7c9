//! The per-worker pool of body buffers used where `sendfile(2)` cannot be (TLS, HTTP/2):
//! file bytes are read from the page cache into a pooled 16 KiB buffer, handed to the
//! writer, and the buffer returns to the pool when the writer drops it.
//!
//! The pool belongs to the worker thread (a thread-local), allocates buffers lazily up to
//! [`POOL_BUFFERS`] and keeps them for reuse, so serving bodies allocates nothing per
//! request once warm. When every buffer is out, acquirers wait (FIFO) for one to come
//! back, for a bounded time ([`PoolBuf::acquire_within`]): the pool bounds the worker's
//! body memory, and a stalled connection can hold only what its own limits allow (see
//! the HTTP/2 module's per-stream and per-connection budgets), a client address at most
//! [`CLIENT_BUFFERS`] of them ([`client_budget`]) plus one batch per connection (what
//! an HTTPS/1.1 connection holds too), so clients that stop reading cannot take the pool
//! from everyone else, nor from a connection of their own address that reads.

use std::cell::RefCell;
use std::net::IpAddr;
use std::rc::Rc;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use bytes::Buf;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::shares::Shares;

/// Size of one pooled buffer: the largest TLS record payload (RFC 8446 section 5.1), so
/// a full buffer leaves as one full record.
pub const BUF_SIZE: usize = 16 * 1024;
/// Bytes each buffer has beyond [`BUF_SIZE`]: room for a TLS record's header, explicit
/// nonce, inner content type and tag around a full payload, so a file body read into a
/// buffer can be sealed in place as one full record.
pub(crate) const RECORD_ROOM: usize = 32;
/// Most buffers one worker has out at once (16 MiB).
pub const POOL_BUFFERS: usize = 1024;
/// Most buffers of one worker's pool that the connections of one client address may hold
/// queued at once (an eighth: 2 MiB).
pub const CLIENT_BUFFERS: usize = POOL_BUFFERS / 8;

/// Every worker pool's permits, for the metrics: read when they are rendered, so lending a
/// buffer touches nothing another core shares.
static POOLS: Mutex<Vec<Weak<Semaphore>>> = Mutex::new(Vec::new());

struct Pool {
    free: RefCell<Vec<Box<[u8]>>>,
    permits: Arc<Semaphore>,
}

thread_local! {
    static POOL: Rc<Pool> = {
        let permits = Arc::new(Semaphore::new(POOL_BUFFERS));
        if let Ok(mut pools) = POOLS.lock() {
            pools.retain(|p| p.strong_count() > 0);
            pools.push(Arc::downgrade(&permits));
        }
        Rc::new(Pool { free: RefCell::new(Vec::new()), permits })
    };
    /// Each client address's budget of this worker's buffers, kept while a connection of
    /// it holds the budget.
    static CLIENTS: Shares<IpAddr> = Shares::default();
}

/// The budget of this worker's pooled buffers that the connections of client `ip` share
/// ([`CLIENT_BUFFERS`] permits): every connection of one address gets the same one while
/// any of them holds it.
pub fn client_budget(ip: IpAddr) -> Arc<Semaphore> {
    CLIENTS.with(|c| c.get(ip, CLIENT_BUFFERS))
}

/// A buffer lent by this worker's pool: `len` bytes of data, read from `pos`.
/// Dropping it returns the memory to the pool.
pub struct PoolBuf {
    data: Option<Box<[u8]>>,
    len: usize,
    pos: usize,
    pool: Rc<Pool>,
    _permit: Option<OwnedSemaphorePermit>,
}

impl PoolBuf {
    /// Borrows a buffer from this worker's pool, waiting while all are out.
    pub async fn acquire() -> PoolBuf {
        let pool = POOL.with(Rc::clone);
        // The semaphore is never closed, so acquiring cannot fail.
        let permit = pool.permits.clone().acquire_owned().await.ok();
        let data = pool
            .free
            .borrow_mut()
            .pop()
            .unwrap_or_else(|| vec![0u8; BUF_SIZE + RECORD_ROOM].into());
        PoolBuf { data: Some(data), len: 0, pos: 0, pool, _permit: permit }
    }

    /// A buffer if one is free now (no waiting, no timer).
    pub fn try_acquire() -> Option<PoolBuf> {
        let pool = POOL.with(Rc::clone);
        let permit = pool.permits.clone().try_acquire_owned().ok()?;
        let data = pool
            .free
            .borrow_mut()
            .pop()
            .unwrap_or_else(|| vec![0u8; BUF_SIZE + RECORD_ROOM].into());
        Some(PoolBuf { data: Some(data), len: 0, pos: 0, pool, _permit: Some(permit) })
    }

    /// Like [`PoolBuf::acquire`], waiting at most `wait`: `None` when no buffer came back
    /// in time. A writer never waits on the pool for longer than it would on its client.
    pub async fn acquire_within(wait: Duration) -> Option<PoolBuf> {
        if let Some(b) = Self::try_acquire() {
            return Some(b);
        }
        tokio::time::timeout(wait, Self::acquire()).await.ok()
    }

    /// Buffers lent out by every worker's pool together.
    pub fn lent() -> usize {
        let Ok(pools) = POOLS.lock() else { return 0 };
        pools.iter().filter_map(Weak::upgrade).map(|p| POOL_BUFFERS - p.available_permits()).sum()
    }

    /// The buffer's [`BUF_SIZE`] bytes, to fill.
    pub fn space(&mut self) -> &mut [u8] {
        self.data.as_deref_mut().map_or(&mut [], |d| &mut d[..BUF_SIZE])
    }

    /// The whole buffer with its [`RECORD_ROOM`], for a record sealed in place.
    pub fn record_space(&mut self) -> &mut [u8] {
        self.data.as_deref_mut().unwrap_or(&mut [])
    }

    /// Marks the first `len` bytes as the data (clamped to the buffer) and rewinds.
    pub fn set_len(&mut self, len: usize) {
        self.len = len.min(self.data.as_deref().map_or(0, <[u8]>::len));
        self.pos = 0;
    }

    /// The unread data.
    pub fn data(&self) -> &[u8] {
        self.data.as_deref().map_or(&[][..], |d| &d[self.pos..self.len])
    }

    /// Buffers of this worker's pool currently lent out.
    pub fn in_use() -> usize {
        POOL.with(|p| POOL_BUFFERS - p.permits.available_permits())
    }
}

impl Buf for PoolBuf {
    fn remaining(&self) -> usize {
        self.len - self.pos
    }
    fn chunk(&self) -> &[u8] {
        self.data()
    }
    fn advance(&mut self, cnt: usize) {
        self.pos = (self.pos + cnt).min(self.len);
    }
}

impl Drop for PoolBuf {
    fn drop(&mut self) {
        if let Some(d) = self.data.take() {
            self.pool.free.borrow_mut().push(d);
        }
    }
}

impl std::fmt::Debug for PoolBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PoolBuf({} of {} bytes left)", self.len - self.pos, self.len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_are_reused_and_bounded() {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let mut a = PoolBuf::acquire().await;
            a.space()[..3].copy_from_slice(b"abc");
            a.set_len(3);
            a.advance(1);
            assert_eq!((a.remaining(), a.chunk()), (2, &b"bc"[..]));
            let ptr = a.data.as_ref().unwrap().as_ptr();
            assert_eq!(PoolBuf::in_use(), 1);
            drop(a);
            assert_eq!(PoolBuf::in_use(), 0);
            let b = PoolBuf::acquire().await;
            assert_eq!(b.data.as_ref().unwrap().as_ptr(), ptr, "the freed buffer is reused");
            let mut all = vec![b];
            for _ in 1..POOL_BUFFERS {
                all.push(PoolBuf::acquire().await);
            }
            // Exhausted: the next acquirer waits until a buffer comes back.
            let waiting =
                tokio::time::timeout(std::time::Duration::from_millis(50), PoolBuf::acquire());
            assert!(waiting.await.is_err());
            all.pop();
            let got = tokio::time::timeout(std::time::Duration::from_secs(5), PoolBuf::acquire());
            assert!(got.await.is_ok());
        });
    }
}
