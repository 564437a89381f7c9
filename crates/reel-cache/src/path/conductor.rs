//! The per-worker cache front, [`WorkerCache`]: routes a request to its site and walks the
//! decision tree below phase by phase ([`Phase`]), deciding after each which phase comes
//! next. The phase value holds all the machine's state: what the request's rounds learnt
//! travels in it from the phase that learnt it, and the leader's fetch ends in its result
//! ([`Phase::Fetched`]), from which `after_fetch` picks the next phase. Every step is
//! logged at trace level (target `reel_cache::path::conductor`, `phase` as
//! [`Phase::as_str`] names it), so one request's path through the cache is one line per
//! step. The phases are the modules of `path/phase/` (and `path/piecewise/`); none of
//! them answers a viewer on its own initiative or calls back here.
//!
//! ```text
//! GET/HEAD ─ site? ─ key ─ lookup ─┬─ complete, fresh ─────────────── hit (sendfile)
//!                                  ├─ complete, stale ─ swr ───────── hit + background refresh
//!                                  │                  └ revalidate ── 304: refresh meta, hit
//!                                  │                                  200: fill   5xx: stale-if-error
//!                                  ├─ filling ─────────────────────── stream while it fills (collapsed)
//!                                  └─ absent ─ inflight ─┬─ leader ── origin ─ storable? ─ fill + stream
//!                                                        │                    └ no ─ pass the body through
//!                                                        └─ follower ─ woken by the leader ─ look up again
//!                                                                    │ (its fetch failed: once more, one of
//!                                                                    │  the followers leading)
//!                                                                    └ lock_timeout ─ fetch on its own, uncached
//!                                                                      (LL-HLS blocking: blocking_timeout ─ 504)
//! sliced site, no whole object stored ─ slice (head, slices by Range, read-ahead)
//! partial index for the URL ─ oversized (pieces by Range)
//! other methods ─ pass through (body streamed) ─ 2xx/3xx: invalidate URL, Location, Content-Location
//! (extension methods pass too; TRACE and CONNECT never; only POST, PUT, DELETE and PATCH
//! invalidate unless the site's `invalidate_on = "all"`)
//! CORS preflight (site with `[site.cors]`) ─ 204 at the edge, never forwarded
//! ```
//!
//! Before any of this, a site with access rules (`worker/access.rs`) refuses clients by
//! address, country and request rate: 403, 451 or 429, nothing looked up or fetched.
//! Every response of a site with `[site.cors]` or `[[site.header]]` leaves through its
//! edits (`answer/edits.rs`), whichever phase answered it.
//!
//! Phase by phase: `lookup` finds what is stored ([`Found`]); `inflight` makes this
//! request the leader or a follower of the one fetch per key; `fetch` makes the leader's
//! fetch and says what became of it ([`Fetched`]), `fill` writing into the store; `serve`
//! answers from a stored or filling object, `forward` passes what is not cached;
//! `deadline` bounds every wait; `llhls` watches the playlists a fill brings; `slice` and
//! `oversized` (`path/piecewise/`) answer objects stored piecewise.

use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use reel_http::{Method, Request, RequestBody, Response};
use reel_ops::metrics::WorkerMetrics;
use reel_origin::WorkerClient;
use reel_store::Filling;

use super::answer::stored::{Prepared, ReqHeaders, unix_now};
use super::answer::tag::Tag;
use super::answer::{Answer, StatusNames};
use super::phase::cmcd;
use super::phase::deadline::{self, Wait};
use super::phase::fetch::{self, FetchCx, Fetched, refresh_in_background};
use super::phase::forward::Forwarder;
use super::phase::inflight::{Follow, Lead, Role, State};
use super::phase::llhls;
use super::phase::lookup::{Found, Reader, Stored, cache_key};
use super::phase::serve::{Serve, local, stream_origin};
use super::piecewise::oversized;
use super::piecewise::slice::{self, readahead::ReadAhead};
use super::worker::settings::{Settings, Site};
use super::worker::shared::SharedCache;
use super::worker::small::SMALL_BODY;
use super::worker::{WorkerParts, access};
use crate::key::CacheKey;
use crate::policy::cache_control::RequestCacheControl;
use crate::policy::decision::{Decision, decide, stale_if_error_ok};

