//! `[site.cmsd]` over HTTP/2 and HTTP/3: the fields are added to the response every
//! protocol shares, so a miss, a 206 and a hit carry the same `CMSD-Static` and
//! `CMSD-Dynamic` as over HTTP/1.1.

use super::*;

fn values<'a>(r: &'a reel_test_support::h2::Reply, name: &str) -> Vec<&'a str> {
    r.headers.get_all(name).iter().filter_map(|v| v.to_str().ok()).collect()
}

#[test]
fn cmsd_fields_over_http2_and_http3() {
    let dir = tempfile::tempdir().expect("tmp");
    let origin = Origin::start("o");
    let a = body(40_000, 5);
    origin.put("/c/v1/seg.m4s", cached(&a).header("content-type", "video/mp4"));
    let pki = Pki::new(dir.path());
    pki.leaf("edge", &["edge.example.test"]);
    let mut conf = h3_conf(dir.path(), &origin, &pki, "");
    conf.site = "[site.cmsd]\nenabled = true\nid = \"edge-h\"\n".into();
    let reel = Reel::start(&conf);
    let addr = reel.listener_addr("https").expect("https listener");
    let check = |r: &reel_test_support::h2::Reply, what: &str| {
        assert_eq!(values(r, "cmsd-static"), ["ot=v"], "{what}: {:?}", r.headers);
        assert_eq!(values(r, "cmsd-dynamic"), ["\"edge-h\""], "{what}: {:?}", r.headers);
    };
    rt().block_on(async {
        let h2 = h2_client(addr, pki.client(&[b"h2"]), "edge.example.test").await;
        let req = |fields: &[(&str, &str)]| {
            let mut b = http::Request::builder().uri("https://edge.example.test/c/v1/seg.m4s");
            for (n, v) in fields {
                b = b.header(*n, *v);
            }
            b.body(()).expect("request")
        };
        let miss = reel_test_support::h2::exchange(&h2, req(&[]), None).await.expect("h2");
        assert_eq!(miss.status, 200);
        assert!(miss.body == a);
        check(&miss, "h2 miss");
        let range = reel_test_support::h2::exchange(&h2, req(&[("range", "bytes=10-19")]), None)
            .await
            .expect("h2");
        assert_eq!((range.status, range.body.len()), (206, 10));
        check(&range, "h2 206");

        let ep = h3::endpoint();
        let (_conn, mut c) = h3::connect(&ep, addr).await.expect("HTTP/3 connection");
        let hit = get(&mut c, "/c/v1/seg.m4s", &[]).await;
        assert_eq!(hit.status, 200);
        assert!(hit.cache_status().contains("hit"), "{}", hit.cache_status());
        assert!(hit.body == a);
        check(&hit, "h3 hit");
        let nm = get(&mut c, "/c/v1/seg.m4s", &[("if-none-match", "\"v1\"")]).await;
        assert_eq!(nm.status, 304);
        check(&nm, "h3 304");
    });
    assert_eq!(origin.hits("/c/v1/seg.m4s"), 1);
}
