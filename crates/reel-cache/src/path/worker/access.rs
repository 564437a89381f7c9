//! A site's access checks, run by the conductor once the site is known and before the
//! method dispatch, so a refusal never reaches the store or the origin: the signed viewer
//! token of `[site.token]` ([`check_token`]), and what follows an admitted request's
//! answer so the token reaches the player's next requests ([`follow`]).
//!
//! An admitted request goes on without its token: the cache path is handed a copy with
//! the query parameter and the cookie removed, so the token is in no cache key and never
//! reaches the origin, and one stored copy serves every viewer whatever their token.

use std::borrow::Cow;

use reel_access::DenyReason;
use reel_access::token::{self, Presented, Valid, pct};
use reel_http::{Method, Request, Response};

use super::settings::{Propagate, SiteToken};
use crate::path::answer::tag::Tag;
use crate::path::answer::tokenised;

/// A request whose token verified.
pub(in crate::path) struct Admitted<'r> {
    /// The request without its token: what the cache keys on and the origin is sent.
    pub clean: Request,
    /// What to do to the answer for this viewer (propagation).
    pub follow: Follow<'r>,
    /// The verified token (its identity keys per-token limits).
    #[allow(dead_code)]
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

/// Whether a path names an HLS playlist by its extension.
pub(in crate::path) fn is_playlist_path(path: &str) -> bool {
    path.len() >= 5 && path.as_bytes()[path.len() - 5..].eq_ignore_ascii_case(b".m3u8")
}

/// Whether `v` can be a cookie value as it is (RFC 6265 4.1.1 `cookie-octet`).
fn cookie_safe(v: &str) -> bool {
    !v.is_empty() && v.bytes().all(|b| matches!(b, 0x21 | 0x23..=0x2b | 0x2d..=0x3a | 0x3c..=0x5b | 0x5d..=0x7e))
}

impl Follow<'_> {
    /// The answer to `orig` (the request as the viewer sent it) as this viewer gets it:
    /// with `propagate = "query"`, an HLS playlist's URIs carry the token; with
    /// `"cookie"`, the token comes back as a cookie scoped to its ACL's path.
    pub(in crate::path) async fn apply(self, t: &SiteToken, orig: &Request, resp: Response) -> Response {
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
