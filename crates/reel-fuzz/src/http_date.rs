//! HTTP-date parsing (`reel_cache::policy::headers::parse_http_date`: IMF-fixdate,
//! RFC 850 and asctime, RFC 9110 5.6.7) and its round trip through the formatter the
//! cache writes dates with; delta-seconds alongside.

use reel_cache::policy::headers::{format_http_date, parse_delta_seconds, parse_http_date};

/// 2026-11-23, and the clocks RFC 850's century rule turns on.
const CLOCKS: [u64; 3] = [1_795_392_000, 0, 4_102_444_800];

/// Parses `data` as a date field's value.
pub fn run(data: &[u8]) {
    let _ = parse_delta_seconds(data);
    for now in CLOCKS {
        if let Some(t) = parse_http_date(data, now) {
            let again = format_http_date(t);
            assert_eq!(parse_http_date(again.as_bytes(), now), Some(t), "{again}");
        }
    }
}
