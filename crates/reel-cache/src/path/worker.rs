//! The per-worker cache: answers one request from the store, from a fill in progress, or
//! from the origin.
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
//! other methods ─ pass through (body streamed) ─ 2xx/3xx: invalidate URL, Location, Content-Location
//! ```

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue, Method as HttpMethod, uri::PathAndQuery};
use reel_http::{BodyFraming, Method, Request, RequestBody, Response};
use reel_ops::metrics::{CacheResult, WorkerMetrics};
use reel_origin::{OriginRequest, OriginResponse, WorkerClient};
use reel_store::{Hit, Lookup, StoreError};

use super::inflight::{Lead, Role, State};
use super::respond::{
    LeasedRange, MetaCache, Prepared, ReqHeaders, encode_vary_marker, stream_cold_hit,
    stream_filling, unix_now, vary_marker,
};
use super::settings::{Settings, Site};
use super::shared::{SharedCache, VARIANT_SEP};
use super::tag::Tag;
use crate::key::CacheKey;
use crate::policy::cache_control::{RequestCacheControl, ResponseCacheControl};
use crate::policy::conditional::{self, Outcome, Validators};
use crate::policy::freshness::{Decision, decide, is_error_status, stale_if_error_ok, storable};
use crate::policy::meta::{ResponseTimes, StoredMeta};
use crate::policy::range::{
    Available, RangeOutcome, content_range, content_range_unsatisfied, parse_range,
};
use crate::policy::rules::TtlRule;
use crate::policy::vary::{Vary, VaryKey};

/// Whole bodies up to this size are kept per worker in memory and sent with their head.
const SMALL_BODY: u64 = 16 * 1024;

/// How many times a request may go round (look up, wait for a leader, look up again)
/// before it fetches on its own.
const MAX_ROUNDS: usize = 4;

// RFC 9211 Cache-Status values.
const CS_HIT: &[u8] = b"reel; hit";
const CS_HIT_STALE: &[u8] = b"reel; hit; detail=stale";
const CS_HIT_SWR: &[u8] = b"reel; hit; detail=stale-while-revalidate";
const CS_MISS_STORED: &[u8] = b"reel; fwd=miss; stored";
const CS_MISS_COLLAPSED: &[u8] = b"reel; fwd=miss; collapsed";
const CS_MISS_NOT_STORED: &[u8] = b"reel; fwd=miss; detail=not-storable";
const CS_REVALIDATED: &[u8] = b"reel; fwd=stale; fwd-status=304";
const CS_REFRESHED: &[u8] = b"reel; fwd=stale; stored";
const CS_STALE_IF_ERROR: &[u8] = b"reel; fwd=stale; detail=stale-if-error";
const CS_FWD_REQUEST: &[u8] = b"reel; fwd=request";
const CS_FWD_METHOD: &[u8] = b"reel; fwd=method";
const CS_ORIGIN_ERROR: &[u8] = b"reel; fwd=miss; detail=origin-error";
const CS_ONLY_IF_CACHED: &[u8] = b"reel; detail=only-if-cached";

/// One worker's cache front: origin client pool, decoded-metadata cache.
pub struct WorkerCache {
    shared: Arc<SharedCache>,
    settings: Arc<Settings>,
    client: WorkerClient,
    metas: RefCell<MetaCache>,
}

enum Found {
    Hit { store_key: Vec<u8>, hit: Rc<Hit>, prep: Rc<Prepared> },
    Filling { fill: reel_store::Filling, prep: Rc<Prepared> },
    None,
}

fn local(status: u16) -> Response {
    Response::error(status).tagged(Tag::local())
}

fn tag(r: CacheResult, origin: Option<Duration>) -> u64 {
    Tag::new(r, origin).raw()
}

/// The request target in origin-form (absolute-form targets lose scheme and authority).
fn origin_form(req: &Request) -> &str {
    let t = req.target();
    if t.starts_with('/') {
        return t;
    }
    let after_scheme = t.find("://").map_or(t, |i| &t[i + 3..]);
    match after_scheme.find('/') {
        Some(i) => &after_scheme[i..],
        None => "/",
    }
}

impl WorkerCache {
    /// A worker's cache over the shared state, for one config generation.
    pub fn new(shared: Arc<SharedCache>, settings: Arc<Settings>, client: WorkerClient) -> Self {
        WorkerCache { shared, settings, client, metas: RefCell::new(MetaCache::default()) }
    }

