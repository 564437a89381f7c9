//! The one origin fetch per key. A leader's miss, its revalidation of a stale object and
//! the background refresh of stale-while-revalidate all go through one step,
//! [`Fetcher::fetch_and_store`]: ask the origin, apply the storability rules (RFC 9111 3)
//! for the viewer the fetch is made for, store what may be stored and tell the followers.
//! The foreground then streams the result to its client; a background refresh has none.
//! The origin requests these fetches send are built here too.

use std::borrow::Cow;
use std::time::{Duration, Instant};

use http::{HeaderMap, HeaderName, HeaderValue, uri::PathAndQuery};
use reel_http::{Request, RequestBody, Response};
use reel_origin::{Affinity, OriginRequest, OriginResponse, WorkerClient};

use super::answer::Answer;
use super::fill::{fill_task, header_pairs};
use super::hops::Node;
use super::inflight::{Lead, State};
use super::interim;
use super::lookup::Stored;
use super::respond::{Prepared, ReqHeaders, unix_now};
use super::serve::stream_origin;
use super::settings::{Settings, Site};
use super::shared::SharedCache;
use super::worker::{WorkerCache, local};
use crate::key::{CacheKey, KeyConfig};
use crate::policy::HeaderLookup;
use crate::policy::cache_control::RequestCacheControl;
use crate::policy::conditional;
use crate::policy::freshness::{PolicyConfig, is_error_status, stale_if_error_ok, storable};
use crate::policy::meta::{ResponseTimes, StoredMeta};
use crate::policy::vary::Vary;

/// Request fields that belong to one viewer: a fetch made on everyone's behalf (a
/// background refresh) does not send them to the origin.
const PER_VIEWER: &[&str] = &["authorization", "proxy-authorization", "cookie"];

/// The request target in origin-form: as received, or for an absolute-form target its
/// path and query (RFC 9112 3.2.2: the authority replaced Host).
pub(super) fn origin_form(req: &Request) -> Cow<'_, str> {
    let t = req.target();
    if t.starts_with('/') {
        return Cow::Borrowed(t);
    }
    match req.query() {
        Some(q) => Cow::Owned(format!("{}?{q}", req.path())),
        None => Cow::Borrowed(req.path()),
    }
}

/// The target the origin is asked for: the request's, normalised exactly as its cache
/// key is ([`crate::key::origin_target`]), so the origin's answer is stored under the
/// key of the resource it describes and no `..` is ever forwarded. `None`: not a
/// target we can key (the client gets 400).
pub(super) fn origin_path(req: &Request) -> Option<PathAndQuery> {
    let t = crate::key::origin_target(origin_form(req).as_bytes()).ok()?;
    PathAndQuery::try_from(t).ok()
}

/// What an origin request is for, which decides the client fields it carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Forward {
    /// Forwarded for this client alone: its fields go along.
    Pass,
    /// A fill led by this client: the whole representation, whatever its range or
    /// conditionals.
    Fill,
    /// A fill on everyone's behalf (background refresh): as [`Forward::Fill`], and
    /// without the viewer's credentials and cookies ([`PER_VIEWER`]).
    SharedFill,
}

