//! A site's access checks, run by the conductor once the site is known and before the
//! method dispatch, so a refusal never reaches the store or the origin: the address and
//! country rules of `[site.access]` ([`refuse_by_address`]), the signed viewer token of
//! `[site.token]` ([`check_token`]), the request rate of `[site.limits]`
//! ([`refuse_by_rate`], per token when one verified), and what follows an admitted
//! request's answer so the token reaches the player's next requests ([`follow`]). A
//! refusal is a small fixed body, counted by reason (`reel_denied_total{reason}`) and
//! tagged with it for the access log.
//!
//! An admitted request goes on without its token: the cache path is handed a copy with
//! the query parameter and the cookie removed, so the token is in no cache key and never
//! reaches the origin, and one stored copy serves every viewer whatever their token.

use std::borrow::Cow;

use bytes::Bytes;
use reel_access::token::{self, Presented, Valid, pct};
use reel_access::{DenyReason, Refusal, SiteAccess, retry_after_secs};
use reel_http::{Method, Request, Response};
use reel_ops::metrics::WorkerMetrics;

use super::settings::{Propagate, SiteToken};
use crate::path::answer::tag::Tag;
use crate::path::answer::tokenised::{self, is_playlist_path};

/// A request whose token verified.
pub(in crate::path) struct Admitted<'r> {
    /// The request without its token: what the cache keys on and the origin is sent.
    pub clean: Request,
    /// What to do to the answer for this viewer (propagation).
    pub follow: Follow<'r>,
    /// The verified token (its identity keys per-token limits).
    pub valid: Valid,
}

/// What an admitted request's answer needs so the token follows the player: the token as
/// the viewer sent it in the query (`None`: it came as a cookie, and nothing is added).
pub(in crate::path) struct Follow<'r> {
    from_query: Option<&'r str>,
    has_acl: bool,
}

/// The 403 a refused request gets: a fixed body, the reason only in the tag (for the
/// access log) and in `reel_denied_total{reason}`.
pub(in crate::path) fn denied(reason: DenyReason) -> Response {
    Response::error(403).tagged(Tag::denied(reason))
}

/// The token `req` carries for `t`: the query parameter, else the cookie of that name;
/// with whether it came in the query. The value as sent (still escaped, if it was).
fn find<'r>(t: &SiteToken, req: &'r Request) -> Option<(&'r str, bool)> {
    let named = |p: &'r str| p.split_once('=').filter(|(n, _)| *n == t.param).map(|(_, v)| v);
    if let Some(v) = req.query().and_then(|q| q.split('&').find_map(named)) {
        return Some((v, true));
    }
    req.headers()
        .filter(|(n, _)| n.eq_ignore_ascii_case("cookie"))
        .filter_map(|(_, v)| std::str::from_utf8(v).ok())
        .flat_map(|v| v.split(';'))
        .find_map(|c| named(c.trim()))
        .map(|v| (v, false))
}

/// Checks `req`'s token for the site `t` at `now` (Unix seconds): admitted with a copy of
/// the request without it, or the reason it is refused.
pub(in crate::path) fn check_token<'r>(
    t: &SiteToken,
    req: &'r Request,
    now: u64,
) -> Result<Admitted<'r>, DenyReason> {
    let (raw, from_query) = find(t, req).ok_or(DenyReason::TokenMissing)?;
    let token = pct::token_as_sent(raw).ok_or(DenyReason::TokenMalformed)?;
    // The ACL is matched against the path the cache will serve (dot-segments removed,
    // escapes normalised), so `/live/../vod/x` is judged as `/vod/x`.
    let path = normal_path(req.path()).ok_or(DenyReason::TokenAcl)?;
    let at = Presented { path: &path, client: req.peer().ip(), now };
    let valid = t.verifier.verify(&token, at)?;
    // A rewritten playlist is served whole: its ranges would be of another body.
    let drop_range = from_query && t.propagate == Propagate::Query && is_playlist_path(req.path());
    let clean = req.without_credential(&t.param, drop_range).ok_or(DenyReason::TokenMalformed)?;
    let follow = Follow { from_query: from_query.then_some(raw), has_acl: valid.has_acl };
    Ok(Admitted { clean, follow, valid })
}

