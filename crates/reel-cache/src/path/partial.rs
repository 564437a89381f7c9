//! Partial responses on sites without slicing: the byte ranges of a representation too
//! large for the store, each stored as its own object and reused for the ranges it covers.
//!
//! A miss is fetched whole, as always; when the store cannot take it (larger than a
//! volume), the fetch leaves an *index* for the URL (the representation's metadata and
//! length, no bytes yet) and the viewer's own range is passed to the origin instead. From
//! then on, a request for the URL is answered from the index: the ranges it needs that a
//! stored piece covers come from the store, the others (gaps, at most a quarter volume at a
//! time) are fetched with `Range`, stored as new pieces and listed in the index. A later
//! request can so complete the object: a request for all of it fetches exactly the gaps.
//!
//! ```text
//! K ␀ p                          the index: the 200's metadata, total length, the pieces
//! K ␀ p <version><start><end>    a piece (16 hex digits each)
//! K ␀ p # <start>                not stored: coalesces fetches of a gap starting there
//! K ␀ p #i                       not stored: serialises the index's read-modify-write
//! ```
//!
//! Pieces agree as slices do (`slice`): a piece whose validators or length differ from the
//! index replaces it, and the old pieces can no longer be reached. A stale index is
//! revalidated by the next piece fetch. The walk over the pieces, the range plan and
//! multipart are the sliced path's ([`WorkerCache::answer_from`]).

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::atomic::Ordering::Relaxed;

use bytes::{BufMut, Bytes, BytesMut};
use http::header::CONTENT_RANGE;
use reel_http::{Method, Request, RequestBody, Response};
use reel_origin::OriginResponse;
use reel_store::{FillWriter, Filling, Lookup, Store, StoreError};

use super::answer::Answer;
use super::fetch::{Fetched, Fetcher};
use super::inflight::{Role, State};
use super::pieces::{Piece, PieceData, Pieces};
use super::respond::unix_now;
use super::settings::Site;
use super::shared::VARIANT_SEP;
use super::slice::{Got, Head, Job, Lost, Part, Source, head_version, version_of};
use super::worker::{WorkerCache, local};
use crate::key::CacheKey;
use crate::policy::cache_control::RequestCacheControl;
use crate::policy::freshness::{Decision, decide};
use crate::policy::meta::ResponseTimes;
use crate::policy::range::{ByteRange, parse_content_range, parse_range};
use crate::policy::rules::TtlRule;
use crate::policy::vary::{Vary, VaryKey};

/// How many times a request goes round before it passes.
const MAX_ROUNDS: usize = 4;
/// The tag after the separator of every partial key.
const TAG: u8 = b'p';
/// The start of an index's metadata blob.
const INDEX_META: &[u8] = b"\xffreel-part\n";
/// The start of a piece's metadata blob.
const PIECE_META: &[u8] = b"\xffreel-piece\n";
/// Most pieces listed per URL; beyond, the oldest are dropped (and left unreachable).
const MAX_PIECES: usize = 256;

/// The key of a URL's index.
pub(super) fn index_key(primary: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(primary.len() + 51);
    k.extend_from_slice(primary);
    k.extend_from_slice(&[VARIANT_SEP, TAG]);
    k
}

fn piece_key(primary: &[u8], version: u64, r: ByteRange) -> Vec<u8> {
    let mut k = index_key(primary);
    k.extend_from_slice(format!("{version:016x}{:016x}{:016x}", r.start, r.end).as_bytes());
    k
}

fn piece_meta(version: u64, r: ByteRange) -> Bytes {
    let mut b = PIECE_META.to_vec();
    b.extend_from_slice(format!("{version:016x}{:016x}{:016x}", r.start, r.end).as_bytes());
    b.into()
}

fn lock(primary: &[u8], what: &str) -> Vec<u8> {
    let mut k = index_key(primary);
    k.push(b'#');
    k.extend_from_slice(what.as_bytes());
    k
}

