//! The in-memory index: which key is stored where, or being filled by whom.
//!
//! 64 shards, each a `std::sync::RwLock<HashMap<u128, Slot>>` keyed by the xxh3-128 of
//! the key. A lookup takes one shard's read lock for a hash probe and an `Arc` clone, so
//! workers on different cores only meet when they hit the same shard, and then only as
//! readers; the hash already is uniformly distributed, so shard choice and the map's
//! hasher just take bits of it. A concurrent map crate would save little over this and
//! add a dependency. Writers (commit, reclaim, purge) take one shard's write lock at a
//! time and never across an await.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

use bytes::Bytes;

use super::Disk;
use super::fill::{FillShared, FillState};
use super::volumes::Volume;

/// Number of index shards.
pub(super) const SHARDS: usize = 64;

/// A hasher for keys that already are 128-bit hashes.
#[derive(Default)]
pub(super) struct PassHasher(u64);

impl Hasher for PassHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }
    fn write_u128(&mut self, i: u128) {
        self.0 = i as u64;
    }
}

/// One shard of the index.
pub(super) type Shard = HashMap<u128, Slot, BuildHasherDefault<PassHasher>>;

/// What the index holds for a key.
pub(super) enum Slot {
    Ready(Arc<Entry>),
    Filling(Arc<FillShared>),
}

/// Where a complete object lives. Shared between the index and hit handles.
pub(super) struct Entry {
    pub(super) key: Box<[u8]>,
    pub(super) meta: Bytes,
    pub(super) vol: u32,
    pub(super) seq: u64,
    pub(super) rec_off: u64,
    pub(super) body_off: u64,
    pub(super) body_len: u64,
    pub(super) span: u64,
    pub(super) stored_at: u64,
    /// Read since written: earns a second chance at reclaim.
    pub(super) accessed: AtomicBool,
}

impl Disk {
    pub(super) fn shard(&self, h: u128) -> &RwLock<Shard> {
        &self.shards[((h >> 64) as usize) % SHARDS]
    }

    pub(super) fn ready_entry(&self, h: u128, key: &[u8]) -> Option<Arc<Entry>> {
        match self.shard(h).read().ok()?.get(&h)? {
            Slot::Ready(e) if &*e.key == key => Some(e.clone()),
            _ => None,
        }
    }

    pub(super) fn uncount(&self, e: &Entry) {
        self.c.objects.fetch_sub(1, Ordering::Relaxed);
        self.c.bytes_used.fetch_sub(e.span, Ordering::Relaxed);
    }

    /// Accounts a slot taken out of the index: a complete object is uncounted, a fill
    /// is told it was purged (its readers see it aborted).
    pub(super) fn retire_slot(&self, slot: Slot) {
        match slot {
            Slot::Ready(e) => self.uncount(&e),
            Slot::Filling(f) => {
                f.purged.store(true, Ordering::SeqCst);
                f.progress.send_modify(|p| p.state = FillState::Aborted);
            }
        }
    }

    /// Drops from the index every object of `vol`'s incarnation `seq`; returns how many.
    pub(super) fn drop_volume_entries(&self, vol: &Volume, seq: u64) -> u64 {
        let hashes = std::mem::take(&mut *vol.objects.lock().unwrap_or_else(|p| p.into_inner()));
        let mut n = 0;
        for h in hashes {
            let Ok(mut s) = self.shard(h).write() else { continue };
            if let Some(Slot::Ready(e)) = s.get(&h)
                && e.vol == vol.idx
                && e.seq == seq
                && let Some(Slot::Ready(e)) = s.remove(&h)
            {
                self.uncount(&e);
                n += 1;
            }
        }
        n
    }
}
