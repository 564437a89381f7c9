//! Conditional requests: a client's If-None-Match answered 304 from the cache, and the
//! cache's own revalidation where a 304 from the origin freshens the stored headers.

use crate::client::{body_of, get};
use crate::origin::Route;

#[test]
fn client_if_none_match_on_a_cached_object_is_a_304_from_the_cache() {
    let (o, s) = crate::setup();
    o.route(
        "/inm",
        Route::ok(body_of(2000, 1), &[("cache-control", "max-age=600"), ("etag", "\"e1\"")]),
    );
    get(&s, "/inm", &[]);
    let r = get(&s, "/inm", &[("If-None-Match", "\"e1\"")]);
    assert_eq!(r.status, 304);
    assert_eq!(r.header("etag"), Some("\"e1\""));
    assert!(r.body.is_empty());
    let r = get(&s, "/inm", &[("If-None-Match", "\"zz\"")]);
    assert_eq!(r.status, 200);
    assert_eq!(o.count("/inm"), 1, "the origin was not asked");
}

#[test]
fn client_if_modified_since_and_if_match_are_evaluated_against_the_stored_object() {
    let (o, s) = crate::setup();
    let lm = "Mon, 01 Jan 2024 00:00:00 GMT";
    o.route(
        "/ims",
        Route::ok(
            body_of(100, 1),
            &[("cache-control", "max-age=600"), ("last-modified", lm), ("etag", "\"m1\"")],
        ),
    );
    get(&s, "/ims", &[]);
    assert_eq!(get(&s, "/ims", &[("If-Modified-Since", lm)]).status, 304);
    assert_eq!(
        get(&s, "/ims", &[("If-Modified-Since", "Sun, 01 Jan 2023 00:00:00 GMT")]).status,
        200
    );
    assert_eq!(get(&s, "/ims", &[("If-Match", "\"other\"")]).status, 412);
    assert_eq!(get(&s, "/ims", &[("If-Match", "\"m1\"")]).status, 200);
    assert_eq!(
        get(&s, "/ims", &[("If-Unmodified-Since", "Sun, 01 Jan 2023 00:00:00 GMT")]).status,
        412
    );
    assert_eq!(o.count("/ims"), 1);
}

#[test]
fn revalidation_answered_304_updates_stored_headers_and_serves_the_cached_body() {
    let (o, s) = crate::setup();
    let body = body_of(50_000, 2);
    o.route(
        "/rv",
        Route::ok(
            body.clone(),
            &[("cache-control", "max-age=0"), ("etag", "\"v1\""), ("x-version", "1")],
        ),
    );
    let first = get(&s, "/rv", &[]);
    assert_eq!(first.header("x-version"), Some("1"));
    // The origin's answer to a revalidation: not modified, but new metadata.
    o.route(
        "/rv",
        Route::ok(
            b"must never be sent".to_vec(),
            &[("cache-control", "max-age=600"), ("etag", "\"v1\""), ("x-version", "2")],
        ),
    );
    let second = get(&s, "/rv", &[]);
    assert_eq!(o.count("/rv"), 2);
    let seen = o.seen("/rv");
    assert_eq!(seen[1].header("if-none-match"), Some("\"v1\""), "a conditional revalidation");
    assert_eq!(second.status, 200);
    assert_eq!(second.body, body, "body served from the cache");
    assert_eq!(second.header("x-version"), Some("2"));
    assert!(second.cache_status().contains("fwd=stale"), "{}", second.cache_status());
    // The stored headers were updated: now fresh for 600 s, with the new field.
    let third = get(&s, "/rv", &[]);
    assert_eq!(o.count("/rv"), 2);
    assert_eq!(third.header("x-version"), Some("2"));
    assert!(third.cache_status().contains("hit"), "{}", third.cache_status());
    assert_eq!(third.body, body);
}

#[test]
fn max_age_zero_with_an_etag_is_stored_but_revalidated_every_time() {
    let (o, s) = crate::setup();
    let body = body_of(3000, 3);
    o.route("/m0", Route::ok(body.clone(), &[("cache-control", "max-age=0"), ("etag", "\"z\"")]));
    get(&s, "/m0", &[]);
    for i in 2..=3 {
        let r = get(&s, "/m0", &[]);
        assert_eq!(r.body, body);
        assert!(r.cache_status().contains("fwd=stale; fwd-status=304"), "{}", r.cache_status());
        assert_eq!(o.count("/m0"), i);
        assert_eq!(o.seen("/m0")[i - 1].header("if-none-match"), Some("\"z\""));
    }
}

#[test]
fn request_no_cache_forces_a_revalidation_of_a_fresh_object() {
    let (o, s) = crate::setup();
    let body = body_of(3000, 4);
    o.route("/nc", Route::ok(body.clone(), &[("cache-control", "max-age=600"), ("etag", "\"n\"")]));
    get(&s, "/nc", &[]);
    let r = get(&s, "/nc", &[("Cache-Control", "no-cache")]);
    assert_eq!(o.count("/nc"), 2);
    assert_eq!(o.seen("/nc")[1].header("if-none-match"), Some("\"n\""));
    assert_eq!(r.body, body);
    let r = get(&s, "/nc", &[("Pragma", "no-cache")]);
    assert_eq!(r.body, body);
}

#[test]
fn response_no_cache_is_stored_but_revalidated_before_each_use() {
    let (o, s) = crate::setup();
    let body = body_of(4000, 5);
    o.route(
        "/rnc",
        Route::ok(body.clone(), &[("cache-control", "no-cache, max-age=600"), ("etag", "\"q\"")]),
    );
    get(&s, "/rnc", &[]);
    let r = get(&s, "/rnc", &[]);
    assert_eq!(r.body, body);
    assert!(r.cache_status().contains("fwd=stale; fwd-status=304"), "{}", r.cache_status());
    assert_eq!(o.count("/rnc"), 2);
    assert_eq!(o.seen("/rnc")[1].header("if-none-match"), Some("\"q\""));
}

/// A 412 computed from a stored response (or one still filling) carries `Cache-Status`
/// like every other answer from the cache path; it had none.
#[test]
fn a_412_from_the_cache_carries_cache_status() {
    let (o, s) = crate::setup();
    let cc = ("cache-control", "max-age=600");
    o.route("/pf", Route::ok(body_of(100, 2), &[cc, ("etag", "\"p1\"")]));
    get(&s, "/pf", &[]);
    let r = get(&s, "/pf", &[("If-Match", "\"other\"")]);
    assert_eq!(r.status, 412);
    assert_eq!(r.cache_status(), "reel; hit");
    assert_eq!(o.count("/pf"), 1);

    // While the object fills: the follower's precondition fails against what is known.
    let gate = crate::origin::Gate::new();
    let mut route = Route::ok(body_of(200_000, 3), &[cc, ("etag", "\"p2\"")]);
    route.pieces = 2;
    route.gate = Some(gate.clone());
    o.route("/pf2", route);
    let mut leader = crate::client::Conn::open(s.addr);
    leader.send(
        format!("GET /pf2 HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n", crate::server::HOST)
            .as_bytes(),
    );
    let (st, lh) = leader.read_head();
    assert_eq!(st, 200);
    let r = crate::client::request(s.addr, "GET", "/pf2", &[("If-Match", "\"other\"")]);
    assert_eq!(r.status, 412);
    assert!(r.cache_status().contains("collapsed"), "{}", r.cache_status());
    gate.open(1);
    let (_, complete) = leader.read_body(&lh, false);
    assert!(complete);
}
