//! A 206 stored as the part of a representation it was asked for: a slice of a sliced
//! object with the object's head (`slice`), or a piece of a partially stored object
//! listed in the URL's index (`oversized`); and the index a 200 too large for the store
//! leaves behind. Anything but the part asked for is refused (and then not stored). The
//! key layouts are in `store_keys`.

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;

use bytes::Bytes;
use http::header::CONTENT_RANGE;
use reel_origin::OriginResponse;
use reel_store::{FillWriter, Filling, Lookup, Store, StoreError};

use super::Filler;
use crate::key::CacheKey;
use crate::path::phase::inflight::{Role, State};
use crate::path::piecewise::span;
use crate::path::piecewise::store_keys::{
    decode_index, encode_index, head_key, head_version, index_key, partial_lock_key, piece_key,
    piece_meta, slice_key, slice_len, slice_meta, version_of,
};
use crate::policy::meta::ResponseTimes;
use crate::policy::range::{ByteRange, parse_content_range};
use crate::policy::rules::TtlRule;
use crate::policy::vary::{Vary, VaryKey};

/// How many times an index read or rewrite waits out another before giving up.
const MAX_ROUNDS: usize = 4;
/// Most pieces listed per URL; beyond, the oldest are dropped (and left unreachable).
const MAX_PIECES: usize = 256;

/// A part of a representation a fetch asks the origin for, whose 206 is stored as that
/// part.
#[derive(Clone, Copy)]
pub(in crate::path) enum Part<'a> {
    /// One slice of a sliced object.
    Slice(&'a SlicePart),
    /// A piece of a partially stored object.
    Range(&'a RangePart),
}

/// Slice `k` of an object sliced by `size`.
pub(in crate::path) struct SlicePart {
    /// The slice size.
    pub size: u64,
    /// The slice's index.
    pub k: u64,
    /// The version of the head the request holds, if any.
    pub holds: Option<u64>,
    /// Whether that head is stale: a matching slice freshens it.
    pub refresh: bool,
}

/// A range of a partially stored representation, stored as a piece.
pub(in crate::path) struct RangePart {
    /// The bytes asked for.
    pub range: ByteRange,
    /// The version of the index the request holds.
    pub holds: u64,
    /// Whether that index is stale: a matching piece freshens it.
    pub refresh: bool,
}

impl Filler<'_> {
    /// Starts storing a 206 as the part it answers. Returns the writer and a reader.
    pub(in crate::path) async fn begin_part(
        &self,
        part: Part<'_>,
        key: &CacheKey,
        resp: &OriginResponse,
        times: ResponseTimes,
        rule: Option<&TtlRule>,
    ) -> Result<(FillWriter, Filling), StoreError> {
        match part {
            Part::Slice(s) => self.begin_slice(s, key, resp, times, rule).await,
            Part::Range(r) => self.begin_range(r, key, resp, times, rule).await,
        }
    }

    async fn begin_slice(
        &self,
        job: &SlicePart,
        key: &CacheKey,
        resp: &OriginResponse,
        times: ResponseTimes,
        rule: Option<&TtlRule>,
    ) -> Result<(FillWriter, Filling), StoreError> {
        let total = this_slice(resp, job.size, job.k).ok_or(StoreError::Range)?;
        if Vary::parse(&resp.headers) != Vary::None {
            // Slices are one representation for everyone; a varying one is passed.
            return Err(StoreError::Range);
        }
        let store = &self.shared.store;
        let primary = key.as_bytes();
        let version = version_of(&resp.headers, total);
        // The head stored, or being written by another slice's fetch.
        let current = match store.lookup(&head_key(primary)).await {
            Some(Lookup::Hit(h)) => head_version(h.meta()),
            Some(Lookup::Filling(f)) => head_version(f.meta()),
            None => None,
        };
        if job.holds.is_some_and(|v| v != version) {
            self.shared.slices.version_changes.fetch_add(1, Relaxed);
        }
        if current != Some(version) || job.refresh {
            let skip = ["content-range", "content-length"];
            let vk = VaryKey::default();
            let meta = self.meta_for(200, &resp.headers, &skip, vk, times, Some(total), rule);
            self.write_head(&head_key(primary), meta.encode().into()).await?;
        }
        let sk = slice_key(primary, version, job.size, job.k);
        let len = slice_len(job.size, total, job.k);
        let meta = slice_meta(version, job.size, job.k);
        let writer = store.begin_fill(&sk, meta, Some(len)).await?;
        match store.lookup(&sk).await {
            Some(Lookup::Filling(f)) => Ok((writer, f)),
            _ => Err(StoreError::Gone),
        }
    }

    /// Writes an object's head (a metadata-only object). Another fill of the head can only
    /// be a moment's write: try again briefly.
    async fn write_head(&self, key: &[u8], meta: Bytes) -> Result<(), StoreError> {
        let store = &self.shared.store;
        let mut last = StoreError::AlreadyFilling;
        for _ in 0..8 {
            match store.begin_fill(key, meta.clone(), Some(0)).await {
                Ok(mut w) => {
                    w.append(Bytes::new()).await?;
                    return w.commit().await.map(drop);
                }
                Err(StoreError::AlreadyFilling) => tokio::task::yield_now().await,
                Err(e) => return Err(e),
            }
            last = StoreError::AlreadyFilling;
        }
        Err(last)
    }

    /// Starts storing a 206 as a piece and lists it in the index.
    async fn begin_range(
        &self,
        job: &RangePart,
        key: &CacheKey,
        resp: &OriginResponse,
        times: ResponseTimes,
        rule: Option<&TtlRule>,
    ) -> Result<(FillWriter, Filling), StoreError> {
        let total = exactly(resp, job.range).ok_or(StoreError::Range)?;
        if Vary::parse(&resp.headers) != Vary::None {
            return Err(StoreError::Range);
        }
        let primary = key.as_bytes();
        let version = version_of(&resp.headers, total);
        if job.holds != version {
            self.shared.slices.version_changes.fetch_add(1, Relaxed);
        }
        let skip = ["content-range", "content-length"];
        let meta =
            self.meta_for(200, &resp.headers, &skip, VaryKey::default(), times, Some(total), rule);
        let r = job.range;
        self.update_index(primary, version, meta.encode(), job.refresh, |p| {
            p.retain(|x| *x != r);
            p.push(r);
        })
        .await?;
        let store = &self.shared.store;
        let pk = piece_key(primary, version, r);
        let writer = store.begin_fill(&pk, piece_meta(version, r), Some(r.len())).await?;
        match store.lookup(&pk).await {
            Some(Lookup::Filling(f)) => Ok((writer, f)),
            _ => Err(StoreError::Gone),
        }
    }

    /// Leaves an index (no pieces yet) for a 200 the store refused as too large, so the
    /// URL's ranges are fetched and stored from now on.
    pub(in crate::path) async fn note_too_large(
        &self,
        key: &CacheKey,
        resp: &OriginResponse,
        times: ResponseTimes,
        rule: Option<&TtlRule>,
    ) {
        let Some(total) = resp.body.content_length() else { return };
        if resp.status.as_u16() != 200 || Vary::parse(&resp.headers) != Vary::None {
            return;
        }
        let skip = ["content-length"];
        let meta =
            self.meta_for(200, &resp.headers, &skip, VaryKey::default(), times, Some(total), rule);
        let version = version_of(&resp.headers, total);
        let _ = self.update_index(key.as_bytes(), version, meta.encode(), false, |_| {}).await;
    }

    /// Rewrites the index of `primary` for `version` under its lock: the pieces listed
    /// (none if the index was of another version) changed by `edit`, the metadata the one
    /// stored unless it is of another version or `refresh`.
    async fn update_index(
        &self,
        primary: &[u8],
        version: u64,
        meta: Vec<u8>,
        refresh: bool,
        edit: impl FnOnce(&mut Vec<ByteRange>),
    ) -> Result<(), StoreError> {
        let store = &self.shared.store;
        let key = index_key(primary);
        for _ in 0..MAX_ROUNDS * 4 {
            let mut lead = match self.shared.inflight.join(&partial_lock_key(primary, "i")) {
                Role::Lead(l) => l,
                Role::Follow(f) => {
                    let _ = f.wait().await;
                    continue;
                }
            };
            let (meta, mut pieces) = match read_index(store, primary).await {
                Some((m, p)) if head_version(&m) == Some(version) => {
                    (if refresh { meta } else { m.to_vec() }, p)
                }
                _ => (meta, Vec::new()),
            };
            edit(&mut pieces);
            if pieces.len() > MAX_PIECES {
                pieces.drain(..pieces.len() - MAX_PIECES);
            }
            let res = async {
                let mut w = store.begin_fill(&key, encode_index(&meta, &pieces), Some(0)).await?;
                w.append(Bytes::new()).await?;
                w.commit().await.map(drop)
            }
            .await;
            lead.publish(State::Done);
            return res;
        }
        Err(StoreError::AlreadyFilling)
    }
}

