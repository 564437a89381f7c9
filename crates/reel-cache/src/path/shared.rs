//! The cache's cross-worker state: the store and the in-flight map, plus purge.

use std::sync::Arc;

use reel_store::Store;

use super::inflight::Inflight;
use super::settings::Settings;
use crate::key::{CacheKey, prefix_for_purge};
use crate::policy::meta::StoredMeta;

/// Separates a primary key from a variant's secondary key (Vary) in store keys. A byte
/// that a normalised key never contains.
pub const VARIANT_SEP: u8 = 0x00;

/// Shared by every worker (`Arc`): the store and the coalescing map.
pub struct SharedCache {
    /// The segment store.
    pub store: Arc<Store>,
    /// Origin fetches in flight.
    pub inflight: Arc<Inflight>,
}

/// Why a purge request was refused.
#[derive(Debug, thiserror::Error)]
pub enum PurgeError {
    /// Not an `http://host/path` URL.
    #[error("expected an absolute http:// or https:// URL")]
    BadUrl,
    /// No site serves that host.
    #[error("no site serves host {0:?}")]
    UnknownHost(String),
    /// The path cannot be keyed.
    #[error("invalid URL: {0}")]
    Key(#[from] crate::key::KeyError),
    /// Soft purge needs each object's metadata; by prefix it is not supported.
    #[error("soft purge is supported for exact URLs only")]
    SoftPrefix,
    /// The store failed.
    #[error("store: {0}")]
    Store(#[from] reel_store::StoreError),
}

impl SharedCache {
    /// Wraps the store.
    pub fn new(store: Arc<Store>) -> Arc<SharedCache> {
        Arc::new(SharedCache { store, inflight: Inflight::new() })
    }

    /// Purges `url` (or, with `prefix`, every URL starting with it) on every worker at
    /// once: the store's index is shared. A soft purge marks the object stale instead, so
    /// it is revalidated before use and can still be served by `stale-if-error`; the
    /// variants of a URL with `Vary` cannot be enumerated, so a soft purge removes them.
    /// Returns how many objects were affected.
    pub async fn purge(
        &self,
        settings: &Settings,
        url: &str,
        prefix: bool,
        soft: bool,
    ) -> Result<u64, PurgeError> {
        let rest = url
            .strip_prefix("http://")
            .or_else(|| url.strip_prefix("https://"))
            .ok_or(PurgeError::BadUrl)?;
        let (host, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/"),
        };
        if host.is_empty() {
            return Err(PurgeError::BadUrl);
        }
        let site = settings.site_for(host).ok_or_else(|| PurgeError::UnknownHost(host.into()))?;
        if prefix {
            if soft {
                return Err(PurgeError::SoftPrefix);
            }
            let p = prefix_for_purge(host.as_bytes(), path.as_bytes())?;
            return Ok(self.store.remove_prefix(p.as_bytes()).await?);
        }
        let key = CacheKey::build(host.as_bytes(), path.as_bytes(), &site.key)?;
        let mut variants = key.as_bytes().to_vec();
        variants.push(VARIANT_SEP);
        if soft {
            let Some(reel_store::Lookup::Hit(hit)) = self.store.lookup(key.as_bytes()) else {
                return Ok(0);
            };
            if super::respond::vary_marker(hit.meta()).is_some() {
                // The variants of a varying URL cannot be enumerated (the store offers
                // removal by prefix, not listing), so they cannot each be marked stale:
                // they are removed instead, which is what a soft purge must at least
                // achieve (no variant served without asking the origin).
                return Ok(self.store.remove_prefix(&variants).await?);
            }
            let Ok(mut meta) = StoredMeta::decode(hit.meta()) else { return Ok(0) };
            meta.set_invalidated(true);
            let n = self.store.update_meta(key.as_bytes(), meta.encode().into()).await?;
            return Ok(u64::from(n));
        }
        let mut n = u64::from(self.store.remove(key.as_bytes()).await?);
        n += self.store.remove_prefix(&variants).await?;
        Ok(n)
    }
}
