//! The one origin fetch per key, as its leader makes it. A miss, a revalidation of a stale
//! object, the background refresh of stale-while-revalidate, an LL-HLS prefetch and a
//! slice or piece fetch all go through one step, [`Fetcher::fetch_and_store`]: ask the
//! origin, apply the storability rules (RFC 9111 3) for the viewer the fetch is made for,
//! store what may be stored (`fill`) and tell the followers. A viewer's own miss is also
//! subject to `[store] admission`: under `second-hit` an object seen for the first time is
//! filled unstored (delivered to the leader and its followers, then forgotten). It returns what became of the
//! fetch ([`Fetched`]) and never answers a viewer: the conductor decides what to answer.

use std::sync::Arc;
use std::time::{Duration, Instant};

use reel_http::{Interim, Request};
use reel_origin::{Affinity, ErrorKind, OriginRequest, OriginResponse, Requester, WorkerClient};
use tokio::sync::mpsc::UnboundedReceiver;

use super::deadline::{fill_deadline, is_blocking};
use super::fill::{Filler, Part, fill_task, header_pairs};
use super::inflight::{Lead, State};
use super::interim;
use super::lookup::Stored;
use super::respond::{ReqHeaders, unix_now};
use super::settings::{Settings, Site};
use super::shared::SharedCache;
use super::small::read_small;
use super::upstream::{Forward, Withheld, fill_request, key_omits_query};
use crate::key::CacheKey;
use crate::policy::HeaderLookup;
use crate::policy::cache_control::RequestCacheControl;
use crate::policy::freshness::{PolicyConfig, is_error_status, stale_if_error_ok, storable};
use crate::policy::meta::{ResponseTimes, StoredMeta};
use crate::policy::vary::Vary;

/// What fetches on the worker's behalf own of it: a task that outlives the request (a
/// background refresh, a prefetch, a slice read-ahead) keeps a clone.
#[derive(Clone)]
pub(super) struct FetchCx {
    /// The store and the in-flight map.
    pub shared: Arc<SharedCache>,
    /// This config generation's settings.
    pub settings: Arc<Settings>,
    /// This worker's origin connections.
    pub client: WorkerClient,
}

impl FetchCx {
    /// A fetcher for `site`'s objects.
    pub(super) fn fetcher<'a>(&'a self, site: &'a Site) -> Fetcher<'a> {
        Fetcher {
            shared: &self.shared,
            settings: &self.settings,
            policy: &site.policy,
            client: &self.client,
            group: &site.group,
        }
    }
}

/// What a fetch for the cache uses of the worker, borrowed.
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
    /// The part of the representation the request asks the origin for (a slice): its 206
    /// is stored as that part. `None`: the whole representation.
    pub part: Option<Part<'a>>,
    /// Whether `[store] admission` decides if the response is stored: a viewer's own miss
    /// of a whole object. Revalidations, background refreshes, prefetches and parts are
    /// stored whenever they may be.
    pub admission: bool,
}