/// The client's header fields for the origin: without Host (the origin client sets it)
/// and without the client's hop-by-hop fields (RFC 9110 7.6.1: `Connection`, what it
/// lists, and the fixed ones). For fills, also without the fields that would make the
/// origin answer something other than the whole representation, and without `drop`
/// (`[cache] fill_drop_headers`: host, path and method overrides). Then reel's own
/// `X-Forwarded-For` and `CDN-Loop` (what came in, then our entry, RFC 8586): added after
/// the client's `Connection` list was applied and never dropped, so no client can have
/// them stripped.
pub(super) fn forward_headers(
    req: &Request,
    why: Forward,
    drop: &[String],
    node: &Node,
) -> HeaderMap {
    let mut h = HeaderMap::new();
    for (n, v) in req.headers() {
        if n.eq_ignore_ascii_case("host") || n.eq_ignore_ascii_case("cdn-loop") {
            continue;
        }
        if why != Forward::Pass {
            let lower = n.to_ascii_lowercase();
            if lower == "range"
                || lower.starts_with("if-")
                || lower == "cache-control"
                || lower == "pragma"
                || (why == Forward::SharedFill && PER_VIEWER.contains(&lower.as_str()))
                || drop.contains(&lower)
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
    reel_origin::strip_hop_by_hop(&mut h);
    let ip = req.peer().ip().to_string();
    if let Ok(v) = HeaderValue::from_str(&ip) {
        h.append("x-forwarded-for", v);
    }
    h.insert("cdn-loop", node.cdn_loop(req));
    h
}

/// The origin request for a fill of `key`: the Host the key names, the client's headers
/// as [`forward_headers`] keeps them for `why`, plus our validators when revalidating
/// `stale`.
fn fill_request(
    req: &Request,
    key: &CacheKey,
    why: Forward,
    stale: Option<&StoredMeta>,
    settings: &Settings,
) -> Option<OriginRequest> {
    let pq = origin_path(req)?;
    let mut headers = forward_headers(req, why, &settings.fill_drop_headers, &settings.node);
    if let Some(meta) = stale {
        for (n, v) in conditional::revalidation_headers(meta) {
            if let Ok(v) = HeaderValue::from_bytes(&v) {
                headers.insert(n, v);
            }
        }
    }
    let mut o = OriginRequest::get(pq, String::from_utf8_lossy(key.host()));
    o.headers = headers;
    Some(o)
}

/// What a fetch for the cache uses of the worker, borrowed: a background refresh owns
/// the same parts and lends them.
pub(super) struct Fetcher<'a> {
    /// The store and the in-flight map.
    pub shared: &'a SharedCache,
    /// Path rules and defaults.
    pub settings: &'a Settings,
    /// The site's freshness and storability knobs.
    pub policy: &'a PolicyConfig,
    /// This worker's origin connections.
    pub client: &'a WorkerClient,
    /// The site's origin group.
    pub group: &'a str,
}

/// The request a fetch stores a response for.
pub(super) struct Viewer<'a, H: ?Sized> {
    /// Its header fields, as the client sent them: the storability rules (RFC 9111 3,
    /// 3.5) and the Vary key read them.
    pub headers: &'a H,
    /// Its Cache-Control.
    pub cc: &'a RequestCacheControl,
    /// Fields the origin request left out. A response that varies on one the viewer did
    /// send was not chosen for this viewer, so it is not stored as the viewer's variant.
    pub withheld: Withheld<'a>,
    /// Whether the key leaves out query parameters the origin was sent
    /// ([`key_omits_query`]): then an error answer is not stored.
    pub partial_key: bool,
}

/// Whether `key` leaves out query parameters the origin is sent for `req` (`drop_query`,
/// `ignore_query`). The origin then answers for a query that other viewers of the key do
/// not send: a 404 to one viewer's junk token says nothing about another's valid one.
pub(super) fn key_omits_query(req: &Request, key: &CacheKey) -> bool {
    let full = CacheKey::build(key.host(), origin_form(req).as_bytes(), &KeyConfig::default());
    full.map_or(true, |f| f != *key)
}

/// The viewer's fields a fill does not send: the configured drops, and for a shared
/// fill the viewer's credentials and cookies ([`PER_VIEWER`]).
#[derive(Clone, Copy)]
pub(super) struct Withheld<'a> {
    /// `[cache] fill_drop_headers`, lowercase.
    pub dropped: &'a [String],
    /// Whether [`PER_VIEWER`] is withheld too.
    pub per_viewer: bool,
}

impl Withheld<'_> {
    fn contains(&self, name: &str) -> bool {
        (self.per_viewer && PER_VIEWER.contains(&name)) || self.dropped.iter().any(|d| d == name)
    }
}

impl<H: HeaderLookup + ?Sized> Viewer<'_, H> {
    /// Whether `names` (lowercase) select on a field this viewer sent but the origin did
    /// not get.
    fn selects_withheld<'n>(&self, mut names: impl Iterator<Item = &'n str>) -> bool {
        names.any(|n| self.withheld.contains(n) && self.headers.has(n))
    }
}

/// The stored object a fetch revalidates.
pub(super) struct Revalidating<'a> {
    /// Its key in the store.
    pub store_key: &'a [u8],
    /// Its metadata, as stored.
    pub meta: &'a StoredMeta,
}

/// What became of a fetch for the cache; the followers have been told.
pub(super) enum Fetched {
    /// The origin could not be asked or did not answer: the status for the client.
    Failed(u16),
    /// 304 to a revalidation: the stored response, freshened (RFC 9111 4.3.4).
    Freshened(StoredMeta),
    /// An error status to a revalidation that stale-if-error covers (RFC 5861 4): the
    /// stored response stays as it was.
    StaleIfError,
    /// Being written into the store while the body arrives.
    Filling(reel_store::Filling),
    /// Not stored (not storable for this viewer, or the store refused it): the response,
    /// for the viewer alone.
    NotStored(OriginResponse),
}

