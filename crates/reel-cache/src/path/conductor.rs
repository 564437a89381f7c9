//! The per-worker cache front, [`WorkerCache`]: routes a request to its site and walks the
//! decision tree below phase by phase ([`Phase`]), deciding after each which phase comes
//! next. The phases are the other modules of `path`; none of them answers a viewer on its
//! own initiative or calls back here.
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
//! partial index for the URL ─ partial (pieces by Range)
//! other methods ─ pass through (body streamed) ─ 2xx/3xx: invalidate URL, Location, Content-Location
//! (extension methods pass too; TRACE and CONNECT never; only POST, PUT, DELETE and PATCH
//! invalidate unless the site's `invalidate_on = "all"`)
//! ```
//!
//! Phase by phase: `lookup` finds what is stored ([`Found`]); `inflight` makes this
//! request the leader or a follower of the one fetch per key; `fetch` makes the leader's
//! fetch and says what became of it ([`Fetched`]), `fill` writing into the store; `serve`
//! answers from a stored or filling object, `forward` passes what is not cached;
//! `deadline` bounds every wait; `llhls` watches the playlists a fill brings; `slice` and
//! `partial` answer objects stored piecewise.

use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use reel_http::{Method, Request, RequestBody, Response};
use reel_ops::metrics::WorkerMetrics;
use reel_origin::WorkerClient;
use reel_store::Filling;

use super::answer::{Answer, StatusNames};
use super::deadline::{self, Wait};
use super::fetch::{self, FetchCx, Fetched, refresh_in_background};
use super::forward::Forwarder;
use super::inflight::{Follow, Lead, Role, State};
use super::llhls;
use super::lookup::{Found, Reader, Stored, cache_key};
use super::partial;
use super::parts::WorkerParts;
use super::respond::{Prepared, ReqHeaders, unix_now};
use super::serve::{Serve, local, stream_origin};
use super::settings::{Settings, Site};
use super::shared::SharedCache;
use super::slice::{self, readahead::ReadAhead};
use super::small::SMALL_BODY;
use super::tag::Tag;
use crate::key::CacheKey;
use crate::policy::cache_control::RequestCacheControl;
use crate::policy::freshness::{Decision, decide, stale_if_error_ok};

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

/// Where a GET or HEAD is in the decision tree.
enum Phase {
    /// Look the key up (again).
    Lookup,
    /// A complete stored object: its freshness decides.
    Stored(Stored),
    /// An object being filled: stream it as it fills.
    Filling(Filling, Rc<Prepared>),
    /// Nothing usable stored.
    Absent,
    /// This request leads the one fetch of the key; with the stale object it revalidates.
    Lead(Lead, Option<Stored>),
    /// Another request leads it: wait, then look up again. `revalidating`: the fetch
    /// revalidates a stored object, whose unshared answer leaves that object to look at.
    /// `to_end`: the leader's response is being stored already but is not this request's
    /// (another Vary variant): wait for its fill to end, then lead a fetch of its own.
    Follow { f: Follow, revalidating: bool, to_end: bool },
    /// A follower waited its bound.
    WaitedOut,
    /// Fetch for this client alone, uncached.
    Pass(Answer),
    /// Answered.
    Done(Response),
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

/// One GET or HEAD on its way through the phases: what stays the same from round to
/// round, and what the rounds learnt.
struct Get<'r> {
    req: &'r Request,
    site: &'r Site,
    key: CacheKey,
    cc: RequestCacheControl,
    wait: Wait,
    m: &'r WorkerMetrics,
    fails: Failures,
    /// Whether the request waited once for a small body to be read whole.
    small_waited: bool,
    /// A fill this request waited on that is not stored (refused by admission): it leaves
    /// the index when it commits, so a lookup after the wait may miss it. Served from here
    /// then, rather than fetched again.
    joined: Option<Filling>,
}

impl WorkerCache {
    /// A worker's cache over the shared state, for one config generation.
    pub fn new(shared: Arc<SharedCache>, settings: Arc<Settings>, client: WorkerClient) -> Self {
        let statuses = Rc::new(StatusNames::new(settings.node.cache_status_name()));
        let fetch = FetchCx { shared, settings, client };
        let parts = WorkerParts { fetch, metas: Rc::default(), statuses, misses: Rc::default() };
        WorkerCache { parts, read_ahead: Rc::default() }
    }

    /// This worker's cache for the next config generation: new settings and client (pass a
    /// clone of the current one to keep its pool), the same decoded-metadata cache.
    pub fn next_generation(&self, settings: Arc<Settings>, client: WorkerClient) -> Self {
        let statuses = Rc::new(StatusNames::new(settings.node.cache_status_name()));
        let fetch = FetchCx { shared: self.parts.fetch.shared.clone(), settings, client };
        let (metas, misses) = (self.parts.metas.clone(), self.parts.misses.clone());
        let parts = WorkerParts { fetch, metas, statuses, misses };
        WorkerCache { parts, read_ahead: self.read_ahead.clone() }
    }