/// How many times a request may go round (look up, wait for a leader, look up again)
/// before it fetches on its own.
const MAX_ROUNDS: usize = 4;

/// One worker's cache front: origin client pool, decoded-metadata cache.
pub struct WorkerCache {
    /// The store, this generation's settings and origin connections, the decoded-metadata
    /// cache (shared with the worker's caches of later config generations: it depends on
    /// stored objects only), our `Cache-Status` entries with this generation's name.
    parts: WorkerParts,
    /// Read-ahead fetches in flight on this worker (kept across generations, like the
    /// metadata cache).
    read_ahead: Rc<ReadAhead>,
}

/// Where a GET or HEAD is in the decision tree, with everything the steps before it learnt
/// that the steps after it need: the machine's whole state apart from the request itself
/// ([`Get`]). Each step is logged at trace level ([`Phase::as_str`]).
enum Phase {
    /// Look the key up (again), with what the rounds before learnt.
    Lookup(Learnt),
    /// A complete stored object: its freshness decides.
    Stored(Stored, Learnt),
    /// An object being filled: stream it as it fills (a small one's readers wait once).
    Filling(Filling, Rc<Prepared>, Learnt),
    /// Nothing usable stored.
    Absent(Learnt),
    /// This request leads the one fetch of the key; with the stale object it revalidates.
    Lead(Lead, Option<Stored>),
    /// The leader's fetch ended: what became of it, the origin's time, and the stale object
    /// it revalidated, if any. [`WorkerCache::after_fetch`] says what comes next.
    Fetched { fetched: Fetched, origin_time: Option<Duration>, stale: Option<Stored> },
    /// Another request leads it: wait, then look up again. `revalidating`: the fetch
    /// revalidates a stored object, whose unshared answer leaves that object to look at.
    /// `to_end`: the leader's response is being stored already but is not this request's
    /// (another Vary variant): wait for its fill to end, then lead a fetch of its own.
    Follow { f: Follow, revalidating: bool, to_end: bool, learnt: Learnt },
    /// A follower waited its bound.
    WaitedOut,
    /// Answer from a complete stored object (`now`: the time its age is computed at).
    Hit { stored: Stored, prep: Rc<Prepared>, now: u64, answer: Answer },
    /// Stream an object as it is written.
    Stream(Filling, Rc<Prepared>, Answer),
    /// Stream the origin's response, not stored, through to this client.
    PassThrough(reel_origin::OriginResponse, Answer),
    /// Too large for the store: the viewer's range is fetched and stored as a piece.
    Oversized,
    /// Fetch for this client alone, uncached.
    Pass(Answer),
    /// Answered.
    Done(Response),
}

impl Phase {
    /// The step's name in the trace log.
    fn as_str(&self) -> &'static str {
        match self {
            Phase::Lookup(_) => "lookup",
            Phase::Stored(..) => "stored",
            Phase::Filling(..) => "filling",
            Phase::Absent(_) => "absent",
            Phase::Lead(..) => "lead",
            Phase::Fetched { .. } => "fetched",
            Phase::Follow { .. } => "follow",
            Phase::WaitedOut => "waited-out",
            Phase::Hit { .. } => "hit",
            Phase::Stream(..) => "stream",
            Phase::PassThrough(..) => "pass-through",
            Phase::Oversized => "oversized",
            Phase::Pass(_) => "pass",
            Phase::Done(_) => "done",
        }
    }
}

/// What a request's rounds (look up, wait for a leader, look up again) learnt, carried from
/// the phase that learnt it to the next lookup and the phases after it.
#[derive(Default)]
struct Learnt {
    /// What the leaders' news said of failed fetches (`Follow`, `Filling`).
    fails: Failures,
    /// Whether the request waited once for a small body to be read whole (`Filling`).
    small_waited: bool,
    /// A fill this request waited on that is not stored (refused by admission): it leaves
    /// the index when it commits, so a lookup after the wait may miss it. Served from here
    /// then, rather than fetched again (`Follow`, `Filling`).
    joined: Option<Filling>,
}

