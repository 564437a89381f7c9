//! Storability, freshness, age, the serve decision, stale-if-error, stored metadata and
//! 304 freshening, driven through the public API as the cache path uses it.

use std::time::Duration;

use reel_cache::policy::cache_control::{RequestCacheControl, ResponseCacheControl};
use reel_cache::policy::conditional::{Outcome, Validators, evaluate, revalidation_headers};
use reel_cache::policy::decision::{Decision, decide, is_error_status, stale_if_error_ok};
use reel_cache::policy::freshness::{
    NotStorable, PolicyConfig, Storability, current_age, freshness_lifetime, storable,
};
use reel_cache::policy::headers::{HeaderLookup, format_http_date};
use reel_cache::policy::meta::{MetaError, ResponseTimes, StoredMeta};
use reel_cache::policy::rules::{TtlRule, TtlRules};
use reel_cache::policy::vary::{Vary, VaryKey};

const T0: u64 = 1_700_000_000;

type Hdrs = Vec<(String, String)>;

fn h(pairs: &[(&str, &str)]) -> Hdrs {
    pairs.iter().map(|(n, v)| (n.to_string(), v.to_string())).collect()
}

fn date(t: u64) -> String {
    format_http_date(t)
}

fn store_check(
    method: &str,
    status: u16,
    req: &Hdrs,
    resp: &Hdrs,
    cfg: &PolicyConfig,
) -> Storability {
    storable(method.as_bytes(), status, &RequestCacheControl::parse(req), req, resp, cfg, None)
}

#[test]
fn storability_table() {
    use NotStorable::*;
    let cfg = PolicyConfig::default();
    let neg =
        PolicyConfig { negative_ttl: Some(Duration::from_secs(5)), ..PolicyConfig::default() };
    let lax = PolicyConfig { store_without_validators: true, ..PolicyConfig::default() };
    let s = Storability::Store;
    let n = Storability::NotStorable;
    let none = h(&[]);
    let auth = h(&[("Authorization", "Bearer x")]);
    let req_no_store = h(&[("Cache-Control", "no-store")]);
    let cases: Vec<(&str, u16, &Hdrs, Hdrs, &PolicyConfig, Storability)> = vec![
        ("GET", 200, &none, h(&[("Cache-Control", "max-age=60")]), &cfg, s),
        ("GET", 200, &none, h(&[("Expires", &date(T0))]), &cfg, s),
        ("GET", 200, &none, h(&[("Expires", "0")]), &cfg, s),
        ("GET", 200, &none, h(&[("ETag", "\"a\"")]), &cfg, s),
        ("GET", 200, &none, h(&[("Last-Modified", &date(T0))]), &cfg, s),
        ("GET", 200, &none, h(&[]), &cfg, n(NoFreshnessOrValidator)),
        ("GET", 200, &none, h(&[]), &lax, s),
        ("HEAD", 200, &none, h(&[("Cache-Control", "max-age=60")]), &cfg, n(Method)),
        ("POST", 200, &none, h(&[("Cache-Control", "max-age=60")]), &cfg, n(Method)),
        ("GET", 206, &none, h(&[("Cache-Control", "max-age=60")]), &cfg, n(Status)),
        ("GET", 304, &none, h(&[("Cache-Control", "max-age=60")]), &cfg, n(Status)),
        ("GET", 100, &none, h(&[("Cache-Control", "max-age=60")]), &cfg, n(Status)),
        ("GET", 302, &none, h(&[("ETag", "\"a\"")]), &cfg, n(Status)),
        ("GET", 302, &none, h(&[("Cache-Control", "max-age=60")]), &cfg, s),
        ("GET", 302, &none, h(&[("Cache-Control", "public"), ("ETag", "\"a\"")]), &cfg, s),
        ("GET", 500, &none, h(&[("Last-Modified", &date(T0))]), &cfg, n(Status)),
        ("GET", 301, &none, h(&[("Last-Modified", &date(T0))]), &cfg, s),
        ("GET", 404, &none, h(&[]), &cfg, n(NoFreshnessOrValidator)),
        ("GET", 404, &none, h(&[]), &neg, s),
        ("GET", 410, &none, h(&[]), &neg, s),
        ("GET", 200, &none, h(&[]), &neg, n(NoFreshnessOrValidator)),
        (
            "GET",
            200,
            &none,
            h(&[("Cache-Control", "max-age=60, no-store")]),
            &cfg,
            n(ResponseNoStore),
        ),
        ("GET", 200, &req_no_store, h(&[("Cache-Control", "max-age=60")]), &cfg, n(RequestNoStore)),
        ("GET", 200, &none, h(&[("Cache-Control", "private, max-age=60")]), &cfg, n(Private)),
        ("GET", 200, &none, h(&[("Cache-Control", "private=\"x-user\", max-age=60")]), &cfg, s),
        ("GET", 200, &none, h(&[("Cache-Control", "no-cache"), ("ETag", "\"a\"")]), &cfg, s),
        ("GET", 200, &auth, h(&[("Cache-Control", "max-age=60")]), &cfg, n(Authorization)),
        ("GET", 200, &auth, h(&[("Cache-Control", "public, max-age=60")]), &cfg, s),
        ("GET", 200, &auth, h(&[("Cache-Control", "s-maxage=60")]), &cfg, s),
        ("GET", 200, &auth, h(&[("Cache-Control", "must-revalidate, max-age=60")]), &cfg, s),
        (
            "GET",
            200,
            &none,
            h(&[("Cache-Control", "max-age=60"), ("Vary", "*")]),
            &cfg,
            n(VaryStar),
        ),
        ("GET", 200, &none, h(&[("Cache-Control", "max-age=60"), ("Vary", "Origin")]), &cfg, s),
    ];
    for (method, status, req, resp, cfg, want) in cases {
        assert_eq!(
            store_check(method, status, req, &resp, cfg),
            want,
            "{method} {status} {req:?} {resp:?}"
        );
    }
    // A path TTL rule counts as configured freshness.
    let rule = TtlRule { ttl: Duration::from_secs(2), override_origin: false };
    let empty = h(&[]);
    let got =
        storable(b"GET", 200, &RequestCacheControl::default(), &empty, &empty, &cfg, Some(&rule));
    assert!(got.is_store());
}

