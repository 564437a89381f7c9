//! Measurement support (feature `measure`): fills a store's index with synthetic
//! entries, without writing records, so the index's memory per object can be measured at
//! the object counts of a large box (tens of millions) on a small disk.

use crate::Store;

/// Puts `n` synthetic entries into the index of the store's first disk in service, as
/// fills would (one per key `key(i)`, spread over its volumes, each counted in its
/// volume's object list). They name no record: a lookup of one misses, and no checkpoint
/// keeps them. Returns how many were added.
pub fn fill_index(store: &Store, n: u64, key: impl Fn(u64) -> String) -> u64 {
    match store.slots.iter().find_map(|s| s.in_service()) {
        Some(d) => d.fill_synthetic(n, key),
        None => 0,
    }
}
