//! Requests shaped to poison or bypass the cache: targets whose key and origin request
//! could name different resources, and viewers' directives that would force origin
//! fetches.

use std::sync::mpsc;
use std::time::Duration;

use crate::client::{Conn, GUARD, Resp, body_of, get, request};
use crate::origin::{Gate, Route};
use crate::server::HOST;

/// `GET /lit/upload/../victim.txt` used to fetch the literal path and store the answer
/// under the key of `/lit/victim.txt`: the origin must be asked for the resource the key
/// names.
#[test]
fn dot_segments_are_resolved_before_the_origin_sees_the_target() {
    let (o, s) = crate::setup();
    o.route("/lit/victim.txt", Route::ok("real victim", &[("cache-control", "max-age=600")]));
    o.route("/lit/upload/../victim.txt", Route::ok("POISON", &[("cache-control", "max-age=600")]));
    let r = get(&s, "/lit/upload/../victim.txt", &[]);
    assert_eq!(r.body, b"real victim");
    let r = get(&s, "/lit/victim.txt", &[]);
    assert_eq!(r.body, b"real victim");
    assert!(r.cache_status().contains("hit"), "{}", r.cache_status());
    assert_eq!(o.count("/lit/upload/../victim.txt"), 0, "no dot-segment reached the origin");
    assert_eq!(o.count("/lit/victim.txt"), 1);
}

/// `/lit/nope/%2e%2e/victim2.txt` used to cache the origin's 404 for the literal target
/// under the key of `/lit/victim2.txt`.
#[test]
fn encoded_dot_segments_cannot_plant_a_negative_entry_for_another_path() {
    let (o, s) = crate::setup_with(|opts| {
        opts.policy.negative_ttl = Some(Duration::from_secs(60));
    });
    o.route("/lit/victim2.txt", Route::ok("v2", &[("cache-control", "max-age=600")]));
    let r = get(&s, "/lit/nope/%2e%2e/victim2.txt", &[]);
    assert_eq!((r.status, r.body.as_slice()), (200, &b"v2"[..]));
    let r = get(&s, "/lit/victim2.txt", &[]);
    assert_eq!((r.status, r.body.as_slice()), (200, &b"v2"[..]));
    assert!(o.all_seen().iter().all(|s| !s.target.contains("..") && !s.target.contains("%2e")));
}

#[test]
fn passed_through_methods_and_no_store_requests_are_normalised_too() {
    let (o, s) = crate::setup();
    o.route("/lit/x", Route::ok("x", &[]));
    request(s.addr, "POST", "/lit/a/../x", &[("content-length", "0")]);
    get(&s, "/lit/b/./../x", &[("cache-control", "no-store")]);
    let targets: Vec<String> = o.all_seen().into_iter().map(|s| s.target).collect();
    assert_eq!(targets, vec!["/lit/x".to_string(), "/lit/x".to_string()]);
}

#[test]
fn absolute_form_targets_keep_their_query_and_share_the_origin_form_key() {
    let (o, s) = crate::setup();
    o.route("/q", Route::ok("q", &[("cache-control", "max-age=600")]));
    o.route("/", Route::ok("root", &[("cache-control", "max-age=600")]));
    let abs = |t: &str| {
        let mut c = Conn::open(s.addr);
        c.send(format!("GET {t} HTTP/1.1\r\nHost: other\r\nConnection: close\r\n\r\n").as_bytes());
        c.read_response(false)
    };
    assert_eq!(abs(&format!("http://{HOST}/q?x=1")).body, b"q");
    assert_eq!(abs(&format!("http://{HOST}?y=2")).body, b"root");
    let seen: Vec<String> = o.all_seen().into_iter().map(|s| s.target).collect();
    assert_eq!(seen, vec!["/q?x=1".to_string(), "/?y=2".to_string()]);
    // The origin-form request for the same resource is a hit on the same key (once the
    // fill is written: a small body is answered before that).
    s.settle();
    let r = get(&s, "/q?x=1", &[]);
    assert!(r.cache_status().contains("hit"), "{}", r.cache_status());
    assert_eq!(o.count("/q?x=1"), 1);
}

#[test]
fn ignored_client_cache_control_cannot_force_origin_fetches() {
    let (o, s) = crate::setup_with(|opts| opts.honor_client_cache_control = false);
    o.route("/seg.ts", Route::ok("seg", &[("cache-control", "max-age=600"), ("etag", "\"s\"")]));
    get(&s, "/seg.ts", &[]);
    for h in [
        ("Cache-Control", "no-cache"),
        ("Cache-Control", "no-store"),
        ("Cache-Control", "max-age=0"),
        ("Pragma", "no-cache"),
    ] {
        let r = get(&s, "/seg.ts", &[h]);
        assert!(r.cache_status().contains("hit"), "{h:?}: {}", r.cache_status());
    }
    assert_eq!(o.count("/seg.ts"), 1);
}

