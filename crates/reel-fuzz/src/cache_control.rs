//! `Cache-Control` of responses and requests (RFC 9111 5.2), the targeted fields
//! `CDN-Cache-Control` and reel's own (RFC 9213, Structured Fields) and the freshness
//! lifetime they give with `Expires`, `Date`, `Age` and `Last-Modified`.
//!
//! Input: the response's fields, one `name: value` a line.

use std::time::Duration;

use reel_cache::policy::cache_control::{RequestCacheControl, ResponseCacheControl, targeted};
use reel_cache::policy::freshness::{PolicyConfig, freshness_lifetime, storable};
use reel_cache::policy::headers::parse_age;

use crate::fields;

const NOW: u64 = 1_795_392_000;

/// Reads the caching fields of the head `data` describes.
pub fn run(data: &[u8]) {
    let headers = fields::split(data);
    let cfg =
        PolicyConfig { negative_ttl: Some(Duration::from_secs(5)), ..PolicyConfig::default() };
    let governing = ResponseCacheControl::for_cache(&headers, &cfg.targeted);
    let plain = ResponseCacheControl::parse(&headers);
    if targeted(&headers, &cfg.targeted).is_none() {
        assert_eq!(governing, plain, "without a targeted field Cache-Control governs");
    }
    let _ = (governing.has_explicit_lifetime(), governing.forbids_stale(), parse_age(&headers));
    let req = RequestCacheControl::parse(&headers);
    for status in [200, 206, 404] {
        let _ = storable(b"GET", status, &req, &headers, &headers, &cfg, None);
        let _ = freshness_lifetime(status, &governing, &headers, NOW, &cfg, None);
    }
}
