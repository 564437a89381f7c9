//! Vary (RFC 9111 4.1): variants keyed on the listed request fields; `Vary: *` never served
//! from the cache.

use crate::client::get;
use crate::origin::Route;

#[test]
fn accept_encoding_variants_are_stored_separately_and_served_to_matching_requests() {
    let (o, s) = crate::setup();
    let cc = ("cache-control", "max-age=600");
    let vary = ("vary", "Accept-Encoding");
    o.route("/v", Route::ok("gzip-body", &[cc, vary, ("content-encoding", "gzip")]));
    let g = get(&s, "/v", &[("Accept-Encoding", "gzip")]);
    assert_eq!(g.body, b"gzip-body");
    o.route("/v", Route::ok("identity-body", &[cc, vary]));
    let i = get(&s, "/v", &[("Accept-Encoding", "identity")]);
    assert_eq!(i.body, b"identity-body");
    assert_eq!(o.count("/v"), 2);
    for _ in 0..2 {
        let g = get(&s, "/v", &[("Accept-Encoding", "gzip")]);
        assert_eq!(g.body, b"gzip-body");
        assert_eq!(g.header("content-encoding"), Some("gzip"));
        assert!(g.cache_status().contains("hit"), "{}", g.cache_status());
        let i = get(&s, "/v", &[("Accept-Encoding", "identity")]);
        assert_eq!(i.body, b"identity-body");
        assert_eq!(i.header("content-encoding"), None);
    }
    assert_eq!(o.count("/v"), 2, "both variants came from the cache");
}

#[test]
fn vary_star_is_never_served_from_the_cache() {
    let (o, s) = crate::setup();
    o.route("/vs", Route::ok("star", &[("cache-control", "max-age=600"), ("vary", "*")]));
    for i in 1..=3 {
        let r = get(&s, "/vs", &[]);
        assert_eq!(r.body, b"star");
        assert_eq!(o.count("/vs"), i);
    }
}

/// When a URL's responses change the fields they vary on, or stop varying, the variants
/// its old marker listed leave the store with it.
#[test]
fn variants_of_an_old_vary_leave_the_store_with_their_marker() {
    let (o, s) = crate::setup();
    let cc = ("cache-control", "max-age=0");
    let et = ("etag", "\"1\"");
    o.route("/vc", Route::ok("ae", &[cc, et, ("vary", "Accept-Encoding")]));
    for e in ["gzip", "br", "identity"] {
        get(&s, "/vc", &[("Accept-Encoding", e)]);
    }
    assert_eq!(s.shared.store.stats().objects, 4, "a marker and three variants");
    let mut r = Route::ok("al", &[cc, ("etag", "\"2\""), ("vary", "Accept-Language")]);
    r.honour_inm = false;
    o.route("/vc", r);
    assert_eq!(get(&s, "/vc", &[("Accept-Encoding", "gzip")]).body, b"al");
    assert_eq!(s.shared.store.stats().objects, 2, "a new marker and its one variant");
    let mut r = Route::ok("none", &[cc, ("etag", "\"3\"")]);
    r.honour_inm = false;
    o.route("/vc", r);
    assert_eq!(get(&s, "/vc", &[]).body, b"none");
    assert_eq!(s.shared.store.stats().objects, 1, "the object alone");
    assert_eq!(get(&s, "/vc", &[("Accept-Language", "fr")]).body, b"none");
}

/// Variants per URL are capped (`[cache] max_variants`): 10k `Accept-Encoding` values
/// kept 10k variants' metadata in memory. Beyond the cap a new variant replaces the URL's
/// oldest one; every response is still served.
#[test]
fn variants_per_url_are_capped_and_the_oldest_is_replaced() {
    let (o, s) = crate::setup_with(|opts| opts.max_variants = 3);
    o.route(
        "/cap",
        Route::ok("c", &[("cache-control", "max-age=600"), ("vary", "Accept-Encoding")]),
    );
    let ae = |i: usize| format!("enc-{i}");
    for i in 0..20 {
        let r = get(&s, "/cap", &[("Accept-Encoding", &ae(i))]);
        assert_eq!((r.status, r.body.as_slice()), (200, &b"c"[..]), "variant {i} served");
        assert!(s.shared.store.stats().objects <= 4, "a marker and at most three variants");
    }
    assert_eq!(s.shared.store.stats().objects, 4);
    for i in 17..20 {
        let r = get(&s, "/cap", &[("Accept-Encoding", &ae(i))]);
        assert!(r.cache_status().contains("hit"), "newest {i}: {}", r.cache_status());
    }
    let r = get(&s, "/cap", &[("Accept-Encoding", &ae(0))]);
    assert!(r.cache_status().contains("fwd=miss"), "oldest replaced: {}", r.cache_status());
    assert_eq!(o.count("/cap"), 21);
}
