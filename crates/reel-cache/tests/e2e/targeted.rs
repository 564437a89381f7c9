//! RFC 9213 targeted cache control (`CDN-Cache-Control` and our own `Reel-Cache-Control`
//! override `Cache-Control` and `Expires` for this cache, while viewers still get the
//! origin's `Cache-Control` untouched) and responses that set cookies (`Set-Cookie`, and
//! the obsolete `Set-Cookie2` of RFC 2965, treated alike).

use crate::client::get;
use crate::origin::Route;

#[test]
fn cdn_cache_control_max_age_stores_what_cache_control_forbids() {
    let (o, s) = crate::setup();
    o.route(
        "/t",
        Route::ok("t", &[("cache-control", "no-store"), ("cdn-cache-control", "max-age=600")]),
    );
    let first = get(&s, "/t", &[]);
    let second = get(&s, "/t", &[]);
    assert_eq!(o.count("/t"), 1, "CDN-Cache-Control: max-age=600 makes it storable");
    assert!(second.cache_status().contains("hit"), "{}", second.cache_status());
    // Downstream sees the origin's Cache-Control untouched.
    assert_eq!(first.header("cache-control"), Some("no-store"));
    assert_eq!(second.header("cache-control"), Some("no-store"));
}

#[test]
fn cdn_cache_control_no_store_wins_over_cache_control_max_age() {
    let (o, s) = crate::setup();
    o.route(
        "/n",
        Route::ok("n", &[("cache-control", "max-age=600"), ("cdn-cache-control", "no-store")]),
    );
    get(&s, "/n", &[]);
    let r = get(&s, "/n", &[]);
    assert_eq!(o.count("/n"), 2);
    assert_eq!(r.header("cache-control"), Some("max-age=600"));
}

#[test]
fn cdn_cache_control_private_and_no_cache_apply_to_us() {
    let (o, s) = crate::setup();
    o.route(
        "/p",
        Route::ok("p", &[("cache-control", "max-age=600"), ("cdn-cache-control", "private")]),
    );
    get(&s, "/p", &[]);
    get(&s, "/p", &[]);
    assert_eq!(o.count("/p"), 2, "private for CDNs: not stored");

    o.route(
        "/nc",
        Route::ok(
            "nc",
            &[
                ("cache-control", "max-age=600"),
                ("cdn-cache-control", "no-cache"),
                ("etag", "\"1\""),
            ],
        ),
    );
    get(&s, "/nc", &[]);
    get(&s, "/nc", &[]);
    assert_eq!(o.count("/nc"), 2, "no-cache for CDNs: every use revalidates");
    let seen = o.seen("/nc");
    assert_eq!(seen[1].header("if-none-match"), Some("\"1\""));
}

#[test]
fn our_own_field_outranks_cdn_cache_control_and_expires_is_ignored() {
    let (o, s) = crate::setup();
    o.route(
        "/own",
        Route::ok(
            "own",
            &[
                ("cache-control", "no-store"),
                ("cdn-cache-control", "no-store"),
                ("reel-cache-control", "max-age=600"),
            ],
        ),
    );
    get(&s, "/own", &[]);
    get(&s, "/own", &[]);
    assert_eq!(o.count("/own"), 1);

    // With a targeted field, an Expires in the past does not make the response stale.
    o.route(
        "/exp",
        Route::ok(
            "exp",
            &[("expires", "Thu, 01 Jan 1970 00:00:00 GMT"), ("cdn-cache-control", "max-age=600")],
        ),
    );
    get(&s, "/exp", &[]);
    let r = get(&s, "/exp", &[]);
    assert_eq!(o.count("/exp"), 1);
    assert!(r.cache_status().contains("hit"), "{}", r.cache_status());
}

#[test]
fn an_invalid_targeted_field_falls_back_to_cache_control() {
    let (o, s) = crate::setup();
    o.route(
        "/bad",
        Route::ok("bad", &[("cache-control", "max-age=600"), ("cdn-cache-control", "Max-Age=0,")]),
    );
    get(&s, "/bad", &[]);
    get(&s, "/bad", &[]);
    assert_eq!(o.count("/bad"), 1, "an invalid CDN-Cache-Control is ignored entirely");
}