    /// Answers one request. The response's tag carries the cache result and origin time.
    pub async fn handle(
        &self,
        req: &Request,
        body: &mut RequestBody<'_>,
        m: &WorkerMetrics,
    ) -> Response {
        let host = req.host().unwrap_or("");
        let Some(site) = self.settings.site_for(host) else {
            // Not a site of ours: never an open proxy (RFC 9110 15.5.20).
            return local(421);
        };
        match req.method() {
            Method::Get | Method::Head => self.get(req, site, m).await,
            Method::Post | Method::Put | Method::Delete | Method::Options | Method::Patch
                if site.pass_methods =>
            {
                self.pass(req, body, site).await
            }
            m => Response::for_unsupported_method(m, &[Method::Get, Method::Head])
                .unwrap_or_else(|| Response::error(405))
                .tagged(Tag::local()),
        }
    }

    fn key(&self, req: &Request, site: &Site) -> Option<CacheKey> {
        let host = req.host().unwrap_or("");
        CacheKey::build(host.as_bytes(), origin_form(req).as_bytes(), &site.key).ok()
    }

    fn prepared(&self, blob: &Bytes) -> Option<Rc<Prepared>> {
        self.metas.borrow_mut().get(blob)
    }

    /// Finds the representation for this request: the key itself, or its variant.
    fn find(&self, key: &CacheKey, req: &ReqHeaders<'_>) -> Found {
        let store = &self.shared.store;
        let Some(l) = store.lookup(key.as_bytes()) else { return Found::None };
        let (store_key, l) = match &l {
            Lookup::Hit(h) => match vary_marker(h.meta()) {
                Some(names) => {
                    let vk = VaryKey::from_request(&Vary::Fields(names), req);
                    let sk = variant_key(key, &vk);
                    match store.lookup(&sk) {
                        Some(l) => (sk, l),
                        None => return Found::None,
                    }
                }
                None => (key.as_bytes().to_vec(), l),
            },
            Lookup::Filling(_) => (key.as_bytes().to_vec(), l),
        };
        match l {
            Lookup::Hit(hit) => {
                let Some(prep) = self.prepared(hit.meta()) else { return Found::None };
                if !prep.meta.vary().matches(req) {
                    return Found::None;
                }
                Found::Hit { store_key, hit: Rc::new(hit), prep }
            }
            Lookup::Filling(fill) => match self.prepared(fill.meta()) {
                Some(prep) => Found::Filling { fill, prep },
                None => Found::None,
            },
        }
    }

    async fn get(&self, req: &Request, site: &Site, m: &WorkerMetrics) -> Response {
        let Some(key) = self.key(req, site) else { return local(400) };
        let hdrs = ReqHeaders(req);
        let req_cc = RequestCacheControl::parse(&hdrs);
        if req_cc.no_store {
            return self.fetch_pass(req, site, CS_FWD_REQUEST, CacheResult::Pass).await;
        }
        let mut origin_failed: Option<u16> = None;
        for _ in 0..MAX_ROUNDS {
            match self.find(&key, &hdrs) {
                Found::Hit { store_key, hit, prep } => {
                    let now = unix_now();
                    if let Some(st) = origin_failed {
                        // The leader's fetch failed: stale-if-error, or the leader's error.
                        return if stale_if_error_ok(&req_cc, &prep.meta, now) {
                            self.serve_hit(
                                req,
                                hit,
                                &prep,
                                now,
                                CS_STALE_IF_ERROR,
                                CacheResult::Stale,
                                None,
                            )
                            .await
                        } else {
                            local(st)
                        };
                    }
                    match decide(&req_cc, &prep.meta, now) {
                        Decision::Fresh => {
                            return self
                                .serve_hit(req, hit, &prep, now, CS_HIT, CacheResult::Hit, None)
                                .await;
                        }
                        Decision::StaleServable => {
                            return self
                                .serve_hit(
                                    req,
                                    hit,
                                    &prep,
                                    now,
                                    CS_HIT_STALE,
                                    CacheResult::Stale,
                                    None,
                                )
                                .await;
                        }
                        Decision::StaleWhileRevalidate => {
                            self.refresh_in_background(req, site, &key, store_key, prep.clone());
                            return self
                                .serve_hit(
                                    req,
                                    hit,
                                    &prep,
                                    now,
                                    CS_HIT_SWR,
                                    CacheResult::Stale,
                                    None,
                                )
                                .await;
                        }
                        Decision::GatewayTimeout => {
                            return local(504)
                                .header("cache-status", Bytes::from_static(CS_ONLY_IF_CACHED));
                        }
                        Decision::MustRevalidate => match self.shared.inflight.join(key.as_bytes())
                        {
                            Role::Lead(lead) => {
                                return self
                                    .fetch(
                                        req,
                                        site,
                                        &key,
                                        lead,
                                        Some((store_key, hit, prep)),
                                        &req_cc,
                                    )
                                    .await;
                            }
                            Role::Follow(f) => {
                                if let State::Failed(st) = self.follow(f, m).await {
                                    origin_failed = Some(st);
                                }
                            }
                        },
                    }
                }
                Found::Filling { fill, prep } => {
                    return self
                        .serve_filling(
                            req,
                            fill,
                            prep,
                            CS_MISS_COLLAPSED,
                            CacheResult::Coalesced,
                            None,
                        )
                        .await;
                }
                Found::None => {
                    if let Some(st) = origin_failed {
                        return local(st)
                            .header("cache-status", Bytes::from_static(CS_ORIGIN_ERROR));
                    }
                    if req_cc.only_if_cached {
                        // RFC 9111 5.2.1.7.
                        return local(504)
                            .header("cache-status", Bytes::from_static(CS_ONLY_IF_CACHED));
                    }
                    match self.shared.inflight.join(key.as_bytes()) {
                        Role::Lead(lead) => {
                            return self.fetch(req, site, &key, lead, None, &req_cc).await;
                        }
                        Role::Follow(f) => match self.follow(f, m).await {
                            State::NotShared => {
                                return self
                                    .fetch_pass(req, site, CS_MISS_NOT_STORED, CacheResult::Pass)
                                    .await;
                            }
                            State::Failed(st) => origin_failed = Some(st),
                            _ => {}
                        },
                    }
                }
            }
        }
        self.fetch_pass(req, site, CS_MISS_NOT_STORED, CacheResult::Pass).await
    }

