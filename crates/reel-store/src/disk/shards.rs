//! The disk's reads and writes of its index: the shard of a hash, the side table of
//! refreshed objects' metadata, and slots leaving the index (a complete object
//! uncounted, a fill aborted, a volume's objects dropped). The types are in `index`.

use std::sync::RwLock;
use std::sync::atomic::Ordering;

use super::entry::{Entry, Loc, seq24};
use super::fill_state::FillState;
#[cfg(feature = "measure")]
use super::index::index_hash;
use super::index::{MetaAt, SHARDS, Shard, Slot};
use super::state::Disk;
use super::volumes::Volume;
#[cfg(feature = "measure")]
use crate::format::ALIGN;

impl Disk {
    /// The shard of hash `h`: bits 32..38, apart from the bits the shard's map uses (the
    /// low ones for the bucket, the top 7 for its control bytes, which must vary within
    /// a shard or every probe meets false candidates).
    pub(super) fn shard_no(h: u64) -> usize {
        (h >> 32) as usize % SHARDS
    }

    pub(super) fn shard(&self, h: u64) -> &RwLock<Shard> {
        &self.shards[Disk::shard_no(h)]
    }

    /// Where the newest metadata of the refreshed object at `l` is.
    pub(super) fn meta_at(&self, h: u64, l: &Loc) -> Option<MetaAt> {
        let m = self.metas[Disk::shard_no(h)].lock().unwrap_or_else(|p| p.into_inner());
        m.get(&h).copied().filter(|m| m.obj == (l.vol, l.seq24, l.rec_off))
    }

    /// Records where the newest metadata of the object at `l` is.
    pub(super) fn set_meta_at(&self, h: u64, m: MetaAt) {
        self.metas[Disk::shard_no(h)].lock().unwrap_or_else(|p| p.into_inner()).insert(h, m);
    }

    /// Forgets the side-table entry of `h` (its object left the index).
    pub(super) fn forget_meta(&self, h: u64) {
        self.metas[Disk::shard_no(h)].lock().unwrap_or_else(|p| p.into_inner()).remove(&h);
    }

    pub(super) fn uncount(&self, e: &Entry) {
        self.c.objects.fetch_sub(1, Ordering::Relaxed);
        self.c.bytes_used.fetch_sub(e.span(), Ordering::Relaxed);
    }

    /// Accounts a slot taken out of the index: a complete object is uncounted, a fill
    /// is told it was purged (its readers see it aborted).
    pub(super) fn retire_slot(&self, h: u64, slot: Slot) {
        self.records.remove(h);
        match slot {
            Slot::Ready(e) => {
                if e.refreshed() {
                    self.forget_meta(h);
                }
                self.uncount(&e)
            }
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
                && e.vol() == vol.idx
                && e.loc().seq24 == seq24(seq)
                && let Some(slot) = s.remove(&h)
            {
                drop(s);
                self.retire_slot(h, slot);
                n += 1;
            }
        }
        n
    }
}

#[cfg(feature = "measure")]
impl Disk {
    /// See [`crate::measure::fill_index`].
    pub(crate) fn fill_synthetic(&self, n: u64, key: impl Fn(u64) -> String) -> u64 {
        let vols = self.vols.len() as u64;
        let per_vol = (self.volume_size / (2 * ALIGN)).max(1);
        let mut added = 0;
        for i in 0..n {
            let h = index_hash(key(i).as_bytes());
            let v = (i % vols) as u32;
            let rec_off = ALIGN * (1 + 2 * ((i / vols) % per_vol));
            // Incarnation 0 is no volume's: a lookup's lease, and the checkpoint, skip it.
            let e = Entry::new(Loc::new(v, 0, rec_off, rec_off + ALIGN, 100));
            let Ok(mut s) = self.shard(h).write() else { continue };
            if s.insert(h, Slot::Ready(e)).is_none() {
                added += 1;
                self.vols[v as usize].objects.lock().unwrap_or_else(|p| p.into_inner()).push(h);
            }
        }
        self.c.objects.fetch_add(added, Ordering::Relaxed);
        added
    }
}
