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
//! The keys (the index, its pieces, the in-flight keys of its gaps) are in `store_keys`;
//! the index and pieces are written by `fill::part`. Pieces agree as slices do (`slice`):
//! a piece whose validators or length differ from the index replaces it, and the old
//! pieces can no longer be reached. A stale index is revalidated by the next piece fetch.
//! The walk over the pieces, the range plan and multipart are the sliced path's
//! (`piecewise`).

use std::cell::RefCell;
use std::rc::Rc;

use reel_http::{Request, RequestBody, Response};
use reel_store::{Lookup, Store};

use super::answer::Answer;
use super::deadline;
use super::fetch::Fetched;
use super::fill::{Part, RangePart, read_index};
use super::inflight::{Role, State};
use super::parts::WorkerParts;
use super::pieces::{Piece, PieceData, Pieces};
use super::piecewise::answer::answer_from;
use super::piecewise::{Got, Head, Job, Lost, Source};
use super::respond::unix_now;
use super::serve::local;
use super::settings::Site;
use super::store_keys::{
    head_version, index_key, partial_lock_key, piece_key, piece_meta, version_of,
};
use crate::key::CacheKey;
use crate::path::fill::part::exactly;
use crate::policy::cache_control::RequestCacheControl;
use crate::policy::freshness::{Decision, decide};
use crate::policy::range::ByteRange;

/// How many times a request goes round before it passes.
const MAX_ROUNDS: usize = 4;

/// The largest piece fetched at once: a quarter of a volume, at most 16 MiB.
fn max_piece(store: &Store) -> u64 {
    (store.volume_size() / 4).clamp(64 << 10, 16 << 20)
}

/// Whether `key` has an index of partial responses.
pub(super) fn has_index(store: &Store, key: &CacheKey) -> bool {
    store.contains(&index_key(key.as_bytes()))
}

/// A GET or HEAD for a URL with an index of partial responses (and no whole object):
/// answered from its pieces, gaps fetched and stored. `None`: the URL has no index.
pub(super) async fn get(
    worker: &WorkerParts,
    (req, body): (&Request, &mut RequestBody<'_>),
    site: &Site,
    key: &CacheKey,
    req_cc: &RequestCacheControl,
) -> Option<Response> {
    let store = worker.fetch.shared.store.clone();
    if !has_index(&store, key) {
        return None;
    }
    let Some(job) = Job::new(worker.clone(), req, site, key, req_cc) else {
        return Some(local(400));
    };
    let job = Rc::new(job);
    for _ in 0..MAX_ROUNDS {
        let (meta, pieces) = read_index(&store, key.as_bytes()).await?;
        let prep = worker.reader().prepared(&meta)?;
        let total = prep.meta.body_len()?;
        let version = version_of(prep.meta.headers(), total);
        let head = Head { prep, version, total };
        let (ans, refresh) = match decide(req_cc, &head.prep.meta, unix_now()) {
            Decision::Fresh => (Answer::HIT, false),
            Decision::StaleServable | Decision::StaleWhileRevalidate => (Answer::HIT_STALE, false),
            Decision::GatewayTimeout => {
                return Some(Answer::ONLY_IF_CACHED.on(Response::error(504), &worker.statuses));
            }
            Decision::MustRevalidate => (Answer::REFRESHED, true),
        };
        let src = PartialSource {
            job: job.clone(),
            head: head.clone(),
            pieces,
            refresh,
            max_piece: max_piece(&store),
            first: None,
        };
        if let Some(r) = answer_from((req, &mut *body), &job, &head, ans, src).await {
            return Some(r);
        }
    }
    let fw = worker.forwarder();
    Some(fw.fetch_pass(req, body, site, Answer::PASS_NOT_STORED).await)
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
    async fn stored(&self, r: ByteRange) -> Option<(PieceData, Got)> {
        let store = &self.job.worker.fetch.shared.store;
        match store.lookup(&piece_key(self.primary(), self.head.version, r)).await? {
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
        let store = &self.job.worker.fetch.shared.store;
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
                match self.stored(r).await {
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
            let shared = &self.job.worker.fetch.shared;
            match shared.inflight.join(&partial_lock_key(self.primary(), &format!("{pos:016x}"))) {
                Role::Lead(mut lead) => {
                    if !self.refresh {
                        self.reload().await?;
                        if self.covering(pos).is_some() {
                            lead.publish(State::Done);
                            continue;
                        }
                    }
                    let part = RangePart { range, holds: self.head.version, refresh: self.refresh };
                    let (fetched, t) =
                        self.job.fetch_part(range, Part::Range(&part), None, lead, false).await;
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
                        Fetched::BlockingTimeout => Err(Lost::Failed(504)),
                        Fetched::Freshened(_) | Fetched::StaleIfError => Err(Lost::Failed(502)),
                    };
                }
                Role::Follow(f) => {
                    if deadline::follow_part(f, &self.job.worker.fetch.settings).await.is_none() {
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
    async fn has(&self, pos: u64) -> bool {
        match self.covering(pos) {
            Some(r) => self.stored(r).await.is_some(),
            None => false,
        }
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