impl<H: HeaderLookup + ?Sized> Viewer<'_, H> {
    /// Whether `names` (lowercase) select on a field this viewer sent but the origin did
    /// not get.
    pub(super) fn selects_withheld<'n>(&self, mut names: impl Iterator<Item = &'n str>) -> bool {
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
    /// An LL-HLS blocking request whose media did not appear within `blocking_timeout`.
    BlockingTimeout,
    /// 304 to a revalidation: the stored response, freshened (RFC 9111 4.3.4).
    Freshened(StoredMeta),
    /// An error status to a revalidation that stale-if-error covers (RFC 5861 4): the
    /// stored response stays as it was.
    StaleIfError,
    /// Being written into the store while the body arrives.
    Filling(reel_store::Filling),
    /// Withheld from the cache (not storable for this viewer, or the store refused it):
    /// the response, for the viewer alone.
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
        let deadline = fill_deadline(self.settings, t0);
        // The key, not the target, picks the parent: one owner per object (see Affinity).
        let affinity = Some(Affinity::of(key.as_bytes()));
        let resp = match self.client.send_keyed(self.group, oreq, affinity).await {
            Ok(r) => r,
            Err(e) if e.kind() == ErrorKind::BlockingTimeout => {
                lead.publish(State::BlockingTimeout);
                return (Fetched::BlockingTimeout, Some(t0.elapsed()));
            }
            Err(e) => {
                let status = e.client_status();
                lead.publish(State::Failed(status));
                return (Fetched::Failed(status), Some(t0.elapsed()));
            }
        };
        let origin_time = Some(t0.elapsed());
        let response_time = unix_now();
        // RFC 9111 4.2.3 ages a response by the origin's time to answer, taken as transit
        // delay. An LL-HLS blocking request is held on purpose until its answer exists (its
        // Date says when): ageing it by the hold made a playlist with max-age shorter than
        // the hold stale on arrival, and fetched again by the next viewer.
        let held = is_blocking(&self.shared.streams, key);
        let request_time = if held { response_time } else { request_time };
        let times = ResponseTimes { request_time, response_time };
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

        // A part's 206 is the representation's own answer, cut to the range asked for.
        let as_status = if status == 206 && viewer.part.is_some() { 200 } else { status };
        let ok = storable(
            b"GET",
            as_status,
            viewer.cc,
            viewer.headers,
            &resp.headers,
            self.policy,
            rule,
        );
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
        let mut resp = resp;
        let filler = self.filler();
        // Counted once per fetch, by the key: the requests that share it are one sighting.
        let keep = !viewer.admission
            || self.shared.admission.admit(self.settings.admission, key.as_bytes());
        let begun = match viewer.part {
            Some(part) if status == 206 => filler.begin_part(part, key, &resp, times, rule).await,
            _ => filler.begin_fill(key, &vary, viewer.headers, &resp, times, rule, keep).await,
        };
        match begun {
            Ok((mut writer, fill)) => {
                // A small body is read whole before anyone is told, then answered from
                // memory (`small`).
                let first = match read_small(&mut resp).await {
                    Ok(b) => b,
                    Err(e) => {
                        writer.abort();
                        let status = e.client_status();
                        lead.publish(State::Failed(status));
                        return (Fetched::Failed(status), origin_time);
                    }
                };
                if let Some(b) = &first {
                    self.shared.small.insert(fill.meta(), b.clone());
                }
                if !keep {
                    // Out of the store's index at its commit: the followers get it here.
                    lead.share_fill(fill.clone());
                }
                lead.publish(State::Filling);
                tokio::task::spawn_local(fill_task(writer, resp, lead, first, deadline));
                (Fetched::Filling(fill), origin_time)
            }
            Err(e) => {
                if matches!(e, reel_store::StoreError::TooLarge(_)) && viewer.part.is_none() {
                    // Its ranges are stored instead (`partial`).
                    filler.note_too_large(key, &resp, times, rule).await;
                }
                // The store would not take it (full, too large, I/O error): serve it anyway.
                lead.publish(State::NotShared);
                (Fetched::NotStored(resp), origin_time)
            }
        }
    }

    /// What writing into the store for this fetch uses.
    pub(super) fn filler(&self) -> Filler<'_> {
        Filler { shared: self.shared, settings: self.settings, policy: self.policy }
    }
}

/// The origin request of the leader's fetch for the viewer `req` (its fill request, with
/// `stale` a revalidation of that stored object), its first byte bounded by `first_byte`,
/// and the receiver of the origin's interim responses, which go to the viewer as they come.
/// `None` when the request cannot be sent upstream.
pub(super) fn viewer_request(
    req: &Request,
    key: &CacheKey,
    stale: Option<&StoredMeta>,
    settings: &Settings,
    first_byte: Option<Duration>,
) -> Option<(OriginRequest, UnboundedReceiver<Interim>)> {
    let mut oreq = fill_request(req, key, Forward::Fill, stale, settings)?;
    oreq.first_byte_timeout = first_byte;
    let (sink, interims) = interim::channel();
    oreq.interim = Some(sink);
    Some((oreq, interims))
}

