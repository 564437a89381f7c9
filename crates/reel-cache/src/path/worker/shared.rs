//! The cache's cross-worker state ([`SharedCache`]: the store, its admission doorkeeper,
//! the in-flight map, the LL-HLS streams seen, small bodies, compressed representations,
//! counters) and purge.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};

use reel_ops::metrics::{Kind, PromWriter};
use reel_store::{Admission, Lookup, Store, StoreError};

use super::encoded::Encodings;
use super::hints::Streams;
use super::settings::Settings;
use super::small::SmallBodies;
use crate::key::{CacheKey, prefix_for_purge};
use crate::path::answer::pass_stream::PassBuffered;
use crate::path::phase::inflight::Inflight;
use crate::path::phase::variants::Marker;
use crate::path::piecewise::store_keys::{derived_keys, head_key};
use crate::policy::meta::StoredMeta;

pub use crate::path::piecewise::store_keys::VARIANT_SEP;

/// Shared by every worker (`Arc`): the store and the coalescing map.
pub struct SharedCache {
    /// The segment store.
    pub store: Arc<Store>,
    /// Origin fetches in flight.
    pub inflight: Arc<Inflight>,
    /// Bytes of pass-through bodies held between origins and clients.
    pub pass_buffered: Arc<PassBuffered>,
    /// Counters of sliced objects.
    pub slices: SliceCounters,
    /// The LL-HLS streams whose playlists passed through.
    pub streams: Arc<Streams>,
    /// Small bodies read whole on arrival, answered from memory.
    pub small: Arc<SmallBodies>,
    /// Compressed representations of stored text responses.
    pub encodings: Arc<Encodings>,
    /// Which fetches are stored under `second-hit` (`[store] admission`).
    pub admission: Admission,
    /// Whether the node is overloaded (its health verdict), set by the health sampler:
    /// `du` in `CMSD-Dynamic` (`[site.cmsd]`).
    pub duress: Arc<AtomicBool>,
}

/// `[store] admission_window` when none is given.
pub const DEFAULT_ADMISSION_WINDOW: u64 = 1_000_000;

/// Counters of the sliced path, all workers together (`/metrics`).
#[derive(Default)]
pub struct SliceCounters {
    /// Slices fetched because a viewer's response needed them.
    pub viewer_fetches: AtomicU64,
    /// Slices fetched ahead of a sequential viewer.
    pub read_ahead_fetches: AtomicU64,
    /// Read-ahead not started because a connection or the worker had its most in flight.
    pub read_ahead_skipped: AtomicU64,
    /// Slices after the first of a response that no fetch had started when the response
    /// reached them: the viewer waited on the origin.
    pub waits: AtomicU64,
    /// Slices whose validators or length disagreed with the object's head (the object
    /// changed at the origin).
    pub version_changes: AtomicU64,
}

impl SliceCounters {
    /// Writes the counters in the Prometheus text format.
    pub fn render_prometheus(&self, p: &mut PromWriter) {
        let fam = "reel_slice_fetches_total";
        p.family(fam, Kind::Counter, "Slices fetched from origins, by why.");
        p.sample(fam, &[("reason", "viewer")], self.viewer_fetches.load(Relaxed));
        p.sample(fam, &[("reason", "read_ahead")], self.read_ahead_fetches.load(Relaxed));
        p.single(
            "reel_slice_read_ahead_skipped_total",
            Kind::Counter,
            "Read-ahead not started: the connection or worker had its most in flight.",
            self.read_ahead_skipped.load(Relaxed),
        );
        p.single(
            "reel_slice_waits_total",
            Kind::Counter,
            "Slices after a response's first that it had to fetch itself when it got there.",
            self.waits.load(Relaxed),
        );
        p.single(
            "reel_slice_version_changes_total",
            Kind::Counter,
            "Slices whose validators or length disagreed with their object's head.",
            self.version_changes.load(Relaxed),
        );
    }
}

/// Why a purge request was refused.
#[derive(Debug, thiserror::Error)]
pub enum PurgeError {
    /// Not an `http://host/path` URL.
    #[error("expected a URL such as http://HOST[:PORT]/PATH (https:// or no scheme too)")]
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
    /// Wraps the store, with the default admission window.
    pub fn new(store: Arc<Store>) -> Arc<SharedCache> {
        SharedCache::with_admission_window(store, DEFAULT_ADMISSION_WINDOW)
    }

    /// Wraps the store; under `second-hit`, the doorkeeper remembers `window` objects.
    pub fn with_admission_window(store: Arc<Store>, window: u64) -> Arc<SharedCache> {
        Arc::new(SharedCache {
            store,
            inflight: Inflight::new(),
            pass_buffered: Arc::default(),
            slices: SliceCounters::default(),
            streams: Arc::default(),
            small: Arc::default(),
            encodings: Arc::default(),
            admission: Admission::new(window),
            duress: Arc::default(),
        })
    }

    /// Removes what the store holds for the primary key `key`: its object, or its Vary
    /// marker and every variant the marker lists. A lookup, not a scan; only what exists
    /// is removed, so a key with nothing stored writes nothing. The marker goes first: from
    /// then on no variant can be served, whatever happens to the rest. Returns how many
    /// objects were removed.
    pub async fn remove_url(&self, key: &[u8]) -> Result<u64, StoreError> {
        let marker = match self.store.lookup(key).await {
            None => return self.remove_derived(key).await,
            Some(Lookup::Hit(h)) => Marker::parse(h.meta()),
            Some(Lookup::Filling(f)) => Marker::parse(f.meta()),
        };
        let mut n = u64::from(self.store.remove(key).await?);
        for k in marker.iter().flat_map(|m| m.keys(key)) {
            n += u64::from(self.store.remove(&k).await?);
        }
        Ok(n + self.remove_derived(key).await?)
    }

