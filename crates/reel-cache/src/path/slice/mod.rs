//! Slice caching (`[[site]] slice`): a large object answered from fixed-size slices, each
//! fetched from the origin with a `Range` request and stored as its own object.
//!
//! The store keys (the object's head, its slices, the in-flight key of each slice) and
//! the version that ties the slices of one representation together are in `store_keys`.
//! A request reads the head once and asks for slices of that version only, so it never
//! sends bytes of two versions. A slice fetched from the origin that disagrees with the
//! head replaces the head (`fill::part`): the slices of the old version can no longer be
//! reached (they leave with their volumes), and a response that already sent bytes of the
//! old version is cut (the connection closes) rather than spliced.
//!
//! Every fetch, a viewer's or read-ahead's ([`readahead`]), goes through the one
//! fetch-and-store step (`Fetcher::fetch_and_store`) with the slice as its part. An origin
//! that ignores `Range` answers 200: that is stored whole under the URL's key like any
//! miss (the sliced path then serves the whole object), or, too large for the store,
//! streamed to that viewer. The head's freshness is the object's: a stale head is
//! revalidated with the next slice fetch (conditional when that slice is stored, so a 304
//! freshens it).
//!
//! The slice arithmetic (which slice holds a byte, the bytes of a slice, what the origin is
//! asked for, the part of a slice a response sends) is checked, in [`span`]: offsets near
//! `u64::MAX` and slice sizes that are not powers of two never wrap.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use reel_http::{Method, Request, RequestBody, Response};
use reel_ops::metrics::WorkerMetrics;
use reel_origin::OriginResponse;
use reel_store::Lookup;

use super::answer::Answer;
use super::deadline;
use super::fetch::Fetched;
use super::fill::{Part, SlicePart};
use super::inflight::{Lead, Role, State};
use super::parts::WorkerParts;
use super::pieces::{Piece, PieceData, Pieces};
use super::piecewise::answer::{answer_from, first_byte, first_byte_hint, not_stored};
use super::piecewise::{Got, Head, Job, Lost, Source};
use super::respond::unix_now;
use super::serve::local;
use super::settings::Site;
use super::store_keys::{head_key, slice_key, slice_len, slice_lock_key, slice_meta, version_of};
use crate::key::CacheKey;
use crate::path::fill::part::this_slice;
use crate::policy::cache_control::RequestCacheControl;
use crate::policy::freshness::{Decision, decide, stale_if_error_ok};
use crate::policy::range::{RangeSet, parse_range};

pub(super) mod readahead;
pub(super) mod span;

use readahead::ReadAhead;

/// How many times a request goes round (head, slice, fetch) before it passes.
const MAX_ROUNDS: usize = 4;

/// A sliced object as one request reads it: the request's job, the slice size, and its
/// worker's read-ahead.
pub(super) struct Sliced {
    job: Job,
    size: u64,
    read_ahead: Rc<ReadAhead>,
}