#[test]
fn freshness_lifetime_table() {
    let cfg = PolicyConfig::default();
    let no_heur = PolicyConfig { heuristic: false, ..PolicyConfig::default() };
    let neg =
        PolicyConfig { negative_ttl: Some(Duration::from_secs(7)), ..PolicyConfig::default() };
    let rule = TtlRule { ttl: Duration::from_secs(3), override_origin: false };
    let over = TtlRule { ttl: Duration::from_secs(1), override_origin: true };
    let d = date(T0);
    let cases: Vec<(u16, Hdrs, &PolicyConfig, Option<&TtlRule>, u64)> = vec![
        (200, h(&[("Cache-Control", "max-age=60")]), &cfg, None, 60),
        (200, h(&[("Cache-Control", "max-age=60, s-maxage=5")]), &cfg, None, 5),
        (200, h(&[("Cache-Control", "max-age=60"), ("Expires", &date(T0 + 999))]), &cfg, None, 60),
        (200, h(&[("Date", &d), ("Expires", &date(T0 + 30))]), &cfg, None, 30),
        (200, h(&[("Date", &d), ("Expires", &date(T0 - 30))]), &cfg, None, 0),
        (200, h(&[("Date", &d), ("Expires", "0")]), &cfg, None, 0),
        // no Date: Expires counts from the response time
        (200, h(&[("Expires", &date(T0 + 40))]), &cfg, None, 40),
        (200, h(&[("Cache-Control", "max-age=oops")]), &cfg, None, 0),
        // heuristic: 10% of Date - Last-Modified, capped
        (200, h(&[("Date", &d), ("Last-Modified", &date(T0 - 1000))]), &cfg, None, 100),
        (200, h(&[("Date", &d), ("Last-Modified", &date(T0 - 100_000_000))]), &cfg, None, 86_400),
        (200, h(&[("Date", &d), ("Last-Modified", &date(T0 - 1000))]), &no_heur, None, 0),
        (200, h(&[("Date", &d), ("Last-Modified", &date(T0 + 1000))]), &cfg, None, 0),
        (302, h(&[("Date", &d), ("Last-Modified", &date(T0 - 1000))]), &cfg, None, 0),
        (200, h(&[]), &cfg, None, 0),
        // path rules
        (200, h(&[("Date", &d), ("Last-Modified", &date(T0 - 1000))]), &cfg, Some(&rule), 3),
        (200, h(&[("Cache-Control", "max-age=60")]), &cfg, Some(&rule), 60),
        (200, h(&[("Cache-Control", "max-age=60")]), &cfg, Some(&over), 1),
        // negative caching
        (404, h(&[]), &neg, None, 7),
        (404, h(&[]), &neg, Some(&over), 7),
        (404, h(&[]), &neg, Some(&rule), 7),
        (410, h(&[("Cache-Control", "max-age=2")]), &neg, None, 2),
        (404, h(&[]), &cfg, Some(&rule), 3),
    ];
    for (status, resp, cfg, rule, want) in cases {
        let cc = ResponseCacheControl::parse(&resp);
        assert_eq!(
            freshness_lifetime(status, &cc, &resp, T0, cfg, rule),
            Duration::from_secs(want),
            "{status} {resp:?} {rule:?}"
        );
    }
}