/// What a follower learnt of failed fetches. A leader's fetch can fail because of the
/// leader's own request (a field the origin rejects): its followers go round once more, one
/// of them leading a fetch with its own request, before they answer with the failure.
#[derive(Default)]
struct Failures {
    /// Whether the followers went round again already.
    retried: bool,
    /// The status of the failure to answer with (or stale-if-error).
    failed: Option<u16>,
    /// That failure was an LL-HLS blocking timeout.
    blocking_timeout: bool,
}

impl Failures {
    /// Records the leader's news, if it is a failure.
    fn record(&mut self, state: State) {
        let Some(status) = state.failure() else { return };
        if std::mem::replace(&mut self.retried, true) {
            self.failed = Some(status);
            self.blocking_timeout = state == State::BlockingTimeout;
        }
    }
}

/// One GET or HEAD on its way through the phases: what stays the same from round to round
/// (what the rounds learn travels in the [`Phase`]).
struct Get<'r> {
    req: &'r Request,
    site: &'r Site,
    key: CacheKey,
    cc: RequestCacheControl,
    wait: Wait,
    m: &'r WorkerMetrics,
}

impl WorkerCache {
    /// A worker's cache over the shared state, for one config generation.
    pub fn new(shared: Arc<SharedCache>, settings: Arc<Settings>, client: WorkerClient) -> Self {
        let statuses = Rc::new(StatusNames::new(settings.node.cache_status_name()));
        let fetch = FetchCx { shared, settings, client };
        let parts =
            WorkerParts { fetch, metas: Rc::default(), statuses, miss_quota: Rc::default() };
        WorkerCache { parts, read_ahead: Rc::default() }
    }

    /// This worker's cache for the next config generation: new settings and client (pass a
    /// clone of the current one to keep its pool), the same decoded-metadata cache.
    pub fn next_generation(&self, settings: Arc<Settings>, client: WorkerClient) -> Self {
        let statuses = Rc::new(StatusNames::new(settings.node.cache_status_name()));
        let fetch = FetchCx { shared: self.parts.fetch.shared.clone(), settings, client };
        let (metas, miss_quota) = (self.parts.metas.clone(), self.parts.miss_quota.clone());
        let parts = WorkerParts { fetch, metas, statuses, miss_quota };
        WorkerCache { parts, read_ahead: self.read_ahead.clone() }
    }

    /// Answers one request. The response's tag carries the cache result, the origin time
    /// and the site's metrics id.
    pub async fn handle(
        &self,
        req: &Request,
        body: &mut RequestBody<'_>,
        m: &WorkerMetrics,
    ) -> Response {
        let settings = &self.parts.fetch.settings;
        if settings.node.is_loop(req) {
            // RFC 8586 2, before the lookup: a request of our own fill that came back would
            // otherwise wait on that fill.
            return local(508);
        }
        let host = req.host().unwrap_or("");
        let Some(site) = settings.site_for(host) else {
            // Not a site of ours: never an open proxy (RFC 9110 15.5.20).
            return local(421);
        };
        let mut r = match &site.edits {
            None => self.checked(req, body, site, m).await,
            // A CORS preflight is answered first, before the site's access checks: a
            // browser sends no cookies, tokens or credentials with one.
            Some(edits) => match edits.preflight(req) {
                Some(r) => r,
                None => edits.apply(req, self.checked(req, body, site, m).await),
            },
        };
        if let Some(cmsd) = &site.cmsd {
            cmsd.apply(req, &mut r, self.parts.fetch.shared.duress.load(Relaxed));
        }
        r.tag = Tag::with_site(r.tag, site.metrics_id);
        r
    }