/// An index blob: the prefix, the piece count and pieces, then the representation's
/// stored metadata.
fn encode_index(meta: &[u8], pieces: &[ByteRange]) -> Bytes {
    let mut b = BytesMut::with_capacity(INDEX_META.len() + 4 + 16 * pieces.len() + meta.len());
    b.put_slice(INDEX_META);
    b.put_u32_le(pieces.len() as u32);
    for r in pieces {
        b.put_u64_le(r.start);
        b.put_u64_le(r.end);
    }
    b.put_slice(meta);
    b.freeze()
}

/// The metadata and pieces of an index blob (the metadata shares the blob's memory, so
/// the per-worker metadata cache recognises it).
fn decode_index(blob: &Bytes) -> Option<(Bytes, Vec<ByteRange>)> {
    let rest = blob.strip_prefix(INDEX_META)?;
    let n = u32::from_le_bytes(rest.get(..4)?.try_into().ok()?) as usize;
    let list = rest.get(4..4 + n.checked_mul(16)?)?;
    let pieces = list
        .chunks_exact(16)
        .map(|c| {
            let start = u64::from_le_bytes(c[..8].try_into().unwrap_or_default());
            let end = u64::from_le_bytes(c[8..].try_into().unwrap_or_default());
            ByteRange { start, end }
        })
        .filter(|r| r.start <= r.end)
        .collect();
    let at = INDEX_META.len() + 4 + 16 * n;
    Some((blob.slice(at..), pieces))
}

/// The index stored for `primary`, waiting out one being written.
async fn read_index(
    store: &std::sync::Arc<Store>,
    primary: &[u8],
) -> Option<(Bytes, Vec<ByteRange>)> {
    let key = index_key(primary);
    for _ in 0..MAX_ROUNDS {
        match store.lookup(&key)? {
            Lookup::Hit(h) => return decode_index(h.meta()),
            Lookup::Filling(mut f) => {
                let _ = f.wait_for(u64::MAX).await;
            }
        }
    }
    None
}

/// The largest piece fetched at once: a quarter of a volume, at most 16 MiB.
fn max_piece(store: &Store) -> u64 {
    let st = store.stats();
    (st.capacity / st.volumes.max(1) / 4).clamp(64 << 10, 16 << 20)
}

/// A range of the representation a fetch stores as a piece.
pub(super) struct RangeJob {
    range: ByteRange,
    /// The version of the index the request holds.
    holds: u64,
    /// Whether that index is stale: a matching piece freshens it.
    refresh: bool,
}

