//! The record cache: key, metadata blob and store time of recently hit objects, so a
//! hit on a hot object reads nothing but its index entry. A hit on any other object
//! reads its record header (one read of its header pages, usually from the page cache),
//! compares the key and puts the record here. Bounded by bytes (`quick_cache`, whose
//! policy keeps a scan of cold objects from flushing the hot ones).
//!
//! An entry is valid for one version of an object: [`Ver`] names the object's record and
//! the metadata record of its newest refresh, so a replaced or refreshed object never
//! finds the old version here (it is replaced on its next hit).

use std::hash::BuildHasherDefault;
use std::sync::Arc;

use bytes::Bytes;
use quick_cache::Weighter;
use quick_cache::sync::{Cache, DefaultLifecycle};

use super::entry::Loc;
use super::index::{MetaAt, MixHasher};

/// Bytes an entry costs beside its key and metadata (the `Arc`, the cache's slot).
const OVERHEAD: u64 = 96;

/// The version of an object a record belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Ver {
    pub(super) loc: Loc,
    meta: Option<MetaAt>,
}

impl Ver {
    pub(super) fn new(loc: Loc, meta: Option<MetaAt>) -> Ver {
        Ver { loc, meta }
    }
}

/// What a hit needs from an object's record.
pub(super) struct Record {
    pub(super) ver: Ver,
    /// The key's xxh3-128 (compared on a hit instead of the key).
    pub(super) kh: u128,
    pub(super) key: Box<[u8]>,
    pub(super) meta: Bytes,
    pub(super) stored_at: u64,
}

#[derive(Clone)]
struct ByBytes;

impl Weighter<u64, Arc<Record>> for ByBytes {
    fn weight(&self, _: &u64, r: &Arc<Record>) -> u64 {
        r.key.len() as u64 + r.meta.len() as u64 + OVERHEAD
    }
}

type Inner = Cache<
    u64,
    Arc<Record>,
    ByBytes,
    BuildHasherDefault<MixHasher>,
    DefaultLifecycle<u64, Arc<Record>>,
>;

/// The cache of one disk.
pub(super) struct Records {
    cache: Option<Inner>,
}

impl Records {
    /// A cache of at most `bytes` (0: none; every hit reads its record).
    pub(super) fn new(bytes: u64) -> Records {
        let cache = (bytes > 0).then(|| {
            // An estimate of the items, for the cache's table: records of a few hundred
            // bytes.
            let items = (bytes / 512).clamp(64, 1 << 22) as usize;
            Inner::with(items, bytes, ByBytes, Default::default(), Default::default())
        });
        Records { cache }
    }

    /// The record of hash `h` if it is that of version `ver`.
    pub(super) fn get(&self, h: u64, ver: &Ver) -> Option<Arc<Record>> {
        self.cache.as_ref()?.get(&h).filter(|r| r.ver == *ver)
    }

    pub(super) fn insert(&self, h: u64, r: Arc<Record>) {
        if let Some(c) = &self.cache {
            c.insert(h, r);
        }
    }

    /// The hashes and versions of the cached records whose key starts with `prefix`.
    pub(super) fn matching(&self, prefix: &[u8]) -> Vec<(u64, Ver)> {
        let Some(c) = &self.cache else { return Vec::new() };
        c.iter().filter(|(_, r)| r.key.starts_with(prefix)).map(|(h, r)| (h, r.ver)).collect()
    }

    /// Bytes held.
    pub(super) fn bytes(&self) -> u64 {
        self.cache.as_ref().map_or(0, |c| c.weight())
    }

    pub(super) fn remove(&self, h: u64) {
        if let Some(c) = &self.cache {
            c.remove(&h);
        }
    }
}