    async fn follow(&self, f: super::inflight::Follow, m: &WorkerMetrics) -> State {
        m.coalesced_waiters.fetch_add(1, Relaxed);
        let s = f.wait().await;
        m.coalesced_waiters.fetch_sub(1, Relaxed);
        s
    }

    /// The origin request for a fill: the client's headers minus hop-by-hop, range and
    /// conditional fields (we fetch the whole representation for everyone), plus our
    /// validators when revalidating.
    fn fill_request(&self, req: &Request, stale: Option<&Prepared>) -> Option<OriginRequest> {
        let pq = PathAndQuery::try_from(origin_form(req)).ok()?;
        let mut headers = forward_headers(req, true);
        if let Some(p) = stale {
            for (n, v) in conditional::revalidation_headers(&p.meta) {
                if let Ok(v) = HeaderValue::from_bytes(&v) {
                    headers.insert(n, v);
                }
            }
        }
        let mut o = OriginRequest::get(pq, req.host().unwrap_or(""));
        o.headers = headers;
        Some(o)
    }

    /// The leader's fetch: from the origin into the store, streamed to this client while
    /// it arrives. With `stale`, a revalidation of that stored object.
    async fn fetch(
        &self,
        req: &Request,
        site: &Site,
        key: &CacheKey,
        mut lead: Lead,
        stale: Option<(Vec<u8>, Rc<Hit>, Rc<Prepared>)>,
        req_cc: &RequestCacheControl,
    ) -> Response {
        let Some(oreq) = self.fill_request(req, stale.as_ref().map(|s| &*s.2)) else {
            return local(400);
        };
        let request_time = unix_now();
        let t0 = Instant::now();
        let resp = match self.client.send(&site.group, oreq).await {
            Ok(r) => r,
            Err(e) => {
                lead.publish(State::Failed(e.client_status()));
                return self
                    .origin_failed(req, e.client_status(), stale, req_cc, Some(t0.elapsed()))
                    .await;
            }
        };
        let origin_time = Some(t0.elapsed());
        let times = ResponseTimes { request_time, response_time: unix_now() };
        let status = resp.status.as_u16();
        let rule = self.settings.rules.find(key.path());

        if let Some((store_key, hit, prep)) = &stale {
            if status == 304 {
                // RFC 9111 4.3.4: freshen the stored response with the 304's fields.
                let mut meta = prep.meta.clone();
                let h = header_pairs(&resp.headers);
                meta.update_from_304(&h, times, &self.settings.policy, rule);
                let _ = self.shared.store.update_meta(store_key, meta.encode().into()).await;
                lead.publish(State::Done);
                let fresh = Prepared::new(meta);
                return self
                    .serve_hit(
                        req,
                        hit.clone(),
                        &fresh,
                        unix_now(),
                        CS_REVALIDATED,
                        CacheResult::Revalidated,
                        origin_time,
                    )
                    .await;
            }
            if is_error_status(status) && stale_if_error_ok(req_cc, &prep.meta, unix_now()) {
                lead.publish(State::Failed(status));
                return self
                    .serve_hit(
                        req,
                        hit.clone(),
                        prep,
                        unix_now(),
                        CS_STALE_IF_ERROR,
                        CacheResult::Stale,
                        origin_time,
                    )
                    .await;
            }
        }

        let hdrs = ReqHeaders(req);
        let ok =
            storable(b"GET", status, req_cc, &hdrs, &resp.headers, &self.settings.policy, rule);
        if !ok.is_store() {
            lead.publish(State::NotShared);
            return self.stream_origin(
                req,
                resp,
                CS_MISS_NOT_STORED,
                CacheResult::Miss,
                origin_time,
            );
        }
        match self.begin_fill(key, &hdrs, &resp, times, rule).await {
            Ok((writer, fill, prep)) => {
                lead.publish(State::Filling);
                tokio::task::spawn_local(fill_task(writer, resp, lead));
                let (cs, result) = if stale.is_some() {
                    (CS_REFRESHED, CacheResult::Revalidated)
                } else {
                    (CS_MISS_STORED, CacheResult::Miss)
                };
                self.serve_filling(req, fill, prep, cs, result, origin_time).await
            }
            Err(_) => {
                // The store would not take it (full, too large, I/O error): serve it anyway.
                lead.publish(State::NotShared);
                self.stream_origin(req, resp, CS_MISS_NOT_STORED, CacheResult::Miss, origin_time)
            }
        }
    }

