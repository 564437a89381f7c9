//! The per-worker cache front, [`WorkerCache`]: routes a request to its site and decides,
//! round by round, which of the other modules answers it.
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
//! other methods ─ pass through (body streamed) ─ 2xx/3xx: invalidate URL, Location, Content-Location
//! (extension methods too; TRACE and CONNECT never)
//! ```
//!
//! `lookup` finds the stored representation, `serve` answers from it, `fetch` makes the
//! one origin fetch per key and `fill` writes it into the store, `forward` passes what is
//! not cached.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;

use reel_http::{Method, Request, RequestBody, Response};
use reel_ops::metrics::WorkerMetrics;
use reel_origin::WorkerClient;

use super::answer::{Answer, StatusNames};
use super::inflight::{Follow, Role, State};
use super::lookup::Found;
use super::respond::{MetaCache, ReqHeaders, unix_now};
use super::settings::{Settings, Site};
use super::shared::SharedCache;
use super::tag::Tag;
use crate::policy::cache_control::RequestCacheControl;
use crate::policy::freshness::{Decision, decide, stale_if_error_ok};

/// How many times a request may go round (look up, wait for a leader, look up again)
/// before it fetches on its own.
const MAX_ROUNDS: usize = 4;

/// What a follower learnt of failed fetches. A leader's fetch can fail because of the
/// leader's own request (a field the origin rejects): its followers go round once more, one
/// of them leading a fetch with its own request, before they answer with the failure.
#[derive(Default)]
struct Failures {
    /// Whether the followers went round again already.
    retried: bool,
    /// The status of the failure to answer with (or stale-if-error).
    failed: Option<u16>,
}

impl Failures {
    fn record(&mut self, status: u16) {
        if std::mem::replace(&mut self.retried, true) {
            self.failed = Some(status);
        }
    }
}

/// One worker's cache front: origin client pool, decoded-metadata cache.
pub struct WorkerCache {
    pub(super) shared: Arc<SharedCache>,
    pub(super) settings: Arc<Settings>,
    pub(super) client: WorkerClient,
    /// Shared with the worker's caches of later config generations (it depends on stored
    /// objects only).
    pub(super) metas: Rc<RefCell<MetaCache>>,
    /// Our `Cache-Status` entries with this generation's name.
    pub(super) statuses: StatusNames,
}

/// A response reel produced itself.
pub(super) fn local(status: u16) -> Response {
    Response::error(status).tagged(Tag::local())
}

impl WorkerCache {
    /// A worker's cache over the shared state, for one config generation.
    pub fn new(shared: Arc<SharedCache>, settings: Arc<Settings>, client: WorkerClient) -> Self {
        let statuses = StatusNames::new(settings.node.cache_status_name());
        WorkerCache { shared, settings, client, metas: Rc::default(), statuses }
    }

    /// This worker's cache for the next config generation: new settings and client (pass a
    /// clone of the current one to keep its pool), the same decoded-metadata cache.
    pub fn next_generation(&self, settings: Arc<Settings>, client: WorkerClient) -> Self {
        let statuses = StatusNames::new(settings.node.cache_status_name());
        WorkerCache {
            shared: self.shared.clone(),
            settings,
            client,
            metas: self.metas.clone(),
            statuses,
        }
    }