    /// A request of `site` through its access checks, then by its method.
    async fn checked(
        &self,
        req: &Request,
        body: &mut RequestBody<'_>,
        site: &Site,
        m: &WorkerMetrics,
    ) -> Response {
        // The site's access rules, before the store or the origin is consulted: address
        // and country, then the token, then the rate (per token when one verified). OPTIONS
        // is left to the CORS preflight (browsers send no credentials on one).
        if let Some(access) = &site.access
            && let Some(refused) = access::refuse_by_address(access, req, m)
        {
            return refused;
        }
        if let Some(t) = &site.token
            && *req.method() != Method::Options
        {
            let admitted = match access::check_token(t, req, unix_now()) {
                Ok(a) => a,
                Err(reason) => {
                    m.record_denied(reason);
                    return access::denied(reason);
                }
            };
            if let Some(access) = &site.access
                && let Some(refused) =
                    access::refuse_by_rate(access, req, Some(&admitted.valid.identity), m)
            {
                return refused;
            }
            let resp = self.by_method(&admitted.clean, body, site, m).await;
            return admitted.follow.apply(t, req, resp).await;
        }
        if let Some(access) = &site.access
            && let Some(refused) = access::refuse_by_rate(access, req, None, m)
        {
            return refused;
        }
        self.by_method(req, body, site, m).await
    }

    /// A request of `site` by its method: GET and HEAD through the cache, others passed
    /// through (or refused).
    async fn by_method(
        &self,
        req: &Request,
        body: &mut RequestBody<'_>,
        site: &Site,
        m: &WorkerMetrics,
    ) -> Response {
        // CMCD: its next object warmed, and the request as the origin may see it.
        let without_cmcd = cmcd::on_request(&self.parts.fetch, req, site);
        let req = without_cmcd.as_ref().unwrap_or(req);
        match req.method() {
            Method::Get | Method::Head => self.get(req, body, site, m).await,
            // Extension methods too (RFC 9110 9.1, 16.1): the origin knows what they mean.
            // TRACE and CONNECT never: one reflects the request, the other tunnels.
            Method::Post
            | Method::Put
            | Method::Delete
            | Method::Options
            | Method::Patch
            | Method::Other(_)
                if site.pass_methods =>
            {
                let Some(_place) = self.parts.miss_place(req.socket_peer()).await else {
                    return too_many_waiting();
                };
                self.forwarder().pass(req, body, site).await
            }
            m => Response::for_unsupported_method(m, &[Method::Get, Method::Head])
                .unwrap_or_else(|| Response::error(405))
                .tagged(Tag::local()),
        }
    }

