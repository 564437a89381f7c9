//! One origin fetch per object: concurrent misses collapse onto the leader's fill, and a
//! follower streams the object while it is still arriving.

use std::sync::mpsc;
use std::time::Duration;

use reel_test_support::wait_until;

use crate::client::{Conn, GUARD, body_of};
use crate::origin::{Gate, OnHeader, Route};
use crate::server::HOST;

fn get_raw(target: &str) -> Vec<u8> {
    format!("GET {target} HTTP/1.1\r\nHost: {HOST}\r\nConnection: close\r\n\r\n").into_bytes()
}

#[test]
fn hundred_concurrent_misses_reach_the_origin_once_and_get_identical_bodies() {
    let (o, s) = crate::setup();
    let body = body_of(300_000, 7);
    let gate = Gate::new();
    let mut r = Route::ok(body.clone(), &[("cache-control", "max-age=600"), ("etag", "\"c1\"")]);
    // A slow origin: the head comes late and the body is held until every client is in.
    r.delay = Duration::from_millis(300);
    r.pieces = 2;
    r.gate = Some(gate.clone());
    o.route("/c/seg.ts", r);

    let (head_tx, head_rx) = mpsc::channel();
    let addr = s.addr;
    let clients: Vec<_> = (0..100)
        .map(|_| {
            let head_tx = head_tx.clone();
            std::thread::spawn(move || {
                let mut c = Conn::open(addr);
                c.send(&get_raw("/c/seg.ts"));
                let (status, headers) = c.read_head();
                head_tx.send(()).unwrap();
                let (b, complete) = c.read_body(&headers, false);
                (status, headers, b, complete)
            })
        })
        .collect();
    drop(head_tx);
    for _ in 0..100 {
        head_rx.recv_timeout(GUARD).expect("every client gets a head while the body is held");
    }
    gate.open(1);
    let mut stored = 0;
    let mut collapsed = 0;
    for c in clients {
        let (status, headers, b, complete) = c.join().unwrap();
        assert_eq!(status, 200);
        assert!(complete, "body framed completely");
        assert!(b == body, "body identical to the origin's");
        let cs = headers.iter().find(|(n, _)| n == "cache-status").map(|(_, v)| v.clone());
        let cs = cs.unwrap_or_default();
        if cs.contains("fwd=miss; stored") {
            stored += 1;
        } else if cs.contains("collapsed") {
            collapsed += 1;
        } else {
            panic!("unexpected cache-status {cs:?}");
        }
    }
    assert_eq!(o.count("/c/seg.ts"), 1, "the origin saw exactly one request");
    assert_eq!((stored, collapsed), (1, 99), "one leader, 99 collapsed followers");
    let hit = crate::client::get(&s, "/c/seg.ts", &[]);
    assert!(hit.cache_status().contains("hit"), "{:?}", hit.cache_status());
    assert_eq!(hit.body, body);
}

#[test]
fn a_follower_gets_body_bytes_before_the_origin_sends_its_last_chunk() {
    let (o, s) = crate::setup();
    let body = body_of(400_000, 9);
    let gate = Gate::new();
    let mut r = Route::ok(body.clone(), &[("cache-control", "max-age=600")]);
    r.chunked = true;
    r.pieces = 4;
    r.gate = Some(gate.clone());
    o.route("/s/seg.m4s", r);

    let mut leader = Conn::open(s.addr);
    leader.send(&get_raw("/s/seg.m4s"));
    let (st, lh) = leader.read_head();
    assert_eq!(st, 200);
    // The origin sent its head and first piece; the other three are held.
    leader.raw_at_least(1);
    gate.open(1);

    let mut follower = Conn::open(s.addr);
    follower.send(&get_raw("/s/seg.m4s"));
    let (st, fh) = follower.read_head();
    assert_eq!(st, 200);
    let cs = fh.iter().find(|(n, _)| n == "cache-status").map(|(_, v)| v.as_str());
    assert!(cs.is_some_and(|v| v.contains("collapsed")), "{cs:?}");
    let early = follower.raw_at_least(1).len();
    assert!(early > 0, "the follower got body bytes");
    assert_eq!(o.finished("/s/seg.m4s"), 0, "... before the origin sent its last chunk");

    gate.open(2);
    let (lb, lok) = leader.read_body(&lh, false);
    let (fb, fok) = follower.read_body(&fh, false);
    assert!(lok && fok);
    assert!(lb == body && fb == body, "both bodies are the origin's");
    assert_eq!(o.count("/s/seg.m4s"), 1);
}

