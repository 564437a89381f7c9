//! A cache in a tier of caches: the parent each request goes to is chosen by its cache key
//! (rendezvous), every origin request carries `CDN-Loop` (RFC 8586) and loops are refused
//! before the cache is looked at, and a parent's `Cache-Status` entries come before ours
//! (RFC 9211).

use std::collections::BTreeSet;

use reel_cache::Node;
use reel_cache::key::KeyConfig;
use reel_cache::path::worker::hops::process_token;
use reel_origin::Balance;

use crate::client::{get, request};
use crate::origin::{Origin, Route};
use crate::server::{Opts, Server};

/// Three parents ranked by rendezvous hashing, each serving `routes`.
fn three_parents(routes: &[(&str, Route)]) -> ([Origin; 3], Opts) {
    let parents = [Origin::start(), Origin::start(), Origin::start()];
    for p in &parents {
        for (path, r) in routes {
            p.route(path, r.clone());
        }
    }
    let mut opts = Opts::new(parents[0].addr);
    opts.tiers = vec![parents.iter().map(|p| p.addr).collect()];
    opts.balance = Balance::Rendezvous;
    opts.key = KeyConfig { ignore_query: vec!["token".into()], ..KeyConfig::default() };
    (parents, opts)
}

/// Which parents received requests for `path`.
fn owners(parents: &[Origin; 3], path: &str) -> Vec<usize> {
    (0..3).filter(|&i| parents[i].count_path(path) > 0).collect()
}

/// With the path and query hashed, one segment requested with 30 viewer tokens would
/// spread over the three parents (and be fetched, stored and served by each).
#[test]
fn fills_and_pass_through_pick_the_parent_by_the_cache_key() {
    let uncached = Route::ok("u", &[("cache-control", "no-store")]);
    let (parents, opts) = three_parents(&[("/u.ts", uncached), ("/p.ts", Route::ok("p", &[]))]);
    let s = Server::start(opts);
    for i in 0..30 {
        // Fills (the response is not storable, so each one reaches a parent).
        let r = get(&s, &format!("/u.ts?token={i}"), &[]);
        assert_eq!((r.status, &r.body[..]), (200, &b"u"[..]));
        // Pass-through: a no-store request and another method.
        let r = get(&s, &format!("/p.ts?token={i}"), &[("cache-control", "no-store")]);
        assert_eq!(r.status, 200);
        let r = request(s.addr, "POST", &format!("/p.ts?token={i}"), &[]);
        assert_eq!(r.status, 200);
    }
    assert_eq!(owners(&parents, "/u.ts").len(), 1, "one parent owns /u.ts");
    let p = owners(&parents, "/p.ts");
    assert_eq!(p.len(), 1, "one parent owns /p.ts");
    assert_eq!(parents[p[0]].count_path("/p.ts"), 60);

    // Different keys spread over the parents.
    for i in 0..30 {
        assert_eq!(get(&s, &format!("/k{i}.ts"), &[]).status, 404);
    }
    let used: BTreeSet<usize> =
        (0..30).flat_map(|i| owners(&parents, &format!("/k{i}.ts"))).collect();
    assert_eq!(used.len(), 3, "30 keys on {used:?}");
}

#[test]
fn origin_requests_carry_cdn_loop_after_what_came_in() {
    let (o, s) = crate::setup_with(|_| {});
    o.route("/a.ts", Route::ok("a", &[("cache-control", "max-age=60"), ("etag", "\"a\"")]));
    o.route("/post", Route::ok("ok", &[]));
    let ours = format!("reel; t={}", process_token());

    let r = get(&s, "/a.ts", &[("cdn-loop", "other-cdn; v=1"), ("cdn-loop", "reel; t=x")]);
    assert_eq!(r.status, 200);
    let seen = o.seen("/a.ts");
    assert_eq!(seen.len(), 1);
    assert_eq!(
        seen[0].header("cdn-loop"),
        Some(format!("other-cdn; v=1, reel; t=x, {ours}").as_str())
    );

    // A client cannot have it stripped as a hop-by-hop field.
    let r = request(s.addr, "POST", "/post", &[("connection", "cdn-loop")]);
    assert_eq!(r.status, 200);
    assert_eq!(o.seen("/post")[0].header("cdn-loop"), Some(ours.as_str()));
}

