//! Storability (RFC 9111 3), freshness lifetime (4.2.1, 4.2.2) and age (4.2.3): the
//! arithmetic a stored response's metadata is computed with. What to do with a stored
//! response for a request (serve, revalidate, stale-if-error) is [`super::decision`]'s.
//!
//! Time points are unix seconds (`u64`), the resolution of HTTP-dates; lifetimes and ages are
//! returned as [`Duration`]. Nothing here reads a clock: the caller passes `now`.

use std::time::Duration;

use super::cache_control::{RequestCacheControl, ResponseCacheControl, targeted};
use super::headers::{HeaderLookup, parse_http_date};
use super::rules::TtlRule;
use super::vary::Vary;

/// Response fields that set a cookie, lowercase: `Set-Cookie` (RFC 6265) and the obsolete
/// `Set-Cookie2` (RFC 2965), which some clients still honour. Both are handled alike: they
/// decide storability ([`PolicyConfig::store_set_cookie`]) and are never stored (`meta`).
pub const SET_COOKIE_FIELDS: [&str; 2] = ["set-cookie", "set-cookie2"];

/// Policy knobs that are not in the messages themselves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyConfig {
    /// Allow heuristic freshness (RFC 9111 4.2.2): 10% of `Date - Last-Modified`.
    pub heuristic: bool,
    /// Upper bound of a heuristic lifetime.
    pub heuristic_max: Duration,
    /// Store responses that have neither explicit freshness nor a validator (they can only
    /// be refetched in full once stale).
    pub store_without_validators: bool,
    /// Lifetime for 404 and 410 responses that carry no explicit freshness (negative
    /// caching). `None` leaves them to the heuristic / path rules.
    pub negative_ttl: Option<Duration>,
    /// RFC 9213 targeted cache-control fields this cache obeys, lowercase, highest
    /// precedence first (our own field, then `cdn-cache-control`).
    pub targeted: Vec<String>,
    /// Store responses that carry `Set-Cookie` or `Set-Cookie2` ([`SET_COOKIE_FIELDS`];
    /// the fields themselves are never stored or replayed, see `meta`). Off by default:
    /// such responses are usually personal.
    pub store_set_cookie: bool,
}

impl Default for PolicyConfig {
    fn default() -> Self {
        Self {
            heuristic: true,
            heuristic_max: Duration::from_secs(86_400),
            store_without_validators: false,
            negative_ttl: None,
            targeted: vec!["reel-cache-control".to_string(), "cdn-cache-control".to_string()],
            store_set_cookie: false,
        }
    }
}

/// Why a response may not be stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotStorable {
    /// Only GET responses are stored (RFC 9111 3: the method must be understood and
    /// cacheable; HEAD is served from stored GET responses, not stored itself).
    Method,
    /// Non-final, 304, or 206 (we store whole representations only), or a status that is
    /// not heuristically cacheable and has no explicit freshness (RFC 9111 3, 4.2.2).
    Status,
    /// `no-store` in the request (RFC 9111 5.2.1.5).
    RequestNoStore,
    /// `no-store` in the response (RFC 9111 5.2.2.5).
    ResponseNoStore,
    /// Unqualified `private`: we are a shared cache (RFC 9111 5.2.2.7).
    Private,
    /// The request had `Authorization` and the response did not allow shared caching
    /// with `public`, `s-maxage` or `must-revalidate` (RFC 9111 3.5).
    Authorization,
    /// `Vary: *` can never be served from cache (RFC 9111 4.1), so it is not stored.
    VaryStar,
    /// No explicit freshness and no validator, and `store_without_validators` is off.
    NoFreshnessOrValidator,
    /// The response sets a cookie (`Set-Cookie`, `Set-Cookie2`) and `store_set_cookie` is
    /// off.
    SetCookie,
}

/// The result of [`storable`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Storability {
    /// The response may be stored.
    Store,
    /// The response must not be stored.
    NotStorable(NotStorable),
}

impl Storability {
    /// Whether the response may be stored.
    pub fn is_store(self) -> bool {
        self == Storability::Store
    }
}

/// Status codes that are heuristically cacheable (RFC 9110 15.1), 206 excluded because the
/// store keeps only complete representations.
pub fn heuristically_cacheable(status: u16) -> bool {
    matches!(status, 200 | 203 | 204 | 300 | 301 | 308 | 404 | 405 | 410 | 414 | 501)
}

/// Whether the response carries `Expires` (any value, valid or not: RFC 9111 5.3 says an
/// invalid Expires means "already expired", which is still explicit freshness).
fn has_expires<H: HeaderLookup + ?Sized>(resp: &H) -> bool {
    resp.has("expires")
}

fn has_validator<H: HeaderLookup + ?Sized>(resp: &H) -> bool {
    resp.has("etag") || resp.has("last-modified")
}

fn is_negative(status: u16) -> bool {
    status == 404 || status == 410
}

