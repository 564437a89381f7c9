//! A site's access rules at the door: the checks `WorkerCache::handle` runs after finding
//! the site and before anything else (address and country rules first, then the token,
//! then the rate), and the answers of a refusal: a small fixed body, counted by reason
//! (`reel_denied_total{reason}`) and tagged with it for the access log. A refused request
//! is never looked up, fetched or forwarded.

use bytes::Bytes;
use reel_access::{Refusal, SiteAccess, retry_after_secs};
use reel_http::{Request, Response};
use reel_ops::metrics::WorkerMetrics;

use crate::path::answer::tag::Tag;

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