    /// Answers one request. The response's tag carries the cache result and origin time.
    pub async fn handle(
        &self,
        req: &Request,
        body: &mut RequestBody<'_>,
        m: &WorkerMetrics,
    ) -> Response {
        if self.settings.node.is_loop(req) {
            // RFC 8586 2, before the lookup: a request of our own fill that came back would
            // otherwise wait on that fill.
            return local(508);
        }
        let host = req.host().unwrap_or("");
        let Some(site) = self.settings.site_for(host) else {
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
                self.pass(req, body, site).await
            }
            m => Response::for_unsupported_method(m, &[Method::Get, Method::Head])
                .unwrap_or_else(|| Response::error(405))
                .tagged(Tag::local()),
        }
    }

    /// `body` carries the origin's interim responses to the client (a GET has no body to
    /// read).
    async fn get(
        &self,
        req: &Request,
        body: &mut RequestBody<'_>,
        site: &Site,
        m: &WorkerMetrics,
    ) -> Response {
        let Some(key) = self.key(req, site) else { return local(400) };
        let hdrs = ReqHeaders(req);
        let req_cc = if site.honor_client_cache_control {
            RequestCacheControl::parse(&hdrs)
        } else {
            RequestCacheControl::default()
        };
        if req_cc.no_store {
            // RFC 9111 5.2.1.5 forbids storing what this request fetches, not sharing a
            // fill already under way: joining it costs the origin nothing.
            if let Found::Filling { fill, prep } = self.find(&key, &hdrs) {
                return self.serve_filling(req, fill, prep, Answer::MISS_COLLAPSED).await;
            }
            return self.fetch_pass(req, body, site, Answer::FWD_REQUEST).await;
        }
        let mut fails = Failures::default();
        for _ in 0..MAX_ROUNDS {
            match self.find(&key, &hdrs) {
                Found::Hit(stored) => {
                    let now = unix_now();
                    if let Some(st) = fails.failed {
                        // The leader's fetch failed: stale-if-error, or the leader's error.
                        return if stale_if_error_ok(&req_cc, &stored.prep.meta, now) {
                            self.serve_hit(
                                req,
                                stored.hit,
                                &stored.prep,
                                now,
                                Answer::STALE_IF_ERROR,
                            )
                            .await
                        } else {
                            local(st)
                        };
                    }
                    let answer = match decide(&req_cc, &stored.prep.meta, now) {
                        Decision::Fresh => Answer::HIT,
                        Decision::StaleServable => Answer::HIT_STALE,
                        Decision::StaleWhileRevalidate => {
                            self.refresh_in_background(req, site, &key, &stored, &req_cc);
                            Answer::HIT_SWR
                        }
                        Decision::GatewayTimeout => {
                            return Answer::ONLY_IF_CACHED.on(Response::error(504), &self.statuses);
                        }
                        Decision::MustRevalidate => {
                            match self.shared.inflight.join(key.as_bytes()) {
                                Role::Lead(lead) => {
                                    return self
                                        .fetch(req, body, site, &key, lead, Some(stored), &req_cc)
                                        .await;
                                }
                                Role::Follow(f) => match self.follow(f, m).await {
                                    Some(State::Failed(st)) => {
                                        fails.record(st);
                                        continue;
                                    }
                                    Some(_) => continue,
                                    None => {
                                        return self
                                            .fetch_pass(req, body, site, Answer::LOCK_TIMEOUT)
                                            .await;
                                    }
                                },
                            }
                        }
                    };
                    return self.serve_hit(req, stored.hit, &stored.prep, now, answer).await;
                }
                Found::Filling { fill, prep } => {
                    return self.serve_filling(req, fill, prep, Answer::MISS_COLLAPSED).await;
                }
                Found::None => {
                    if let Some(st) = fails.failed {
                        let cs = self.statuses.get(Answer::ORIGIN_ERROR.status);
                        return local(st).header("cache-status", cs);
                    }
                    if req_cc.only_if_cached {
                        // RFC 9111 5.2.1.7.
                        return Answer::ONLY_IF_CACHED.on(Response::error(504), &self.statuses);
                    }
                    match self.shared.inflight.join(key.as_bytes()) {
                        Role::Lead(lead) => {
                            return self.fetch(req, body, site, &key, lead, None, &req_cc).await;
                        }
                        Role::Follow(f) => match self.follow(f, m).await {
                            Some(State::NotShared) => {
                                return self
                                    .fetch_pass(req, body, site, Answer::PASS_NOT_STORED)
                                    .await;
                            }
                            Some(State::Failed(st)) => fails.record(st),
                            Some(_) => {}
                            None => {
                                return self
                                    .fetch_pass(req, body, site, Answer::LOCK_TIMEOUT)
                                    .await;
                            }
                        },
                    }
                }
            }
        }
        self.fetch_pass(req, body, site, Answer::PASS_NOT_STORED).await
    }

    /// Waits for the leader of this key's fetch, counted as a coalesced waiter, at most
    /// `[cache] lock_timeout` (as pingora's cache lock): `None` when the leader's origin
    /// has not answered by then, and the request fetches on its own.
    async fn follow(&self, f: Follow, m: &WorkerMetrics) -> Option<State> {
        m.coalesced_waiters.fetch_add(1, Relaxed);
        let s = tokio::time::timeout(self.settings.lock_timeout, f.wait()).await.ok();
        m.coalesced_waiters.fetch_sub(1, Relaxed);
        s
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn the_next_generation_keeps_the_metadata_cache() {
        let dir = tempfile::tempdir().unwrap();
        let store = reel_store::Store::open(reel_store::StoreConfig {
            path: dir.path().join("store"),
            size: 8 << 20,
            volume_size: 4 << 20,
            io: reel_store::IoMode::Threads,
        })
        .unwrap();
        let spec = reel_origin::GroupSpec::new(
            "g",
            vec![vec![reel_origin::HostSpec::new("127.0.0.1:1".to_string())]],
        );
        let origins = reel_origin::Origins::new(vec![spec]).unwrap();
        let settings = Arc::new(Settings {
            sites: Vec::new(),
            fallback: None,
            policy: Default::default(),
            rules: Default::default(),
            swr_default: Duration::ZERO,
            fill_drop_headers: Settings::default_fill_drop_headers(),
            max_variants: 32,
            lock_timeout: Duration::from_secs(10),
            node: Default::default(),
        });
        let a =
            WorkerCache::new(SharedCache::new(store), settings.clone(), origins.worker_client());
        let b = a.next_generation(settings, a.client.clone());
        assert!(Rc::ptr_eq(&a.metas, &b.metas));
        let other = WorkerCache::new(a.shared.clone(), b.settings.clone(), origins.worker_client());
        assert!(!Rc::ptr_eq(&a.metas, &other.metas));
    }
}
