//! The in-memory index: which key is stored where, or being filled by whom.
//!
//! 64 shards, each a `std::sync::RwLock<HashMap<u64, Slot>>` keyed by 64 bits of the
//! xxh3-128 of the key. A lookup takes one shard's read lock for a hash probe and a copy
//! of a 16-byte [`Entry`], so workers on different cores only meet when they hit the same
//! shard, and then only as readers; the hash already is uniformly distributed, so shard
//! choice and the map's hasher just take bits of it. Writers (commit, reclaim, purge) take
//! one shard's write lock at a time and never across an await.
//!
//! The index holds no key and no metadata: both are in the object's record on disk, read
//! back (and the key compared) on a hit whose record is not in the record cache (module
//! `records`). Two keys whose 64-bit hashes collide share a slot: the newer replaces the
//! older, and a lookup of the other key reads the record, sees another key and misses.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::num::NonZeroU16;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use super::Disk;
use super::fill::{FillShared, FillState};
use super::volumes::Volume;
use crate::format::{self, ALIGN, TRAILER_LEN};

/// Number of index shards.
pub(super) const SHARDS: usize = 64;

/// Most volumes one disk may have: an entry names its volume in 16 bits.
pub(crate) const MAX_VOLUMES: u64 = u16::MAX as u64 - 1;
/// Largest body an entry can describe (40 bits).
pub(crate) const MAX_BODY: u64 = (1 << 40) - 1;

/// A hasher for keys that already are hashes: the map gets the hash as it is.
#[derive(Default)]
pub(super) struct PassHasher(u64);

/// A hasher for keys that already are hashes, for maps (the record cache) that pick their
/// own shards from the hash's bits: one multiply-xorshift round so that no bits they use
/// line up with the index's shard bits.
#[derive(Default)]
pub(super) struct MixHasher(u64);

impl Hasher for MixHasher {
    fn finish(&self) -> u64 {
        let h = self.0.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        h ^ (h >> 29)
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }
    fn write_u64(&mut self, i: u64) {
        self.0 = i;
    }
}

impl Hasher for PassHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }
    fn write_u64(&mut self, i: u64) {
        self.0 = i;
    }
}

/// One shard of the index.
pub(super) type Shard = HashMap<u64, Slot, BuildHasherDefault<PassHasher>>;

/// What the index holds for a key hash. 16 bytes: the fill's pointer sits beside the
/// entry's non-zero volume field, which is the enum's niche.
pub(super) enum Slot {
    Ready(Entry),
    Filling(Arc<FillShared>),
}

const _: () = assert!(std::mem::size_of::<Slot>() == 16);
const _: () = assert!(std::mem::size_of::<Entry>() == 16);

/// Set on an entry read since it was written: earns a second chance at reclaim.
const ACCESSED: u8 = 1;
/// Set on an entry whose metadata was replaced: the newest is in a metadata record,
/// named in the shard's side table ([`Disk::meta_at`]).
const REFRESHED: u8 = 2;

/// Where a complete object lives, packed into 16 bytes.
pub(super) struct Entry {
    /// Volume number + 1.
    vol1: NonZeroU16,
    /// 4 KiB pages of the record header before the body.
    hdr_pages: u8,
    flags: AtomicU8,
    /// Record offset in 4 KiB pages.
    rec_page: u32,
    len_lo: u32,
    /// Low 24 bits: the volume's incarnation (its low bits); high 8: body length bits
    /// 32..40.
    seq_len: u32,
}

/// An [`Entry`] unpacked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Loc {
    pub(super) vol: u32,
    /// Low 24 bits of the incarnation.
    pub(super) seq24: u32,
    pub(super) rec_off: u64,
    pub(super) body_off: u64,
    pub(super) body_len: u64,
}

impl Loc {
    /// A location. It packs into an [`Entry`] when the volume and the body length are
    /// within [`MAX_VOLUMES`] and [`MAX_BODY`], which `Disk::open` ensures.
    pub(super) fn new(vol: u32, seq: u64, rec_off: u64, body_off: u64, body_len: u64) -> Loc {
        Loc { vol, seq24: seq24(seq), rec_off, body_off, body_len }
    }

    /// Disk bytes of the record (header pages, body, trailer, padding).
    pub(super) fn span(&self) -> u64 {
        format::align_up(self.body_off - self.rec_off + self.body_len + TRAILER_LEN as u64)
    }

    /// Whether this is the object at `rec_off` of incarnation `seq` of volume `vol`.
    pub(super) fn is(&self, vol: u32, seq: u64, rec_off: u64) -> bool {
        self.vol == vol && self.seq24 == seq24(seq) && self.rec_off == rec_off
    }
}

/// The low 24 bits of an incarnation, as entries keep it.
pub(super) fn seq24(seq: u64) -> u32 {
    (seq & 0xff_ffff) as u32
}

impl Entry {
    pub(super) fn new(l: Loc) -> Entry {
        debug_assert!(l.rec_off.is_multiple_of(ALIGN) && l.body_off.is_multiple_of(ALIGN));
        debug_assert!(u64::from(l.vol) < MAX_VOLUMES && l.body_len <= MAX_BODY);
        let hdr_pages = ((l.body_off - l.rec_off) / ALIGN) as u8;
        Entry {
            vol1: NonZeroU16::new((l.vol + 1) as u16).unwrap_or(NonZeroU16::MAX),
            hdr_pages,
            flags: AtomicU8::new(0),
            rec_page: (l.rec_off / ALIGN) as u32,
            len_lo: l.body_len as u32,
            seq_len: l.seq24 | (((l.body_len >> 32) as u32) << 24),
        }
    }

    pub(super) fn loc(&self) -> Loc {
        let rec_off = u64::from(self.rec_page) * ALIGN;
        Loc {
            vol: u32::from(self.vol1.get()) - 1,
            seq24: self.seq_len & 0xff_ffff,
            rec_off,
            body_off: rec_off + u64::from(self.hdr_pages) * ALIGN,
            body_len: u64::from(self.len_lo) | (u64::from(self.seq_len >> 24) << 32),
        }
    }

    pub(super) fn vol(&self) -> u32 {
        u32::from(self.vol1.get()) - 1
    }

    pub(super) fn span(&self) -> u64 {
        self.loc().span()
    }

    /// Marks the entry read (relaxed: a hint for reclaim).
    pub(super) fn touch(&self) {
        if self.flags.load(Ordering::Relaxed) & ACCESSED == 0 {
            self.flags.fetch_or(ACCESSED, Ordering::Relaxed);
        }
    }

    pub(super) fn accessed(&self) -> bool {
        self.flags.load(Ordering::Relaxed) & ACCESSED != 0
    }

    pub(super) fn refreshed(&self) -> bool {
        self.flags.load(Ordering::Relaxed) & REFRESHED != 0
    }

    pub(super) fn set_refreshed(&self) {
        self.flags.fetch_or(REFRESHED, Ordering::Relaxed);
    }
}

/// Where the newest metadata of a refreshed object is: a metadata record, and the object
/// it was written for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct MetaAt {
    /// The object (its volume, incarnation bits and record offset).
    pub(super) obj: (u32, u32, u64),
    /// The metadata record: volume, full incarnation, offset.
    pub(super) vol: u32,
    pub(super) seq: u64,
    pub(super) rec_off: u64,
}

/// The side table of refreshed objects, one per shard.
pub(super) type Metas = Mutex<HashMap<u64, MetaAt, BuildHasherDefault<PassHasher>>>;

/// The 64 bits of a key's hash the index keys on.
pub(crate) fn index_hash(key: &[u8]) -> u64 {
    format::key_hash(key) as u64
}

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
