//! The one origin fetch per key: the leader's fetch and revalidation, the background
//! refresh of stale-while-revalidate, and the origin requests they send.

use std::time::{Duration, Instant};

use http::{HeaderMap, HeaderName, HeaderValue, uri::PathAndQuery};
use reel_http::{Request, Response};
use reel_origin::OriginRequest;

use super::answer::Answer;
use super::fill::{fill_task, header_pairs};
use super::inflight::{Lead, State};
use super::lookup::Stored;
use super::respond::{Prepared, ReqHeaders, unix_now};
use super::serve::stream_origin;
use super::settings::Site;
use super::worker::{WorkerCache, local};
use crate::key::CacheKey;
use crate::policy::cache_control::{RequestCacheControl, ResponseCacheControl};
use crate::policy::conditional;
use crate::policy::freshness::{is_error_status, stale_if_error_ok, storable};
use crate::policy::meta::{ResponseTimes, StoredMeta};
use crate::policy::vary::{Vary, VaryKey};

/// The request target in origin-form (absolute-form targets lose scheme and authority).
pub(super) fn origin_form(req: &Request) -> &str {
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

/// What an origin request is for, which decides the client fields it carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Forward {
    /// Forwarded for this client alone: its fields go along.
    Pass,
    /// A fill: the whole representation, whatever this client's range or conditionals.
    Fill,
}

/// The client's header fields for the origin: without Host (the origin client sets it),
/// hop-by-hop fields (the origin client strips them) and, for fills, the fields that
/// would make the origin answer something other than the whole representation.
pub(super) fn forward_headers(req: &Request, why: Forward) -> HeaderMap {
    let mut h = HeaderMap::new();
    for (n, v) in req.headers() {
        if n.eq_ignore_ascii_case("host") {
            continue;
        }
        if why == Forward::Fill {
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

/// The origin request for a fill: the client's headers minus hop-by-hop, range and
/// conditional fields (we fetch the whole representation for everyone), plus our
/// validators when revalidating.
fn fill_request(req: &Request, stale: Option<&Prepared>) -> Option<OriginRequest> {
    let pq = PathAndQuery::try_from(origin_form(req)).ok()?;
    let mut headers = forward_headers(req, Forward::Fill);
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

impl WorkerCache {
    /// The leader's fetch: from the origin into the store, streamed to this client while
    /// it arrives. With `stale`, a revalidation of that stored object.
    pub(super) async fn fetch(
        &self,
        req: &Request,
        site: &Site,
        key: &CacheKey,
        mut lead: Lead,
        stale: Option<Stored>,
        req_cc: &RequestCacheControl,
    ) -> Response {
        let Some(oreq) = fill_request(req, stale.as_ref().map(|s| &*s.prep)) else {
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

        if let Some(s) = &stale {
            if status == 304 {
                // RFC 9111 4.3.4: freshen the stored response with the 304's fields.
                let mut meta = s.prep.meta.clone();
                let h = header_pairs(&resp.headers);
                meta.update_from_304(&h, times, &self.settings.policy, rule);
                let _ = self.shared.store.update_meta(&s.store_key, meta.encode().into()).await;
                lead.publish(State::Done);
                let fresh = Prepared::new(meta);
                let ans = Answer::REVALIDATED.after(origin_time);
                return self.serve_hit(req, s.hit.clone(), &fresh, unix_now(), ans).await;
            }
            if is_error_status(status) && stale_if_error_ok(req_cc, &s.prep.meta, unix_now()) {
                lead.publish(State::Failed(status));
                let ans = Answer::STALE_IF_ERROR.after(origin_time);
                return self.serve_hit(req, s.hit.clone(), &s.prep, unix_now(), ans).await;
            }
        }

        let hdrs = ReqHeaders(req);
        let resp_cc = ResponseCacheControl::parse(&resp.headers);
        let ok = storable(
            b"GET",
            status,
            req_cc,
            &hdrs,
            &resp_cc,
            &resp.headers,
            &self.settings.policy,
            rule,
        );
        if !ok.is_store() {
            lead.publish(State::NotShared);
            return stream_origin(req, resp, Answer::MISS_NOT_STORED.after(origin_time));
        }
        match self.begin_fill(key, &hdrs, &resp, times, rule).await {
            Ok((writer, fill, prep)) => {
                lead.publish(State::Filling);
                tokio::task::spawn_local(fill_task(writer, resp, lead));
                let ans = if stale.is_some() { Answer::REFRESHED } else { Answer::MISS_STORED };
                self.serve_filling(req, fill, prep, ans.after(origin_time)).await
            }
            Err(_) => {
                // The store would not take it (full, too large, I/O error): serve it anyway.
                lead.publish(State::NotShared);
                stream_origin(req, resp, Answer::MISS_NOT_STORED.after(origin_time))
            }
        }
    }

    /// Background revalidation for stale-while-revalidate: at most one per key.
    pub(super) fn refresh_in_background(
        &self,
        req: &Request,
        site: &Site,
        key: &CacheKey,
        stored: &Stored,
    ) {
        let Some(mut lead) = self.shared.inflight.try_lead(key.as_bytes()) else { return };
        let Some(oreq) = fill_request(req, Some(&stored.prep)) else { return };
        let client = self.client.clone();
        let group = site.group.clone();
        let shared = self.shared.clone();
        let settings = self.settings.clone();
        let key = key.clone();
        let store_key = stored.store_key.clone();
        let prep = stored.prep.clone();
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
                    let rcc = ResponseCacheControl::parse(&resp.headers);
                    let none: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
                    let ok = storable(
                        b"GET",
                        200,
                        &RequestCacheControl::default(),
                        &none,
                        &rcc,
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
        Answer::ORIGIN_ERROR.after(origin_time).on(Response::error(status))
    }
}