impl Fetcher<'_> {
    /// Starts storing a 206 as a piece and lists it in the index.
    pub(super) async fn begin_range(
        &self,
        job: &RangeJob,
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
        match store.lookup(&pk) {
            Some(Lookup::Filling(f)) => Ok((writer, f)),
            _ => Err(StoreError::Gone),
        }
    }

    /// Leaves an index (no pieces yet) for a 200 the store refused as too large, so the
    /// URL's ranges are fetched and stored from now on.
    pub(super) async fn note_too_large(
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
            let mut lead = match self.shared.inflight.join(&lock(primary, "i")) {
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

/// The total length a 206 announces if it is exactly `r`.
fn exactly(resp: &OriginResponse, r: ByteRange) -> Option<u64> {
    if resp.status.as_u16() != 206 {
        return None;
    }
    let (got, total) = parse_content_range(resp.headers.get(CONTENT_RANGE)?.as_bytes())?;
    (got == r).then_some(total).flatten()
}

impl WorkerCache {
    /// Whether `key` has an index of partial responses.
    pub(super) fn has_partial(&self, key: &CacheKey) -> bool {
        self.shared.store.contains(&index_key(key.as_bytes()))
    }

    /// A GET or HEAD for a URL with an index of partial responses (and no whole object):
    /// answered from its pieces, gaps fetched and stored. `None`: the URL has no index.
    pub(super) async fn get_partial(
        &self,
        req: &Request,
        body: &mut RequestBody<'_>,
        site: &Site,
        key: &CacheKey,
        req_cc: &RequestCacheControl,
    ) -> Option<Response> {
        if !self.has_partial(key) {
            return None;
        }
        let Some(job) = Job::new(self, req, site, key, 0, req_cc) else { return Some(local(400)) };
        let job = Rc::new(job);
        let store = &self.shared.store;
        let range = match (req.method(), req.header("range")) {
            (Method::Get, Some(v)) => parse_range(v),
            _ => None,
        };
        for _ in 0..MAX_ROUNDS {
            let (meta, pieces) = read_index(store, key.as_bytes()).await?;
            let prep = self.prepared(&meta)?;
            let total = prep.meta.body_len()?;
            let version = version_of(prep.meta.headers(), total);
            let head = Head { prep, version, total };
            let (ans, refresh) = match decide(req_cc, &head.prep.meta, unix_now()) {
                Decision::Fresh => (Answer::HIT, false),
                Decision::StaleServable | Decision::StaleWhileRevalidate => {
                    (Answer::HIT_STALE, false)
                }
                Decision::GatewayTimeout => {
                    return Some(Answer::ONLY_IF_CACHED.on(Response::error(504), &self.statuses));
                }
                Decision::MustRevalidate => (Answer::REFRESHED, true),
            };
            let src = PartialSource {
                job: job.clone(),
                head: head.clone(),
                pieces,
                refresh,
                max_piece: max_piece(store),
                first: None,
            };
            if let Some(r) =
                self.answer_from((req, &mut *body), &job, &head, range.as_ref(), ans, src).await
            {
                return Some(r);
            }
        }
        Some(self.fetch_pass(req, body, site, Answer::PASS_NOT_STORED).await)
    }
}

/// The pieces of one version of a partially stored object, as a response walks them.
struct PartialSource {
    job: Rc<Job>,
    head: Head,
    /// The pieces listed in the index when last read.
    pieces: Vec<ByteRange>,
    /// The index is stale: the first piece is fetched from the origin whatever is stored,
    /// which revalidates it.
    refresh: bool,
    max_piece: u64,
    first: Option<Piece>,
}

impl PartialSource {
    fn primary(&self) -> &[u8] {
        self.job.primary()
    }

    /// The stored piece `r`, if it is stored.
    fn stored(&self, r: ByteRange) -> Option<(PieceData, Got)> {
        let store = &self.job.cache.shared.store;
        match store.lookup(&piece_key(self.primary(), self.head.version, r))? {
            Lookup::Hit(h)
                if h.body_len() == r.len()
                    && h.meta()[..] == piece_meta(self.head.version, r)[..] =>
            {
                Some((PieceData::Hit(Rc::new(h)), Got::Stored))
            }
            Lookup::Filling(f) if f.expected_len() == Some(r.len()) => {
                Some((PieceData::Filling(Rc::new(RefCell::new(f))), Got::Joined))
            }
            _ => None,
        }
    }

    /// The listed piece holding `pos`.
    fn covering(&self, pos: u64) -> Option<ByteRange> {
        self.pieces.iter().find(|r| r.start <= pos && pos <= r.end).copied()
    }

    /// Reads the index again: its pieces, if it is still of the version held.
    async fn reload(&mut self) -> Result<(), Lost> {
        let store = &self.job.cache.shared.store;
        match read_index(store, self.primary()).await {
            Some((m, p)) if head_version(&m) == Some(self.head.version) => {
                self.pieces = p;
                Ok(())
            }
            Some(_) => Err(Lost::Changed),
            None => Ok(()),
        }
    }

    /// The piece holding `pos`: stored, or the gap from `pos` (up to `until`, the next
    /// piece, the size bound) fetched and stored.
    async fn find(&mut self, pos: u64, until: u64) -> Result<(Piece, Got), Lost> {
        for _ in 0..MAX_ROUNDS {
            if !self.refresh
                && let Some(r) = self.covering(pos)
            {
                match self.stored(r) {
                    Some((data, got)) => {
                        return Ok((Piece { data, start: r.start, len: r.len() }, got));
                    }
                    // Listed but gone (evicted): a gap again.
                    None => self.pieces.retain(|p| *p != r),
                }
            }
            let next = self.pieces.iter().filter(|r| r.start > pos).map(|r| r.start).min();
            let mut end = until.min(self.head.total - 1).min(pos + self.max_piece - 1);
            if let Some(n) = next {
                end = end.min(n - 1);
            }
            let range = ByteRange { start: pos, end };
            let shared = &self.job.cache.shared;
            match shared.inflight.join(&lock(self.primary(), &format!("{pos:016x}"))) {
                Role::Lead(mut lead) => {
                    if !self.refresh {
                        self.reload().await?;
                        if self.covering(pos).is_some() {
                            lead.publish(State::Done);
                            continue;
                        }
                    }
                    let job = RangeJob { range, holds: self.head.version, refresh: self.refresh };
                    let (fetched, t) =
                        self.job.fetch_part(range, Part::Range(&job), None, lead).await;
                    self.refresh = false;
                    let pk = piece_key(self.primary(), self.head.version, range);
                    let piece = |data| Piece { data, start: pos, len: range.len() };
                    return match fetched {
                        Fetched::Filling(f) if f.key() == &pk[..] => {
                            Ok((piece(PieceData::Filling(Rc::new(RefCell::new(f)))), Got::Led(t)))
                        }
                        Fetched::Filling(f) if f.key() == self.primary() => Err(Lost::Whole(f)),
                        Fetched::Filling(_) => Err(Lost::Changed),
                        Fetched::NotStored(r)
                            if exactly(&r, range).is_some_and(|total| {
                                total == self.head.total
                                    && version_of(&r.headers, total) == self.head.version
                            }) =>
                        {
                            Ok((piece(PieceData::Origin(Box::new(r))), Got::Led(t)))
                        }
                        Fetched::NotStored(r) => Err(Lost::NotStored(Box::new(r))),
                        Fetched::Failed(st) => Err(Lost::Failed(st)),
                        Fetched::Freshened(_) | Fetched::StaleIfError => Err(Lost::Failed(502)),
                    };
                }
                Role::Follow(f) => {
                    let timeout = self.job.cache.settings.lock_timeout;
                    if tokio::time::timeout(timeout, f.wait()).await.is_err() {
                        return Err(Lost::LockTimeout);
                    }
                    self.reload().await?;
                }
            }
        }
        Err(Lost::Failed(502))
    }
}

impl Source for PartialSource {
    fn has(&self, pos: u64) -> bool {
        self.covering(pos).is_some_and(|r| self.stored(r).is_some())
    }

    async fn prime(&mut self, pos: u64, until: u64) -> Result<Got, Lost> {
        let (piece, got) = self.find(pos, until).await?;
        self.first = Some(piece);
        Ok(got)
    }
}

impl Pieces for PartialSource {
    async fn piece_at(&mut self, pos: u64, until: u64) -> Result<Piece, String> {
        if let Some(p) = self.first.take()
            && p.start <= pos
            && pos < p.start + p.len
        {
            return Ok(p);
        }
        self.find(pos, until).await.map(|(p, _)| p).map_err(|l| l.describe())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(start: u64, end: u64) -> ByteRange {
        ByteRange { start, end }
    }

    #[test]
    fn index_blobs_roundtrip_and_bad_ones_are_refused() {
        let pieces = [r(0, 9), r(100, 199)];
        let blob = encode_index(b"meta", &pieces);
        let (meta, got) = decode_index(&blob).expect("decodes");
        assert_eq!((&meta[..], got.as_slice()), (&b"meta"[..], &pieces[..]));
        assert!(decode_index(&Bytes::from_static(b"\xffreel-part\n\x05\0\0\0")).is_none());
        assert!(decode_index(&Bytes::from_static(b"other")).is_none());
        let (k, p) = (index_key(b"h/x"), piece_key(b"h/x", 1, r(0, 9)));
        assert!(p.starts_with(&k) && k[3] == VARIANT_SEP);
        assert_ne!(p, piece_key(b"h/x", 2, r(0, 9)));
        assert_ne!(p, piece_key(b"h/x", 1, r(0, 10)));
        assert_ne!(lock(b"h/x", "i"), lock(b"h/x", &format!("{:016x}", 0)));
    }
}
