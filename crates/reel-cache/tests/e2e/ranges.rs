//! Range requests (RFC 9110 14): 206 from a complete object, 416, a range answered while the
//! object is still filling, and If-Range.

use crate::client::{Conn, body_of, get};
use crate::origin::{Gate, Route};
use crate::server::HOST;

#[test]
fn a_range_of_a_complete_object_is_a_206_with_content_range() {
    let (o, s) = crate::setup();
    let body = body_of(100_000, 1);
    o.route(
        "/r.ts",
        Route::ok(body.clone(), &[("cache-control", "max-age=600"), ("etag", "\"r1\"")]),
    );
    assert_eq!(get(&s, "/r.ts", &[]).body, body);
    let r = get(&s, "/r.ts", &[("Range", "bytes=100-199")]);
    assert_eq!(r.status, 206);
    assert_eq!(r.header("content-range"), Some("bytes 100-199/100000"));
    assert_eq!(r.body, &body[100..200]);
    let tail = get(&s, "/r.ts", &[("Range", "bytes=-10")]);
    assert_eq!(tail.status, 206);
    assert_eq!(tail.body, &body[body.len() - 10..]);
    assert_eq!(o.count("/r.ts"), 1, "ranges are answered from the cache");
}

#[test]
fn an_unsatisfiable_range_is_a_416() {
    let (o, s) = crate::setup();
    o.route("/r416", Route::ok(body_of(1000, 2), &[("cache-control", "max-age=600")]));
    get(&s, "/r416", &[]);
    let r = get(&s, "/r416", &[("Range", "bytes=5000-")]);
    assert_eq!(r.status, 416);
    assert_eq!(r.header("content-range"), Some("bytes */1000"));
    assert_eq!(o.count("/r416"), 1);
}

#[test]
fn a_range_of_a_filling_object_is_answered_while_it_fills() {
    let (o, s) = crate::setup();
    let body = body_of(400_000, 4);
    let gate = Gate::new();
    let mut r = Route::ok(body.clone(), &[("cache-control", "max-age=600")]);
    r.pieces = 4;
    r.gate = Some(gate.clone());
    o.route("/rf.ts", r);
    let mut leader = Conn::open(s.addr);
    leader.send(
        format!("GET /rf.ts HTTP/1.1\r\nHost: {HOST}\r\nConnection: close\r\n\r\n").as_bytes(),
    );
    let (_, lh) = leader.read_head();
    leader.raw_at_least(1);
    let r = crate::client::request(s.addr, "GET", "/rf.ts", &[("Range", "bytes=10-5009")]);
    assert_eq!(r.status, 206);
    assert_eq!(r.header("content-range"), Some("bytes 10-5009/400000"));
    assert_eq!(r.body, &body[10..5010]);
    assert_eq!(o.finished("/rf.ts"), 0, "answered before the origin finished");
    gate.open(3);
    let (lb, ok) = leader.read_body(&lh, false);
    assert!(ok && lb == body);
    assert_eq!(o.count("/rf.ts"), 1);
}

#[test]
fn if_range_mismatch_gets_the_full_200_and_a_match_gets_206() {
    let (o, s) = crate::setup();
    let body = body_of(5000, 5);
    o.route(
        "/ir",
        Route::ok(body.clone(), &[("cache-control", "max-age=600"), ("etag", "\"ir1\"")]),
    );
    get(&s, "/ir", &[]);
    let miss = get(&s, "/ir", &[("Range", "bytes=0-9"), ("If-Range", "\"other\"")]);
    assert_eq!(miss.status, 200);
    assert_eq!(miss.body, body);
    let hit = get(&s, "/ir", &[("Range", "bytes=0-9"), ("If-Range", "\"ir1\"")]);
    assert_eq!(hit.status, 206);
    assert_eq!(hit.body, &body[..10]);
    assert_eq!(o.count("/ir"), 1);
}