/// `path` normalised as the cache key's is; borrowed when it already is.
fn normal_path(path: &str) -> Option<Cow<'_, str>> {
    let plain = path.bytes().all(|b| b.is_ascii_alphanumeric() || b"/-_.~".contains(&b))
        && !path.contains("//")
        && !path.split('/').any(|s| s == "." || s == "..");
    if plain && path.starts_with('/') {
        return Some(Cow::Borrowed(path));
    }
    crate::key::origin_target(path.as_bytes()).ok().map(Cow::Owned)
}

/// Whether `v` can be a cookie value as it is (RFC 6265 4.1.1 `cookie-octet`).
fn cookie_safe(v: &str) -> bool {
    !v.is_empty()
        && v.bytes()
            .all(|b| matches!(b, 0x21 | 0x23..=0x2b | 0x2d..=0x3a | 0x3c..=0x5b | 0x5d..=0x7e))
}

impl Follow<'_> {
    /// The answer to `orig` (the request as the viewer sent it) as this viewer gets it:
    /// with `propagate = "query"`, an HLS playlist's URIs carry the token; with
    /// `"cookie"`, the token comes back as a cookie scoped to its ACL's path.
    pub(in crate::path) async fn apply(
        self,
        t: &SiteToken,
        orig: &Request,
        resp: Response,
    ) -> Response {
        let Some(raw) = self.from_query else { return resp };
        match t.propagate {
            Propagate::Off => resp,
            Propagate::Query => {
                if !matches!(orig.method(), Method::Get | Method::Head) {
                    return resp;
                }
                tokenised::playlist(resp, orig, &t.param, raw).await
            }
            Propagate::Cookie => {
                let Some(token) = pct::token_as_sent(raw) else { return resp };
                let path = if self.has_acl { token::cookie_path(&token) } else { None };
                let (Some(path), true) = (path, cookie_safe(raw)) else { return resp };
                let secure = orig.version() == reel_http::Version::Http3
                    || t.tls_ports.contains(&orig.local().port());
                let attrs = if secure { "; HttpOnly; Secure; SameSite=None" } else { "; HttpOnly" };
                let v = format!("{}={raw}; Path={path}{attrs}", t.param);
                resp.header("set-cookie", v)
            }
        }
    }
}

/// The address and country rules for the client of `req`; `Some`: the refusal to send.
pub(in crate::path) fn refuse_by_address(
    access: &SiteAccess,
    req: &Request,
    m: &WorkerMetrics,
) -> Option<Response> {
    access.check_addr(req.peer().ip()).err().map(|r| refusal(r, m))
}

/// The rate limit for the client of `req`, or for `token` (the identity of a token the
/// request carries); `Some`: the refusal to send.
pub(in crate::path) fn refuse_by_rate(
    access: &SiteAccess,
    req: &Request,
    token: Option<&[u8]>,
    m: &WorkerMetrics,
) -> Option<Response> {
    access.check_rate(req.peer().ip(), token).err().map(|r| refusal(r, m))
}

/// `Retry-After` values that need no formatting.
const SECONDS: [&str; 10] = ["0", "1", "2", "3", "4", "5", "6", "7", "8", "9"];

