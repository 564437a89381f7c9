//! `[site.cors]` and `[[site.header]]` over HTTP/2 and HTTP/3: the edits are made on the
//! response every protocol shares, so a hit, a range and a preflight carry the same fields
//! as over HTTP/1.1, with the origin's own CORS fields replaced.

use super::*;

const PLAYER: &str = "https://player.example";

fn values<'a>(r: &'a reel_test_support::h2::Reply, name: &str) -> Vec<&'a str> {
    r.headers.get_all(name).iter().filter_map(|v| v.to_str().ok()).collect()
}

#[test]
fn cors_and_header_rules_apply_over_http2_and_http3() {
    let dir = tempfile::tempdir().expect("tmp");
    let origin = Origin::start("o");
    let a = body(50_000, 3);
    origin.put("/c/a.ts", cached(&a).header("access-control-allow-origin", "*"));
    let pki = Pki::new(dir.path());
    pki.leaf("edge", &["edge.example.test"]);
    let mut conf = h3_conf(dir.path(), &origin, &pki, "");
    conf.site = format!(
        "[site.cors]\nallow_origins = [\"{PLAYER}\"]\n\n[[site.header]]\naction = \"set\"\n\
         name = \"Strict-Transport-Security\"\nvalue = \"max-age=31536000\"\n"
    );
    let reel = Reel::start(&conf);
    let addr = reel.listener_addr("https").expect("https listener");
    let check = |r: &reel_test_support::h2::Reply, what: &str| {
        assert_eq!(values(r, "access-control-allow-origin"), [PLAYER], "{what}: {:?}", r.headers);
        let vary = values(r, "vary").join(",").to_ascii_lowercase();
        assert!(vary.contains("origin"), "{what}: {:?}", r.headers);
        let expose = values(r, "access-control-expose-headers").join(",");
        assert!(expose.contains("Cache-Status"), "{what}: {:?}", r.headers);
        assert_eq!(values(r, "strict-transport-security"), ["max-age=31536000"], "{what}");
    };
    rt().block_on(async {
        let h2 = h2_client(addr, pki.client(&[b"h2"]), "edge.example.test").await;
        let req = |method: &str, fields: &[(&str, &str)]| {
            let mut b = http::Request::builder()
                .method(method)
                .uri("https://edge.example.test/c/a.ts")
                .header("origin", PLAYER);
            for (n, v) in fields {
                b = b.header(*n, *v);
            }
            b.body(()).expect("request")
        };
        let miss = reel_test_support::h2::exchange(&h2, req("GET", &[]), None).await.expect("h2");
        assert_eq!(miss.status, 200);
        assert!(miss.body == a);
        check(&miss, "h2 miss");
        let range =
            reel_test_support::h2::exchange(&h2, req("GET", &[("range", "bytes=0-99")]), None)
                .await
                .expect("h2");
        assert_eq!((range.status, range.body.len()), (206, 100));
        check(&range, "h2 206");
        let pre = reel_test_support::h2::exchange(
            &h2,
            req(
                "OPTIONS",
                &[
                    ("access-control-request-method", "GET"),
                    ("access-control-request-headers", "cmcd-request"),
                ],
            ),
            None,
        )
        .await
        .expect("h2 preflight");
        assert_eq!(pre.status, 204);
        assert_eq!(values(&pre, "access-control-allow-origin"), [PLAYER]);
        assert_eq!(values(&pre, "access-control-allow-methods"), ["GET, HEAD"]);

        let ep = h3::endpoint();
        let (_conn, mut c) = h3::connect(&ep, addr).await.expect("HTTP/3 connection");
        let hit = get(&mut c, "/c/a.ts", &[("origin", PLAYER)]).await;
        assert_eq!(hit.status, 200);
        assert!(hit.cache_status().contains("hit"), "{}", hit.cache_status());
        assert!(hit.body == a);
        check(&hit, "h3 hit");
        let pre = h3::request_at(
            &mut c,
            "edge.example.test",
            "OPTIONS",
            "/c/a.ts",
            &[("origin", PLAYER), ("access-control-request-method", "GET")],
            None,
        )
        .await
        .expect("h3 preflight");
        assert_eq!(pre.status, 204);
        assert_eq!(values(&pre, "access-control-allow-origin"), [PLAYER]);
        let other = get(&mut c, "/c/a.ts", &[("origin", "https://evil.example")]).await;
        assert!(values(&other, "access-control-allow-origin").is_empty(), "{:?}", other.headers);
    });
    assert_eq!(origin.hits("/c/a.ts"), 1, "one fill; no preflight reached the origin");
}