    /// A GET or HEAD: the requests that skip the lookup (`no-store`, sliced sites), then
    /// the phases from the lookup on. `body` carries the origin's interim responses to the
    /// client (a GET has no body to read).
    async fn get(
        &self,
        req: &Request,
        body: &mut RequestBody<'_>,
        site: &Site,
        m: &WorkerMetrics,
    ) -> Response {
        let Some(key) = cache_key(req, site) else { return local(400) };
        let hdrs = ReqHeaders(req);
        let cc = if site.honor_client_cache_control {
            RequestCacheControl::parse(&hdrs)
        } else {
            RequestCacheControl::default()
        };
        let shared = &self.parts.fetch.shared;
        if cc.no_store {
            // RFC 9111 5.2.1.5 forbids storing what this request fetches, not sharing a
            // fill already under way: joining it costs the origin nothing.
            if let Found::Filling { fill, prep } = self.reader().find(&key, &hdrs).await {
                return self.serve_for(site).filling(req, fill, prep, Answer::MISS_COLLAPSED).await;
            }
            let Some(_place) = self.parts.miss_place(req.socket_peer()).await else {
                return too_many_waiting();
            };
            return self.forwarder().fetch_pass(req, body, site, Answer::FWD_REQUEST).await;
        }
        if let Some(size) = site.slicing.size
            && !shared.store.contains(key.as_bytes())
        {
            // Sliced, unless a whole object is stored for the URL (an origin that ignored
            // Range, or slicing turned on by a reload): that one is served as it is.
            let ra = self.read_ahead.clone();
            return slice::get(self.parts.clone(), ra, (req, body), site, &key, size, &cc, m).await;
        }
        let wait = Wait::new(&self.parts.fetch.settings, &shared.streams, &key);
        // A blocking request's leader failure is final: another round would hold one more
        // origin request.
        let fails = Failures { retried: wait.blocking, ..Failures::default() };
        let g = Get { req, site, key, cc, wait, m };
        let mut phase = Phase::Lookup(Learnt { fails, ..Learnt::default() });
        let mut rounds = 0;
        let key = || String::from_utf8_lossy(g.key.as_bytes());
        loop {
            // One line per step: a request's path through the cache.
            tracing::trace!(phase = phase.as_str(), key = %key(), "cache step");
            phase = match phase {
                Phase::Lookup(_) if rounds == MAX_ROUNDS => Phase::Pass(Answer::PASS_NOT_STORED),
                Phase::Lookup(mut learnt) => {
                    rounds += 1;
                    match self.reader().find(&g.key, &hdrs).await {
                        Found::Hit(stored) => Phase::Stored(stored, learnt),
                        Found::Filling { fill, prep } => Phase::Filling(fill, prep, learnt),
                        Found::None => match self.joined(&mut learnt, &hdrs) {
                            Some((fill, prep)) => Phase::Filling(fill, prep, learnt),
                            None => Phase::Absent(learnt),
                        },
                    }
                }
                Phase::Stored(stored, learnt) => self.stored(&g, stored, learnt).await,
                Phase::Filling(fill, prep, learnt) => self.filling(&g, fill, prep, learnt).await,
                Phase::Absent(learnt) => self.absent(&g, body, learnt).await,
                Phase::Lead(lead, stale) => self.lead(&g, body, lead, stale).await,
                Phase::Fetched { fetched, origin_time, stale } => {
                    self.after_fetch(&g, fetched, origin_time, stale)
                }
                Phase::Follow { f, revalidating, to_end, mut learnt } => {
                    let shared_fill = f.shared_fill();
                    match deadline::follow(f, m, g.wait.until(), to_end).await {
                        Some(State::NotShared) if !revalidating => {
                            Phase::Pass(Answer::PASS_NOT_STORED)
                        }
                        Some(st) => {
                            learnt.fails.record(st);
                            learnt.joined = shared_fill.get();
                            Phase::Lookup(learnt)
                        }
                        None => Phase::WaitedOut,
                    }
                }
                // A blocking request answers 504 (its media did not appear in time); any
                // other fetches on its own, uncached.
                Phase::WaitedOut if g.wait.blocking => Phase::Done(self.blocking_timeout(m, None)),
                Phase::WaitedOut => Phase::Pass(Answer::LOCK_TIMEOUT),
                Phase::Hit { stored, prep, now, answer } => {
                    return self.serve_for(site).hit(req, stored.hit, &prep, now, answer).await;
                }
                Phase::Stream(fill, prep, answer) => {
                    return self.serve_for(site).filling(req, fill, prep, answer).await;
                }
                Phase::PassThrough(resp, answer) => {
                    let (statuses, shared) = (&self.parts.statuses, &self.parts.fetch.shared);
                    return stream_origin(req, resp, answer, statuses, &shared.pass_buffered);
                }
                Phase::Oversized => {
                    let parts = self.parts.clone();
                    let r = oversized::get(&parts, (req, body), site, &g.key, &g.cc).await;
                    return r.unwrap_or_else(|| local(502));
                }
                Phase::Pass(ans) => {
                    let Some(_place) = self.parts.miss_place(req.socket_peer()).await else {
                        return too_many_waiting();
                    };
                    return self.forwarder().fetch_pass(req, body, site, ans).await;
                }
                Phase::Done(r) => return r,
            };
        }
    }

