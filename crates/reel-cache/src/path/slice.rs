//! Slice caching (`[[site]] slice`): a large object answered from fixed-size slices, each
//! fetched from the origin with a `Range` request and stored as its own object.
//!
//! Store keys, all derived from the URL's cache key `K` (a normalised key never contains
//! the separator byte, so none can collide with a URL or a Vary variant):
//!
//! ```text
//! K ␀ s                      the object's head: the representation's stored metadata as
//!                            a 200 (headers, freshness, validators), total length as its
//!                            body length, no body
//! K ␀ s <version> <k>        slice k of that version (16 hex digits each)
//! K ␀ s # <k>                not stored: the in-flight key that coalesces fetches of slice k
//! ```
//!
//! The version is a hash of what every slice of one representation shares: `ETag`,
//! `Last-Modified` and the total length from `Content-Range` (RFC 9111 3.4 combines partial
//! responses only when they agree). A request reads the head once and asks for slices of
//! that version only, so it never sends bytes of two versions. A slice fetched from the
//! origin that disagrees with the head replaces the head: the slices of the old version
//! can no longer be reached (they leave with their volumes), and a response that already
//! sent bytes of the old version is cut (the connection closes) rather than spliced.
//!
//! Every fetch, a viewer's or read-ahead's, goes through the one fetch-and-store step
//! ([`Fetcher::fetch_and_store`]) with the slice as its [`Part`]; `begin_part` below checks
//! the 206 against the slice asked for and writes the head. An origin that ignores `Range`
//! answers 200: that is stored whole under the URL's key like any miss (the sliced path
//! then serves the whole object), or, too large for the store, streamed to that viewer.
//! The head's freshness is the object's: a stale head is revalidated with the next slice
//! fetch (conditional when that slice is stored, so a 304 freshens it).

use std::cell::RefCell;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use bytes::Bytes;
use http::header::{CONTENT_RANGE, RANGE};
use http::{HeaderMap, HeaderValue, uri::PathAndQuery};
use reel_http::{Method, Request, RequestBody, Response};
use reel_ops::metrics::{Kind, PromWriter, WorkerMetrics};
use reel_origin::{OriginRequest, OriginResponse};
use reel_store::{FillWriter, Filling, Lookup, StoreError};

use super::answer::Answer;
use super::fetch::{
    Fetched, Fetcher, Forward, Revalidating, Viewer, Withheld, fill_request, key_omits_query,
};
use super::inflight::{Lead, Role, State};
use super::partial::RangeJob;
use super::pieces::{self, Piece, PieceData, Pieces};
use super::respond::{Prepared, ReqHeaders, unix_now};
use super::serve::{not_modified, precondition_failed, stream_origin};
use super::settings::Site;
use super::shared::VARIANT_SEP;
use super::worker::{WorkerCache, local};
use crate::key::CacheKey;
use crate::policy::HeaderLookup;
use crate::policy::cache_control::RequestCacheControl;
use crate::policy::conditional::{self, Outcome, Validators};
use crate::policy::freshness::{Decision, decide, stale_if_error_ok};
use crate::policy::meta::ResponseTimes;
use crate::policy::multipart::{Multipart, fresh_boundary};
use crate::policy::range::{
    ByteRange, RangeSet, content_range, content_range_unsatisfied, parse_content_range, parse_range,
};
use crate::policy::rules::TtlRule;
use crate::policy::vary::{Vary, VaryKey};

/// How many times a request goes round (head, slice, fetch) before it passes.
const MAX_ROUNDS: usize = 4;
/// The tag after the separator of every sliced key.
const TAG: u8 = b's';
/// Marks in-flight keys.
const LOCK: u8 = b'#';
/// Metadata of a stored slice: this prefix, then its version and index.
const SLICE_META: &[u8] = b"\xffreel-slice\n";

/// The key of an object's head.
fn head_key(primary: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(primary.len() + 35);
    k.extend_from_slice(primary);
    k.extend_from_slice(&[VARIANT_SEP, TAG]);
    k
}

