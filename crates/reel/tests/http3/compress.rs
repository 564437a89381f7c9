//! `[site.compress]` over HTTP/3: a playlist answered in brotli or gzip by
//! `Accept-Encoding`, its bytes decoding to the stored body, the representation made once
//! and shared with HTTP/1.1 viewers, a range of the compressed bytes, and a segment sent as
//! it is.

use std::io::Read as _;

use super::*;

const M3U8: &str = "application/vnd.apple.mpegurl";

fn field<'a>(r: &'a reel_test_support::h2::Reply, name: &str) -> Option<&'a str> {
    r.headers.get(name).and_then(|v| v.to_str().ok())
}

fn decoded(r: &reel_test_support::h2::Reply) -> Vec<u8> {
    let mut out = Vec::new();
    match field(r, "content-encoding") {
        None => out.clone_from(&r.body),
        Some("gzip") => {
            flate2::read::GzDecoder::new(&r.body[..]).read_to_end(&mut out).expect("gzip");
        }
        Some("br") => {
            brotli::BrotliDecompress(&mut &r.body[..], &mut out).expect("brotli");
        }
        Some(other) => panic!("unexpected coding {other}"),
    }
    out
}

#[test]
fn playlists_are_compressed_by_accept_encoding_over_http3() {
    let dir = tempfile::tempdir().expect("tmp");
    let origin = Origin::start("o");
    let mut list = b"#EXTM3U\n#EXT-X-VERSION:7\n#EXT-X-TARGETDURATION:4\n".to_vec();
    for i in 0..200 {
        list.extend_from_slice(format!("#EXTINF:4.000,\nseg_{i:05}.ts\n").as_bytes());
    }
    origin.put("/v/index.m3u8", cached(&list).header("content-type", M3U8));
    let seg = body(20_000, 5);
    origin.put("/v/seg.ts", cached(&seg).header("content-type", "video/mp2t"));
    let pki = Pki::new(dir.path());
    pki.leaf("edge", &["edge.example.test"]);
    let reel = Reel::start(&h3_conf(dir.path(), &origin, &pki, ""));
    let addr = reel.listener_addr("https").expect("https listener");
    // Stored first: representations are made from the stored version, which every worker
    // shares (a response still filling is answered as it comes).
    eventually("the playlist stored", || {
        let r = crate::common::request(reel.data, "GET", "edge.example.test", "/v/index.m3u8", &[]);
        r.cache_status().contains("hit").then_some(())
    });
    rt().block_on(async {
        let ep = h3::endpoint();
        let (_conn, mut c) = h3::connect(&ep, addr).await.expect("HTTP/3 connection");
        let id = get(&mut c, "/v/index.m3u8", &[]).await;
        assert_eq!((id.status, field(&id, "content-encoding")), (200, None));
        assert!(id.cache_status().contains("hit"), "{}", id.cache_status());
        assert!(id.body == list);
        for coding in ["br", "gzip"] {
            let r = get(&mut c, "/v/index.m3u8", &[("accept-encoding", coding)]).await;
            assert_eq!(r.status, 200, "{coding}");
            assert_eq!(field(&r, "content-encoding"), Some(coding), "{:?}", r.headers);
            assert_eq!(field(&r, "vary"), Some("Accept-Encoding"), "{coding}");
            assert!(r.body.len() * 4 < list.len(), "{coding}: {} bytes", r.body.len());
            assert!(decoded(&r) == list, "{coding}: decodes to the stored body");
            // A range is of the representation asked for: the compressed bytes.
            let part = get(
                &mut c,
                "/v/index.m3u8",
                &[("accept-encoding", coding), ("range", "bytes=0-9")],
            )
            .await;
            assert_eq!(part.status, 206, "{coding}");
            assert_eq!(part.body[..], r.body[..10], "{coding}");
        }
        let s = get(&mut c, "/v/seg.ts", &[("accept-encoding", "br, gzip")]).await;
        assert_eq!((s.status, field(&s, "content-encoding")), (200, None));
        assert!(s.body == seg);
    });
    // HTTP/1.1 viewers get the representation HTTP/3 made: one per coding in all.
    let h1 = crate::common::request(
        reel.data,
        "GET",
        "edge.example.test",
        "/v/index.m3u8",
        &[("accept-encoding", "gzip")],
    );
    assert_eq!(h1.header("content-encoding"), Some("gzip"));
    let m = reel.metrics();
    for coding in ["br", "gzip"] {
        let made = metric(&m, &format!("reel_compress_made_total{{encoding=\"{coding}\"}}"));
        assert_eq!(made, Some(1.0), "{coding}");
    }
    assert_eq!(origin.hits("/v/index.m3u8"), 1);
}