    /// A complete stored object: answered (fresh, stale but acceptable, refreshed in the
    /// background, or stale-if-error after a failed fetch), or revalidated first.
    async fn stored(&self, g: &Get<'_>, stored: Stored, learnt: Learnt) -> Phase {
        let now = unix_now();
        let fails = &learnt.fails;
        if let Some(st) = fails.failed {
            // The leader's fetch failed: stale-if-error, or the leader's error.
            return if stale_if_error_ok(&g.cc, &stored.prep.meta, now) {
                let prep = stored.prep.clone();
                Phase::Hit { stored, prep, now, answer: Answer::STALE_IF_ERROR }
            } else if fails.blocking_timeout {
                Phase::Done(self.blocking_timeout(g.m, None))
            } else {
                Phase::Done(local(st))
            };
        }
        let answer = match decide(&g.cc, &stored.prep.meta, now) {
            Decision::Fresh => Answer::HIT,
            Decision::StaleServable => Answer::HIT_STALE,
            Decision::StaleWhileRevalidate => {
                refresh_in_background(&self.parts.fetch, g.req, g.site, &g.key, &stored, &g.cc)
                    .await;
                Answer::HIT_SWR
            }
            Decision::GatewayTimeout => {
                let r = Answer::ONLY_IF_CACHED.on(Response::error(504), &self.parts.statuses);
                return Phase::Done(r);
            }
            Decision::MustRevalidate => {
                return match self.parts.fetch.shared.inflight.join(g.key.as_bytes()) {
                    Role::Lead(lead) => Phase::Lead(lead, Some(stored)),
                    Role::Follow(f) => {
                        Phase::Follow { f, revalidating: true, to_end: false, learnt }
                    }
                };
            }
        };
        let prep = stored.prep.clone();
        Phase::Hit { stored, prep, now, answer }
    }

    /// An object being filled: streamed as it fills. A small body is read whole before the
    /// leader releases its followers (`small`): a request that finds the fill in that
    /// moment waits with them, once, rather than stream it ahead of them.
    async fn filling(
        &self,
        g: &Get<'_>,
        fill: Filling,
        prep: Rc<Prepared>,
        mut learnt: Learnt,
    ) -> Phase {
        if !learnt.small_waited
            && fill.expected_len().is_some_and(|n| {
                n <= SMALL_BODY && self.serve().small_body(&prep, fill.meta(), n).is_none()
            })
            && let Some(f) = self.parts.fetch.shared.inflight.follow(g.key.as_bytes())
        {
            learnt.small_waited = true;
            // Past the wait's bound the fill is streamed as it is.
            if let Some(st) = deadline::follow(f, g.m, g.wait.until(), false).await {
                learnt.fails.record(st);
            }
            if fill.is_unstored() {
                learnt.joined = Some(fill);
            }
            return Phase::Lookup(learnt);
        }
        Phase::Stream(fill, prep, Answer::MISS_COLLAPSED)
    }

    /// The unstored fill this request waited on, when a lookup no longer finds it (it
    /// committed and left the index): still whole for its readers, if it did not fail and is
    /// the variant this request selects.
    fn joined(
        &self,
        learnt: &mut Learnt,
        hdrs: &ReqHeaders<'_>,
    ) -> Option<(Filling, Rc<Prepared>)> {
        let fill = learnt.joined.take()?;
        if learnt.fails.failed.is_some() || fill.status().is_err() {
            return None;
        }
        let prep = self.reader().prepared(fill.meta())?;
        prep.meta.vary().matches(hdrs).then_some((fill, prep))
    }

    /// Nothing usable stored: the failure a previous round learnt, the URL's partial
    /// responses, `only-if-cached`, or the one fetch of the key, led or followed.
    async fn absent(&self, g: &Get<'_>, body: &mut RequestBody<'_>, learnt: Learnt) -> Phase {
        if let Some(st) = learnt.fails.failed {
            if learnt.fails.blocking_timeout {
                return Phase::Done(self.blocking_timeout(g.m, None));
            }
            let cs = self.parts.statuses.get(Answer::ORIGIN_ERROR.status);
            return Phase::Done(local(st).header("cache-status", cs));
        }
        if oversized::has_index(&self.parts.fetch.shared.store, &g.key)
            && let Some(r) =
                oversized::get(&self.parts.clone(), (g.req, body), g.site, &g.key, &g.cc).await
        {
            return Phase::Done(r);
        }
        if g.cc.only_if_cached {
            // RFC 9111 5.2.1.7.
            return Phase::Done(
                Answer::ONLY_IF_CACHED.on(Response::error(504), &self.parts.statuses),
            );
        }
        match self.parts.fetch.shared.inflight.join(g.key.as_bytes()) {
            Role::Lead(lead) => Phase::Lead(lead, None),
            Role::Follow(f) => {
                // Filling, yet nothing found for this request: another variant's fill.
                let to_end = f.is_filling();
                Phase::Follow { f, revalidating: false, to_end, learnt }
            }
        }
    }

