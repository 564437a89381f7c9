//! Freshness and validation end to end: Age, Expires with Date, heuristic freshness, path
//! TTL rules, must-revalidate, misses carrying Range or conditionals, HEAD on a miss.

use std::time::{Duration, SystemTime};

use reel_cache::policy::rules::TtlRule;

use crate::client::{body_of, get, request};
use crate::origin::Route;

fn date(offset_secs: i64) -> String {
    let now = SystemTime::now();
    let t = if offset_secs >= 0 {
        now + Duration::from_secs(offset_secs as u64)
    } else {
        now - Duration::from_secs((-offset_secs) as u64)
    };
    httpdate::fmt_http_date(t)
}

#[test]
fn age_from_upstream_counts_toward_freshness() {
    let (o, s) = crate::setup();
    o.route("/age", Route::ok("a", &[("cache-control", "max-age=600"), ("age", "100")]));
    get(&s, "/age", &[]);
    let r = get(&s, "/age", &[]);
    let age: u64 = r.header("age").and_then(|v| v.parse().ok()).expect("age on a hit");
    assert!((100..200).contains(&age), "age {age}");
    // Already older than its lifetime when it arrived: stale, so fetched again.
    o.route("/old", Route::ok("o", &[("cache-control", "max-age=600"), ("age", "700")]));
    get(&s, "/old", &[]);
    get(&s, "/old", &[]);
    assert_eq!(o.count("/old"), 2);
}

#[test]
fn expires_is_relative_to_the_origin_date() {
    let (o, s) = crate::setup();
    // The lifetime is Expires - Date (RFC 9111 4.2.1), the age starts from Date (4.2.3).
    let (d, e) = (date(-10), date(1800));
    o.route("/exp", Route::ok("e", &[("date", d.as_str()), ("expires", e.as_str())]));
    get(&s, "/exp", &[]);
    let r = get(&s, "/exp", &[]);
    assert!(r.cache_status().contains("hit"), "{}", r.cache_status());
    let age: u64 = r.header("age").and_then(|v| v.parse().ok()).expect("age");
    assert!((10..100).contains(&age), "age counts from Date: {age}");
    // An Expires before Date: stale at once, and (no validator) fetched again.
    let (d, e) = (date(0), date(-60));
    o.route("/past", Route::ok("p", &[("date", d.as_str()), ("expires", e.as_str())]));
    get(&s, "/past", &[]);
    get(&s, "/past", &[]);
    assert_eq!((o.count("/exp"), o.count("/past")), (1, 2));
}

#[test]
fn heuristic_freshness_only_where_enabled() {
    let lm = date(-100 * 86_400);
    for heuristic in [true, false] {
        let (o, s) = crate::setup_with(|opts| opts.policy.heuristic = heuristic);
        o.route("/lm", Route::ok("l", &[("last-modified", lm.as_str())]));
        get(&s, "/lm", &[]);
        let r = get(&s, "/lm", &[]);
        if heuristic {
            assert!(r.cache_status().contains("hit"), "{}", r.cache_status());
            assert_eq!(o.count("/lm"), 1);
        } else {
            // Stored for its validator, but with no lifetime: revalidated.
            assert_eq!(o.count("/lm"), 2);
            assert_eq!(o.seen("/lm")[1].header("if-modified-since"), Some(lm.as_str()));
        }
    }
}

#[test]
fn path_rules_give_live_video_its_own_ttl() {
    let (o, s) = crate::setup_with(|opts| {
        opts.rules = vec![
            ("*.m3u8".into(), TtlRule { ttl: Duration::ZERO, override_origin: true }),
            ("*.ts".into(), TtlRule { ttl: Duration::from_secs(600), override_origin: false }),
        ];
    });
    // The segment has no freshness of its own: the rule makes it storable and fresh.
    o.route("/live/1.ts", Route::ok(body_of(1000, 1), &[]));
    // The playlist says an hour; the override says zero.
    o.route(
        "/live/p.m3u8",
        Route::ok("#EXTM3U\n", &[("cache-control", "max-age=3600"), ("etag", "\"pl\"")]),
    );
    for _ in 0..3 {
        get(&s, "/live/1.ts", &[]);
        get(&s, "/live/p.m3u8", &[]);
    }
    assert_eq!(o.count("/live/1.ts"), 1);
    assert_eq!(o.count("/live/p.m3u8"), 3);
}