#[test]
fn looping_requests_get_508_and_nothing_is_fetched() {
    let (o, s) = crate::setup_with(|_| {});
    o.route("/a.ts", Route::ok("a", &[("cache-control", "max-age=60"), ("etag", "\"a\"")]));
    let own = format!("reel; t={}", process_token());
    for (what, loops) in [
        ("our own token", vec![own.as_str()]),
        (
            "our own token, quoted, after others",
            vec!["x, reel; t=1", &format!("reel; t=\"{}\"", process_token())],
        ),
        ("four hops of ours", vec!["reel, other, reel", "reel; t=1, REEL; t=2"]),
    ] {
        let h: Vec<(&str, &str)> = loops.iter().map(|v| ("cdn-loop", *v)).collect();
        let r = get(&s, "/a.ts", &h);
        assert_eq!(r.status, 508, "{what}");
        let r = request(s.addr, "POST", "/a.ts", &h);
        assert_eq!(r.status, 508, "{what}");
    }
    assert_eq!(o.count_path("/a.ts"), 0, "nothing fetched");
    // Three hops of ours are allowed.
    let r = get(&s, "/a.ts", &[("cdn-loop", "reel; t=1, reel; t=2, reel; t=3")]);
    assert_eq!(r.status, 200);
    // Once stored, a looping request is refused all the same.
    assert_eq!(get(&s, "/a.ts", &[("cdn-loop", &own)]).status, 508);
    assert_eq!(o.count_path("/a.ts"), 1);
}

#[test]
fn a_parents_cache_status_comes_before_ours() {
    let (o, s) = crate::setup_with(|opts| opts.node = Node::new("reel", "edge", 3));
    let stored = [
        ("cache-control", "max-age=60"),
        ("etag", "\"c\""),
        ("cache-status", "origin-shield; hit"),
        ("cache-status", "shield; fwd=miss; stored"),
    ];
    o.route("/c.ts", Route::ok("c", &stored));
    o.route(
        "/n.ts",
        Route::ok("n", &[("cache-control", "no-store"), ("cache-status", "shield; fwd=uri-miss")]),
    );
    o.route("/plain.ts", Route::ok("p", &[("cache-control", "max-age=60"), ("etag", "\"p\"")]));

    let up = "origin-shield; hit, shield; fwd=miss; stored";
    let r = get(&s, "/c.ts", &[]);
    assert_eq!(r.cache_status(), format!("{up}, edge; fwd=miss; stored"));
    assert_eq!(r.headers.iter().filter(|(n, _)| n == "cache-status").count(), 1, "one field line");
    // On hits, the stored entries as they were stored, then ours.
    for _ in 0..2 {
        assert_eq!(get(&s, "/c.ts", &[]).cache_status(), format!("{up}, edge; hit"));
    }
    let r = get(&s, "/c.ts", &[("if-none-match", "\"c\"")]);
    assert_eq!((r.status, r.cache_status()), (304, format!("{up}, edge; hit").as_str()));
    let r = get(&s, "/c.ts", &[("range", "bytes=0-0")]);
    assert_eq!((r.status, r.cache_status()), (206, format!("{up}, edge; hit").as_str()));

    let r = get(&s, "/n.ts", &[]);
    assert_eq!(r.cache_status(), "shield; fwd=uri-miss, edge; fwd=miss; detail=not-storable");
    let r = get(&s, "/n.ts", &[("cache-control", "no-store")]);
    assert_eq!(r.cache_status(), "shield; fwd=uri-miss, edge; fwd=request");

    // Without a parent, ours alone.
    assert_eq!(get(&s, "/plain.ts", &[]).cache_status(), "edge; fwd=miss; stored");
    assert_eq!(get(&s, "/plain.ts", &[]).cache_status(), "edge; hit");
}