    /// The leader's fetch (its playlist watched when it fills), ending in what became of
    /// it: [`Phase::Fetched`].
    async fn lead(
        &self,
        g: &Get<'_>,
        body: &mut RequestBody<'_>,
        lead: Lead,
        stale: Option<Stored>,
    ) -> Phase {
        let (req, site, key) = (g.req, g.site, &g.key);
        // Dropping the lead before the fetch tells the followers it failed: they go round
        // once more, and one of them leads.
        let Some(place) = self.parts.miss_place(req.socket_peer()).await else {
            return Phase::Done(too_many_waiting());
        };
        let stale_meta = stale.as_ref().map(|s| &s.prep.meta);
        let settings = &self.parts.fetch.settings;
        let Some((oreq, mut interims)) =
            fetch::viewer_request(req, key, stale_meta, settings, g.wait.first_byte())
        else {
            return Phase::Done(local(400));
        };
        // The fetch runs as a task of its own: a leader whose client goes away (an HTTP/2
        // stream reset, a closed connection) stops waiting for it, but the fetch goes on
        // and its followers get what the origin sends. With no follower either, before
        // the origin answered, it is abandoned and its origin connection given back.
        let (cx, site_own, key_own) = (self.parts.fetch.clone(), site.clone(), key.clone());
        let (req_own, cc) = (req.clone(), g.cc.clone());
        let revalidate = stale.as_ref().map(|s| (s.store_key.clone(), s.prep.clone()));
        let _viewing = lead.viewing();
        let unwanted = lead.unwanted();
        let fetch = tokio::task::spawn_local(async move {
            let stale = revalidate.as_ref().map(|(k, p)| (&k[..], &p.meta));
            let fetch = cx.for_viewer(&site_own, &req_own, &key_own, &cc, stale, oreq, lead);
            let r = tokio::select! {
                biased;
                r = fetch => r,
                () = unwanted => return (Fetched::Failed(502), None),
            };
            // The origin has answered (or failed): the body goes on without the place.
            drop(place);
            if let (Fetched::Filling(fill), _) = &r {
                llhls::watch_playlist(&cx, &req_own, &site_own, &key_own, fill).await;
            }
            r
        });
        let (fetched, origin_time) =
            body.with_interims(&mut interims, fetch).await.unwrap_or((Fetched::Failed(502), None));
        Phase::Fetched { fetched, origin_time, stale }
    }