/// What names the slices of `version` cut by `size`: a change of either (a reload may
/// change the size) names other slices.
fn cut(version: u64, size: u64) -> u64 {
    let mut x = [0u8; 16];
    x[..8].copy_from_slice(&version.to_le_bytes());
    x[8..].copy_from_slice(&size.to_le_bytes());
    xxhash_rust::xxh3::xxh3_64(&x)
}

/// The key of slice `k` of `version` cut by `size`.
fn slice_key(primary: &[u8], version: u64, size: u64, k: u64) -> Vec<u8> {
    let mut key = head_key(primary);
    key.extend_from_slice(format!("{:016x}{k:016x}", cut(version, size)).as_bytes());
    key
}

/// The in-flight key of slice `k` by `size`, whatever its version: one fetch of it at a
/// time.
fn lock_key(primary: &[u8], size: u64, k: u64) -> Vec<u8> {
    let mut key = head_key(primary);
    key.push(LOCK);
    key.extend_from_slice(format!("{size:x}.{k:016x}").as_bytes());
    key
}

/// The keys a URL's key `primary` may have besides its own object: a sliced object's head
/// and a partial object's index. Purge and invalidation remove them with the URL (what
/// they describe can then no longer be reached).
pub(super) fn derived_keys(primary: &[u8]) -> [Vec<u8>; 2] {
    [head_key(primary), super::partial::index_key(primary)]
}

/// The key of a URL's sliced head (a plain stored metadata: soft purge marks it).
pub(super) fn head_key_of(primary: &[u8]) -> Vec<u8> {
    head_key(primary)
}

/// The in-flight key of slice `k` of `job`'s object.
pub(super) fn lock_key_of(job: &Job, k: u64) -> Vec<u8> {
    lock_key(job.primary(), job.size, k)
}

/// The metadata blob of a stored slice.
fn slice_meta(version: u64, size: u64, k: u64) -> Bytes {
    let mut b = SLICE_META.to_vec();
    b.extend_from_slice(format!("{version:016x}{size:x}.{k:016x}").as_bytes());
    b.into()
}

/// The version of a representation: its validators and total length (see the module doc).
pub(super) fn version_of<H: HeaderLookup + ?Sized>(h: &H, total: u64) -> u64 {
    let mut x = Vec::with_capacity(128);
    x.extend_from_slice(h.get_first("etag").unwrap_or_default());
    x.push(0);
    x.extend_from_slice(h.get_first("last-modified").unwrap_or_default());
    x.push(0);
    x.extend_from_slice(&total.to_le_bytes());
    xxhash_rust::xxh3::xxh3_64(&x)
}

/// Bytes in slice `k` of an object of `total` bytes (`k` below the slice count).
fn slice_len(size: u64, total: u64, k: u64) -> u64 {
    total.saturating_sub(k * size).min(size)
}

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