#[test]
fn an_origin_reset_mid_body_closes_the_client_short_and_nothing_is_stored() {
    let (o, s) = crate::setup();
    for (path, chunked) in [("/t/cl.ts", false), ("/t/chunked.ts", true)] {
        let body = body_of(200_000, 3);
        let mut r = Route::ok(body.clone(), &[("cache-control", "max-age=600")]);
        r.chunked = chunked;
        r.pieces = 4;
        r.reset_after = Some(120_000);
        o.route(path, r);
        let first = crate::client::get(&s, path, &[]);
        assert_eq!(first.status, 200);
        assert!(!first.complete, "{path}: a truncated body must not look complete");
        assert!(first.body.len() < body.len());

        o.route(path, Route::ok(body.clone(), &[("cache-control", "max-age=600")]));
        let second = crate::client::get(&s, path, &[]);
        assert_eq!(o.count(path), 2, "{path}: the truncated object was not stored");
        assert!(second.complete && second.body == body);
        assert!(second.cache_status().contains("fwd=miss"), "{}", second.cache_status());
    }
}

#[test]
fn followers_of_a_fill_the_origin_cuts_short_are_closed_short_too() {
    let (o, s) = crate::setup();
    let body = body_of(400_000, 11);
    let gate = Gate::new();
    let mut r = Route::ok(body.clone(), &[("cache-control", "max-age=600")]);
    r.pieces = 4;
    r.gate = Some(gate.clone());
    // Content-Length promised, then the origin resets in the middle of the third piece.
    r.reset_after = Some(250_000);
    o.route("/x/seg.ts", r);

    let mut leader = Conn::open(s.addr);
    leader.send(&get_raw("/x/seg.ts"));
    let (st, lh) = leader.read_head();
    assert_eq!(st, 200);
    leader.raw_at_least(1);

    let mut follower = Conn::open(s.addr);
    follower.send(&get_raw("/x/seg.ts"));
    let (st, fh) = follower.read_head();
    assert_eq!(st, 200);
    let cs = fh.iter().find(|(n, _)| n == "cache-status").map(|(_, v)| v.as_str());
    assert!(cs.is_some_and(|v| v.contains("collapsed")), "{cs:?}");
    assert!(fh.iter().any(|(n, _)| n == "content-length"), "the follower was told a length");

    gate.open(3);
    let (lb, lok) = leader.read_body(&lh, false);
    let (fb, fok) = follower.read_body(&fh, false);
    assert!(!lok && lb.len() < body.len(), "the leader's connection closed short");
    assert!(!fok && fb.len() < body.len(), "the follower's connection closed short");
    assert!(body.starts_with(&lb) && body.starts_with(&fb), "what was sent is the origin's");

    o.route("/x/seg.ts", Route::ok(body.clone(), &[("cache-control", "max-age=600")]));
    let again = crate::client::get(&s, "/x/seg.ts", &[]);
    assert!(again.complete && again.body == body);
    assert_eq!(o.count("/x/seg.ts"), 2, "the cut object was never stored");
}

fn get_with(addr: std::net::SocketAddr, target: &str, extra: &str) -> crate::client::Resp {
    let mut c = Conn::open(addr);
    c.send(
        format!("GET {target} HTTP/1.1\r\nHost: {HOST}\r\n{extra}Connection: close\r\n\r\n")
            .as_bytes(),
    );
    c.read_response(false)
}

