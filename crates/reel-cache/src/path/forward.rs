//! What is not cached: GET/HEAD forwarded without storing, other methods passed through
//! with their body streamed, and the invalidation a successful unsafe request causes
//! (RFC 9111 4.4).

use std::time::Instant;

use http::{HeaderMap, Method as HttpMethod};
use reel_http::{BodyFraming, Method, Request, RequestBody, Response};
use reel_origin::{Affinity, OriginRequest, Requester, WorkerClient};

use super::answer::{Answer, StatusNames};
use super::interim;
use super::lookup::cache_key;
use super::serve::{local, stream_origin};
use super::settings::{InvalidateOn, Settings, Site};
use super::shared::SharedCache;
use super::upstream::{Forward, forward_headers, origin_form, origin_path};
use crate::key::CacheKey;

/// What passing a request through uses of the worker.
#[derive(Clone, Copy)]
pub(super) struct Forwarder<'a> {
    /// The store (invalidation) and the pass-through gauge.
    pub shared: &'a SharedCache,
    /// This node's `CDN-Loop` entry.
    pub settings: &'a Settings,
    /// This worker's origin connections.
    pub client: &'a WorkerClient,
    /// Our `Cache-Status` entries.
    pub statuses: &'a StatusNames,
}

impl Forwarder<'_> {
    /// GET/HEAD forwarded without storing (request `no-store`, or a response the leader
    /// could not share): the client's own conditionals and Range go along, the origin's
    /// interim responses come back through `body`.
    pub(super) async fn fetch_pass(
        &self,
        req: &Request,
        body: &mut RequestBody<'_>,
        site: &Site,
        ans: Answer,
    ) -> Response {
        let (Some(pq), Some(host)) = (origin_path(req), origin_host(req)) else {
            return local(400);
        };
        let mut o = OriginRequest::get(pq, host);
        if *req.method() == Method::Head {
            o.method = HttpMethod::HEAD;
        }
        o.headers = forward_headers(req, Forward::Pass, &[], &self.settings.node);
        o.from = Requester::Viewer(req.peer().ip());
        let (sink, mut interims) = interim::channel();
        o.interim = Some(sink);
        let t0 = Instant::now();
        match body
            .with_interims(
                &mut interims,
                self.client.send_keyed(&site.group, o, self.affinity(req, site)),
            )
            .await
        {
            Ok(resp) => {
                let ans = ans.after(Some(t0.elapsed()));
                stream_origin(req, resp, ans, self.statuses, &self.shared.pass_buffered)
            }
            Err(e) => Answer::ORIGIN_ERROR
                .counted_as(ans.result)
                .after(Some(t0.elapsed()))
                .on(Response::error(e.client_status()), self.statuses),
        }
    }

    /// The parent a request for `req`'s object goes to is chosen by its cache key, as for
    /// fills (see [`Affinity`]); a target that cannot be keyed hashes its path and query.
    fn affinity(&self, req: &Request, site: &Site) -> Option<Affinity> {
        cache_key(req, site).map(|k| Affinity::of(k.as_bytes()))
    }

    /// Other methods: forwarded uncached with the body streamed; a successful unsafe
    /// request invalidates what we store for its URL (RFC 9111 4.4), if the site's
    /// `invalidate_on` covers its method (see [`invalidates`]). The origin's interim
    /// responses reach the client once its body has been read (the two share the
    /// connection).
    pub(super) async fn pass(
        &self,
        req: &Request,
        body: &mut RequestBody<'_>,
        site: &Site,
    ) -> Response {
        let (Some(pq), Some(host)) = (origin_path(req), origin_host(req)) else {
            return local(400);
        };
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
        let (sink, mut interims) = interim::channel();
        let o = OriginRequest {
            method,
            path_and_query: pq,
            headers: forward_headers(req, Forward::Pass, &[], &self.settings.node),
            host,
            body: rbody,
            idempotent: false,
            first_byte_timeout: None,
            interim: Some(sink),
            from: Requester::Viewer(req.peer().ip()),
        };
        let t0 = Instant::now();
        let pump = async |body: &mut RequestBody<'_>| {
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
        // The upload and the origin request go together; once the body is read, what is
        // left of the wait is the interims'.
        let mut send =
            std::pin::pin!(self.client.send_keyed(&site.group, o, self.affinity(req, site)));
        let mut early = None;
        {
            let mut upload = std::pin::pin!(pump(body));
            loop {
                tokio::select! {
                    r = &mut send, if early.is_none() => early = Some(r),
                    () = &mut upload => break,
                }
            }
        }
        let res = match early {
            Some(r) => r,
            None => body.with_interims(&mut interims, send).await,
        };
        let ans = Answer::FWD_METHOD.after(Some(t0.elapsed()));
        match res {
            Ok(resp) => {
                let status = resp.status.as_u16();
                if (200..400).contains(&status) && invalidates(req.method(), site.invalidate_on) {
                    self.invalidate(req, site, &resp.headers).await;
                }
                stream_origin(req, resp, ans, self.statuses, &self.shared.pass_buffered)
            }
            Err(e) => ans.on(Response::error(e.client_status()), self.statuses),
        }
    }

    /// RFC 9111 4.4: the target URI, and Location / Content-Location on the same host;
    /// each a lookup of its key (and of the variants its Vary marker lists).
    async fn invalidate(&self, req: &Request, site: &Site, resp: &HeaderMap) {
        let host = req.host().unwrap_or("");
        let mut targets = vec![origin_form(req).to_string()];
        for name in ["location", "content-location"] {
            if let Some(v) = resp.get(name).and_then(|v| v.to_str().ok())
                && let Some(path) = same_host_path(v, host)
            {
                targets.push(path);
            }
        }
        for t in targets {
            if let Ok(k) = CacheKey::build(host.as_bytes(), t.as_bytes(), &site.key) {
                // Only what is stored is removed: nothing stored, nothing written.
                let _ = self.shared.remove_url(k.as_bytes()).await;
            }
        }
    }
}

