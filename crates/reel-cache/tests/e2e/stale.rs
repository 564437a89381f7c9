//! Stale serving (RFC 5861): stale-if-error when the origin fails or is down, its absence,
//! and stale-while-revalidate with exactly one background refresh.

use std::time::{Duration, Instant};

use crate::client::{GUARD, body_of, get};
use crate::origin::Route;

#[test]
fn stale_if_error_serves_the_stale_object_when_the_origin_answers_503_or_is_down() {
    let (o, s) = crate::setup();
    let body = body_of(10_000, 1);
    o.route("/sie", Route::ok(body.clone(), &[("cache-control", "max-age=0, stale-if-error=600")]));
    get(&s, "/sie", &[]);
    o.route("/sie", Route::status(503, "down", &[]));
    let r = get(&s, "/sie", &[]);
    assert_eq!(r.status, 200);
    assert_eq!(r.body, body);
    assert!(r.cache_status().contains("fwd=stale; detail=stale-if-error"), "{}", r.cache_status());
    assert_eq!(o.count("/sie"), 2);
    o.down();
    let r = get(&s, "/sie", &[]);
    assert_eq!(r.status, 200);
    assert_eq!(r.body, body);
    assert!(r.cache_status().contains("stale-if-error"), "{}", r.cache_status());
}

#[test]
fn without_stale_if_error_the_origin_error_is_passed_on() {
    let (o, s) = crate::setup();
    o.route("/nosie", Route::ok(body_of(1000, 2), &[("cache-control", "max-age=0")]));
    get(&s, "/nosie", &[]);
    o.route("/nosie", Route::status(503, "origin says no", &[]));
    let r = get(&s, "/nosie", &[]);
    assert_eq!(r.status, 503);
    assert_eq!(r.body, b"origin says no");
    o.down();
    let r = get(&s, "/nosie", &[]);
    assert!(r.status == 502 || r.status == 504, "origin down: {}", r.status);
}