/// A leader whose origin request fails because of its own request (here a field the
/// origin answers by closing the connection) failed every follower with its 502. The
/// followers now go round once more: one of them leads a fetch with its own request.
#[test]
fn followers_of_a_leader_whose_own_request_fails_retry_once() {
    let (o, s) = crate::setup();
    let body = body_of(50_000, 4);
    let gate = Gate::new();
    let mut r = Route::ok(body.clone(), &[("cache-control", "max-age=600")]);
    r.on_header = Some(("x-break".into(), OnHeader::HoldThenClose(gate.clone())));
    o.route("/lf", r);
    let addr = s.addr;
    let leader = std::thread::spawn(move || get_with(addr, "/lf", "X-Break: 1\r\n"));
    wait_until("the leader's request at the origin", || o.count("/lf") == 1);
    let followers: Vec<_> =
        (0..6).map(|_| std::thread::spawn(move || get_with(addr, "/lf", ""))).collect();
    // The followers join the leader's fetch and wait on it (they do not reach the origin).
    wait_until("six followers waiting on the leader", || s.coalesced_waiters() == 6);
    assert_eq!(o.count("/lf"), 1);
    gate.open(10);
    assert_eq!(leader.join().unwrap().status, 502, "the leader's own request failed");
    for f in followers {
        let r = f.join().unwrap();
        assert_eq!(r.status, 200, "{}", r.cache_status());
        assert!(r.complete && r.body == body);
    }
    let retries = o.seen("/lf").iter().filter(|s| s.header("x-break").is_none()).count();
    assert_eq!(retries, 1, "the followers' retry is one fetch, coalesced");
}

/// A follower waits for its leader's origin response at most `[cache] lock_timeout`,
/// then fetches on its own, uncached: it waited forever behind a hung leader.
#[test]
fn a_follower_waits_at_most_the_lock_timeout() {
    let (o, s) = crate::setup_with(|opts| opts.lock_timeout = Duration::from_millis(200));
    let gate = Gate::new();
    let mut r = Route::ok("slow", &[("cache-control", "max-age=600")]);
    r.on_header = Some(("x-slow".into(), OnHeader::Hold(gate.clone())));
    o.route("/slow", r);
    let addr = s.addr;
    let leader = std::thread::spawn(move || get_with(addr, "/slow", "X-Slow: 1\r\n"));
    wait_until("the leader's request at the origin", || o.count("/slow") == 1);
    let f = get_with(addr, "/slow", "");
    assert_eq!((f.status, f.body.as_slice()), (200, &b"slow"[..]));
    assert!(f.cache_status().contains("detail=lock-timeout"), "{}", f.cache_status());
    assert_eq!(o.count("/slow"), 2, "the follower fetched on its own while the leader hung");
    gate.open(1);
    let l = leader.join().unwrap();
    assert_eq!((l.status, l.body.as_slice()), (200, &b"slow"[..]));
    // The leader's fill commits just after its client has the last byte.
    s.settle();
    assert!(crate::client::get(&s, "/slow", &[]).cache_status().contains("hit"));
}

#[test]
fn a_dripping_origin_holds_a_fill_no_longer_than_fill_timeout() {
    let (o, s) = crate::setup_with(|o| o.fill_timeout = Duration::from_millis(800));
    let body = body_of(200_000, 5);
    let mut r = Route::ok(body.clone(), &[("cache-control", "max-age=600")]);
    // A piece every 250 ms: always within the origin's idle bound, 5 s in all.
    r.pieces = 20;
    r.piece_delay = Duration::from_millis(250);
    o.route("/d/seg.ts", r);
    let first = crate::client::get(&s, "/d/seg.ts", &[]);
    assert_eq!(first.status, 200);
    assert!(!first.complete && first.body.len() < body.len(), "closed short, never complete");
    // Nothing was stored: the next request goes to the origin again, and with a quick
    // origin gets the whole object.
    o.route("/d/seg.ts", Route::ok(body.clone(), &[("cache-control", "max-age=600")]));
    let second = crate::client::get(&s, "/d/seg.ts", &[]);
    assert!(second.complete && second.body == body);
    assert_eq!(o.count("/d/seg.ts"), 2);
}