impl Fetcher<'_> {
    /// Fetches `key` from the origin with `oreq` on behalf of `viewer` and stores what
    /// may be stored, publishing to `lead` as it goes: a miss, or with `stale` a
    /// revalidation. Returns the outcome and the origin's time.
    pub(super) async fn fetch_and_store<H: HeaderLookup + ?Sized>(
        &self,
        key: &CacheKey,
        oreq: OriginRequest,
        viewer: Viewer<'_, H>,
        stale: Option<Revalidating<'_>>,
        mut lead: Lead,
    ) -> (Fetched, Option<Duration>) {
        let request_time = unix_now();
        let t0 = Instant::now();
        // The key, not the target, picks the parent: one owner per object (see Affinity).
        let affinity = Some(Affinity::of(key.as_bytes()));
        let resp = match self.client.send_keyed(self.group, oreq, affinity).await {
            Ok(r) => r,
            Err(e) => {
                let status = e.client_status();
                lead.publish(State::Failed(status));
                return (Fetched::Failed(status), Some(t0.elapsed()));
            }
        };
        let origin_time = Some(t0.elapsed());
        let times = ResponseTimes { request_time, response_time: unix_now() };
        let status = resp.status.as_u16();
        let rule = self.settings.rules.find(key.path());

        if let Some(s) = stale {
            if status == 304 {
                // RFC 9111 4.3.4: freshen the stored response with the 304's fields.
                let mut meta = s.meta.clone();
                let h = header_pairs(&resp.headers);
                meta.update_from_304(&h, times, self.policy, rule);
                let _ = self.shared.store.update_meta(s.store_key, meta.encode().into()).await;
                lead.publish(State::Done);
                return (Fetched::Freshened(meta), origin_time);
            }
            if is_error_status(status) && stale_if_error_ok(viewer.cc, s.meta, unix_now()) {
                lead.publish(State::Failed(status));
                return (Fetched::StaleIfError, origin_time);
            }
        }

        let ok =
            storable(b"GET", status, viewer.cc, viewer.headers, &resp.headers, self.policy, rule);
        let vary = Vary::parse(&resp.headers);
        let not_for_viewer = match &vary {
            Vary::Fields(names) => viewer.selects_withheld(names.iter().map(String::as_str)),
            _ => false,
        };
        // Negative caching (and any error answer) only where the key names everything the
        // origin was sent: on drop_query / ignore_query requests an error is the viewer's.
        let error_for_partial_key = viewer.partial_key && status >= 400;
        if !ok.is_store() || not_for_viewer || error_for_partial_key {
            lead.publish(State::NotShared);
            return (Fetched::NotStored(resp), origin_time);
        }
        match self.begin_fill(key, &vary, viewer.headers, &resp, times, rule).await {
            Ok((writer, fill)) => {
                lead.publish(State::Filling);
                tokio::task::spawn_local(fill_task(writer, resp, lead));
                (Fetched::Filling(fill), origin_time)
            }
            Err(_) => {
                // The store would not take it (full, too large, I/O error): serve it anyway.
                lead.publish(State::NotShared);
                (Fetched::NotStored(resp), origin_time)
            }
        }
    }
}

impl WorkerCache {
    fn fetcher<'a>(&'a self, site: &'a Site) -> Fetcher<'a> {
        Fetcher {
            shared: &self.shared,
            settings: &self.settings,
            policy: &site.policy,
            client: &self.client,
            group: &site.group,
        }
    }