/// Whether a 2xx/3xx answer to `method` invalidates its URL. RFC 9111 4.4 lets a cache
/// invalidate on any unsafe method, but an extension method (`PURGEME`, any token) is
/// one a viewer can make up and an origin may answer 2xx without changing anything:
/// by default only the standard unsafe methods count, so no viewer empties the cache
/// with one.
fn invalidates(method: &Method, on: InvalidateOn) -> bool {
    match on {
        InvalidateOn::Standard => {
            matches!(method, Method::Post | Method::Put | Method::Delete | Method::Patch)
        }
        InvalidateOn::All => method.is_unsafe(),
    }
}

/// The Host a passed-through request is sent with: normalised like a key's, so the
/// origin sees one spelling of each site whatever the request's path.
fn origin_host(req: &Request) -> Option<String> {
    crate::key::normalize_host(req.host().unwrap_or("").as_bytes()).ok()
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
    fn only_standard_unsafe_methods_invalidate_unless_all() {
        let m = Method::from_token;
        for t in ["POST", "PUT", "DELETE", "PATCH"] {
            assert!(invalidates(&m(t), InvalidateOn::Standard), "{t}");
            assert!(invalidates(&m(t), InvalidateOn::All), "{t}");
        }
        for t in ["FOO", "PURGEME", "PROPPATCH", "post"] {
            assert!(!invalidates(&m(t), InvalidateOn::Standard), "{t}");
            assert!(invalidates(&m(t), InvalidateOn::All), "{t}");
        }
        for t in ["GET", "HEAD", "OPTIONS", "TRACE"] {
            assert!(!invalidates(&m(t), InvalidateOn::Standard), "{t}");
            assert!(!invalidates(&m(t), InvalidateOn::All), "{t}");
        }
    }

    #[test]
    fn same_host_paths() {
        assert_eq!(same_host_path("/a/b", "h"), Some("/a/b".into()));
        assert_eq!(same_host_path("http://H:80/x", "h:8080"), Some("/x".into()));
        assert_eq!(same_host_path("http://other/x", "h"), None);
        assert_eq!(same_host_path("ftp://h/x", "h"), None);
    }
}
