//! What removals and purges record while the index loads ([`LoadState`]), so the load
//! (module `rebuild`) does not bring back what they removed, and the tombstones due
//! once it found them on disk.

use std::collections::{HashMap, HashSet};

/// What remove and purge calls record while the index is loading, so the load does not
/// bring back what they removed.
#[derive(Default)]
pub(super) struct LoadState {
    pub(super) active: bool,
    pub(super) keys: HashSet<u64>,
    /// Keys removed during the load that nothing in the live index matched: no tombstone
    /// was written for them, since they may not be stored at all.
    pub(super) unmatched: HashMap<u64, Box<[u8]>>,
    /// Of those, the ones the load found on disk, with the record each tombstone must
    /// name (incarnation, offset); written by the next maintenance pass.
    pub(super) tombstones_due: Vec<DueTombstone>,
}

/// A key and the record (incarnation, offset) its tombstone names.
pub(super) type DueTombstone = (Box<[u8]>, (u64, u64));