#[test]
fn stale_while_revalidate_serves_stale_at_once_refreshes_once_then_serves_new_content() {
    let (o, s) = crate::setup();
    let v1 = body_of(20_000, 1);
    let v2 = body_of(20_000, 2);
    o.route(
        "/swr",
        Route::ok(v1.clone(), &[("cache-control", "max-age=0, stale-while-revalidate=600")]),
    );
    get(&s, "/swr", &[]);
    let mut slow = Route::ok(v2.clone(), &[("cache-control", "max-age=600")]);
    slow.delay = Duration::from_millis(500);
    o.route("/swr", slow);
    // While the refresh is slow, every request is answered at once with the stale body.
    let r = get(&s, "/swr", &[]);
    assert_eq!(r.body, v1, "stale served at once");
    assert!(r.cache_status().contains("stale-while-revalidate"), "{}", r.cache_status());
    let deadline = Instant::now() + GUARD;
    loop {
        let r = get(&s, "/swr", &[]);
        assert!(r.complete);
        if r.body == v2 {
            break;
        }
        assert_eq!(r.body, v1);
        assert!(Instant::now() < deadline, "the background refresh never landed");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(o.count("/swr"), 2, "exactly one background refresh");
    let r = get(&s, "/swr", &[]);
    assert_eq!(r.body, v2);
    assert!(r.cache_status().contains("hit"), "{}", r.cache_status());
    assert_eq!(o.count("/swr"), 2);
}

/// RFC 9111 3.5 on a background refresh: the shared refresh a viewer with credentials
/// triggers neither carries that viewer's credentials or cookies to the origin nor stores
/// what a foreground miss with `Authorization` could not store.
#[test]
fn a_refresh_triggered_by_a_viewer_with_credentials_is_neither_sent_them_nor_stored_for_all() {
    let (o, s) = crate::setup();
    let public = body_of(5_000, 1);
    let personal = body_of(5_000, 2);
    o.route(
        "/swr-auth",
        Route::ok(public.clone(), &[("cache-control", "max-age=0, stale-while-revalidate=600")]),
    );
    get(&s, "/swr-auth", &[]);
    // Without `public`, `s-maxage` or `must-revalidate`, this answer may not be stored
    // for a request that carried Authorization.
    o.route("/swr-auth", Route::ok(personal.clone(), &[("cache-control", "max-age=600")]));
    let creds = [
        ("Authorization", "Bearer alice"),
        ("Proxy-Authorization", "Basic YWxpY2U6cHc="),
        ("Cookie", "session=alice"),
    ];
    let r = get(&s, "/swr-auth", &creds);
    assert_eq!(r.body, public, "stale served at once");
    assert!(r.cache_status().contains("stale-while-revalidate"), "{}", r.cache_status());
    let seen = o.seen("/swr-auth");
    assert_eq!(seen.len(), 2, "one background refresh");
    for name in ["authorization", "proxy-authorization", "cookie"] {
        assert_eq!(seen[1].header(name), None, "the shared refresh carried the viewer's {name}");
    }
    // A viewer without credentials does not get what the refresh fetched.
    let r = get(&s, "/swr-auth", &[]);
    assert_eq!(r.status, 200);
    assert!(r.body != personal, "the refresh was stored as the shared copy");
    assert_eq!(r.body, public);
    assert!(r.cache_status().contains("stale-while-revalidate"), "{}", r.cache_status());
}

#[test]
fn a_refresh_triggered_by_a_viewer_with_credentials_stores_what_the_origin_made_public() {
    let (o, s) = crate::setup();
    let swr = ("cache-control", "max-age=0, stale-while-revalidate=600");
    o.route("/swr-pub", Route::ok("v1", &[swr]));
    get(&s, "/swr-pub", &[]);
    o.route("/swr-pub", Route::ok("v2", &[("cache-control", "public, max-age=600")]));
    let r = get(&s, "/swr-pub", &[("Authorization", "Bearer alice")]);
    assert_eq!(r.body, b"v1", "stale served at once");
    assert_eq!(o.count("/swr-pub"), 2, "one background refresh");
    // `public` allows a shared cache to store it (RFC 9111 3.5), as on a foreground miss.
    let r = get(&s, "/swr-pub", &[]);
    assert_eq!(r.body, b"v2");
    assert!(r.cache_status().contains("hit"), "{}", r.cache_status());
    assert_eq!(o.count("/swr-pub"), 2);
}

#[test]
fn stale_while_revalidate_restores_a_varying_response() {
    let (o, s) = crate::setup();
    let vary = ("vary", "Accept-Encoding");
    let gz = ("content-encoding", "gzip");
    let gzip = [("Accept-Encoding", "gzip")];
    o.route(
        "/swr-vary",
        Route::ok(
            "gzip-v1",
            &[("cache-control", "max-age=0, stale-while-revalidate=600"), vary, gz],
        ),
    );
    assert_eq!(get(&s, "/swr-vary", &gzip).body, b"gzip-v1");
    o.route("/swr-vary", Route::ok("gzip-v2", &[("cache-control", "max-age=600"), vary, gz]));
    let r = get(&s, "/swr-vary", &gzip);
    assert_eq!(r.body, b"gzip-v1", "stale served at once");
    assert!(r.cache_status().contains("stale-while-revalidate"), "{}", r.cache_status());
    assert_eq!(o.count("/swr-vary"), 2, "one background refresh");
    let r = get(&s, "/swr-vary", &gzip);
    assert_eq!(r.body, b"gzip-v2", "the refresh was not stored");
    assert!(r.cache_status().contains("hit"), "{}", r.cache_status());
    assert_eq!(r.header("content-encoding"), Some("gzip"));
    assert_eq!(o.count("/swr-vary"), 2);
    // Another variant is still its own.
    o.route("/swr-vary", Route::ok("identity", &[("cache-control", "max-age=600"), vary]));
    let r = get(&s, "/swr-vary", &[("Accept-Encoding", "identity")]);
    assert_eq!(r.body, b"identity");
    assert_eq!(get(&s, "/swr-vary", &gzip).body, b"gzip-v2");
    assert_eq!(o.count("/swr-vary"), 3);
}

#[test]
fn a_variant_selected_by_a_cookie_is_not_refreshed_on_everyones_behalf() {
    let (o, s) = crate::setup();
    let vary = ("vary", "Cookie");
    let swr = ("cache-control", "max-age=0, stale-while-revalidate=600");
    let alice = [("Cookie", "session=alice")];
    o.route("/swr-cookie", Route::ok("for-alice", &[swr, vary]));
    assert_eq!(get(&s, "/swr-cookie", &alice).body, b"for-alice");
    o.route("/swr-cookie", Route::ok("anonymous", &[swr, vary]));
    // Refreshed without her cookie, the origin could only choose another variant.
    let r = get(&s, "/swr-cookie", &alice);
    assert_eq!(r.body, b"for-alice");
    assert!(r.cache_status().contains("stale-while-revalidate"), "{}", r.cache_status());
    assert_eq!(o.count("/swr-cookie"), 1, "no shared refresh of a cookie's variant");
    // A viewer without cookies selects its own variant, refreshed as usual.
    assert_eq!(get(&s, "/swr-cookie", &[]).body, b"anonymous");
    o.route("/swr-cookie", Route::ok("anonymous-v2", &[("cache-control", "max-age=600"), vary]));
    assert_eq!(get(&s, "/swr-cookie", &[]).body, b"anonymous", "stale served at once");
    assert_eq!(o.count("/swr-cookie"), 3, "one shared refresh");
    assert!(o.seen("/swr-cookie")[2].header("cookie").is_none());
    let r = get(&s, "/swr-cookie", &[]);
    assert_eq!(r.body, b"anonymous-v2");
    assert!(r.cache_status().contains("hit"), "{}", r.cache_status());
    assert_eq!(get(&s, "/swr-cookie", &alice).body, b"for-alice");
    assert_eq!(o.count("/swr-cookie"), 3);
}