#[test]
fn current_age_table() {
    // (date, age, request_time, response_time, now) -> age
    let cases: &[(u64, u64, u64, u64, u64, u64)] = &[
        (T0, 0, T0, T0, T0, 0),
        (T0, 0, T0, T0, T0 + 10, 10),
        // apparent age from a Date in the past
        (T0 - 5, 0, T0, T0, T0, 5),
        // Age header plus response delay
        (T0, 30, T0, T0 + 2, T0 + 2, 32),
        // max(apparent, corrected)
        (T0 - 50, 30, T0, T0 + 2, T0 + 12, 62),
        // origin clock ahead: apparent age clamps to 0
        (T0 + 100, 0, T0, T0, T0 + 1, 1),
        // now before response_time (clock step): resident time clamps to 0
        (T0, 0, T0, T0, T0 - 100, 0),
    ];
    for &(date, age, req, resp, now, want) in cases {
        assert_eq!(current_age(date, age, req, resp, now), Duration::from_secs(want));
    }
}

fn meta_with(resp: &[(&str, &str)], cfg: &PolicyConfig) -> StoredMeta {
    let resp = h(resp);
    StoredMeta::from_response(
        200,
        &resp,
        VaryKey::default(),
        ResponseTimes { request_time: T0, response_time: T0 },
        Some(10),
        cfg,
        None,
    )
}

#[test]
fn decide_table() {
    use Decision::*;
    let cfg = PolicyConfig::default();
    let d = date(T0);
    let rq = |s: &str| RequestCacheControl::parse_values([s.as_bytes()]);
    // (response cache-control, request cache-control, seconds after T0, decision)
    let cases: &[(&str, &str, u64, Decision)] = &[
        ("max-age=60", "", 0, Fresh),
        ("max-age=60", "", 59, Fresh),
        ("max-age=60", "", 60, MustRevalidate),
        ("max-age=60", "", 61, MustRevalidate),
        ("max-age=0", "", 0, MustRevalidate),
        ("max-age=60, no-cache", "", 0, MustRevalidate),
        ("max-age=60, no-cache=\"set-cookie\"", "", 0, Fresh),
        ("max-age=60", "no-cache", 0, MustRevalidate),
        ("max-age=60", "max-age=10", 5, Fresh),
        ("max-age=60", "max-age=10", 11, MustRevalidate),
        ("max-age=60", "min-fresh=10", 49, Fresh),
        ("max-age=60", "min-fresh=10", 51, MustRevalidate),
        ("max-age=60", "max-stale", 1000, StaleServable),
        ("max-age=60", "max-stale=10", 70, StaleServable),
        ("max-age=60", "max-stale=10", 71, MustRevalidate),
        ("max-age=60, must-revalidate", "max-stale", 61, MustRevalidate),
        ("max-age=60, proxy-revalidate", "max-stale", 61, MustRevalidate),
        ("s-maxage=60", "max-stale", 61, MustRevalidate),
        ("max-age=60, stale-while-revalidate=30", "", 61, StaleWhileRevalidate),
        ("max-age=60, stale-while-revalidate=30", "", 90, StaleWhileRevalidate),
        ("max-age=60, stale-while-revalidate=30", "", 91, MustRevalidate),
        ("max-age=60, stale-while-revalidate=30, must-revalidate", "", 61, MustRevalidate),
        ("max-age=60, stale-while-revalidate=30", "max-age=5", 61, MustRevalidate),
        ("max-age=60, stale-while-revalidate=30", "min-fresh=1", 61, MustRevalidate),
        ("max-age=60, stale-while-revalidate=30", "no-cache", 61, MustRevalidate),
        ("max-age=60", "only-if-cached", 0, Fresh),
        ("max-age=60", "only-if-cached", 61, GatewayTimeout),
        ("max-age=60, stale-while-revalidate=30", "only-if-cached", 61, StaleWhileRevalidate),
        ("max-age=60", "only-if-cached, max-stale", 61, StaleServable),
    ];
    for (resp_cc, req_cc, after, want) in cases {
        let meta = meta_with(&[("Date", &d), ("Cache-Control", resp_cc)], &cfg);
        assert_eq!(decide(&rq(req_cc), &meta, T0 + after), *want, "{resp_cc} / {req_cc} @+{after}");
    }
    // Soft purge: revalidate even when fresh.
    let mut meta = meta_with(&[("Date", &d), ("Cache-Control", "max-age=60")], &cfg);
    meta.set_invalidated(true);
    assert_eq!(decide(&RequestCacheControl::default(), &meta, T0), MustRevalidate);
    assert!(!meta.is_fresh(T0));
}