    /// Starts writing a response into the store: its variant key (and the key's Vary
    /// marker) when it varies, its metadata, and a reader for this client.
    async fn begin_fill(
        &self,
        key: &CacheKey,
        hdrs: &ReqHeaders<'_>,
        resp: &OriginResponse,
        times: ResponseTimes,
        rule: Option<&TtlRule>,
    ) -> Result<(reel_store::FillWriter, reel_store::Filling, Rc<Prepared>), StoreError> {
        let store = &self.shared.store;
        let vary = Vary::parse(&resp.headers);
        let vk = VaryKey::from_request(&vary, hdrs);
        let store_key = match &vary {
            Vary::Fields(names) => {
                let mut marker =
                    store.begin_fill(key.as_bytes(), encode_vary_marker(names), Some(0)).await?;
                marker.append(Bytes::new()).await?;
                marker.commit().await?;
                variant_key(key, &vk)
            }
            _ => key.as_bytes().to_vec(),
        };
        let len = resp.body.content_length();
        let mut h = header_pairs(&resp.headers);
        let swr = self.settings.swr_default.as_secs();
        let cc = ResponseCacheControl::for_cache(&resp.headers, &self.settings.policy.targeted);
        if swr > 0 && cc.stale_while_revalidate.is_none() {
            // The configured default window, stored as a field so it survives restarts and
            // reaches the clients like the origin's own would.
            h.push((
                b"cache-control".to_vec(),
                format!("stale-while-revalidate={swr}").into_bytes(),
            ));
        }
        let meta = StoredMeta::from_response(
            resp.status.as_u16(),
            &h,
            vk,
            times,
            len,
            &self.settings.policy,
            rule,
        );
        let blob: Bytes = meta.encode().into();
        let writer = store.begin_fill(&store_key, blob.clone(), len).await?;
        let fill = match store.lookup(&store_key) {
            Some(Lookup::Filling(f)) => f,
            _ => return Err(StoreError::Gone),
        };
        let prep = self.prepared(fill.meta()).ok_or(StoreError::Gone)?;
        Ok((writer, fill, prep))
    }