/// Whether a shared cache may store this response (RFC 9111 3, 3.5), plus our configured
/// requirement of explicit freshness or a validator.
///
/// The response's directives are those of its targeted field when one applies (RFC 9213:
/// then `Cache-Control` and `Expires` are ignored), else of `Cache-Control`.
/// `rule` is the per-path [`TtlRule`] the cache path matched for this request, if any: a
/// TTL rule counts as freshness information for this requirement.
pub fn storable<Q: HeaderLookup + ?Sized, R: HeaderLookup + ?Sized>(
    method: &[u8],
    status: u16,
    req_cc: &RequestCacheControl,
    req: &Q,
    resp: &R,
    cfg: &PolicyConfig,
    rule: Option<&TtlRule>,
) -> Storability {
    use NotStorable as N;
    let no = Storability::NotStorable;
    let (resp_cc, expires_counts) = match targeted(resp, &cfg.targeted) {
        Some((_, cc)) => (cc, false),
        None => (ResponseCacheControl::parse(resp), true),
    };
    if method != b"GET" {
        return no(N::Method);
    }
    if !(200..=599).contains(&status) || status == 206 || status == 304 {
        return no(N::Status);
    }
    if req_cc.no_store {
        return no(N::RequestNoStore);
    }
    if resp_cc.no_store {
        return no(N::ResponseNoStore);
    }
    if resp_cc.private.is_all() {
        return no(N::Private);
    }
    if req.has("authorization")
        && !(resp_cc.public || resp_cc.s_maxage.is_some() || resp_cc.must_revalidate)
    {
        return no(N::Authorization);
    }
    if Vary::parse(resp) == Vary::Star {
        return no(N::VaryStar);
    }
    if !cfg.store_set_cookie && SET_COOKIE_FIELDS.iter().any(|f| resp.has(f)) {
        return no(N::SetCookie);
    }
    let explicit = resp_cc.has_explicit_lifetime() || (expires_counts && has_expires(resp));
    // RFC 9111 3: storable only with explicit freshness, `public`, or a heuristically
    // cacheable status.
    if !explicit && !resp_cc.public && !heuristically_cacheable(status) {
        return no(N::Status);
    }
    let configured = rule.is_some() || (is_negative(status) && cfg.negative_ttl.is_some());
    if !explicit && !configured && !has_validator(resp) && !cfg.store_without_validators {
        return no(N::NoFreshnessOrValidator);
    }
    Storability::Store
}

/// The freshness lifetime of a response (RFC 9111 4.2.1), in priority order:
///
/// 1. a path rule with `override_origin`, for non-negative statuses (a long segment TTL
///    must not pin a 404);
/// 2. `s-maxage`, then `max-age` (invalid values were parsed as 0: stale);
/// 3. `Expires - Date` (invalid Expires: 0, RFC 9111 5.3); Date defaults to
///    `response_time` (RFC 9110 6.6.1); not when a targeted field applies (RFC 9213 2.1);
/// 4. for 404/410, `negative_ttl` if configured;
/// 5. a matching path rule's TTL;
/// 6. heuristic (4.2.2), if enabled and the response allows it: 10% of
///    `Date - Last-Modified`, capped at `heuristic_max`;
/// 7. zero.
pub fn freshness_lifetime<H: HeaderLookup + ?Sized>(
    status: u16,
    cc: &ResponseCacheControl,
    resp: &H,
    response_time: u64,
    cfg: &PolicyConfig,
    rule: Option<&TtlRule>,
) -> Duration {
    if let Some(r) = rule.filter(|r| r.override_origin && !is_negative(status)) {
        return r.ttl;
    }
    if let Some(s) = cc.s_maxage {
        return Duration::from_secs(s);
    }
    if let Some(s) = cc.max_age {
        return Duration::from_secs(s);
    }
    let parse = |d| parse_http_date(d, response_time);
    let date = resp.get_first("date").and_then(parse).unwrap_or(response_time);
    let expires = resp.get_first("expires").filter(|_| targeted(resp, &cfg.targeted).is_none());
    if let Some(expires) = expires {
        let secs = parse(expires).map_or(0, |e| e.saturating_sub(date));
        return Duration::from_secs(secs);
    }
    if is_negative(status)
        && let Some(ttl) = cfg.negative_ttl
    {
        return ttl;
    }
    if let Some(r) = rule {
        return r.ttl;
    }
    if cfg.heuristic
        && (heuristically_cacheable(status) || cc.public)
        && let Some(lm) = resp.get_first("last-modified").and_then(parse)
    {
        let secs = date.saturating_sub(lm) / 10;
        return Duration::from_secs(secs).min(cfg.heuristic_max);
    }
    Duration::ZERO
}

/// The current age of a stored response (RFC 9111 4.2.3):
///
/// ```text
/// apparent_age          = max(0, response_time - date_value)
/// response_delay        = response_time - request_time
/// corrected_age_value   = age_value + response_delay
/// corrected_initial_age = max(apparent_age, corrected_age_value)
/// resident_time         = now - response_time
/// current_age           = corrected_initial_age + resident_time
/// ```
///
/// All arguments are unix seconds except `age_value` (the `Age` header, seconds). Clock
/// skew that would make a term negative clamps it to zero.
pub fn current_age(
    date_value: u64,
    age_value: u64,
    request_time: u64,
    response_time: u64,
    now: u64,
) -> Duration {
    let apparent_age = response_time.saturating_sub(date_value);
    let response_delay = response_time.saturating_sub(request_time);
    let corrected_age_value = age_value.saturating_add(response_delay);
    let corrected_initial_age = apparent_age.max(corrected_age_value);
    let resident_time = now.saturating_sub(response_time);
    Duration::from_secs(corrected_initial_age.saturating_add(resident_time))
}