#[test]
fn honoured_client_no_cache_revalidates() {
    let (o, s) = crate::setup();
    let mut r = Route::ok("seg", &[("cache-control", "max-age=600"), ("etag", "\"s\"")]);
    r.honour_inm = true;
    o.route("/seg.ts", r);
    get(&s, "/seg.ts", &[]);
    get(&s, "/seg.ts", &[("Cache-Control", "no-cache")]);
    assert_eq!(o.count("/seg.ts"), 2);
}

/// A `no-store` request for an object being filled joins the fill instead of asking the
/// origin again.
#[test]
fn a_no_store_request_joins_a_fill_in_progress() {
    let (o, s) = crate::setup();
    let body = body_of(200_000, 3);
    let gate = Gate::new();
    let mut r = Route::ok(body.clone(), &[("cache-control", "max-age=600")]);
    r.pieces = 2;
    r.gate = Some(gate.clone());
    o.route("/big.ts", r);
    let addr = s.addr;
    let (tx, rx) = mpsc::channel();
    let leader = std::thread::spawn(move || {
        let mut c = Conn::open(addr);
        c.send(
            format!("GET /big.ts HTTP/1.1\r\nHost: {HOST}\r\nConnection: close\r\n\r\n").as_bytes(),
        );
        let (status, headers) = c.read_head();
        tx.send(()).unwrap();
        let (b, complete) = c.read_body(&headers, false);
        (status, b, complete)
    });
    rx.recv_timeout(GUARD).expect("leader's head");
    let (tx, rx) = mpsc::channel();
    let follower = std::thread::spawn(move || {
        let mut c = Conn::open(addr);
        c.send(
            format!("GET /big.ts HTTP/1.1\r\nHost: {HOST}\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n")
                .as_bytes(),
        );
        let (status, headers) = c.read_head();
        tx.send(()).unwrap();
        let (body, complete) = c.read_body(&headers, false);
        Resp { status, headers, body, complete }
    });
    // The follower gets its head while the origin still holds the body back: it has
    // joined the fill.
    rx.recv_timeout(GUARD).expect("follower's head");
    gate.open(1);
    let (status, b, complete) = leader.join().unwrap();
    assert!(status == 200 && complete && b == body);
    let f = follower.join().unwrap();
    assert_eq!(f.status, 200);
    assert!(f.body == body);
    assert!(f.cache_status().contains("collapsed"), "{}", f.cache_status());
    assert_eq!(o.count("/big.ts"), 1);
}

/// On a `drop_query` site the key leaves out the query the origin saw: a junk query's 404
/// was stored by `negative_ttl` under the key every viewer's valid query uses. The same
/// for a parameter `ignore_query` names.
#[test]
fn a_junk_query_cannot_plant_a_negative_entry_on_a_drop_query_site() {
    for drop_query in [true, false] {
        junk_query_on(drop_query);
    }
}

fn junk_query_on(drop_query: bool) {
    let (o, s) = crate::setup_with(|opts| {
        opts.policy.negative_ttl = Some(Duration::from_secs(60));
        opts.key.drop_query = drop_query;
        if !drop_query {
            opts.key.ignore_query = vec!["token".into()];
        }
    });
    o.route("/tok/seg.ts", Route::ok("segment", &[("cache-control", "max-age=600")]));
    o.route("/tok/seg.ts?token=junk", Route::status(404, "bad token", &[]));
    o.route(
        "/tok/gone.ts?token=junk",
        Route::status(410, "bad token", &[("cache-control", "max-age=600")]),
    );
    o.route("/tok/gone.ts", Route::ok("there", &[("cache-control", "max-age=600")]));
    for p in ["/tok/seg.ts", "/tok/gone.ts"] {
        for _ in 0..2 {
            let r = get(&s, &format!("{p}?token=junk"), &[]);
            assert!(matches!(r.status, 404 | 410), "{p}: {}", r.status);
        }
        assert_eq!(o.count(&format!("{p}?token=junk")), 2, "{p}: the error was not stored");
        let r = get(&s, &format!("{p}?token=good"), &[]);
        assert_eq!(r.status, 200, "{p}: the valid query reached the origin");
        // The valid answer is stored and shared as usual.
        let r = get(&s, &format!("{p}?token=other"), &[]);
        assert!(r.cache_status().contains("hit"), "{p}: {}", r.cache_status());
    }
}