    /// Background revalidation for stale-while-revalidate: at most one per key.
    fn refresh_in_background(
        &self,
        req: &Request,
        site: &Site,
        key: &CacheKey,
        store_key: Vec<u8>,
        prep: Rc<Prepared>,
    ) {
        let Some(mut lead) = self.shared.inflight.try_lead(key.as_bytes()) else { return };
        let Some(oreq) = self.fill_request(req, Some(&prep)) else { return };
        let client = self.client.clone();
        let group = site.group.clone();
        let shared = self.shared.clone();
        let settings = self.settings.clone();
        let key = key.clone();
        tokio::task::spawn_local(async move {
            let request_time = unix_now();
            let Ok(resp) = client.send(&group, oreq).await else {
                lead.publish(State::Done);
                return;
            };
            let times = ResponseTimes { request_time, response_time: unix_now() };
            let rule = settings.rules.find(key.path());
            match resp.status.as_u16() {
                304 => {
                    let mut meta = prep.meta.clone();
                    meta.update_from_304(
                        &header_pairs(&resp.headers),
                        times,
                        &settings.policy,
                        rule,
                    );
                    let _ = shared.store.update_meta(&store_key, meta.encode().into()).await;
                    lead.publish(State::Done);
                }
                200 => {
                    let none: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
                    let ok = storable(
                        b"GET",
                        200,
                        &RequestCacheControl::default(),
                        &none,
                        &resp.headers,
                        &settings.policy,
                        rule,
                    );
                    let vary = Vary::parse(&resp.headers);
                    if !ok.is_store() || !matches!(vary, Vary::None) {
                        // Variants are refreshed by the requests that select them.
                        lead.publish(State::Done);
                        return;
                    }
                    let len = resp.body.content_length();
                    let meta = StoredMeta::from_response(
                        200,
                        &header_pairs(&resp.headers),
                        VaryKey::default(),
                        times,
                        len,
                        &settings.policy,
                        rule,
                    );
                    match shared.store.begin_fill(&store_key, meta.encode().into(), len).await {
                        Ok(w) => {
                            lead.publish(State::Filling);
                            fill_task(w, resp, lead).await;
                        }
                        Err(_) => lead.publish(State::Done),
                    }
                }
                _ => lead.publish(State::Done),
            }
        });
    }

    async fn origin_failed(
        &self,
        req: &Request,
        status: u16,
        stale: Option<(Vec<u8>, Rc<Hit>, Rc<Prepared>)>,
        req_cc: &RequestCacheControl,
        origin_time: Option<Duration>,
    ) -> Response {
        if let Some((_, hit, prep)) = stale {
            let now = unix_now();
            if stale_if_error_ok(req_cc, &prep.meta, now) {
                return self
                    .serve_hit(
                        req,
                        hit,
                        &prep,
                        now,
                        CS_STALE_IF_ERROR,
                        CacheResult::Stale,
                        origin_time,
                    )
                    .await;
            }
        }
        Response::error(status)
            .header("cache-status", Bytes::from_static(CS_ORIGIN_ERROR))
            .tagged(tag(CacheResult::Miss, origin_time))
    }

    /// A complete stored object: conditionals, ranges, HEAD, then sendfile (or a stream
    /// when its pages are not resident).
    #[allow(clippy::too_many_arguments)]
    async fn serve_hit(
        &self,
        req: &Request,
        hit: Rc<Hit>,
        prep: &Prepared,
        now: u64,
        cs: &'static [u8],
        result: CacheResult,
        origin_time: Option<Duration>,
    ) -> Response {
        let t = tag(result, origin_time);
        let status = prep.meta.status();
        let len = hit.body_len();
        let hdrs = ReqHeaders(req);
        let v = Validators::of(&prep.meta);
        match conditional::evaluate(req.method().as_str().as_bytes(), status, &hdrs, &v, now) {
            Outcome::Proceed => {}
            Outcome::NotModified => return not_modified(prep, now, cs).tagged(t),
            Outcome::PreconditionFailed => return local(412),
        }
        let head = *req.method() == Method::Head;
        let (code, start, n, content_range) =
            match self.range_of(req, &prep.meta, status, len, head) {
                RangeOutcome::Partial { range, total } => {
                    (206, range.start, range.len(), Some(content_range(range, total)))
                }
                RangeOutcome::Unsatisfiable { total } => {
                    return prep
                        .head(416, now, cs)
                        .header("content-range", content_range_unsatisfied(total))
                        .tagged(t);
                }
                RangeOutcome::Full | RangeOutcome::Wait => (status, 0, len, None),
            };
        let mut r = prep.head(code, now, cs);
        if let Some(cr) = content_range {
            r = r.header("content-range", cr);
        }
        if head {
            return r.with_content_length(n).tagged(t);
        }
        if n == 0 {
            return r.tagged(t);
        }
        if code == 200 && n <= SMALL_BODY {
            // A small whole body (a playlist) leaves with its head in one send from a
            // per-worker copy, instead of send + sendfile: one syscall less per hit.
            if let Some(b) = prep.small_body() {
                return r.bytes(b).tagged(t);
            }
            if self.metas.borrow_mut().admit_small(n) {
                if let Ok(b) = hit.read(0, n).await {
                    prep.set_small_body(b.clone());
                    return r.bytes(b).tagged(t);
                }
            }
        }
        if prep.resident(&hit, start, n) {
            if let Some(fr) = LeasedRange::of_hit(hit.clone(), start, n) {
                return r.file(fr).tagged(t);
            }
        }
        r.stream(stream_cold_hit(hit, start, start + n), Some(n)).tagged(t)
    }

