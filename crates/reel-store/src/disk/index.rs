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
use std::sync::{Arc, Mutex};

use super::entry::Entry;
use super::fill_state::FillShared;
use crate::format;

/// Number of index shards.
pub(super) const SHARDS: usize = 64;

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
