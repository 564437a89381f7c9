//! Pass-through of other methods (bodies streamed both ways) and the invalidation a
//! successful unsafe request causes (RFC 9111 4.4).

use crate::client::{body_of, get, request, request_body};
use crate::origin::{Origin, Route};
use crate::server::Server;

#[test]
fn a_post_body_streams_to_the_origin_and_the_response_streams_back() {
    let (o, s) = crate::setup();
    let up = body_of(300_000, 8);
    let down = body_of(200_000, 9);
    let mut r = Route::ok(down.clone(), &[]);
    r.chunked = true;
    r.pieces = 5;
    o.route("/upload", r);
    let resp =
        request_body(s.addr, "POST", "/upload", &[("Content-Type", "video/mp2t")], Some(&up));
    assert_eq!(resp.status, 200);
    assert!(resp.complete);
    assert_eq!(resp.body, down);
    let seen = o.seen("/upload");
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].method, "POST");
    assert!(seen[0].body == up, "the origin got the whole request body");
    assert_eq!(seen[0].header("content-type"), Some("video/mp2t"));
    assert!(resp.cache_status().contains("fwd=method"), "{}", resp.cache_status());
}

#[test]
fn successful_unsafe_methods_invalidate_the_url_and_same_host_locations() {
    let (o, s) = crate::setup();
    let cc = ("cache-control", "max-age=600");
    for p in ["/item", "/loc", "/cloc", "/keep"] {
        o.route(p, Route::ok(p.as_bytes().to_vec(), &[cc]));
        get(&s, p, &[]);
        get(&s, p, &[]);
        assert_eq!(o.count(p), 1, "{p} cached");
    }
    for (i, m) in ["POST", "PUT", "DELETE"].into_iter().enumerate() {
        o.route(
            "/item",
            Route::status(
                201,
                "done",
                &[
                    ("location", "/loc"),
                    ("content-location", "http://test.local/cloc"),
                    ("x-other", "http://other.example/keep"),
                ],
            ),
        );
        let r = request_body(s.addr, m, "/item", &[], Some(b"x"));
        assert_eq!(r.status, 201, "{m}");
        // The GET routes answer again.
        o.route("/item", Route::ok(b"/item".to_vec(), &[cc]));
        for p in ["/item", "/loc", "/cloc"] {
            let r = get(&s, p, &[]);
            assert_eq!(r.body, p.as_bytes());
            let gets = o.seen(p).iter().filter(|s| s.method == "GET").count();
            assert_eq!(gets, i + 2, "{m} invalidated {p}");
        }
        assert_eq!(o.count("/keep"), 1, "an unrelated URL stays cached");
    }
    // A failed unsafe request invalidates nothing.
    o.route("/item", Route::status(500, "no", &[]));
    request(s.addr, "DELETE", "/item", &[]);
    o.route("/item", Route::ok(b"/item".to_vec(), &[cc]));
    get(&s, "/item", &[]);
    assert_eq!(o.seen("/item").iter().filter(|s| s.method == "GET").count(), 4);
}

/// Extension methods (RFC 9110 9.1: any token) pass through on `methods = "pass"` sites,
/// with their bodies; they got 501.
#[test]
fn extension_methods_pass_through_to_the_origin() {
    let (o, s) = crate::setup();
    o.route("/dav", Route::status(207, "multi", &[("content-type", "application/xml")]));
    let r = request_body(s.addr, "PROPFIND", "/dav", &[("Depth", "1")], Some(b"<propfind/>"));
    assert_eq!(r.status, 207);
    assert_eq!(r.body, b"multi");
    assert!(r.cache_status().contains("fwd=method"), "{}", r.cache_status());
    let seen = o.seen("/dav");
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].method, "PROPFIND");
    assert_eq!(seen[0].body, b"<propfind/>");
    assert_eq!(seen[0].header("depth"), Some("1"));
}

/// Stores `/m/<method>` (v1), sends `<method>` to it answered 200 by the origin (which
/// then serves v2 to GETs) and says whether the next GET reached the origin.
fn invalidates(o: &Origin, s: &Server, method: &str) -> bool {
    let p = format!("/m/{method}");
    let cc = ("cache-control", "max-age=600");
    o.route(&p, Route::ok("v1", &[cc]));
    assert_eq!(get(s, &p, &[]).body, b"v1", "{method}");
    assert!(get(s, &p, &[]).cache_status().contains("hit"), "{method}: {p} stored");
    o.route(&p, Route::status(200, "done", &[]));
    let r = request(s.addr, method, &p, &[]);
    assert_eq!((r.status, r.body.as_slice()), (200, &b"done"[..]), "{method}");
    assert!(r.cache_status().contains("fwd=method"), "{method}: {}", r.cache_status());
    o.route(&p, Route::ok("v2", &[cc]));
    let after = get(s, &p, &[]);
    if after.body == b"v1" {
        assert!(after.cache_status().contains("hit"), "{method}: {}", after.cache_status());
    }
    after.body == b"v2"
}