#[test]
fn set_cookie_responses_are_not_stored_by_default() {
    let (o, s) = crate::setup();
    o.route(
        "/ck",
        Route::ok("ck", &[("cache-control", "max-age=600"), ("set-cookie", "session=alice")]),
    );
    let a = get(&s, "/ck", &[]);
    assert_eq!(a.header("set-cookie"), Some("session=alice"), "passed through to its viewer");
    let b = get(&s, "/ck", &[]);
    assert_eq!(o.count("/ck"), 2, "not stored");
    assert_eq!(b.header("set-cookie"), Some("session=alice"), "each viewer gets the origin's own");
}

#[test]
fn when_set_cookie_responses_are_stored_the_cookie_is_never_replayed() {
    let (o, s) = crate::setup_with(|opts| opts.policy.store_set_cookie = true);
    o.route(
        "/ck",
        Route::ok("ck", &[("cache-control", "max-age=600"), ("set-cookie", "session=alice")]),
    );
    get(&s, "/ck", &[]);
    let b = get(&s, "/ck", &[]);
    assert_eq!(o.count("/ck"), 1);
    assert!(b.cache_status().contains("hit"), "{}", b.cache_status());
    assert_eq!(b.header("set-cookie"), None, "another viewer never gets alice's cookie");
}

/// RFC 2965's `Set-Cookie2` sets a cookie as `Set-Cookie` does: it made a response
/// storable by default, and with `store_set_cookie` one viewer's cookie was stored and
/// replayed to every other.
#[test]
fn set_cookie2_is_treated_as_set_cookie() {
    let ck2 = [("cache-control", "max-age=600"), ("set-cookie2", "session=alice; Version=1")];
    let (o, s) = crate::setup();
    o.route("/ck2", Route::ok("ck", &ck2));
    let a = get(&s, "/ck2", &[]);
    assert_eq!(a.header("set-cookie2"), Some("session=alice; Version=1"), "to its viewer");
    let b = get(&s, "/ck2", &[]);
    assert_eq!(o.count("/ck2"), 2, "not stored by default");
    assert_eq!(b.header("set-cookie2"), Some("session=alice; Version=1"), "the origin's own");

    let (o, s) = crate::setup_with(|opts| opts.policy.store_set_cookie = true);
    o.route("/ck2", Route::ok("ck", &ck2));
    let a = get(&s, "/ck2", &[]);
    assert_eq!(a.header("set-cookie2"), None, "not even the filling viewer gets it from the cache");
    let b = get(&s, "/ck2", &[]);
    assert_eq!(o.count("/ck2"), 1);
    assert!(b.cache_status().contains("hit"), "{}", b.cache_status());
    assert_eq!(b.header("set-cookie2"), None, "another viewer never gets alice's cookie");
}

#[test]
fn a_cdn_cache_control_max_age_given_as_a_string_is_ignored() {
    let (o, s) = crate::setup();
    // RFC 9213 2.2: max-age is an Integer. As a String it is not consumed; nothing else in
    // the field, so the field is ignored and Cache-Control governs.
    o.route(
        "/str",
        Route::ok(
            "s",
            &[("cache-control", "no-store"), ("cdn-cache-control", "max-age=\"10000\"")],
        ),
    );
    get(&s, "/str", &[]);
    let r = get(&s, "/str", &[]);
    assert_eq!(o.count("/str"), 2, "Cache-Control: no-store governs: {}", r.cache_status());
    o.route(
        "/zero",
        Route::ok("z", &[("cache-control", "max-age=600"), ("cdn-cache-control", "max-age=\"0\"")]),
    );
    get(&s, "/zero", &[]);
    let r = get(&s, "/zero", &[]);
    assert_eq!(o.count("/zero"), 1, "Cache-Control: max-age=600 governs");
    assert!(r.cache_status().contains("hit"), "{}", r.cache_status());
}