    fn range_of(
        &self,
        req: &Request,
        meta: &StoredMeta,
        status: u16,
        len: u64,
        head: bool,
    ) -> RangeOutcome {
        if head || status != 200 {
            return RangeOutcome::Full;
        }
        let Some(v) = req.header("range") else { return RangeOutcome::Full };
        if !conditional::if_range_holds(&ReqHeaders(req), &Validators::of(meta)) {
            return RangeOutcome::Full;
        }
        match parse_range(v) {
            Some(set) => set.resolve(Available::Complete(len)),
            None => RangeOutcome::Full,
        }
    }

    /// An object still being written: conditionals and ranges against what is known, then
    /// a stream that follows the fill.
    // `fill` is not shared yet while this function waits on it, so its borrows cannot clash.
    #[allow(clippy::await_holding_refcell_ref)]
    async fn serve_filling(
        &self,
        req: &Request,
        fill: reel_store::Filling,
        prep: Rc<Prepared>,
        cs: &'static [u8],
        result: CacheResult,
        origin_time: Option<Duration>,
    ) -> Response {
        let t = tag(result, origin_time);
        let now = unix_now();
        let status = prep.meta.status();
        let hdrs = ReqHeaders(req);
        let v = Validators::of(&prep.meta);
        match conditional::evaluate(req.method().as_str().as_bytes(), status, &hdrs, &v, now) {
            Outcome::Proceed => {}
            Outcome::NotModified => return not_modified(&prep, now, cs).tagged(t),
            Outcome::PreconditionFailed => return local(412),
        }
        let fill = Rc::new(RefCell::new(fill));
        let total = fill.borrow().expected_len();
        let head = *req.method() == Method::Head;
        let range = match (head, status, req.header("range")) {
            (false, 200, Some(v)) if conditional::if_range_holds(&hdrs, &v_of(&prep)) => {
                parse_range(v)
            }
            _ => None,
        };
        if let Some(set) = range {
            // A range is answered as soon as its bytes exist (RFC 9110 14.2, 15.3.7).
            loop {
                let st = match fill.borrow().status() {
                    Ok(s) => s,
                    Err(_) => return local(502),
                };
                let avail = match st.final_len {
                    Some(l) => Available::Complete(l),
                    None => Available::Filling { available: st.available, total },
                };
                match set.resolve(avail) {
                    RangeOutcome::Partial { range, total } => {
                        let r = prep
                            .head(206, now, cs)
                            .header("content-range", content_range(range, total))
                            .stream(
                                stream_filling(fill, range.start, Some(range.end + 1)),
                                Some(range.len()),
                            );
                        return r.tagged(t);
                    }
                    RangeOutcome::Unsatisfiable { total } => {
                        return prep
                            .head(416, now, cs)
                            .header("content-range", content_range_unsatisfied(total))
                            .tagged(t);
                    }
                    RangeOutcome::Full => break,
                    RangeOutcome::Wait => {
                        let next = st.available + 1;
                        let res = fill.borrow_mut().wait_for(next).await;
                        if res.is_err() {
                            return local(502);
                        }
                    }
                }
            }
        }
        let r = prep.head(status, now, cs);
        if head {
            let len = match total {
                Some(l) => l,
                None => {
                    let res = fill.borrow_mut().wait_for(u64::MAX).await;
                    match res.ok().and_then(|s| s.final_len) {
                        Some(l) => l,
                        None => return local(502),
                    }
                }
            };
            return r.with_content_length(len).tagged(t);
        }
        r.stream(stream_filling(fill, 0, total), total).tagged(t)
    }

    /// GET/HEAD forwarded without storing (request `no-store`, or a response the leader
    /// could not share): the client's own conditionals and Range go along.
    async fn fetch_pass(
        &self,
        req: &Request,
        site: &Site,
        cs: &'static [u8],
        result: CacheResult,
    ) -> Response {
        let Ok(pq) = PathAndQuery::try_from(origin_form(req)) else { return local(400) };
        let mut o = OriginRequest::get(pq, req.host().unwrap_or(""));
        if *req.method() == Method::Head {
            o.method = HttpMethod::HEAD;
        }
        o.headers = forward_headers(req, false);
        let t0 = Instant::now();
        match self.client.send(&site.group, o).await {
            Ok(resp) => self.stream_origin(req, resp, cs, result, Some(t0.elapsed())),
            Err(e) => Response::error(e.client_status())
                .header("cache-status", Bytes::from_static(CS_ORIGIN_ERROR))
                .tagged(tag(result, Some(t0.elapsed()))),
        }
    }

