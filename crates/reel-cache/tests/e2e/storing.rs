//! What is stored and how it is served: HEAD from the cache, no-store / private not
//! stored, negative caching, only-if-cached.

use std::time::Duration;

use crate::client::{body_of, get, request};
use crate::origin::Route;

#[test]
fn head_is_answered_from_the_stored_get() {
    let (o, s) = crate::setup();
    let body = body_of(12_345, 1);
    o.route("/h", Route::ok(body, &[("cache-control", "max-age=600"), ("etag", "\"h\"")]));
    get(&s, "/h", &[]);
    let r = request(s.addr, "HEAD", "/h", &[]);
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-length"), Some("12345"));
    assert_eq!(r.header("etag"), Some("\"h\""));
    assert!(r.cache_status().contains("hit"), "{}", r.cache_status());
    assert_eq!(o.count("/h"), 1);
    assert!(o.all_seen().iter().all(|s| s.method == "GET"));
}

#[test]
fn no_store_and_private_responses_are_not_stored() {
    let (o, s) = crate::setup();
    o.route("/ns", Route::ok("ns", &[("cache-control", "no-store, max-age=600")]));
    o.route("/pv", Route::ok("pv", &[("cache-control", "private, max-age=600")]));
    for i in 1..=2 {
        assert_eq!(get(&s, "/ns", &[]).body, b"ns");
        assert_eq!(get(&s, "/pv", &[]).body, b"pv");
        assert_eq!((o.count("/ns"), o.count("/pv")), (i, i));
    }
    // Nor a response to a request with no-store.
    o.route("/rns", Route::ok("rns", &[("cache-control", "max-age=600")]));
    get(&s, "/rns", &[("Cache-Control", "no-store")]);
    get(&s, "/rns", &[]);
    assert_eq!(o.count("/rns"), 2);
}

#[test]
fn no_explicit_freshness_and_no_validator_is_not_stored_by_default() {
    let (o, s) = crate::setup();
    o.route("/bare", Route::ok("bare", &[]));
    get(&s, "/bare", &[]);
    get(&s, "/bare", &[]);
    assert_eq!(o.count("/bare"), 2);
}

#[test]
fn a_404_is_cached_for_negative_ttl() {
    let (o, s) = crate::setup_with(|opts| {
        opts.policy.negative_ttl = Some(Duration::from_secs(60));
    });
    for _ in 0..3 {
        let r = get(&s, "/missing", &[]);
        assert_eq!(r.status, 404);
    }
    assert_eq!(o.count("/missing"), 1);
}

#[test]
fn a_404_without_negative_ttl_is_not_cached() {
    let (o, s) = crate::setup();
    for _ in 0..2 {
        assert_eq!(get(&s, "/missing", &[]).status, 404);
    }
    assert_eq!(o.count("/missing"), 2);
}

#[test]
fn only_if_cached_on_a_miss_is_a_504_without_asking_the_origin() {
    let (o, s) = crate::setup();
    o.route("/oic", Route::ok("x", &[("cache-control", "max-age=600")]));
    let r = get(&s, "/oic", &[("Cache-Control", "only-if-cached")]);
    assert_eq!(r.status, 504);
    assert_eq!(o.count("/oic"), 0);
    get(&s, "/oic", &[]);
    let r = get(&s, "/oic", &[("Cache-Control", "only-if-cached")]);
    assert_eq!(r.status, 200);
    assert_eq!(o.count("/oic"), 1);
}
