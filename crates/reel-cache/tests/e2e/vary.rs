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