    /// What comes after the leader's fetch: the freshened object (revalidated), the stale
    /// one (stale-if-error), the fill streamed as it arrives, the origin's response passed
    /// through (or, too large for the store, the viewer's range stored as a piece), or the
    /// failure.
    fn after_fetch(
        &self,
        g: &Get<'_>,
        fetched: Fetched,
        origin_time: Option<Duration>,
        stale: Option<Stored>,
    ) -> Phase {
        let stale_if_error = |stored: Stored| {
            let (prep, answer) = (stored.prep.clone(), Answer::STALE_IF_ERROR.after(origin_time));
            Phase::Hit { stored, prep, now: unix_now(), answer }
        };
        match (fetched, stale) {
            (Fetched::Failed(_), Some(s)) if stale_if_error_ok(&g.cc, &s.prep.meta, unix_now()) => {
                stale_if_error(s)
            }
            (Fetched::Failed(st), _) => Phase::Done(
                Answer::ORIGIN_ERROR
                    .after(origin_time)
                    .on(Response::error(st), &self.parts.statuses),
            ),
            (Fetched::BlockingTimeout, Some(s))
                if stale_if_error_ok(&g.cc, &s.prep.meta, unix_now()) =>
            {
                stale_if_error(s)
            }
            (Fetched::BlockingTimeout, _) => Phase::Done(self.blocking_timeout(g.m, origin_time)),
            (Fetched::Freshened(meta), Some(stored)) => {
                let answer = Answer::REVALIDATED.after(origin_time);
                Phase::Hit { stored, prep: Prepared::new(meta), now: unix_now(), answer }
            }
            (Fetched::StaleIfError, Some(s)) => stale_if_error(s),
            (Fetched::Filling(fill), stale) => {
                // The metadata was encoded just now, so it decodes.
                let Some(prep) = self.reader().prepared(fill.meta()) else {
                    return Phase::Done(local(502));
                };
                let answer = match stale {
                    Some(_) => Answer::REFRESHED,
                    None if fill.is_unstored() => Answer::MISS_NOT_ADMITTED,
                    None => Answer::MISS_STORED,
                };
                Phase::Stream(fill, prep, answer.after(origin_time))
            }
            (Fetched::NotStored(_), _)
                if g.req.header("range").is_some()
                    && oversized::has_index(&self.parts.fetch.shared.store, &g.key) =>
            {
                // Too large for the store: the viewer's range is fetched and stored.
                Phase::Oversized
            }
            (Fetched::NotStored(resp), _) => {
                Phase::PassThrough(resp, Answer::MISS_NOT_STORED.after(origin_time))
            }
            // Only a revalidation is freshened or covered by stale-if-error.
            (Fetched::Freshened(_) | Fetched::StaleIfError, None) => Phase::Done(local(502)),
        }
    }

    /// The 504 of an LL-HLS blocking request whose media did not appear within
    /// `blocking_timeout`, counted.
    fn blocking_timeout(&self, m: &WorkerMetrics, origin_time: Option<Duration>) -> Response {
        m.blocking_timeouts.fetch_add(1, Relaxed);
        Answer::BLOCKING_TIMEOUT.after(origin_time).on(Response::error(504), &self.parts.statuses)
    }

    /// Reading the store.
    fn reader(&self) -> Reader<'_> {
        self.parts.reader()
    }

    /// Answering from the store.
    fn serve(&self) -> Serve<'_> {
        self.parts.serve()
    }

    /// Answering from the store for `site` (its compression).
    fn serve_for<'a>(&'a self, site: &'a Site) -> Serve<'a> {
        self.parts.serve_for(site)
    }

    /// Passing through.
    fn forwarder(&self) -> Forwarder<'_> {
        self.parts.forwarder()
    }
}

/// The 503 of a request whose client connection has `[cache] max_misses_per_connection`
/// requests waiting on the origin already, and had for `lock_timeout`.
fn too_many_waiting() -> Response {
    local(503).header("retry-after", "1")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_next_generation_keeps_the_metadata_cache() {
        let dir = tempfile::tempdir().unwrap();
        let store = reel_store::Store::open(reel_store::StoreConfig::single(
            dir.path().join("store"),
            8 << 20,
            4 << 20,
            reel_store::IoMode::Threads,
        ))
        .unwrap();
        let spec = reel_origin::GroupSpec::new(
            "g",
            vec![vec![reel_origin::HostSpec::new("127.0.0.1:1".to_string())]],
        );
        let origins = reel_origin::Origins::new(vec![spec]).unwrap();
        let settings = Arc::new(Settings::for_tests(Vec::new()));
        let a =
            WorkerCache::new(SharedCache::new(store), settings.clone(), origins.worker_client());
        let b = a.next_generation(settings, a.parts.fetch.client.clone());
        assert!(Rc::ptr_eq(&a.parts.metas, &b.parts.metas));
        let other = WorkerCache::new(
            a.parts.fetch.shared.clone(),
            b.parts.fetch.settings.clone(),
            origins.worker_client(),
        );
        assert!(!Rc::ptr_eq(&a.parts.metas, &other.parts.metas));
    }
}