/// The index stored for `primary`, waiting out one being written.
pub(in crate::path) async fn read_index(
    store: &Arc<Store>,
    primary: &[u8],
) -> Option<(Bytes, Vec<ByteRange>)> {
    let key = index_key(primary);
    for _ in 0..MAX_ROUNDS {
        match store.lookup(&key).await? {
            Lookup::Hit(h) => return decode_index(h.meta()),
            Lookup::Filling(mut f) => {
                let _ = f.wait_for(u64::MAX).await;
            }
        }
    }
    None
}

/// The total length a 206 announces if it is exactly slice `k` by `size`.
pub(in crate::path) fn this_slice(resp: &OriginResponse, size: u64, k: u64) -> Option<u64> {
    if resp.status.as_u16() != 206 {
        return None;
    }
    let v = resp.headers.get(CONTENT_RANGE)?;
    let (got, total) = parse_content_range(v.as_bytes())?;
    let total = total?;
    (span::bytes(size, total, k) == Some(got)).then_some(total)
}

/// The total length a 206 announces if it is exactly `r`.
pub(in crate::path) fn exactly(resp: &OriginResponse, r: ByteRange) -> Option<u64> {
    if resp.status.as_u16() != 206 {
        return None;
    }
    let (got, total) = parse_content_range(resp.headers.get(CONTENT_RANGE)?.as_bytes())?;
    (got == r).then_some(total).flatten()
}