/// A part of a representation a fetch asks the origin for, whose 206 is stored as that
/// part ([`Viewer::part`]).
pub(super) enum Part<'a> {
    /// One slice of a sliced object.
    Slice(&'a SliceJob),
    /// A piece of a partially stored object (`partial`).
    Range(&'a RangeJob),
}

/// Slice `k` of an object sliced by `size`.
pub(super) struct SliceJob {
    size: u64,
    k: u64,
    /// The version of the head the request holds, if any.
    holds: Option<u64>,
    /// Whether that head is stale: a matching slice freshens it.
    refresh: bool,
}

/// An object's head as a request reads it.
#[derive(Clone)]
pub(super) struct Head {
    /// Its metadata, decoded once per worker.
    pub prep: Rc<Prepared>,
    /// The version of its slices.
    pub version: u64,
    /// The representation's length.
    pub total: u64,
}

impl Fetcher<'_> {
    /// Starts storing a 206 as the part it answers (see [`Part`]). Anything but the part
    /// asked for is refused (and then not stored).
    pub(super) async fn begin_part(
        &self,
        part: &Part<'_>,
        key: &CacheKey,
        resp: &OriginResponse,
        times: ResponseTimes,
        rule: Option<&TtlRule>,
    ) -> Result<(FillWriter, Filling), StoreError> {
        match part {
            Part::Slice(job) => self.begin_slice(job, key, resp, times, rule).await,
            Part::Range(job) => self.begin_range(job, key, resp, times, rule).await,
        }
    }

    async fn begin_slice(
        &self,
        job: &SliceJob,
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
        let current = match store.lookup(&head_key(primary)) {
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
            write_head(self, &head_key(primary), meta.encode().into()).await?;
        }
        let sk = slice_key(primary, version, job.size, job.k);
        let len = slice_len(job.size, total, job.k);
        let meta = slice_meta(version, job.size, job.k);
        let writer = store.begin_fill(&sk, meta, Some(len)).await?;
        match store.lookup(&sk) {
            Some(Lookup::Filling(f)) => Ok((writer, f)),
            _ => Err(StoreError::Gone),
        }
    }
}

/// The version a head's metadata blob describes.
pub(super) fn head_version(blob: &[u8]) -> Option<u64> {
    let m = crate::policy::meta::StoredMeta::decode(blob).ok()?;
    Some(version_of(m.headers(), m.body_len()?))
}

/// The total length a 206 announces if it is exactly slice `k` by `size`.
fn this_slice(resp: &OriginResponse, size: u64, k: u64) -> Option<u64> {
    if resp.status.as_u16() != 206 {
        return None;
    }
    let v = resp.headers.get(CONTENT_RANGE)?;
    let (got, total) = parse_content_range(v.as_bytes())?;
    let total = total?;
    let start = k.checked_mul(size)?;
    (start < total && got.start == start && got.end == start + slice_len(size, total, k) - 1)
        .then_some(total)
}

