//! Low-Latency HLS at the edge (draft-pantos-hls-rfc8216bis): blocking requests and
//! prefetch.
//!
//! - **Blocking requests**, a playlist reload with `_HLS_msn` (§6.2.5.2) or a request for
//!   the part a playlist hints (`EXT-X-PRELOAD-HINT`, §4.4.5.3), are held by the origin
//!   until the media exists. They coalesce like any miss, one origin request per key (the
//!   `_HLS_*` parameters always stay in the key, see [`crate::key`]), and every waiter is
//!   woken by the leader's response. Their wait is bounded by `[cache] blocking_timeout`
//!   instead of `lock_timeout` (followers) and the group's `first_byte_timeout` (the
//!   origin request). A blocking follower whose wait ends, or whose leader's fetch failed,
//!   answers 504 at once rather than fetch on its own: that would hold one more origin
//!   request for the same media.
//! - **Streams** ([`Streams`], shared by the workers): what the playlists that passed
//!   through announced, per playlist URL: its latest hints (so a request for one is known
//!   to block) and its prefetches in flight. At most [`MAX_STREAMS`] are tracked, the
//!   least recently announced forgotten first.
//! - **Prefetch** (`prefetch = "hinted"`): once a playlist fill from the origin is
//!   complete, its hinted part and then its listed parts not stored (newest first) are
//!   fetched at once through the one miss path, [`Fetcher::fetch_and_store`]: each only
//!   when no fetch of it is in flight (the in-flight map), at most
//!   [`PREFETCH_PER_STREAM`] per stream at a time, on everyone's behalf (without the
//!   viewer's credentials and cookies, as a background refresh).
//!
//! Every playlist fill is read once, on any site, so hinted parts are recognised: from
//! memory when it was small enough to be read whole on arrival (`small`), else from the
//! store once complete. Only prefetching sites fetch anything.

use std::rc::Rc;

use http::HeaderMap;
use http::uri::PathAndQuery;
use reel_http::Request;
use reel_origin::OriginRequest;
use reel_store::{Filling, Lookup};

use super::deadline::first_byte;
use super::fetch::{FetchCx, Fetched, Fetcher, Viewer};
use super::inflight::Lead;
use super::upstream::{Forward, Withheld, forward_headers};
use crate::hls;
use crate::key::{CacheKey, KeyConfig};
use crate::path::worker::hints::stream_of;
use crate::path::worker::settings::{Prefetch, Site};
use crate::policy::HeaderLookup;
use crate::policy::cache_control::RequestCacheControl;
use crate::policy::freshness::PolicyConfig;
use crate::policy::meta::StoredMeta;

pub use crate::path::worker::hints::{MAX_STREAMS, PREFETCH_PER_STREAM, Streams};

/// Playlists longer than this are not read for hints.
const MAX_PLAYLIST: u64 = 1 << 20;

/// Whether a stored response is a playlist: `.m3u8` or an HLS media type (RFC 8216 §4).
fn is_playlist(key: &CacheKey, meta: &StoredMeta) -> bool {
    if meta.status() != 200 {
        return false;
    }
    if key.path().ends_with(b".m3u8") {
        return true;
    }
    meta.get_first("content-type").is_some_and(|ct| {
        let ct = ct.to_ascii_lowercase();
        ct.starts_with(b"application/vnd.apple.mpegurl") || ct.starts_with(b"audio/mpegurl")
    })
}