/// GET or HEAD on a site with slicing, when no whole object is stored for the URL.
#[allow(clippy::too_many_arguments)]
pub(super) async fn get(
    worker: WorkerParts,
    read_ahead: Rc<ReadAhead>,
    (req, body): (&Request, &mut RequestBody<'_>),
    site: &Site,
    key: &CacheKey,
    size: u64,
    req_cc: &RequestCacheControl,
    m: &WorkerMetrics,
) -> Response {
    let Some(job) = Job::new(worker, req, site, key, req_cc) else { return local(400) };
    let s = Rc::new(Sliced { job, size, read_ahead });
    let statuses = s.job.worker.statuses.clone();
    let range = match (req.method(), req.header("range")) {
        (Method::Get, Some(v)) => parse_range(v),
        _ => None,
    };
    // What this request's own fetch did, once it made one.
    let mut fetched: Option<Answer> = None;
    for _ in 0..MAX_ROUNDS {
        let Some(head) = s.head().await else {
            if req_cc.only_if_cached {
                return Answer::ONLY_IF_CACHED.on(Response::error(504), &statuses);
            }
            // Learn the object from the slice where the request starts (or slice 0).
            let k = span::learn_from(first_byte_hint(range.as_ref()), size);
            match slice_round((req, &mut *body), &s, k, None, m).await {
                Ok(ans) => fetched = ans.or(fetched),
                Err(resp) => return resp,
            }
            continue;
        };
        let now = unix_now();
        let ans = match (fetched, decide(req_cc, &head.prep.meta, now)) {
            (Some(a), _) => a,
            (None, Decision::Fresh) => Answer::HIT,
            (None, Decision::StaleServable) => Answer::HIT_STALE,
            (None, Decision::StaleWhileRevalidate) => {
                refresh(&s, &head, range.as_ref());
                Answer::HIT_SWR
            }
            (None, Decision::GatewayTimeout) => {
                return Answer::ONLY_IF_CACHED.on(Response::error(504), &statuses);
            }
            (None, Decision::MustRevalidate) => {
                let k = span::index(first_byte(range.as_ref(), head.total), size);
                match slice_round((req, &mut *body), &s, k, Some(&head), m).await {
                    Ok(ans) => fetched = ans.or(fetched),
                    Err(resp) => return resp,
                }
                continue;
            }
        };
        let src = SliceSource { s: s.clone(), head: head.clone(), first: None };
        if let Some(resp) = answer_from((req, &mut *body), &s.job, &head, ans, src).await {
            return resp;
        }
    }
    let fw = s.job.worker.forwarder();
    fw.fetch_pass(req, body, site, Answer::PASS_NOT_STORED).await
}

/// One fetch of slice `k` for a request that needs the head (none, or `stale`): leads it
/// or waits for the request leading it. `Ok`: go round again (with what this request's
/// fetch did, if it made one); `Err`: the answer.
async fn slice_round(
    (req, body): (&Request, &mut RequestBody<'_>),
    s: &Sliced,
    k: u64,
    stale: Option<&Head>,
    m: &WorkerMetrics,
) -> Result<Option<Answer>, Response> {
    let (job, w) = (&s.job, &s.job.worker);
    let shared = &w.fetch.shared;
    let statuses = &w.statuses;
    let mut lead = match shared.inflight.join(&s.lock_key(k)) {
        Role::Lead(lead) => lead,
        Role::Follow(f) => {
            let until = tokio::time::Instant::now() + w.fetch.settings.lock_timeout;
            let state = deadline::follow(f, m, until, false).await;
            return match state {
                Some(st)
                    if st.failure().is_some() && stale.is_none() && s.head().await.is_none() =>
                {
                    let st = st.failure().unwrap_or(502);
                    Err(Answer::ORIGIN_ERROR.on(local(st), statuses))
                }
                Some(_) => Ok(None),
                None => {
                    let fw = w.forwarder();
                    Err(fw.fetch_pass(req, body, &job.site, Answer::LOCK_TIMEOUT).await)
                }
            };
        }
    };
    if stale.is_none() && s.head().await.is_some() {
        // Another request's fetch stored the head meanwhile: go round with it.
        lead.publish(State::Done);
        return Ok(None);
    }
    shared.slices.viewer_fetches.fetch_add(1, Relaxed);
    let conditional = stale.is_some_and(|h| s.has_slice(h, k));
    let (fetched, t) = s.fetch_slice(k, stale, (stale.is_some(), conditional), lead, false).await;
    let refreshed = if stale.is_some() { Answer::REFRESHED } else { Answer::MISS_STORED };
    match fetched {
        Fetched::Filling(f) if f.key() == job.primary() => {
            // The origin ignored Range; the whole object is being stored.
            let Some(prep) = w.reader().prepared(f.meta()) else { return Err(local(502)) };
            Err(w.serve().filling(req, f, prep, Answer::MISS_STORED.after(t)).await)
        }
        Fetched::Filling(_) => Ok(Some(refreshed.after(t))),
        Fetched::Freshened(_) => Ok(Some(Answer::REVALIDATED.after(t))),
        Fetched::StaleIfError => Ok(Some(Answer::STALE_IF_ERROR.after(t))),
        Fetched::NotStored(resp) => Err(not_stored((req, body), job, resp, t).await),
        Fetched::BlockingTimeout => {
            Err(Answer::ORIGIN_ERROR.after(t).on(Response::error(504), statuses))
        }
        Fetched::Failed(st) => match stale {
            Some(h) if stale_if_error_ok(&job.cc, &h.prep.meta, unix_now()) => {
                Ok(Some(Answer::STALE_IF_ERROR.after(t)))
            }
            _ => Err(Answer::ORIGIN_ERROR.after(t).on(Response::error(st), statuses)),
        },
    }
}

/// Stale-while-revalidate of a sliced object: the head is revalidated in the background
/// with the request's first slice, at most once at a time.
fn refresh(s: &Rc<Sliced>, head: &Head, range: Option<&RangeSet>) {
    let k = span::index(first_byte(range, head.total), s.size);
    let Some(lead) = s.job.worker.fetch.shared.inflight.try_lead(&s.lock_key(k)) else {
        return;
    };
    let (s, head) = (s.clone(), head.clone());
    tokio::task::spawn_local(async move {
        let conditional = s.has_slice(&head, k);
        let _ = s.fetch_slice(k, Some(&head), (true, conditional), lead, true).await;
    });
}

impl Sliced {
    /// The in-flight key of slice `k`.
    fn lock_key(&self, k: u64) -> Vec<u8> {
        slice_lock_key(self.job.primary(), self.size, k)
    }

    /// The object's head, if stored. One being written (a moment's metadata write) is
    /// waited for: meanwhile the object is not unknown.
    async fn head(&self) -> Option<Head> {
        let key = head_key(self.job.primary());
        let store = &self.job.worker.fetch.shared.store;
        let mut found = None;
        for _ in 0..MAX_ROUNDS {
            match store.lookup(&key).await? {
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
        let prep = self.job.worker.reader().prepared(h.meta())?;
        let total = prep.meta.body_len()?;
        if prep.meta.status() != 200 {
            return None;
        }
        let version = version_of(prep.meta.headers(), total);
        Some(Head { prep, version, total })
    }

    /// Whether slice `k` of `head`'s version is stored (complete or filling).
    fn has_slice(&self, head: &Head, k: u64) -> bool {
        let key = slice_key(self.job.primary(), head.version, self.size, k);
        self.job.worker.fetch.shared.store.contains(&key)
    }

    /// The one fetch-and-store step for slice `k`, led by `lead`. With `head`, the version
    /// the request holds (`refresh`: it is stale; `conditional`: ask with its validators,
    /// slice `k` being stored). `own`: the node's own fetch (a background refresh, a
    /// read-ahead), not the viewer's.
    async fn fetch_slice(
        &self,
        k: u64,
        head: Option<&Head>,
        (refresh, conditional): (bool, bool),
        mut lead: Lead,
        own: bool,
    ) -> (Fetched, Option<Duration>) {
        // The slice's bytes in the object the head describes; without a head (or for an
        // empty object), the whole nominal slice.
        let range = head.and_then(|h| span::bytes(self.size, h.total, k));
        let Some(range) = range.or_else(|| span::nominal(self.size, k)) else {
            // No object has a slice k (its bytes lie beyond u64): callers never ask for one.
            lead.publish(State::Failed(416));
            return (Fetched::Failed(416), None);
        };
        let part = SlicePart { size: self.size, k, holds: head.map(|h| h.version), refresh };
        let stale = head.filter(|_| conditional).map(|h| (h, head_key(self.job.primary())));
        self.job.fetch_part(range, Part::Slice(&part), stale, lead, own).await
    }

    /// Slice `k` of `head`'s version: stored, or fetched (coalesced with any other fetch
    /// of it).
    async fn locate(&self, head: &Head, k: u64) -> Result<(PieceData, Got), Lost> {
        let w = &self.job.worker;
        let shared = &w.fetch.shared;
        let primary = self.job.primary();
        let sk = slice_key(primary, head.version, self.size, k);
        let meta = slice_meta(head.version, self.size, k);
        let want = slice_len(self.size, head.total, k);
        let (mut joined, mut retried) = (false, false);
        for _ in 0..MAX_ROUNDS {
            match shared.store.lookup(&sk).await {
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
            match shared.inflight.join(&self.lock_key(k)) {
                Role::Lead(mut lead) => {
                    if shared.store.contains(&sk) {
                        // Fetched and stored since the look above.
                        lead.publish(State::Done);
                        continue;
                    }
                    shared.slices.viewer_fetches.fetch_add(1, Relaxed);
                    let (fetched, t) =
                        self.fetch_slice(k, Some(head), (false, false), lead, false).await;
                    return match fetched {
                        Fetched::Filling(f) if f.key() == &sk[..] => {
                            Ok((PieceData::Filling(Rc::new(RefCell::new(f))), Got::Led(t)))
                        }
                        Fetched::Filling(f) if f.key() == primary => Err(Lost::Whole(f)),
                        Fetched::Filling(_) => Err(Lost::Changed),
                        Fetched::NotStored(r) if self.is_slice_of(&r, head, k) => {
                            Ok((PieceData::Origin(Box::new(r)), Got::Led(t)))
                        }
                        Fetched::NotStored(r) => Err(Lost::NotStored(Box::new(r))),
                        Fetched::Failed(st) => Err(Lost::Failed(st)),
                        Fetched::BlockingTimeout => Err(Lost::Failed(504)),
                        Fetched::Freshened(_) | Fetched::StaleIfError => Err(Lost::Failed(502)),
                    };
                }
                Role::Follow(f) => {
                    joined = true;
                    match deadline::follow_part(f, &w.fetch.settings).await.map(State::failure) {
                        Some(Some(st)) if retried => return Err(Lost::Failed(st)),
                        Some(Some(_)) => retried = true,
                        Some(None) => {}
                        None => return Err(Lost::LockTimeout),
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

/// The slices of one version, for the body walk: the first slice as the request located
/// it, the others located (or fetched) as the walk reaches them, read-ahead started as it
/// enters a slice it reads sequentially (`span::reads_most_of`: to the slice's end, at least
/// half of it).
struct SliceSource {
    s: Rc<Sliced>,
    head: Head,
    first: Option<(u64, PieceData)>,
}

impl Source for SliceSource {
    async fn has(&self, pos: u64) -> bool {
        self.s.has_slice(&self.head, span::index(pos, self.s.size))
    }

    async fn prime(&mut self, pos: u64, _until: u64) -> Result<Got, Lost> {
        let k = span::index(pos, self.s.size);
        let (data, got) = self.s.locate(&self.head, k).await?;
        self.first = Some((k, data));
        Ok(got)
    }
}

impl Pieces for SliceSource {
    async fn piece_at(&mut self, pos: u64, until: u64) -> Result<Piece, String> {
        let size = self.s.size;
        let k = span::index(pos, size);
        let Some(slice) = span::bytes(size, self.head.total, k) else {
            return Err("range beyond the object".into());
        };
        let data = match self.first.take() {
            Some((fk, d)) if fk == k => d,
            _ => match self.s.locate(&self.head, k).await {
                Ok((d, got)) => {
                    if matches!(got, Got::Led(_)) {
                        self.s.job.worker.fetch.shared.slices.waits.fetch_add(1, Relaxed);
                    }
                    d
                }
                Err(lost) => return Err(lost.describe()),
            },
        };
        if span::part(slice, pos, until).is_some_and(|part| span::reads_most_of(slice, part)) {
            // The viewer reads most of this slice, to its end: it is reading sequentially.
            readahead::schedule(&self.s, &self.head, k);
        }
        Ok(Piece { data, start: slice.start, len: slice.len() })
    }
}