#[test]
fn stale_if_error_table() {
    let cfg = PolicyConfig::default();
    let d = date(T0);
    let rq = |s: &str| RequestCacheControl::parse_values([s.as_bytes()]);
    let cases: &[(&str, &str, u64, bool)] = &[
        ("max-age=60", "", 10, true),
        ("max-age=60", "", 61, false),
        ("max-age=60, stale-if-error=100", "", 160, true),
        ("max-age=60, stale-if-error=100", "", 161, false),
        ("max-age=60", "stale-if-error=100", 160, true),
        ("max-age=60, stale-if-error=10", "stale-if-error=100", 160, true),
        ("max-age=60, stale-if-error=100, must-revalidate", "", 61, false),
        ("s-maxage=60, stale-if-error=100", "", 61, false),
        ("max-age=60, no-cache, stale-if-error=100", "", 10, true),
    ];
    for (resp_cc, req_cc, after, want) in cases {
        let meta = meta_with(&[("Date", &d), ("Cache-Control", resp_cc)], &cfg);
        assert_eq!(
            stale_if_error_ok(&rq(req_cc), &meta, T0 + after),
            *want,
            "{resp_cc} / {req_cc} @+{after}"
        );
    }
    assert!(is_error_status(503) && is_error_status(500) && !is_error_status(404));
}

#[test]
fn meta_filters_headers_and_adds_date() {
    let cfg = PolicyConfig::default();
    let resp = h(&[
        ("Content-Type", "video/mp2t"),
        ("Connection", "keep-alive, X-Hop"),
        ("Keep-Alive", "timeout=5"),
        ("Transfer-Encoding", "chunked"),
        ("TE", "trailers"),
        ("Trailer", "x"),
        ("Upgrade", "h2c"),
        ("Proxy-Authenticate", "Basic"),
        ("X-Hop", "1"),
        ("Age", "12"),
        ("Set-Cookie", "a=b"),
        ("X-User", "u"),
        ("Cache-Control", "max-age=60, no-cache=\"set-cookie\", private=\"X-User\""),
        ("ETag", "\"e1\""),
        ("Bad Name", "x"),
        ("X-Crlf", "a\r\nInjected: 1"),
    ]);
    let meta = StoredMeta::from_response(
        200,
        &resp,
        VaryKey::default(),
        ResponseTimes { request_time: T0 - 1, response_time: T0 },
        None,
        &cfg,
        None,
    );
    let names: Vec<&[u8]> = meta.headers().iter().map(|(n, _)| n.as_slice()).collect();
    assert_eq!(names, vec![&b"content-type"[..], b"cache-control", b"etag", b"date"]);
    assert_eq!(meta.get_first("date"), Some(date(T0).as_bytes()));
    assert_eq!(meta.age_value(), 12);
    assert_eq!(meta.lifetime(), Duration::from_secs(60));
    // corrected age: Age 12 + response delay 1
    assert_eq!(meta.current_age(T0), Duration::from_secs(13));
    assert_eq!(meta.etag(), Some(&b"\"e1\""[..]));
    assert_eq!(meta.body_len(), None);
}