    /// Other methods: forwarded uncached with the body streamed; a successful unsafe
    /// request invalidates what we store for its URL (RFC 9111 4.4).
    async fn pass(&self, req: &Request, body: &mut RequestBody<'_>, site: &Site) -> Response {
        let Ok(pq) = PathAndQuery::try_from(origin_form(req)) else { return local(400) };
        let Ok(method) = HttpMethod::from_bytes(req.method().as_str().as_bytes()) else {
            return local(501);
        };
        let has_body = !matches!(req.body_framing(), BodyFraming::None);
        let (sender, rbody) = if has_body {
            let (s, b) = reel_origin::RequestBody::channel(4);
            (Some(s), b)
        } else {
            (None, reel_origin::RequestBody::Empty)
        };
        let o = OriginRequest {
            method,
            path_and_query: pq,
            headers: forward_headers(req, false),
            host: req.host().unwrap_or("").to_string(),
            body: rbody,
            idempotent: false,
        };
        let t0 = Instant::now();
        let pump = async {
            let Some(s) = sender else { return };
            loop {
                match body.next_chunk().await {
                    Ok(Some(c)) => {
                        if s.send(c).await.is_err() {
                            return;
                        }
                    }
                    Ok(None) => {
                        s.finish();
                        return;
                    }
                    // Dropping the sender aborts the upload: the origin never sees a
                    // truncated body as complete.
                    Err(_) => return,
                }
            }
        };
        let (res, ()) = tokio::join!(self.client.send(&site.group, o), pump);
        let origin_time = Some(t0.elapsed());
        match res {
            Ok(resp) => {
                let status = resp.status.as_u16();
                if (200..400).contains(&status) && req.method().is_unsafe() {
                    self.invalidate(req, site, &resp.headers).await;
                }
                self.stream_origin(req, resp, CS_FWD_METHOD, CacheResult::Pass, origin_time)
            }
            Err(e) => Response::error(e.client_status())
                .header("cache-status", Bytes::from_static(CS_FWD_METHOD))
                .tagged(tag(CacheResult::Pass, origin_time)),
        }
    }

    /// RFC 9111 4.4: the target URI, and Location / Content-Location on the same host.
    async fn invalidate(&self, req: &Request, site: &Site, resp: &HeaderMap) {
        let host = req.host().unwrap_or("");
        let mut targets = vec![origin_form(req).to_string()];
        for name in ["location", "content-location"] {
            if let Some(v) = resp.get(name).and_then(|v| v.to_str().ok()) {
                if let Some(path) = same_host_path(v, host) {
                    targets.push(path);
                }
            }
        }
        for t in targets {
            if let Ok(k) = CacheKey::build(host.as_bytes(), t.as_bytes(), &site.key) {
                let _ = self.shared.store.remove(k.as_bytes()).await;
                let mut variants = k.as_bytes().to_vec();
                variants.push(VARIANT_SEP);
                let _ = self.shared.store.remove_prefix(&variants).await;
            }
        }
    }

    /// Streams an origin response to the client as it arrives.
    fn stream_origin(
        &self,
        req: &Request,
        mut resp: OriginResponse,
        cs: &'static [u8],
        result: CacheResult,
        origin_time: Option<Duration>,
    ) -> Response {
        let mut r = Response::new(resp.status.as_u16());
        for (n, v) in resp.headers.iter() {
            if n == http::header::CONTENT_LENGTH || n == http::header::DATE {
                continue;
            }
            r = r.header(n.as_str().to_string(), Bytes::copy_from_slice(v.as_bytes()));
        }
        r = r.header("cache-status", Bytes::from_static(cs)).tagged(tag(result, origin_time));
        let len = resp.body.content_length();
        let no_body = *req.method() == Method::Head || matches!(resp.status.as_u16(), 204 | 304);
        if no_body {
            if let Some(l) = len {
                r = r.with_content_length(l);
            }
            return r;
        }
        let (tx, rx) = tokio::sync::mpsc::channel(4);
        tokio::task::spawn_local(async move {
            loop {
                match resp.next_chunk().await {
                    Ok(Some(c)) => {
                        if tx.send(Ok(reel_http::Chunk::Bytes(c))).await.is_err() {
                            return;
                        }
                    }
                    Ok(None) => return,
                    Err(e) => {
                        let _ = tx.send(Err(std::io::Error::other(e.to_string()))).await;
                        return;
                    }
                }
            }
        });
        r.stream(rx, len)
    }
}