/// Any viewer could invalidate any URL with a made-up method its origin answers 2xx
/// (`FOO /x`, `PURGEME /x`): every method but GET, HEAD, OPTIONS and TRACE invalidated.
/// By default (`invalidate_on = "standard"`) only POST, PUT, DELETE and PATCH do.
#[test]
fn extension_methods_answered_2xx_do_not_invalidate_by_default() {
    let (o, s) = crate::setup();
    for m in ["FOO", "PURGEME", "PROPPATCH"] {
        assert!(!invalidates(&o, &s, m), "{m} invalidated its URL");
    }
    for m in ["POST", "PUT", "DELETE", "PATCH"] {
        assert!(invalidates(&o, &s, m), "{m} did not invalidate its URL");
    }
}

/// `invalidate_on = "all"` keeps RFC 9111 4.4's widest reading: any unsafe method,
/// extension methods included, invalidates; safe ones still do not.
#[test]
fn with_invalidate_on_all_extension_methods_invalidate() {
    let (o, s) = crate::setup_with(|opts| opts.invalidate_on = reel_cache::InvalidateOn::All);
    for m in ["FOO", "PURGEME", "POST", "PATCH"] {
        assert!(invalidates(&o, &s, m), "{m} did not invalidate its URL");
    }
    assert!(!invalidates(&o, &s, "OPTIONS"), "OPTIONS is safe");
}

/// Every 2xx POST used to write a purge record (4 KiB) and scan the whole index, whether
/// or not anything was stored for its URL: 2,000 POSTs wrapped a small store and evicted
/// every object. Invalidating what is not stored must write nothing.
#[test]
fn unsafe_requests_to_urls_with_nothing_stored_write_nothing_and_evict_nothing() {
    // Four volumes of 1 MiB: 2,000 records of 4 KiB would wrap it twice.
    let (o, s) = crate::setup_with(|opts| opts.store = (4 << 20, 1 << 20));
    let cc = ("cache-control", "max-age=600");
    for i in 0..10 {
        o.route(&format!("/obj{i}"), Route::ok(body_of(2000, i), &[cc]));
        get(&s, &format!("/obj{i}"), &[]);
    }
    let before = s.shared.store.stats();
    assert_eq!(before.objects, 10);
    o.route("/api", Route::status(201, "created", &[]));
    let mut c = crate::client::Conn::open(s.addr);
    for i in 0..2000 {
        c.send(
            format!(
                "POST /api?n={i} HTTP/1.1\r\nHost: {}\r\nContent-Length: 2\r\n\r\nhi",
                crate::server::HOST
            )
            .as_bytes(),
        );
        assert_eq!(c.read_response(false).status, 201);
    }
    let after = s.shared.store.stats();
    assert_eq!((after.evictions, after.reclaims), (0, 0), "{after:?}");
    assert_eq!(after.objects, 10);
    for i in 0..10 {
        let r = get(&s, &format!("/obj{i}"), &[]);
        assert!(r.cache_status().contains("hit"), "/obj{i}: {}", r.cache_status());
    }
}

/// Invalidation of a URL that varies removes every stored variant, found through the
/// URL's Vary marker (no scan of the index).
#[test]
fn invalidating_a_varying_url_removes_all_its_variants() {
    let (o, s) = crate::setup();
    let hs = [("cache-control", "max-age=600"), ("vary", "Accept-Encoding")];
    o.route("/vv", Route::ok("v", &hs));
    let encodings = ["gzip", "br", "identity"];
    for e in encodings {
        get(&s, "/vv", &[("Accept-Encoding", e)]);
        assert!(get(&s, "/vv", &[("Accept-Encoding", e)]).cache_status().contains("hit"));
    }
    assert_eq!(o.count("/vv"), 3);
    let objects = s.shared.store.stats().objects;
    o.route("/vv", Route::status(204, "", &[]));
    assert_eq!(request(s.addr, "PUT", "/vv", &[("Content-Length", "0")]).status, 204);
    assert_eq!(s.shared.store.stats().objects, objects - 4, "the marker and three variants");
    o.route("/vv", Route::ok("v2", &hs));
    for e in encodings {
        let r = get(&s, "/vv", &[("Accept-Encoding", e)]);
        assert_eq!(r.body, b"v2", "{e}");
        assert!(r.cache_status().contains("fwd=miss"), "{e}: {}", r.cache_status());
    }
    let gets = o.seen("/vv").iter().filter(|s| s.method == "GET").count();
    assert_eq!(gets, 6);
}