    /// Answers one request. The response's tag carries the cache result and origin time.
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
                let Some(_place) = self.parts.admit(req.peer()).await else {
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
                return self.serve().filling(req, fill, prep, Answer::MISS_COLLAPSED).await;
            }
            let Some(_place) = self.parts.admit(req.peer()).await else {
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
        let mut g = Get { req, site, key, cc, wait, m, fails, small_waited: false, joined: None };
        let mut phase = Phase::Lookup;
        let mut rounds = 0;
        loop {
            phase = match phase {
                Phase::Lookup if rounds == MAX_ROUNDS => Phase::Pass(Answer::PASS_NOT_STORED),
                Phase::Lookup => {
                    rounds += 1;
                    match self.reader().find(&g.key, &hdrs).await {
                        Found::Hit(stored) => Phase::Stored(stored),
                        Found::Filling { fill, prep } => Phase::Filling(fill, prep),
                        Found::None => match self.joined(&mut g, &hdrs) {
                            Some((fill, prep)) => Phase::Filling(fill, prep),
                            None => Phase::Absent,
                        },
                    }
                }
                Phase::Stored(stored) => self.stored(&mut g, stored).await,
                Phase::Filling(fill, prep) => self.filling(&mut g, fill, prep).await,
                Phase::Absent => self.absent(&g, body).await,
                Phase::Lead(lead, stale) => Phase::Done(self.lead(&g, body, lead, stale).await),
                Phase::Follow { f, revalidating, to_end } => {
                    let shared_fill = f.shared_fill();
                    match deadline::follow(f, m, g.wait.until(), to_end).await {
                        Some(State::NotShared) if !revalidating => {
                            Phase::Pass(Answer::PASS_NOT_STORED)
                        }
                        Some(st) => {
                            g.fails.record(st);
                            g.joined = shared_fill.get();
                            Phase::Lookup
                        }
                        None => Phase::WaitedOut,
                    }
                }
                // A blocking request answers 504 (its media did not appear in time); any
                // other fetches on its own, uncached.
                Phase::WaitedOut if g.wait.blocking => Phase::Done(self.blocking_timeout(m, None)),
                Phase::WaitedOut => Phase::Pass(Answer::LOCK_TIMEOUT),
                Phase::Pass(ans) => {
                    let Some(_place) = self.parts.admit(req.peer()).await else {
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
    async fn stored(&self, g: &mut Get<'_>, stored: Stored) -> Phase {
        let now = unix_now();
        let serve = self.serve();
        if let Some(st) = g.fails.failed {
            // The leader's fetch failed: stale-if-error, or the leader's error.
            return Phase::Done(if stale_if_error_ok(&g.cc, &stored.prep.meta, now) {
                serve.hit(g.req, stored.hit, &stored.prep, now, Answer::STALE_IF_ERROR).await
            } else if g.fails.blocking_timeout {
                self.blocking_timeout(g.m, None)
            } else {
                local(st)
            });
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
                    Role::Follow(f) => Phase::Follow { f, revalidating: true, to_end: false },
                };
            }
        };
        Phase::Done(serve.hit(g.req, stored.hit, &stored.prep, now, answer).await)
    }

    /// An object being filled: streamed as it fills. A small body is read whole before the
    /// leader releases its followers (`small`): a request that finds the fill in that
    /// moment waits with them, once, rather than stream it ahead of them.
    async fn filling(&self, g: &mut Get<'_>, fill: Filling, prep: Rc<Prepared>) -> Phase {
        let serve = self.serve();
        if !g.small_waited
            && fill.expected_len().is_some_and(|n| {
                n <= SMALL_BODY && serve.small_body(&prep, fill.meta(), n).is_none()
            })
            && let Some(f) = self.parts.fetch.shared.inflight.follow(g.key.as_bytes())
        {
            g.small_waited = true;
            // Past the wait's bound the fill is streamed as it is.
            if let Some(st) = deadline::follow(f, g.m, g.wait.until(), false).await {
                g.fails.record(st);
            }
            if fill.is_unstored() {
                g.joined = Some(fill);
            }
            return Phase::Lookup;
        }
        Phase::Done(serve.filling(g.req, fill, prep, Answer::MISS_COLLAPSED).await)
    }

    /// The unstored fill this request waited on, when a lookup no longer finds it (it
    /// committed and left the index): still whole for its readers, if it did not fail and is
    /// the variant this request selects.
    fn joined(&self, g: &mut Get<'_>, hdrs: &ReqHeaders<'_>) -> Option<(Filling, Rc<Prepared>)> {
        let fill = g.joined.take()?;
        if g.fails.failed.is_some() || fill.status().is_err() {
            return None;
        }
        let prep = self.reader().prepared(fill.meta())?;
        prep.meta.vary().matches(hdrs).then_some((fill, prep))
    }

    /// Nothing usable stored: the failure a previous round learnt, the URL's partial
    /// responses, `only-if-cached`, or the one fetch of the key, led or followed.
    async fn absent(&self, g: &Get<'_>, body: &mut RequestBody<'_>) -> Phase {
        if let Some(st) = g.fails.failed {
            if g.fails.blocking_timeout {
                return Phase::Done(self.blocking_timeout(g.m, None));
            }
            let cs = self.parts.statuses.get(Answer::ORIGIN_ERROR.status);
            return Phase::Done(local(st).header("cache-status", cs));
        }
        if partial::has_index(&self.parts.fetch.shared.store, &g.key)
            && let Some(r) =
                partial::get(&self.parts.clone(), (g.req, body), g.site, &g.key, &g.cc).await
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
                Phase::Follow { f, revalidating: false, to_end }
            }
        }
    }

    /// The leader's fetch, then its answer from what became of it: the fill streamed as
    /// it arrives (its playlist watched), the freshened or stale object, the origin's
    /// response passed through, or the failure.
    async fn lead(
        &self,
        g: &Get<'_>,
        body: &mut RequestBody<'_>,
        lead: Lead,
        stale: Option<Stored>,
    ) -> Response {
        let (req, site, key) = (g.req, g.site, &g.key);
        // Dropping the lead before the fetch tells the followers it failed: they go round
        // once more, and one of them leads.
        let Some(place) = self.parts.admit(req.peer()).await else { return too_many_waiting() };
        let stale_meta = stale.as_ref().map(|s| &s.prep.meta);
        let settings = &self.parts.fetch.settings;
        let Some((oreq, mut interims)) =
            fetch::viewer_request(req, key, stale_meta, settings, g.wait.first_byte())
        else {
            return local(400);
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
        let serve = self.serve();
        match (fetched, stale) {
            (Fetched::Failed(_), Some(s)) if stale_if_error_ok(&g.cc, &s.prep.meta, unix_now()) => {
                let ans = Answer::STALE_IF_ERROR.after(origin_time);
                serve.hit(req, s.hit, &s.prep, unix_now(), ans).await
            }
            (Fetched::Failed(st), _) => Answer::ORIGIN_ERROR
                .after(origin_time)
                .on(Response::error(st), &self.parts.statuses),
            (Fetched::BlockingTimeout, Some(s))
                if stale_if_error_ok(&g.cc, &s.prep.meta, unix_now()) =>
            {
                let ans = Answer::STALE_IF_ERROR.after(origin_time);
                serve.hit(req, s.hit, &s.prep, unix_now(), ans).await
            }
            (Fetched::BlockingTimeout, _) => self.blocking_timeout(g.m, origin_time),
            (Fetched::Freshened(meta), Some(s)) => {
                let ans = Answer::REVALIDATED.after(origin_time);
                serve.hit(req, s.hit, &Prepared::new(meta), unix_now(), ans).await
            }
            (Fetched::StaleIfError, Some(s)) => {
                let ans = Answer::STALE_IF_ERROR.after(origin_time);
                serve.hit(req, s.hit, &s.prep, unix_now(), ans).await
            }
            (Fetched::Filling(fill), stale) => {
                // The metadata was encoded just now, so it decodes.
                let Some(prep) = self.reader().prepared(fill.meta()) else { return local(502) };
                let ans = match stale {
                    Some(_) => Answer::REFRESHED,
                    None if fill.is_unstored() => Answer::MISS_NOT_ADMITTED,
                    None => Answer::MISS_STORED,
                };
                serve.filling(req, fill, prep, ans.after(origin_time)).await
            }
            (Fetched::NotStored(resp), _)
                if req.header("range").is_some()
                    && partial::has_index(&self.parts.fetch.shared.store, key) =>
            {
                // Too large for the store: the viewer's range is fetched and stored.
                drop(resp);
                let r = partial::get(&self.parts.clone(), (req, body), site, key, &g.cc).await;
                r.unwrap_or_else(|| local(502))
            }
            (Fetched::NotStored(resp), _) => stream_origin(
                req,
                resp,
                Answer::MISS_NOT_STORED.after(origin_time),
                &self.parts.statuses,
                &self.parts.fetch.shared.pass_buffered,
            ),
            // Only a revalidation is freshened or covered by stale-if-error.
            (Fetched::Freshened(_) | Fetched::StaleIfError, None) => local(502),
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