#[test]
fn meta_roundtrip_and_errors() {
    let cfg = PolicyConfig::default();
    let req = h(&[("Accept-Encoding", "gzip")]);
    let resp = h(&[
        ("Cache-Control", "max-age=60"),
        ("Vary", "Accept-Encoding, Origin"),
        ("Last-Modified", &date(T0 - 10)),
    ]);
    let vary = VaryKey::from_request(&Vary::parse(&resp), &req);
    let mut meta = StoredMeta::from_response(
        200,
        &resp,
        vary,
        ResponseTimes { request_time: T0, response_time: T0 + 1 },
        Some(1234),
        &cfg,
        None,
    );
    meta.set_invalidated(true);
    let bytes = meta.encode();
    let back = StoredMeta::decode(&bytes).unwrap();
    assert_eq!(back, meta);
    assert!(back.vary().matches(&req));
    assert!(!back.vary().matches(&h(&[("Accept-Encoding", "br")])));

    assert_eq!(StoredMeta::decode(b""), Err(MetaError::Truncated));
    assert_eq!(StoredMeta::decode(b"XX\x01\x00"), Err(MetaError::BadMagic));
    assert_eq!(StoredMeta::decode(b"RM\x09\x00"), Err(MetaError::UnsupportedVersion(9)));
    let mut trailing = bytes.clone();
    trailing.push(0);
    assert_eq!(StoredMeta::decode(&trailing), Err(MetaError::TrailingBytes));
    for cut in 0..bytes.len() {
        assert!(StoredMeta::decode(&bytes[..cut]).is_err(), "prefix {cut} decoded");
    }
    // A header count far beyond the input must not allocate or panic.
    let mut huge = bytes[..46].to_vec();
    huge.extend_from_slice(&u32::MAX.to_le_bytes());
    assert_eq!(StoredMeta::decode(&huge), Err(MetaError::Truncated));
}

#[test]
fn update_from_304() {
    let cfg = PolicyConfig::default();
    let resp = h(&[
        ("Date", &date(T0)),
        ("Cache-Control", "max-age=60"),
        ("ETag", "\"e1\""),
        ("Content-Length", "10"),
        ("X-Old", "keep"),
        ("X-Multi", "a"),
        ("X-Multi", "b"),
    ]);
    let mut meta = StoredMeta::from_response(
        200,
        &resp,
        VaryKey::default(),
        ResponseTimes { request_time: T0, response_time: T0 },
        Some(10),
        &cfg,
        None,
    );
    meta.set_invalidated(true);
    let not_modified = h(&[
        ("Date", &date(T0 + 100)),
        ("Cache-Control", "max-age=120"),
        ("ETag", "\"e1\""),
        ("Content-Length", "0"),
        ("X-Multi", "c"),
        ("Connection", "close"),
        ("Age", "3"),
    ]);
    assert!(meta.matches_304(&not_modified));
    assert!(!meta.matches_304(&h(&[("ETag", "\"e2\"")])));
    assert!(meta.matches_304(&h(&[("ETag", "W/\"e1\"")])));
    meta.update_from_304(
        &not_modified,
        ResponseTimes { request_time: T0 + 99, response_time: T0 + 100 },
        &cfg,
        None,
    );
    assert_eq!(meta.lifetime(), Duration::from_secs(120));
    assert_eq!(meta.get_first("content-length"), Some(&b"10"[..]));
    assert_eq!(meta.get_first("x-old"), Some(&b"keep"[..]));
    assert_eq!(meta.get_all("x-multi").collect::<Vec<_>>(), vec![&b"c"[..]]);
    assert_eq!(meta.get_all("date").count(), 1);
    assert!(!meta.has("connection"));
    assert!(!meta.invalidated());
    assert_eq!(meta.age_value(), 3);
    // Age 3 + delay 1 = 4 at response time
    assert_eq!(meta.current_age(T0 + 100), Duration::from_secs(4));
    assert_eq!(decide(&RequestCacheControl::default(), &meta, T0 + 110), Decision::Fresh);

    // A 304 without Date must not leave the old Date behind (age would jump).
    let mut meta2 = meta.clone();
    meta2.update_from_304(
        &h(&[("ETag", "\"e1\"")]),
        ResponseTimes { request_time: T0 + 500, response_time: T0 + 500 },
        &cfg,
        None,
    );
    assert_eq!(meta2.current_age(T0 + 500), Duration::ZERO);
    assert_eq!(meta2.date(), T0 + 500);

    // Validator-less stored response only matches a validator-less 304.
    let plain = meta_with(&[("Cache-Control", "max-age=1")], &cfg);
    assert!(plain.matches_304(&h(&[])));
    assert!(!plain.matches_304(&h(&[("ETag", "\"x\"")])));
}