    /// The leader's fetch: from the origin into the store, streamed to this client while
    /// it arrives. With `stale`, a revalidation of that stored object. The origin's interim
    /// responses go to this client through `body` as they come.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn fetch(
        &self,
        req: &Request,
        body: &mut RequestBody<'_>,
        site: &Site,
        key: &CacheKey,
        lead: Lead,
        stale: Option<Stored>,
        req_cc: &RequestCacheControl,
    ) -> Response {
        let stale_meta = stale.as_ref().map(|s| &s.prep.meta);
        let dropped = &self.settings.fill_drop_headers;
        let Some(mut oreq) = fill_request(req, key, Forward::Fill, stale_meta, &self.settings)
        else {
            return local(400);
        };
        let (sink, mut interims) = interim::channel();
        oreq.interim = Some(sink);
        let hdrs = ReqHeaders(req);
        let withheld = Withheld { dropped, per_viewer: false };
        let partial_key = key_omits_query(req, key);
        let viewer = Viewer { headers: &hdrs, cc: req_cc, withheld, partial_key };
        let revalidating =
            stale.as_ref().map(|s| Revalidating { store_key: &s.store_key, meta: &s.prep.meta });
        let fetcher = self.fetcher(site);
        let work = fetcher.fetch_and_store(key, oreq, viewer, revalidating, lead);
        let (fetched, origin_time) = body.with_interims(&mut interims, work).await;
        match (fetched, stale) {
            (Fetched::Failed(st), stale) => {
                self.origin_failed(req, st, stale, req_cc, origin_time).await
            }
            (Fetched::Freshened(meta), Some(s)) => {
                let ans = Answer::REVALIDATED.after(origin_time);
                self.serve_hit(req, s.hit, &Prepared::new(meta), unix_now(), ans).await
            }
            (Fetched::StaleIfError, Some(s)) => {
                let ans = Answer::STALE_IF_ERROR.after(origin_time);
                self.serve_hit(req, s.hit, &s.prep, unix_now(), ans).await
            }
            (Fetched::Filling(fill), stale) => {
                // The metadata was encoded just now, so it decodes.
                let Some(prep) = self.prepared(fill.meta()) else { return local(502) };
                let ans = if stale.is_some() { Answer::REFRESHED } else { Answer::MISS_STORED };
                self.serve_filling(req, fill, prep, ans.after(origin_time)).await
            }
            (Fetched::NotStored(resp), _) => stream_origin(
                req,
                resp,
                Answer::MISS_NOT_STORED.after(origin_time),
                &self.statuses,
                &self.shared.pass_buffered,
            ),
            // Only a revalidation is freshened or covered by stale-if-error.
            (Fetched::Freshened(_) | Fetched::StaleIfError, None) => local(502),
        }
    }

    /// Stale-while-revalidate (RFC 5861 3): refreshes `stored` in the background, at most
    /// once per key at a time, through the same fetch-and-store step as a foreground
    /// revalidation. The refresh serves every viewer, so it is sent without this viewer's
    /// credentials and cookies, and what it fetches is stored only if a foreground miss
    /// of this request could have stored it (RFC 9111 3.5 included).
    pub(super) fn refresh_in_background(
        &self,
        req: &Request,
        site: &Site,
        key: &CacheKey,
        stored: &Stored,
        req_cc: &RequestCacheControl,
    ) {
        let hdrs = ReqHeaders(req);
        let dropped = &self.settings.fill_drop_headers;
        let withheld = Withheld { dropped, per_viewer: true };
        let partial_key = key_omits_query(req, key);
        let viewer = Viewer { headers: &hdrs, cc: req_cc, withheld, partial_key };
        let entries = stored.prep.meta.vary().entries();
        if viewer.selects_withheld(entries.iter().map(|(n, _)| n.as_str())) {
            // This viewer's variant depends on its credentials or cookies, which a shared
            // refresh does not send: it is revalidated by the viewer's own request once
            // the stale-while-revalidate window has passed.
            return;
        }
        let Some(lead) = self.shared.inflight.try_lead(key.as_bytes()) else { return };
        let stale = Some(&stored.prep.meta);
        let Some(oreq) = fill_request(req, key, Forward::SharedFill, stale, &self.settings) else {
            return;
        };
        let headers: Vec<(Vec<u8>, Vec<u8>)> =
            req.headers().map(|(n, v)| (n.as_bytes().to_vec(), v.to_vec())).collect();
        let cc = req_cc.clone();
        let (shared, settings, client) =
            (self.shared.clone(), self.settings.clone(), self.client.clone());
        let group = site.group.clone();
        let policy = site.policy.clone();
        let key = key.clone();
        let store_key = stored.store_key.clone();
        let prep = stored.prep.clone();
        tokio::task::spawn_local(async move {
            let fx = Fetcher {
                shared: &shared,
                settings: &settings,
                policy: &policy,
                client: &client,
                group: &group,
            };
            let dropped = &settings.fill_drop_headers;
            let withheld = Withheld { dropped, per_viewer: true };
            let viewer = Viewer { headers: &headers, cc: &cc, withheld, partial_key };
            let stale = Revalidating { store_key: &store_key, meta: &prep.meta };
            // No client waits for it: a response that was not stored is dropped.
            let _ = fx.fetch_and_store(&key, oreq, viewer, Some(stale), lead).await;
        });
    }

    /// The origin failed a fetch: the stale object if stale-if-error allows, else the error.
    async fn origin_failed(
        &self,
        req: &Request,
        status: u16,
        stale: Option<Stored>,
        req_cc: &RequestCacheControl,
        origin_time: Option<Duration>,
    ) -> Response {
        if let Some(s) = stale {
            let now = unix_now();
            if stale_if_error_ok(req_cc, &s.prep.meta, now) {
                let ans = Answer::STALE_IF_ERROR.after(origin_time);
                return self.serve_hit(req, s.hit, &s.prep, now, ans).await;
            }
        }
        Answer::ORIGIN_ERROR.after(origin_time).on(Response::error(status), &self.statuses)
    }
}
