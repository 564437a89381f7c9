//! The serve / revalidate decision for a stored response (RFC 9111 4.2, 4.2.4, 4.3, 5.2.1;
//! RFC 5861), and whether stale-if-error lets it stand in for a failed fetch.
//!
//! Read from [`StoredMeta`] (its lifetime and current age, computed by
//! [`super::freshness`]) and the request's directives, as pingora's `CacheMeta::is_fresh`.
//! Nothing here reads a clock: the caller passes `now` (unix seconds).

use super::cache_control::{MaxStale, RequestCacheControl};
use super::meta::StoredMeta;

/// What to do with a stored response for a request that selected it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Fresh enough for this request: serve it (RFC 9111 4.2).
    Fresh,
    /// Stale, but the request's `max-stale` accepts it (5.2.1.2): serve it.
    StaleServable,
    /// Stale within `stale-while-revalidate` (RFC 5861 3): serve it and revalidate in the
    /// background.
    StaleWhileRevalidate,
    /// Must be validated with the origin before use (4.3; 4.2.4; 5.2.1.4; 5.2.2.4).
    MustRevalidate,
    /// Would need the origin but the request said `only-if-cached`: answer 504
    /// (5.2.1.7).
    GatewayTimeout,
}

/// Decides how a stored response may satisfy a request (RFC 9111 4.2, 4.2.4, 5.2.1, 5.2.2;
/// RFC 5861 3).
///
/// * request `no-cache`, response unqualified `no-cache` or a soft-purged entry: revalidate;
/// * fresh, `age <= max-age` (request) and `lifetime - age >= min-fresh`: serve;
/// * a response that is fresh but too old for the request's `max-age` / `min-fresh` is
///   revalidated (`max-stale` relaxes only staleness);
/// * stale and `must-revalidate` / `proxy-revalidate` / `s-maxage`: revalidate, no
///   stale serving of any kind (4.2.4);
/// * stale within request `max-stale`: serve;
/// * stale within response `stale-while-revalidate`: serve and refresh;
/// * otherwise revalidate.
///
/// Whenever the result would require the origin and the request has `only-if-cached`,
/// the result is [`Decision::GatewayTimeout`].
pub fn decide(req_cc: &RequestCacheControl, stored: &StoredMeta, now: u64) -> Decision {
    let d = decide_inner(req_cc, stored, now);
    if d == Decision::MustRevalidate && req_cc.only_if_cached {
        Decision::GatewayTimeout
    } else {
        d
    }
}

fn decide_inner(req_cc: &RequestCacheControl, stored: &StoredMeta, now: u64) -> Decision {
    let cc = stored.cache_control();
    if req_cc.no_cache || cc.no_cache.is_all() || stored.invalidated() {
        return Decision::MustRevalidate;
    }
    let age = stored.current_age(now).as_secs();
    let lifetime = stored.lifetime().as_secs();
    let fresh = lifetime > age;
    if fresh {
        let age_ok = req_cc.max_age.is_none_or(|m| age <= m);
        let fresh_ok = req_cc.min_fresh.is_none_or(|m| lifetime - age >= m);
        return if age_ok && fresh_ok { Decision::Fresh } else { Decision::MustRevalidate };
    }
    if cc.forbids_stale() {
        return Decision::MustRevalidate;
    }
    let staleness = age - lifetime;
    let max_age_ok = req_cc.max_age.is_none_or(|m| age <= m);
    match req_cc.max_stale {
        Some(MaxStale::Any) => return Decision::StaleServable,
        Some(MaxStale::Secs(s)) if staleness <= s => return Decision::StaleServable,
        _ => {}
    }
    // A request max-age or min-fresh asks for a response at least this fresh; serving stale
    // in the background-refresh window would ignore that.
    if max_age_ok
        && req_cc.min_fresh.is_none()
        && cc.stale_while_revalidate.is_some_and(|w| staleness <= w)
    {
        return Decision::StaleWhileRevalidate;
    }
    Decision::MustRevalidate
}

/// Whether a stored response may be served because revalidating or refetching it failed
/// (origin unreachable or answered 500, 502, 503 or 504): RFC 5861 4, bounded by the
/// response's or the request's `stale-if-error` window (the larger of the two), and never
/// when the response forbids stale serving (RFC 9111 4.2.4). A fresh response is always
/// acceptable.
pub fn stale_if_error_ok(req_cc: &RequestCacheControl, stored: &StoredMeta, now: u64) -> bool {
    let cc = stored.cache_control();
    let age = stored.current_age(now).as_secs();
    let lifetime = stored.lifetime().as_secs();
    if lifetime > age && !stored.invalidated() && !cc.no_cache.is_all() {
        return true;
    }
    if cc.forbids_stale() {
        return false;
    }
    let window = match (cc.stale_if_error, req_cc.stale_if_error) {
        (None, None) => return false,
        (a, b) => a.unwrap_or(0).max(b.unwrap_or(0)),
    };
    age.saturating_sub(lifetime) <= window
}

/// Whether an origin status counts as an error for `stale-if-error` (RFC 5861 4).
pub fn is_error_status(status: u16) -> bool {
    matches!(status, 500 | 502 | 503 | 504)
}