impl FetchCx {
    /// The leader's fetch for the viewer `req` with `oreq` ([`viewer_request`]): from the
    /// origin into the store, with `stale` a revalidation of that stored object. It owns
    /// what it uses, so it can run as a task of its own: a leader whose client goes away
    /// abandons its wait, not the fetch its followers wait on.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn for_viewer(
        &self,
        site: &Site,
        req: &Request,
        key: &CacheKey,
        req_cc: &RequestCacheControl,
        stale: Option<(&[u8], &StoredMeta)>,
        oreq: OriginRequest,
        lead: Lead,
    ) -> (Fetched, Option<Duration>) {
        let hdrs = ReqHeaders(req);
        let withheld = Withheld { dropped: &self.settings.fill_drop_headers, per_viewer: false };
        let partial_key = key_omits_query(req, key);
        let admission = stale.is_none();
        let viewer =
            Viewer { headers: &hdrs, cc: req_cc, withheld, partial_key, part: None, admission };
        let revalidating = stale.map(|(store_key, meta)| Revalidating { store_key, meta });
        self.fetcher(site).fetch_and_store(key, oreq, viewer, revalidating, lead).await
    }
}

/// Stale-while-revalidate (RFC 5861 3): refreshes `stored` in the background, at most
/// once per key at a time, through the same fetch-and-store step as a foreground
/// revalidation. The refresh serves every viewer, so it is sent without this viewer's
/// credentials and cookies, and what it fetches is stored only if a foreground miss of
/// this request could have stored it (RFC 9111 3.5 included).
pub(super) async fn refresh_in_background(
    cx: &FetchCx,
    req: &Request,
    site: &Site,
    key: &CacheKey,
    stored: &Stored,
    req_cc: &RequestCacheControl,
) {
    let hdrs = ReqHeaders(req);
    let dropped = &cx.settings.fill_drop_headers;
    let withheld = Withheld { dropped, per_viewer: true };
    let partial_key = key_omits_query(req, key);
    let viewer =
        Viewer { headers: &hdrs, cc: req_cc, withheld, partial_key, part: None, admission: false };
    let entries = stored.prep.meta.vary().entries();
    if viewer.selects_withheld(entries.iter().map(|(n, _)| n.as_str())) {
        // This viewer's variant depends on its credentials or cookies, which a shared
        // refresh does not send: it is revalidated by the viewer's own request once the
        // stale-while-revalidate window has passed.
        return;
    }
    let Some(lead) = cx.shared.inflight.try_lead(key.as_bytes()) else { return };
    // A refresh that ended between this request's lookup and its lead (on another worker)
    // has replaced the stale metadata: this one would ask the origin a second time.
    match cx.shared.store.lookup(&stored.store_key).await {
        Some(reel_store::Lookup::Hit(h)) if h.meta() == stored.hit.meta() => {}
        _ => return,
    }
    let stale = Some(&stored.prep.meta);
    let Some(mut oreq) = fill_request(req, key, Forward::SharedFill, stale, &cx.settings) else {
        return;
    };
    // The node's own: a refresh has room no viewer's miss can take.
    oreq.from = Requester::Node;
    let headers: Vec<(Vec<u8>, Vec<u8>)> =
        req.headers().map(|(n, v)| (n.as_bytes().to_vec(), v.to_vec())).collect();
    let cc = req_cc.clone();
    let (cx, site, key) = (cx.clone(), site.clone(), key.clone());
    let store_key = stored.store_key.clone();
    let prep = stored.prep.clone();
    tokio::task::spawn_local(async move {
        let fx = cx.fetcher(&site);
        let dropped = &cx.settings.fill_drop_headers;
        let withheld = Withheld { dropped, per_viewer: true };
        let viewer = Viewer {
            headers: &headers,
            cc: &cc,
            withheld,
            partial_key,
            part: None,
            admission: false,
        };
        let stale = Revalidating { store_key: &store_key, meta: &prep.meta };
        // No client waits for it: a response that was not stored is dropped.
        let _ = fx.fetch_and_store(&key, oreq, viewer, Some(stale), lead).await;
    });
}
