//! Pass-through of other methods (bodies streamed both ways) and the invalidation a
//! successful unsafe request causes (RFC 9111 4.4).

use crate::client::{body_of, get, request, request_body};
use crate::origin::Route;

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
/// with their bodies; they got 501. A successful one invalidates like any unsafe method.
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

    let cc = ("cache-control", "max-age=600");
    o.route("/res", Route::ok("v1", &[cc]));
    get(&s, "/res", &[]);
    o.route("/res", Route::status(200, "purged", &[]));
    let r = request(s.addr, "PURGEX", "/res", &[]);
    assert_eq!((r.status, r.body.as_slice()), (200, &b"purged"[..]));
    o.route("/res", Route::ok("v2", &[cc]));
    assert_eq!(get(&s, "/res", &[]).body, b"v2", "the extension method invalidated /res");
}