fn v_of(p: &Prepared) -> Validators<'_> {
    Validators::of(&p.meta)
}

/// Writes the origin body into the store. Runs detached from the client that started it,
/// so the followers keep getting bytes if that client goes away.
async fn fill_task(mut writer: reel_store::FillWriter, mut resp: OriginResponse, mut lead: Lead) {
    loop {
        match resp.next_chunk().await {
            Ok(Some(c)) => {
                if writer.append(c).await.is_err() {
                    writer.abort();
                    lead.publish(State::Failed(502));
                    return;
                }
            }
            Ok(None) => {
                let ok = writer.commit().await.is_ok();
                lead.publish(if ok { State::Done } else { State::Failed(502) });
                return;
            }
            Err(e) => {
                // Never cached truncated: readers of this fill see it aborted and their
                // connections close instead of ending short.
                tracing::debug!(error = %e, "origin body failed mid-transfer; fill discarded");
                writer.abort();
                lead.publish(State::Failed(e.client_status()));
                return;
            }
        }
    }
}

/// A 304 from a stored response: the fields RFC 9110 15.4.5 asks for.
fn not_modified(prep: &Prepared, now: u64, cs: &'static [u8]) -> Response {
    let mut r = Response::new(304);
    for (n, v) in prep.meta.headers() {
        let keep = [
            &b"cache-control"[..],
            b"content-location",
            b"etag",
            b"expires",
            b"vary",
            b"last-modified",
        ]
        .iter()
        .any(|k| k.eq_ignore_ascii_case(n));
        if keep {
            if let Ok(name) = std::str::from_utf8(n) {
                r = r.header(name.to_string(), Bytes::copy_from_slice(v));
            }
        }
    }
    let age = prep.meta.current_age(now).as_secs();
    r.header("age", age.to_string()).header("cache-status", Bytes::from_static(cs))
}

fn variant_key(key: &CacheKey, vk: &VaryKey) -> Vec<u8> {
    let mut k = key.as_bytes().to_vec();
    k.push(VARIANT_SEP);
    k.extend_from_slice(format!("{:016x}", vk.hash64()).as_bytes());
    k
}

fn header_pairs(h: &HeaderMap) -> Vec<(Vec<u8>, Vec<u8>)> {
    h.iter().map(|(n, v)| (n.as_str().as_bytes().to_vec(), v.as_bytes().to_vec())).collect()
}

/// The client's header fields for the origin: without Host (the origin client sets it),
/// hop-by-hop fields (the origin client strips them) and, for fills, the fields that
/// would make the origin answer something other than the whole representation.
fn forward_headers(req: &Request, fill: bool) -> HeaderMap {
    let mut h = HeaderMap::new();
    for (n, v) in req.headers() {
        if n.eq_ignore_ascii_case("host") {
            continue;
        }
        if fill {
            let lower = n.to_ascii_lowercase();
            if lower == "range"
                || lower.starts_with("if-")
                || lower == "cache-control"
                || lower == "pragma"
            {
                continue;
            }
        }
        if let (Ok(name), Ok(value)) =
            (HeaderName::from_bytes(n.as_bytes()), HeaderValue::from_bytes(v))
        {
            h.append(name, value);
        }
    }
    let ip = req.peer().ip().to_string();
    if let Ok(v) = HeaderValue::from_str(&ip) {
        h.append("x-forwarded-for", v);
    }
    h
}

/// The path of `url` if it is relative, or absolute on `host`.
fn same_host_path(url: &str, host: &str) -> Option<String> {
    if url.starts_with('/') {
        return Some(url.to_string());
    }
    let rest = url.strip_prefix("http://").or_else(|| url.strip_prefix("https://"))?;
    let (auth, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let bare = |h: &str| reel_config::strip_port(h).to_ascii_lowercase();
    (bare(auth) == bare(host)).then(|| path.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_host_paths() {
        assert_eq!(same_host_path("/a/b", "h"), Some("/a/b".into()));
        assert_eq!(same_host_path("http://H:80/x", "h:8080"), Some("/x".into()));
        assert_eq!(same_host_path("http://other/x", "h"), None);
        assert_eq!(same_host_path("ftp://h/x", "h"), None);
    }
}
