//! Viewer tokens (`[site.token]`) over HTTP/2 and HTTP/3: the checks run on the request
//! every protocol shares, so a request without a token or with a forged one is a 403 that
//! never reaches the origin, and a token in the query or in one of HTTP/2's separate
//! `cookie` fields admits the viewer to the one stored copy, the origin never seeing it.

use super::*;
use crate::token::{K1, acl_token, generator, token_table};

#[test]
fn tokens_are_checked_and_stripped_over_http2_and_http3() {
    let Some(py) = generator() else {
        return reel_test_support::skip("akamai-edgeauth could not be installed with pip");
    };
    let dir = tempfile::tempdir().expect("tmp");
    let origin = Origin::start("o");
    let seg = body(30_000, 7);
    origin.put("/v/seg_1.ts", cached(&seg));
    let pki = Pki::new(dir.path());
    pki.leaf("edge", &["edge.example.test"]);
    let mut conf = h3_conf(dir.path(), &origin, &pki, "");
    conf.extra = token_table(&[K1], "off");
    let reel = Reel::start(&conf);
    let addr = reel.listener_addr("https").expect("https listener");
    let token = acl_token(&py, K1, "/v/*");
    let forged = format!("{}0", &token[..token.len() - 1]);
    let with = |t: &str| format!("/v/seg_1.ts?hdnts={t}");
    rt().block_on(async {
        let h2 = h2_client(addr, pki.client(&[b"h2"]), "edge.example.test").await;
        let h2_get = |target: String, cookies: &[&str]| {
            let mut b = http::Request::builder()
                .method("GET")
                .uri(format!("https://edge.example.test{target}"));
            for c in cookies {
                b = b.header("cookie", *c);
            }
            reel_test_support::h2::exchange(&h2, b.body(()).expect("request"), None)
        };
        let none = h2_get("/v/seg_1.ts".into(), &[]).await.expect("h2");
        assert_eq!(none.status, 403);
        let bad = h2_get(with(&forged), &[]).await.expect("h2");
        assert_eq!(bad.status, 403);
        let ok = h2_get(with(&token), &[]).await.expect("h2");
        assert_eq!(ok.status, 200);
        assert!(ok.body == seg);
        // HTTP/2 splits cookies into fields of their own (RFC 9113 8.2.3).
        let cookie = format!("hdnts={token}");
        let by_cookie = h2_get("/v/seg_1.ts".into(), &["theme=dark", &cookie, "lang=en"]);
        let by_cookie = by_cookie.await.expect("h2");
        assert_eq!(by_cookie.status, 200);

        let ep = h3::endpoint();
        let (_conn, mut c) = h3::connect(&ep, addr).await.expect("HTTP/3 connection");
        assert_eq!(get(&mut c, "/v/seg_1.ts", &[]).await.status, 403);
        assert_eq!(get(&mut c, &with(&forged), &[]).await.status, 403);
        let hit = get(&mut c, &with(&token), &[]).await;
        assert_eq!(hit.status, 200);
        assert!(hit.cache_status().contains("hit"), "{}", hit.cache_status());
        assert!(hit.body == seg);
        let by_cookie = get(&mut c, "/v/seg_1.ts", &[("cookie", &cookie)]).await;
        assert_eq!(by_cookie.status, 200);
    });
    assert_eq!(origin.hits("/v/seg_1.ts"), 1, "one fill for every admitted viewer");
    let targets = origin.targets();
    assert!(targets.iter().all(|t| !t.contains("hdnts")), "{targets:?}");
    let m = reel.metrics();
    let denied: f64 = m
        .lines()
        .filter(|l| l.starts_with("reel_denied_total{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    assert_eq!(denied, 4.0, "{m}");
}