#[test]
fn must_revalidate_forbids_stale_if_error() {
    let (o, s) = crate::setup();
    o.route(
        "/mr",
        Route::ok("m", &[("cache-control", "max-age=0, must-revalidate, stale-if-error=600")]),
    );
    get(&s, "/mr", &[]);
    o.route("/mr", Route::status(503, "busy", &[]));
    let r = get(&s, "/mr", &[]);
    assert_eq!(r.status, 503);
}

#[test]
fn a_negative_410_is_cached_like_a_404() {
    let (o, s) = crate::setup_with(|opts| opts.policy.negative_ttl = Some(Duration::from_secs(60)));
    o.route("/gone", Route::status(410, "gone", &[]));
    for _ in 0..3 {
        assert_eq!(get(&s, "/gone", &[]).status, 410);
    }
    assert_eq!(o.count("/gone"), 1);
}

#[test]
fn a_miss_with_range_or_conditionals_fetches_and_stores_the_whole_object() {
    let (o, s) = crate::setup();
    let body = body_of(50_000, 6);
    o.route(
        "/mr.ts",
        Route::ok(body.clone(), &[("cache-control", "max-age=600"), ("etag", "\"w\"")]),
    );
    let r = get(&s, "/mr.ts", &[("Range", "bytes=0-99"), ("If-None-Match", "\"x\"")]);
    assert_eq!(r.status, 206);
    assert_eq!(r.body, &body[..100]);
    let seen = &o.seen("/mr.ts")[0];
    assert!(seen.header("range").is_none() && seen.header("if-none-match").is_none());
    assert_eq!(get(&s, "/mr.ts", &[]).body, body);
    assert_eq!(o.count("/mr.ts"), 1);
    // A conditional on a cold key: the origin is asked unconditionally, the client gets 304.
    o.route("/cold", Route::ok("c", &[("cache-control", "max-age=600"), ("etag", "\"c\"")]));
    let r = get(&s, "/cold", &[("If-None-Match", "\"c\"")]);
    assert_eq!(r.status, 304);
    assert!(o.seen("/cold")[0].header("if-none-match").is_none());
    assert_eq!(get(&s, "/cold", &[]).body, b"c");
    assert_eq!(o.count("/cold"), 1);
}

#[test]
fn head_on_a_miss_stores_the_get_and_reports_its_length() {
    let (o, s) = crate::setup();
    o.route("/hm", Route::ok(body_of(7777, 2), &[("cache-control", "max-age=600")]));
    let r = request(s.addr, "HEAD", "/hm", &[]);
    s.settle();
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-length"), Some("7777"));
    assert_eq!(get(&s, "/hm", &[]).body.len(), 7777);
    assert_eq!(o.count("/hm"), 1);
}

#[test]
fn an_expires_in_none_of_the_three_date_formats_is_already_expired() {
    let (o, s) = crate::setup();
    // Invalid HTTP-dates (RFC 9110 5.6.7), read as "already expired" (RFC 9111 5.3): a short
    // weekday with dashes and a four-digit year, and a one-digit hour.
    for (path, bad) in
        [("/dashes", "Thu, 18-Aug-2050 02:01:18 GMT"), ("/hour", "Thu, 01 Jan 2099 2:00:00 GMT")]
    {
        o.route(path, Route::ok("x", &[("expires", bad), ("etag", "\"x\"")]));
        get(&s, path, &[]);
        let r = get(&s, path, &[]);
        assert!(!r.cache_status().contains("hit"), "{bad}: {}", r.cache_status());
        assert_eq!(o.count(path), 2, "{bad}: stale at once");
        assert_eq!(o.seen(path)[1].header("if-none-match"), Some("\"x\""), "stored, revalidated");
    }
    // The same instants in each of the three formats are in the future: fresh.
    for (path, good) in [
        ("/imf", "Thu, 18 Aug 2050 02:01:18 GMT"),
        ("/rfc850", "Thursday, 18-Aug-50 02:01:18 GMT"),
        ("/asctime", "Thu Aug 18 02:01:18 2050"),
        ("/imf-hour", "Thu, 01 Jan 2099 02:00:00 GMT"),
    ] {
        o.route(path, Route::ok("x", &[("expires", good), ("etag", "\"x\"")]));
        get(&s, path, &[]);
        let r = get(&s, path, &[]);
        assert!(r.cache_status().contains("hit"), "{good}: {}", r.cache_status());
        assert_eq!(o.count(path), 1, "{good}");
    }
}