    /// Removes the heads of a URL's sliced object and partial responses, if stored: what
    /// they describe can no longer be reached.
    async fn remove_derived(&self, key: &[u8]) -> Result<u64, StoreError> {
        let mut n = 0;
        for k in derived_keys(key) {
            if self.store.contains(&k) {
                n += u64::from(self.store.remove(&k).await?);
            }
        }
        Ok(n)
    }

    /// Marks the stored object `key` stale (soft purge); false if it is not stored.
    async fn invalidate_one(&self, key: &[u8]) -> Result<bool, StoreError> {
        let Some(Lookup::Hit(hit)) = self.store.lookup(key).await else { return Ok(false) };
        let Ok(mut meta) = StoredMeta::decode(hit.meta()) else { return Ok(false) };
        drop(hit);
        meta.set_invalidated(true);
        self.store.update_meta(key, meta.encode().into()).await
    }

    /// Purges `url` (or, with `prefix`, every URL starting with it) on every worker at
    /// once: the store's index is shared. A soft purge marks the object (each variant of a
    /// URL with `Vary`) stale instead, so it is revalidated before use and can still be
    /// served by `stale-if-error`. Returns how many objects were affected.
    pub async fn purge(
        &self,
        settings: &Settings,
        url: &str,
        prefix: bool,
        soft: bool,
    ) -> Result<u64, PurgeError> {
        let (host, path) = split_purge_url(url)?;
        let site = settings.site_for(host).ok_or_else(|| PurgeError::UnknownHost(host.into()))?;
        if prefix {
            if soft {
                return Err(PurgeError::SoftPrefix);
            }
            let p = prefix_for_purge(host.as_bytes(), path.as_bytes())?;
            return Ok(self.store.remove_prefix(p.as_bytes()).await?);
        }
        let key = CacheKey::build(host.as_bytes(), path.as_bytes(), &site.key)?;
        let key = key.as_bytes();
        if !soft {
            return Ok(self.remove_url(key).await?);
        }
        // A sliced head is marked like an object; a partial object's index is removed
        // (its pieces are fetched again as they are needed).
        let mut derived = u64::from(self.invalidate_one(&head_key(key)).await?);
        let index = &derived_keys(key)[1];
        if self.store.contains(index) {
            derived += u64::from(self.store.remove(index).await?);
        }
        let Some(Lookup::Hit(hit)) = self.store.lookup(key).await else { return Ok(derived) };
        let Some(marker) = Marker::parse(hit.meta()) else {
            drop(hit);
            return Ok(derived + u64::from(self.invalidate_one(key).await?));
        };
        drop(hit);
        if marker.generation.is_none() {
            // A marker from before variant lists: its variants cannot be named, so the
            // marker goes, which leaves them unreachable.
            return Ok(derived + u64::from(self.store.remove(key).await?));
        }
        let mut n = derived;
        for k in marker.keys(key) {
            n += u64::from(self.invalidate_one(&k).await?);
        }
        Ok(n)
    }
}

/// A purge URL as a viewer would type it for the site: `http://`, `https://` (any case) or
/// no scheme; the host with or without a port and in any case (the cache key lowercases it
/// and drops the port); a `#fragment`, which no request carries, ignored. Returns the host
/// (port included) and the path with its query.
fn split_purge_url(url: &str) -> Result<(&str, &str), PurgeError> {
    let url = url.split('#').next().unwrap_or_default();
    let rest = match url.split_once("://") {
        Some((scheme, rest))
            if scheme.eq_ignore_ascii_case("http") || scheme.eq_ignore_ascii_case("https") =>
        {
            rest
        }
        Some(_) => return Err(PurgeError::BadUrl),
        None => url,
    };
    let (host, path) = match rest.find(['/', '?']) {
        Some(i) if rest.as_bytes()[i] == b'/' => (&rest[..i], &rest[i..]),
        Some(_) => return Err(PurgeError::BadUrl),
        None => (rest, "/"),
    };
    if host.is_empty() || host.contains('@') {
        return Err(PurgeError::BadUrl);
    }
    Ok((host, path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn purge_urls_as_viewers_type_them() {
        fn ok(u: &str) -> Option<(&str, &str)> {
            split_purge_url(u).ok()
        }
        let want = Some(("cdn.example.com:8080", "/a/b.ts?x=1"));
        assert_eq!(ok("http://cdn.example.com:8080/a/b.ts?x=1"), want);
        assert_eq!(ok("cdn.example.com:8080/a/b.ts?x=1#t=10"), want);
        assert_eq!(ok("HTTPS://cdn.example.com:8080/a/b.ts?x=1"), want);
        assert_eq!(ok("http://Cdn.Example.com"), Some(("Cdn.Example.com", "/")));
        assert_eq!(ok("http://[::1]:8080/x"), Some(("[::1]:8080", "/x")));
        for bad in ["", "/a.ts", "ftp://h/a", "http:///a", "http://u@h/a", "http://h?x=1", "#x"] {
            assert!(split_purge_url(bad).is_err(), "{bad:?}");
        }
    }
}
