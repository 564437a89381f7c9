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