/// The answer to a refused request, counted.
fn refusal(r: Refusal, m: &WorkerMetrics) -> Response {
    m.record_denied(r.reason);
    let resp = Response::error(r.status).tagged(Tag::denied(r.reason));
    match r.retry_after.map(retry_after_secs) {
        None => resp,
        Some(s) => {
            let value = match SECONDS.get(s as usize) {
                Some(v) => Bytes::from_static(v.as_bytes()),
                None => Bytes::from(s.to_string()),
            };
            resp.header("retry-after", value)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use reel_http::{HeadStatus, Limits};

    fn req(head: &str) -> Request {
        let addr = "192.0.2.1:5000".parse().unwrap();
        let mut r = Request::new(addr, addr);
        let parsed = r.parse_head(head.as_bytes(), &Limits::default());
        assert!(matches!(parsed, Ok(HeadStatus::Complete(_))), "{parsed:?}");
        r
    }

    fn site() -> SiteToken {
        let t = reel_config::TokenConfig {
            format: reel_config::TokenFormat::Edgeauth,
            param: "hdnts".into(),
            keys: vec!["0a1b2c3d4e5f60718293a4b5c6d7e8f9".into()],
            keys_env: None,
            salt: None,
            leeway: reel_config::Duration::from_secs(5),
            escape_early: false,
            propagate: Propagate::Query,
        };
        SiteToken::new(&t, vec![8443])
    }

    #[test]
    fn the_query_wins_over_the_cookie_and_names_match_whole() {
        let t = site();
        let r = req("GET /a.ts?x=1&hdnts=q HTTP/1.1\r\nHost: h\r\nCookie: hdnts=c\r\n\r\n");
        assert_eq!(find(&t, &r), Some(("q", true)));
        let r = req("GET /a.ts?hdntsx=1 HTTP/1.1\r\nHost: h\r\nCookie: a=1;hdnts=c ; b=2\r\n\r\n");
        assert_eq!(find(&t, &r), Some(("c", false)));
        let r = req("GET /a.ts HTTP/1.1\r\nHost: h\r\nCookie: xhdnts=c\r\n\r\n");
        assert_eq!(find(&t, &r), None);
    }

    #[test]
    fn refusals_name_their_reason_and_the_acl_sees_the_normalised_path() {
        let t = site();
        let at = |target: &str| {
            let r = req(&format!("GET {target} HTTP/1.1\r\nHost: h\r\n\r\n"));
            check_token(&t, &r, 1_700_001_000).err()
        };
        // EdgeAuth(key=..., start_time=1700000000, end_time=1700003600).generate_acl_token('/live/*')
        let tok = "st=1700000000~exp=1700003600~acl=/live/*~hmac=64e0871df6cc8343d0a6613f4f3d7e7f38aa5c4528a6d7f84a502829723d7d4c";
        assert_eq!(at("/live/a.ts"), Some(DenyReason::TokenMissing));
        assert_eq!(at("/live/a.ts?hdnts=%zz"), Some(DenyReason::TokenMalformed));
        assert_eq!(at(&format!("/live/a.ts?hdnts={tok}")), None);
        assert_eq!(at(&format!("/live/../vod/a.ts?hdnts={tok}")), Some(DenyReason::TokenAcl));
        assert_eq!(at(&format!("/live/%2e%2e/vod/a.ts?hdnts={tok}")), Some(DenyReason::TokenAcl));
        let r = req(&format!(
            "GET /live/a.m3u8?hdnts={tok}&_HLS_msn=1 HTTP/1.1\r\nHost: h\r\nRange: bytes=0-9\r\n\r\n"
        ));
        let a = check_token(&t, &r, 1_700_001_000).unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(a.clean.target(), "/live/a.m3u8?_HLS_msn=1");
        assert_eq!(a.clean.header("range"), None, "a playlist to rewrite is served whole");
    }

    #[test]
    fn cookie_values_and_playlist_paths() {
        assert!(cookie_safe("exp=1~acl=/live/*!/x/*~hmac=ab"));
        assert!(
            !cookie_safe("a;b") && !cookie_safe("a b") && !cookie_safe("a,b") && !cookie_safe("")
        );
        assert!(
            is_playlist_path("/live/index.M3U8")
                && !is_playlist_path("m3u8")
                && !is_playlist_path("/a.ts")
        );
    }
}