/// Writes an object's head (a metadata-only object). Another fill of the head can only be
/// a moment's write: try again briefly.
async fn write_head(fx: &Fetcher<'_>, key: &[u8], meta: Bytes) -> Result<(), StoreError> {
    let store = &fx.shared.store;
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

/// How a request got a slice.
pub(super) enum Got {
    /// Stored complete when the request looked.
    Stored,
    /// Being fetched by another request (or read-ahead): its bytes as they arrive.
    Joined,
    /// Fetched by the request itself; the origin's time.
    Led(Option<Duration>),
}

/// Why a request could not get a slice of the version it holds.
pub(super) enum Lost {
    /// The origin has another version now (the head was replaced).
    Changed,
    /// The origin ignored `Range` and the whole object is being stored under the URL.
    Whole(Filling),
    /// The origin's answer was not stored and is not the slice.
    NotStored(Box<OriginResponse>),
    /// The origin failed: the status for the client.
    Failed(u16),
    /// The fetch being waited for took longer than `lock_timeout`.
    LockTimeout,
}

impl Lost {
    pub(super) fn describe(&self) -> String {
        match self {
            Lost::Changed => "the object changed at the origin".into(),
            Lost::Whole(_) => "the origin ignored Range".into(),
            Lost::NotStored(r) => format!("unexpected origin answer {}", r.status),
            Lost::Failed(st) => format!("origin failed ({st})"),
            Lost::LockTimeout => "slice fetch took longer than lock_timeout".into(),
        }
    }
}

/// A sliced request's own copy of what its fetches need, so its body task and read-ahead
/// outlive the handler's borrows.
pub(super) struct Job {
    pub(super) cache: WorkerCache,
    site: Site,
    key: CacheKey,
    pub(super) size: u64,
    pq: PathAndQuery,
    host: String,
    fill_headers: HeaderMap,
    viewer: Vec<(Vec<u8>, Vec<u8>)>,
    cc: RequestCacheControl,
    partial_key: bool,
    /// The client connection (read-ahead is bounded per connection).
    pub(super) peer: SocketAddr,
}

impl Job {
    pub(super) fn new(
        cache: &WorkerCache,
        req: &Request,
        site: &Site,
        key: &CacheKey,
        size: u64,
        cc: &RequestCacheControl,
    ) -> Option<Job> {
        let o = fill_request(req, key, Forward::Fill, None, &cache.settings)?;
        Some(Job {
            cache: cache.owned(),
            site: site.clone(),
            key: key.clone(),
            size,
            pq: o.path_and_query,
            host: o.host,
            fill_headers: o.headers,
            viewer: req.headers().map(|(n, v)| (n.as_bytes().to_vec(), v.to_vec())).collect(),
            cc: cc.clone(),
            partial_key: key_omits_query(req, key),
            peer: req.peer(),
        })
    }

    pub(super) fn primary(&self) -> &[u8] {
        self.key.as_bytes()
    }

    /// The site's read-ahead depth.
    pub(super) fn read_ahead_depth(&self) -> u32 {
        self.site.slicing.read_ahead
    }

    /// The object's head, if stored. One being written (a moment's metadata write) is
    /// waited for: meanwhile the object is not unknown.
    async fn head(&self) -> Option<Head> {
        let key = head_key(self.primary());
        let mut found = None;
        for _ in 0..MAX_ROUNDS {
            match self.cache.shared.store.lookup(&key)? {
                Lookup::Hit(h) => {
                    found = Some(h);
                    break;
                }
                Lookup::Filling(mut f) => {
                    let _ = f.wait_for(u64::MAX).await;
                }
            }
        }
        let h = found?;
        let prep = self.cache.prepared(h.meta())?;
        let total = prep.meta.body_len()?;
        if prep.meta.status() != 200 {
            return None;
        }
        let version = version_of(prep.meta.headers(), total);
        Some(Head { prep, version, total })
    }

    /// Whether slice `k` of `head`'s version is stored (complete or filling).
    pub(super) fn has_slice(&self, head: &Head, k: u64) -> bool {
        self.cache.shared.store.contains(&slice_key(self.primary(), head.version, self.size, k))
    }

    /// The one fetch-and-store step for slice `k`, led by `lead`. With `head`, the
    /// version the request holds (`refresh`: it is stale; `conditional`: ask with its
    /// validators, slice `k` being stored).
    pub(super) async fn fetch_slice(
        &self,
        k: u64,
        head: Option<&Head>,
        refresh: bool,
        conditional: bool,
        lead: Lead,
    ) -> (Fetched, Option<Duration>) {
        let start = k.saturating_mul(self.size);
        let len = head.map_or(self.size, |h| slice_len(self.size, h.total, k)).max(1);
        let job = SliceJob { size: self.size, k, holds: head.map(|h| h.version), refresh };
        let range = ByteRange { start, end: start + len - 1 };
        let stale = head.filter(|_| conditional).map(|h| (h, head_key(self.primary())));
        self.fetch_part(range, Part::Slice(&job), stale, lead).await
    }

    /// The one fetch-and-store step for bytes `range` stored as `part`; with `stale`, a
    /// conditional request revalidating that head (stored at that key).
    pub(super) async fn fetch_part(
        &self,
        range: ByteRange,
        part: Part<'_>,
        stale: Option<(&Head, Vec<u8>)>,
        lead: Lead,
    ) -> (Fetched, Option<Duration>) {
        let mut headers = self.fill_headers.clone();
        if let Ok(v) = HeaderValue::from_str(&format!("bytes={}-{}", range.start, range.end)) {
            headers.insert(RANGE, v);
        }
        if let Some((h, _)) = &stale {
            for (n, v) in conditional::revalidation_headers(&h.prep.meta) {
                if let Ok(v) = HeaderValue::from_bytes(&v) {
                    headers.insert(n, v);
                }
            }
        }
        let mut o = OriginRequest::get(self.pq.clone(), self.host.clone());
        o.headers = headers;
        let settings = &self.cache.settings;
        let withheld = Withheld { dropped: &settings.fill_drop_headers, per_viewer: false };
        let viewer = Viewer {
            headers: &self.viewer[..],
            cc: &self.cc,
            withheld,
            partial_key: self.partial_key,
            part: Some(part),
        };
        let reval =
            stale.as_ref().map(|(h, key)| Revalidating { store_key: key, meta: &h.prep.meta });
        let fx = Fetcher {
            shared: &self.cache.shared,
            settings,
            policy: &self.site.policy,
            client: &self.cache.client,
            group: &self.site.group,
        };
        fx.fetch_and_store(&self.key, o, viewer, reval, lead).await
    }

    /// Slice `k` of `head`'s version: stored, or fetched (coalesced with any other fetch
    /// of it).
    async fn locate(&self, head: &Head, k: u64) -> Result<(PieceData, Got), Lost> {
        let shared = &self.cache.shared;
        let sk = slice_key(self.primary(), head.version, self.size, k);
        let meta = slice_meta(head.version, self.size, k);
        let want = slice_len(self.size, head.total, k);
        let (mut joined, mut retried) = (false, false);
        for _ in 0..MAX_ROUNDS {
            match shared.store.lookup(&sk) {
                Some(Lookup::Hit(h)) if h.body_len() == want && h.meta()[..] == meta[..] => {
                    let got = if joined { Got::Joined } else { Got::Stored };
                    return Ok((PieceData::Hit(Rc::new(h)), got));
                }
                Some(Lookup::Filling(f)) if f.expected_len() == Some(want) => {
                    // Another fetch's bytes, as they arrive.
                    return Ok((PieceData::Filling(Rc::new(RefCell::new(f))), Got::Joined));
                }
                _ => {}
            }
            match shared.inflight.join(&lock_key(self.primary(), self.size, k)) {
                Role::Lead(mut lead) => {
                    if shared.store.contains(&sk) {
                        // Fetched and stored since the look above.
                        lead.publish(State::Done);
                        continue;
                    }
                    shared.slices.viewer_fetches.fetch_add(1, Relaxed);
                    let (fetched, t) = self.fetch_slice(k, Some(head), false, false, lead).await;
                    return match fetched {
                        Fetched::Filling(f) if f.key() == &sk[..] => {
                            Ok((PieceData::Filling(Rc::new(RefCell::new(f))), Got::Led(t)))
                        }
                        Fetched::Filling(f) if f.key() == self.primary() => Err(Lost::Whole(f)),
                        Fetched::Filling(_) => Err(Lost::Changed),
                        Fetched::NotStored(r) if self.is_slice_of(&r, head, k) => {
                            Ok((PieceData::Origin(Box::new(r)), Got::Led(t)))
                        }
                        Fetched::NotStored(r) => Err(Lost::NotStored(Box::new(r))),
                        Fetched::Failed(st) => Err(Lost::Failed(st)),
                        Fetched::Freshened(_) | Fetched::StaleIfError => Err(Lost::Failed(502)),
                    };
                }
                Role::Follow(f) => {
                    joined = true;
                    let timeout = self.cache.settings.lock_timeout;
                    match tokio::time::timeout(timeout, f.wait()).await {
                        Ok(State::Failed(st)) if retried => return Err(Lost::Failed(st)),
                        Ok(State::Failed(_)) => retried = true,
                        Ok(_) => {}
                        Err(_) => return Err(Lost::LockTimeout),
                    }
                }
            }
        }
        Err(Lost::Failed(502))
    }

    /// Whether `resp` (not stored) is slice `k` of `head`'s version.
    fn is_slice_of(&self, resp: &OriginResponse, head: &Head, k: u64) -> bool {
        this_slice(resp, self.size, k).is_some_and(|total| {
            total == head.total && version_of(&resp.headers, total) == head.version
        })
    }
}

mod answer;
pub(super) use answer::Source;

#[cfg(test)]
mod tests;
