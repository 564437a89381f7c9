//! A varying URL's marker as fills write it: the variant a response is stored as is
//! listed in the key's Vary marker (`variants`), which is rewritten, or replaced with its
//! variants removed, when that changes it. Only the leader of the key's fetch writes it
//! (the in-flight map serialises them).

use bytes::Bytes;
use reel_store::{Lookup, StoreError};

use super::Filler;
use crate::key::CacheKey;
use crate::path::phase::variants::{Marker, variant_key};

impl Filler<'_> {
    /// The Vary marker stored at `key`, if any.
    pub(super) async fn current_marker(&self, key: &CacheKey) -> Option<Marker> {
        match self.shared.store.lookup(key.as_bytes()).await? {
            Lookup::Hit(h) => Marker::parse(h.meta()),
            Lookup::Filling(_) => None,
        }
    }

    /// Removes `hashes` of `marker`'s variants from the store. A failure leaves a variant
    /// that no marker lists, unreachable (see `variants`).
    pub(super) async fn remove_variants(&self, key: &CacheKey, marker: &Marker, hashes: &[u64]) {
        for &h in hashes {
            let _ = self.shared.store.remove(&marker.key(key.as_bytes(), h)).await;
        }
    }

    /// Lists the variant `hash` in `key`'s Vary marker for `names`, writing the marker
    /// when that changes it, and returns the variant's store key. The caller leads the
    /// fetch of `key`, so no other fill rewrites the marker meanwhile.
    ///
    /// A marker for other fields (or from before generations) is replaced by a new one
    /// with a new generation and its variants removed. Listed variants the store no
    /// longer has are dropped from the list; beyond `max_variants`, the oldest listed
    /// variants are removed to make room.
    pub(super) async fn list_variant(
        &self,
        key: &CacheKey,
        names: &[String],
        hash: u64,
    ) -> Result<Vec<u8>, StoreError> {
        let store = &self.shared.store;
        let (mut marker, mut changed) = match self.current_marker(key).await {
            Some(m) if m.names == names && m.generation.is_some() => (m, false),
            old => {
                if let Some(old) = old {
                    self.remove_variants(key, &old, &old.variants).await;
                }
                (Marker::new(key, names.to_vec()), true)
            }
        };
        let listed = marker.variants.len();
        let kb = key.as_bytes();
        let generation = marker.generation;
        marker.variants.retain(|&h| h == hash || store.contains(&variant_key(kb, generation, h)));
        changed |= marker.variants.len() != listed;
        if !marker.variants.contains(&hash) {
            // Beyond `[cache] max_variants` the oldest variants make room: a bound on what
            // one URL holds (an attacker cycling `Accept-Encoding` values), and a new
            // variant is always stored, so filling the list cannot keep viewers' own
            // variants out of the cache.
            let max = self.settings.max_variants.max(1);
            if marker.variants.len() >= max {
                let evicted: Vec<u64> =
                    marker.variants.drain(..=marker.variants.len() - max).collect();
                self.remove_variants(key, &marker, &evicted).await;
            }
            marker.variants.push(hash);
            changed = true;
        }
        if changed {
            let mut w = store.begin_fill(kb, marker.encode(), Some(0)).await?;
            w.append(Bytes::new()).await?;
            w.commit().await?;
        }
        Ok(marker.key(kb, hash))
    }
}