#[test]
fn conditionals_against_stored_meta() {
    let cfg = PolicyConfig::default();
    let meta = meta_with(
        &[("Cache-Control", "max-age=60"), ("ETag", "\"v9\""), ("Last-Modified", &date(T0 - 50))],
        &cfg,
    );
    let v = Validators::of(&meta);
    let req = h(&[("If-None-Match", "\"v9\"")]);
    assert_eq!(evaluate(b"GET", meta.status(), &req, &v, T0), Outcome::NotModified);
    let reval = revalidation_headers(&meta);
    assert_eq!(
        reval,
        vec![
            ("if-none-match", b"\"v9\"".to_vec()),
            ("if-modified-since", date(T0 - 50).into_bytes())
        ]
    );
    let bare = meta_with(&[("Cache-Control", "max-age=60")], &cfg);
    assert!(revalidation_headers(&bare).is_empty());
}

#[test]
fn ttl_rules_feed_lifetime() {
    let cfg = PolicyConfig::default();
    let rules = TtlRules::new([
        ("*.m3u8", TtlRule { ttl: Duration::from_secs(1), override_origin: true }),
        ("/live/*", TtlRule { ttl: Duration::from_secs(10), override_origin: false }),
    ]);
    let resp = h(&[("Cache-Control", "max-age=600")]);
    let cc = ResponseCacheControl::parse(&resp);
    let l = |p: &str| freshness_lifetime(200, &cc, &resp, T0, &cfg, rules.find(p.as_bytes()));
    assert_eq!(l("/live/a.m3u8"), Duration::from_secs(1));
    assert_eq!(l("/live/a.ts"), Duration::from_secs(600));
    assert_eq!(l("/vod/a.ts"), Duration::from_secs(600));
}

#[test]
fn targeted_directives_survive_encoding_and_304_updates() {
    let cfg = PolicyConfig::default();
    let now = 1_700_000_000;
    let d = date(now);
    let m = meta_with(
        &[
            ("date", &d),
            ("cache-control", "no-cache, max-age=1"),
            ("cdn-cache-control", "max-age=600"),
            ("etag", "\"v1\""),
        ],
        &cfg,
    );
    assert_eq!(m.targeted_field(), Some("cdn-cache-control"));
    assert_eq!(m.lifetime(), Duration::from_secs(600));
    assert!(!m.cache_control().no_cache.is_all(), "Cache-Control's no-cache is not ours");
    let back = StoredMeta::decode(&m.encode()).unwrap();
    assert_eq!(back, m);
    assert_eq!(back.cache_control().max_age, Some(600));
    assert!(back.is_fresh(now + 10));

    // A 304 that drops the targeted field hands control back to Cache-Control.
    let mut m2 = back.clone();
    let times = ResponseTimes { request_time: now + 20, response_time: now + 20 };
    m2.update_from_304(
        &h(&[("cdn-cache-control", ""), ("cache-control", "max-age=5")]),
        times,
        &cfg,
        None,
    );
    assert_eq!(m2.targeted_field(), None);
    assert_eq!(m2.lifetime(), Duration::from_secs(5));

    // Set-Cookie is never part of what is stored.
    let m3 = meta_with(&[("set-cookie", "a=b"), ("cache-control", "max-age=60")], &cfg);
    assert!(!m3.headers().iter().any(|(n, _)| n == b"set-cookie"));
    let m4 = meta_with(&[("Set-Cookie2", "a=b"), ("cache-control", "max-age=60")], &cfg);
    assert!(!m4.headers().iter().any(|(n, _)| n.eq_ignore_ascii_case(b"set-cookie2")));
    // Nor does a 304 bring either in.
    let mut m5 = m4.clone();
    m5.update_from_304(&h(&[("set-cookie2", "c=d"), ("set-cookie", "e=f")]), times, &cfg, None);
    let cookie =
        |n: &[u8]| n.eq_ignore_ascii_case(b"set-cookie2") || n.eq_ignore_ascii_case(b"set-cookie");
    assert!(!m5.headers().iter().any(|(n, _)| cookie(n)));
}