/// A fill from the origin just started for `key`: when it is a playlist, read it once
/// complete, record its hint, and with `prefetch = "hinted"` fetch the parts it
/// announces. `req` is the request the fill is for; the prefetches send its fields as a
/// background refresh does.
pub(in crate::path) async fn watch_playlist(
    cx: &FetchCx,
    req: &Request,
    site: &Site,
    key: &CacheKey,
    fill: &Filling,
) {
    if fill.expected_len().is_some_and(|l| l > MAX_PLAYLIST) {
        return;
    }
    let Ok(meta) = StoredMeta::decode(fill.meta()) else { return };
    if !is_playlist(key, &meta) {
        return;
    }
    // Small playlists were read whole on arrival (`small`); others are read back from
    // the store once complete.
    let known = cx.shared.small.get(fill.meta());
    let fill = match known {
        Some(_) => None,
        None => match cx.shared.store.lookup(fill.key()).await {
            Some(Lookup::Filling(f)) => Some(f),
            _ => return,
        },
    };
    let context = (site.prefetch == Prefetch::Hinted).then(|| Rc::new(Context::new(cx, site, req)));
    let streams = cx.shared.streams.clone();
    let (key, key_cfg) = (key.clone(), site.key.clone());
    tokio::task::spawn_local(async move {
        let body = match (known, fill) {
            (Some(b), _) => b,
            (None, Some(mut fill)) => {
                let Ok(st) = fill.wait_for(u64::MAX).await else { return };
                let Some(len) = st.final_len.filter(|&l| l <= MAX_PLAYLIST) else { return };
                let Ok(body) = fill.read(0, len).await else { return };
                body
            }
            (None, None) => return,
        };
        let Ok(text) = std::str::from_utf8(&body) else { return };
        let Some(ann) = hls::announced(text) else { return };
        let part_key = |uri: &str| {
            let target = hls::resolve(key.path(), key.host(), uri)?;
            let k = CacheKey::build(key.host(), target.as_bytes(), &key_cfg).ok()?;
            Some((k, target))
        };
        let hint = ann.hint.and_then(part_key);
        let stream = stream_of(&key);
        streams.announce(stream, hint.as_ref().map(|(k, _)| k.as_bytes().into()));
        let Some(pf) = context else { return };
        let listed = ann.parts.iter().rev().filter_map(|u| part_key(u));
        let hinted = hint.iter().map(|(k, _)| k.clone()).collect::<Vec<_>>();
        for (part, target) in hint.into_iter().chain(listed) {
            if pf.cx.shared.store.contains(part.as_bytes()) {
                continue;
            }
            let Some(permit) = streams.start(stream) else { break };
            let Some(lead) = pf.cx.shared.inflight.try_lead(part.as_bytes()) else { continue };
            let blocking = hinted.contains(&part);
            tokio::task::spawn_local(prefetch_part(
                pf.clone(),
                part,
                target,
                lead,
                permit,
                blocking,
            ));
        }
    });
}

/// What a prefetch uses of the worker and of the request whose playlist (or CMCD `nor`)
/// announced it.
pub(in crate::path) struct Context {
    cx: FetchCx,
    group: String,
    policy: PolicyConfig,
    /// The origin request's fields: the playlist request's, as a shared fill sends them.
    headers: HeaderMap,
    /// The playlist request's fields, for the storability rules and the Vary key.
    viewer: Vec<(Vec<u8>, Vec<u8>)>,
}

impl Context {
    /// For prefetches of `site` announced by `req`.
    pub(in crate::path) fn new(cx: &FetchCx, site: &Site, req: &Request) -> Context {
        let dropped = &cx.settings.fill_drop_headers;
        Context {
            cx: cx.clone(),
            group: site.group.clone(),
            policy: site.policy.clone(),
            headers: forward_headers(req, Forward::SharedFill, dropped, &cx.settings.node),
            viewer: req.headers().map(|(n, v)| (n.as_bytes().to_vec(), v.to_vec())).collect(),
        }
    }
}

/// Fetches and stores one announced object, holding its slot (a stream's `Permit`, a
/// worker's place for CMCD prefetches) until the fill ends.
pub(in crate::path) async fn prefetch_part<S>(
    pf: Rc<Context>,
    key: CacheKey,
    target: String,
    lead: Lead,
    _permit: S,
    blocking: bool,
) {
    let Some(pq) = crate::key::origin_target(target.as_bytes())
        .ok()
        .and_then(|t| PathAndQuery::try_from(t).ok())
    else {
        return;
    };
    let mut oreq = OriginRequest::get(pq, String::from_utf8_lossy(key.host()));
    oreq.headers = pf.headers.clone();
    oreq.first_byte_timeout = first_byte(&pf.cx.settings, blocking);
    let partial_key = CacheKey::build(key.host(), target.as_bytes(), &KeyConfig::default())
        .map_or(true, |full| full != key);
    let fx = Fetcher {
        shared: &pf.cx.shared,
        settings: &pf.cx.settings,
        policy: &pf.policy,
        client: &pf.cx.client,
        group: &pf.group,
    };
    let withheld = Withheld { dropped: &pf.cx.settings.fill_drop_headers, per_viewer: true };
    let cc = RequestCacheControl::default();
    let viewer = Viewer {
        headers: &pf.viewer,
        cc: &cc,
        withheld,
        partial_key,
        part: None,
        admission: false,
    };
    if let (Fetched::Filling(mut fill), _) =
        fx.fetch_and_store(&key, oreq, viewer, None, lead).await
    {
        // The slot is held while the origin sends the part.
        let _ = fill.wait_for(u64::MAX).await;
    }
}
