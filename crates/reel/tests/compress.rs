//! Compressed playlists and manifests (`[site.compress]`) through the real binary: gzip and
//! brotli chosen by `Accept-Encoding` with q-values, the bytes decompressing to the stored
//! identity body, made once per object version and coding (`reel_compress_made_total`),
//! `Vary`, a strong `ETag` per coding and its 304, `Range` on the compressed bytes, HEAD,
//! segments and an origin's own coding passed as they are, over HTTP/1.1 and HTTP/2 (curl
//! `--compressed`), and an LL-HLS blocking playlist reload answered compressed.

use std::io::Read;
use std::net::SocketAddr;
use std::process::Command;
use std::time::Duration;

use reel_demo_origin::DemoOriginConfig;

use crate::common::{Conf, Object, Origin, Reel, Resp, metric, request};
use crate::tls::{Pki, tls_conf};

const M3U8: &str = "application/vnd.apple.mpegurl";

/// A VOD playlist of `n` segments (compresses well, as real ones do).
fn playlist(n: usize) -> Vec<u8> {
    let mut p =
        b"#EXTM3U\n#EXT-X-VERSION:7\n#EXT-X-TARGETDURATION:4\n#EXT-X-PLAYLIST-TYPE:VOD\n".to_vec();
    for i in 0..n {
        p.extend_from_slice(
            format!("#EXTINF:4.000,\nhttps://media.example.test/v1/seg_{i:05}.ts\n").as_bytes(),
        );
    }
    p.extend_from_slice(b"#EXT-X-ENDLIST\n");
    p
}

fn gunzip(b: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(b).read_to_end(&mut out).expect("gzip");
    out
}

fn unbrotli(b: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    brotli::BrotliDecompress(&mut &b[..], &mut out).expect("brotli");
    out
}

/// The body of `r` decoded by its `Content-Encoding`.
fn decoded(r: &Resp) -> Vec<u8> {
    match r.header("content-encoding") {
        None => r.body.clone(),
        Some("gzip") => gunzip(&r.body),
        Some("br") => unbrotli(&r.body),
        Some(other) => panic!("unexpected coding {other}"),
    }
}

fn get_ae(addr: SocketAddr, path: &str, ae: &str) -> Resp {
    request(addr, "GET", "127.0.0.1", path, &[("accept-encoding", ae)])
}

fn made(reel: &Reel, coding: &str) -> f64 {
    let m = reel.metrics();
    metric(&m, &format!("reel_compress_made_total{{encoding=\"{coding}\"}}")).unwrap_or(-1.0)
}

fn origin_with_objects() -> (Origin, Vec<u8>, Vec<u8>) {
    let origin = Origin::start("o");
    let small = playlist(100);
    let big = playlist(600);
    assert!(small.len() < 16 * 1024 && big.len() > 16 * 1024, "one from memory, one from disk");
    let obj = |b: &[u8], ct: &str, etag: &str| {
        Object::ok(b.to_vec())
            .header("content-type", ct)
            .header("cache-control", "max-age=600")
            .header("etag", etag)
    };
    origin.put("/vod/index.m3u8", obj(&small, M3U8, "\"v1\""));
    origin.put("/vod/manifest.mpd", obj(&big, "application/dash+xml; charset=utf-8", "\"m1\""));
    // Text-like bytes, but a segment: never compressed.
    origin.put("/vod/seg_00001.ts", obj(&small, "video/mp2t", "\"s1\""));
    origin.put(
        "/vod/nt.m3u8",
        obj(&small, M3U8, "\"n1\"").header("cache-control", "max-age=600, no-transform"),
    );
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    std::io::Write::write_all(&mut gz, &small).unwrap();
    let pre = gz.finish().unwrap();
    origin.put(
        "/vod/pre.json",
        obj(&pre, "application/json", "\"p1\"")
            .header("content-encoding", "gzip")
            .header("vary", "Accept-Encoding, Origin"),
    );
    (origin, small, big)
}

#[test]
fn compress_playlists_by_accept_encoding_once_per_version_with_their_own_etag() {
    let dir = tempfile::tempdir().unwrap();
    let (origin, small, big) = origin_with_objects();
    let reel = Reel::start(&Conf::new(dir.path(), &origin));
    let a = reel.data;
    for (path, body) in [("/vod/index.m3u8", &small), ("/vod/manifest.mpd", &big)] {
        let tag = if path.ends_with("m3u8") { "v1" } else { "m1" };
        // Identity first (fills the store); it carries Vary, since others get it compressed.
        let id = get_ae(a, path, "identity");
        assert_eq!(id.status, 200, "{path}");
        assert!(id.body == *body, "{path}");
        assert_eq!(id.header("content-encoding"), None, "{path}");
        assert_eq!(id.header("vary"), Some("Accept-Encoding"), "{path}");
        assert_eq!(id.header("etag"), Some(format!("\"{tag}\"").as_str()));
        // A body larger than 16 KiB is answered identity until its fill is stored.
        crate::common::eventually(path, || {
            get_ae(a, path, "identity").cache_status().contains("hit").then_some(())
        });
        for (ae, want) in [
            ("br", Some("br")),
            ("gzip", Some("gzip")),
            ("gzip;q=0, br;q=0", None),
            ("*", Some("br")),
            ("gzip, deflate, br", Some("br")),
            ("br;q=0.5, gzip", Some("gzip")),
            ("x-gzip;q=0.9, br;q=0.1", Some("gzip")),
        ] {
            let r = get_ae(a, path, ae);
            assert_eq!(r.status, 200, "{path} {ae}");
            assert_eq!(r.header("content-encoding"), want, "{path} {ae}");
            assert_eq!(r.header("vary"), Some("Accept-Encoding"), "{path} {ae}");
            assert!(decoded(&r) == *body, "{path} {ae}: decodes to the stored body");
            let len: usize = r.header("content-length").and_then(|l| l.parse().ok()).unwrap();
            assert_eq!(len, r.body.len(), "{path} {ae}");
            let etag = match want {
                Some("br") => format!("\"{tag}-br\""),
                Some(_) => format!("\"{tag}-gz\""),
                None => format!("\"{tag}\""),
            };
            assert_eq!(r.header("etag"), Some(etag.as_str()), "{path} {ae}");
            if want.is_some() {
                assert!(
                    r.body.len() * 4 < body.len(),
                    "{path} {ae}: {} of {}",
                    r.body.len(),
                    body.len()
                );
            }
        }
        assert_eq!(origin.hits(path), 1, "{path}: one fill, every coding made from it");
    }
    // One representation per version and coding, however many requests.
    assert_eq!((made(&reel, "br"), made(&reel, "gzip")), (2.0, 2.0), "{}", reel.metrics());
    for _ in 0..5 {
        assert_eq!(get_ae(a, "/vod/index.m3u8", "br").header("content-encoding"), Some("br"));
    }
    assert_eq!((made(&reel, "br"), made(&reel, "gzip")), (2.0, 2.0), "made again");
    let m = reel.metrics();
    assert!(metric(&m, "reel_compress_served_total{encoding=\"br\"}").unwrap_or(0.0) >= 9.0, "{m}");

    // Conditionals: each coding's ETag validates its own representation only.
    let p = "/vod/index.m3u8";
    let r = request(
        a,
        "GET",
        "127.0.0.1",
        p,
        &[("accept-encoding", "gzip"), ("if-none-match", "\"v1-gz\"")],
    );
    assert_eq!(r.status, 304);
    assert_eq!(r.header("etag"), Some("\"v1-gz\""));
    assert_eq!(r.header("vary"), Some("Accept-Encoding"));
    let r = request(
        a,
        "GET",
        "127.0.0.1",
        p,
        &[("accept-encoding", "br"), ("if-none-match", "\"v1-gz\"")],
    );
    assert_eq!((r.status, r.header("content-encoding")), (200, Some("br")));
    let r = request(
        a,
        "GET",
        "127.0.0.1",
        p,
        &[("accept-encoding", "br"), ("if-none-match", "\"v1\"")],
    );
    assert_eq!(r.status, 200, "the identity ETag does not validate the br representation");
    let r = request(a, "GET", "127.0.0.1", p, &[("if-none-match", "\"v1\"")]);
    assert_eq!(r.status, 304, "nor the other way round");

    // Range: served on the representation asked for.
    let whole = get_ae(a, p, "gzip").body;
    let r = request(
        a,
        "GET",
        "127.0.0.1",
        p,
        &[("accept-encoding", "gzip"), ("range", "bytes=10-109")],
    );
    assert_eq!(r.status, 206);
    assert_eq!(r.header("content-encoding"), Some("gzip"));
    assert_eq!(r.header("content-range"), Some(format!("bytes 10-109/{}", whole.len()).as_str()));
    assert!(r.body == whole[10..110]);
    let r = request(
        a,
        "GET",
        "127.0.0.1",
        p,
        &[("accept-encoding", "gzip"), ("range", "bytes=0-9, 200-209")],
    );
    assert_eq!(r.status, 200, "several ranges get the whole representation");
    assert!(r.body == whole);
    let r = request(a, "GET", "127.0.0.1", p, &[("range", "bytes=10-109")]);
    assert_eq!((r.status, r.header("content-encoding")), (206, None));
    assert!(r.body == small[10..110], "identity ranges are identity bytes");

    // HEAD: the fields of GET.
    let h = request(a, "HEAD", "127.0.0.1", p, &[("accept-encoding", "br")]);
    let g = get_ae(a, p, "br");
    for f in ["content-encoding", "content-length", "etag", "vary", "content-type"] {
        assert_eq!(h.header(f), g.header(f), "HEAD {f}");
    }

    // Never compressed: a segment, a no-transform response, an origin's own coding.
    for path in ["/vod/seg_00001.ts", "/vod/nt.m3u8"] {
        for _ in 0..2 {
            let r = get_ae(a, path, "br, gzip");
            assert_eq!(r.header("content-encoding"), None, "{path}");
            assert_eq!(r.header("vary"), None, "{path}");
            assert!(r.body == small, "{path}");
        }
    }
    for _ in 0..2 {
        let r = get_ae(a, "/vod/pre.json", "br");
        assert_eq!(r.header("content-encoding"), Some("gzip"), "passed as the origin sent it");
        assert_eq!(r.header("vary"), Some("Accept-Encoding, Origin"));
        assert_eq!(r.header("etag"), Some("\"p1\""));
        assert!(gunzip(&r.body) == small);
    }
    assert_eq!((made(&reel, "br"), made(&reel, "gzip")), (2.0, 2.0), "{}", reel.metrics());
}

#[test]
fn compress_off_and_reel_check_refuses_bad_values() {
    let dir = tempfile::tempdir().unwrap();
    let (origin, small, _) = origin_with_objects();
    let mut conf = Conf::new(dir.path(), &origin);
    let off = "enabled = false # compress\n";
    let text = conf.render().replacen(
        "origin_group = \"o\"\n",
        &format!("origin_group = \"o\"\n[site.compress]\n{off}"),
        1,
    );
    conf.raw = Some(text.clone());
    let reel = Reel::start(&conf);
    let r = get_ae(reel.data, "/vod/index.m3u8", "br");
    assert_eq!((r.header("content-encoding"), r.header("vary")), (None, None));
    assert!(r.body == small);
    drop(reel);
    for (line, key, says) in [
        ("brotli_quality = 12", "site[0].compress.brotli_quality", "between 0 and 11"),
        ("gzip_level = 0", "site[0].compress.gzip_level", "between 1 and 9"),
        ("encodings = [\"br\", \"br\"]", "site[0].compress.encodings[1]", "listed twice"),
        ("types = [\"m3u8\"]", "site[0].compress.types[0]", "not a media type"),
        ("max_size = \"64MiB\"", "site[0].compress.max_size", "above the most"),
        ("encodings = [\"zstd\"]", "encodings", "unknown variant"),
    ] {
        let bad = text.replace(off, &format!("{line}\n"));
        let at = 1 + bad.lines().position(|l| l == line).expect("the line");
        let p = dir.path().join("bad.toml");
        std::fs::write(&p, &bad).unwrap();
        let o =
            Command::new(crate::common::BIN).args(["check", "--config"]).arg(&p).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{line}: accepted");
        assert!(err.contains(key) && err.contains(says), "{line}: {err}");
        let file = p.display().to_string();
        assert!(err.contains(&format!("{file}:{at}:")), "{line}: names the file and line: {err}");
    }
}

/// curl's bytes for `path` over `proto` (`--http1.1` or `--http2`) on the TLS listener, with
/// `args`: (head, body).
fn curl(addr: SocketAddr, proto: &str, path: &str, args: &[&str]) -> (String, Vec<u8>) {
    let dir = tempfile::tempdir().unwrap();
    let head = dir.path().join("head");
    let o = Command::new("curl")
        .args(["-sk", proto, "--max-time", "20", "-D"])
        .arg(&head)
        .args(args)
        .arg("--resolve")
        .arg(format!("edge.example.test:{}:127.0.0.1", addr.port()))
        .arg(format!("https://edge.example.test:{}{path}", addr.port()))
        .output()
        .expect("curl");
    assert!(o.status.success(), "curl {proto} {path}: {}", String::from_utf8_lossy(&o.stderr));
    (std::fs::read_to_string(head).unwrap().to_ascii_lowercase(), o.stdout)
}

#[test]
fn compress_over_http11_and_http2_with_curl() {
    if Command::new("curl").arg("--version").output().map_or(true, |o| {
        let v = String::from_utf8_lossy(&o.stdout).to_ascii_lowercase();
        !(v.contains("brotli") && v.contains("http2"))
    }) {
        return eprintln!(
            "SKIPPED compress_over_http11_and_http2_with_curl: no curl with brotli and HTTP/2"
        );
    }
    let dir = tempfile::tempdir().unwrap();
    let (origin, small, big) = origin_with_objects();
    let pki = Pki::new(dir.path());
    pki.leaf("edge", &["edge.example.test"]);
    let reel = Reel::start(&tls_conf(dir.path(), &origin, &pki));
    let addr = reel.listener_addr("https").expect("https listener");
    // Stored first: a body larger than 16 KiB is answered identity while it streams in.
    for path in ["/vod/index.m3u8", "/vod/manifest.mpd", "/vod/seg_00001.ts"] {
        crate::common::eventually(path, || {
            let r = request(reel.data, "GET", "edge.example.test", path, &[]);
            r.cache_status().contains("hit").then_some(())
        });
    }
    for proto in ["--http1.1", "--http2"] {
        for (path, body) in [("/vod/index.m3u8", &small), ("/vod/manifest.mpd", &big)] {
            // curl decodes what it asked for.
            let (head, got) = curl(addr, proto, path, &["--compressed"]);
            assert!(head.contains("content-encoding: br"), "{proto} {path}: {head}");
            assert!(got == *body, "{proto} {path}");
            // The raw bytes, decoded here.
            for (ae, decode) in [("gzip", gunzip as fn(&[u8]) -> Vec<u8>), ("br", unbrotli)] {
                let (head, raw) =
                    curl(addr, proto, path, &["-H", &format!("accept-encoding: {ae}")]);
                assert!(
                    head.contains(&format!("content-encoding: {ae}")),
                    "{proto} {path}: {head}"
                );
                assert!(head.contains(&format!("content-length: {}", raw.len())), "{head}");
                assert!(decode(&raw) == *body, "{proto} {path} {ae}");
            }
        }
        let (head, got) = curl(addr, proto, "/vod/seg_00001.ts", &["--compressed"]);
        assert!(!head.contains("content-encoding"), "{proto}: {head}");
        assert!(got == small);
    }
}

#[test]
fn compress_an_llhls_blocking_reload_and_the_demo_playlists() {
    let part = Duration::from_millis(500);
    let cfg = DemoOriginConfig {
        segment_duration: part * 4,
        live_segment_size: 64 << 10,
        ..DemoOriginConfig::no_latency()
    };
    let demo = reel_demo_origin::spawn("127.0.0.1:0".parse().unwrap(), cfg).expect("demo origin");
    let dir = tempfile::tempdir().unwrap();
    let stand_in = Origin::start("unused");
    let mut conf = Conf::new(dir.path(), &stand_in);
    conf.origins = vec![demo.local_addr()];
    let reel = Reel::start(&conf);
    let a = reel.data;

    let live = get_ae(a, "/live/index.m3u8", "gzip, br");
    assert_eq!(live.status, 200);
    assert_eq!(live.header("content-encoding"), Some("br"));
    let text = String::from_utf8(unbrotli(&live.body)).expect("text");
    let hint = text
        .lines()
        .find_map(|l| l.strip_prefix("#EXT-X-PRELOAD-HINT:"))
        .unwrap_or_else(|| panic!("no preload hint in {text}"));
    let uri = hint.split("URI=\"").nth(1).and_then(|r| r.split('"').next()).expect("URI");
    let (msn, p) = uri
        .strip_prefix("seg_")
        .and_then(|r| r.strip_suffix(".ts"))
        .and_then(|r| r.split_once(".part"))
        .expect("seg_<msn>.part<p>.ts");
    // The blocking reload for the hinted part: held until it exists, then answered
    // compressed, to every waiter.
    let target = format!("/live/index.m3u8?_HLS_msn={msn}&_HLS_part={p}");
    let waiters: Vec<_> = (0..8)
        .map(|i| {
            let t = target.clone();
            let ae = if i % 2 == 0 { "br" } else { "gzip" };
            std::thread::spawn(move || (ae, get_ae(a, &t, ae)))
        })
        .collect();
    for w in waiters {
        let (ae, r) = w.join().unwrap();
        assert_eq!(r.status, 200, "{}", r.text());
        assert_eq!(r.header("content-encoding"), Some(ae), "{:?}", r.headers);
        let body = String::from_utf8(decoded(&r)).expect("text");
        assert!(body.contains(uri), "the reload lists the part it waited for:\n{body}");
        // The same version, identity.
    }
    let id = get_ae(a, &target, "identity");
    assert!(String::from_utf8_lossy(&id.body).contains(uri));
    assert_eq!(id.header("vary"), Some("Accept-Encoding"));

    // A VOD playlist of the demo origin, and a segment never compressed.
    let vod = get_ae(a, "/vod/title_001/index.m3u8", "gzip");
    assert_eq!(vod.header("content-encoding"), Some("gzip"));
    let vod_id = get_ae(a, "/vod/title_001/index.m3u8", "");
    assert!(gunzip(&vod.body) == vod_id.body);
    let seg = get_ae(a, "/vod/title_001/seg_1.ts", "gzip, br");
    assert_eq!(seg.status, 200);
    assert_eq!(seg.header("content-encoding"), None);
}

/// Hostile `Accept-Encoding` and `Origin` fields (bytes that are not UTF-8, thousands of
/// elements, broken q-values, repeated fields) on a site that compresses and answers CORS:
/// every request gets a whole, decodable answer, a coding only when one is validly asked
/// for, CORS fields only for the allowed origin, and the server keeps serving.
#[test]
fn hostile_accept_encoding_and_origin_fields_get_whole_answers() {
    let dir = tempfile::tempdir().unwrap();
    let (origin, small, _) = origin_with_objects();
    let mut conf = Conf::new(dir.path(), &origin);
    conf.site = "[site.cors]\nallow_origins = [\"https://player.example\"]\n".into();
    let reel = Reel::start(&conf);
    assert_eq!(get_ae(reel.data, "/vod/index.m3u8", "identity").status, 200);
    let many_commas = format!("accept-encoding: {}gzip;q=0.1\r\n", ",".repeat(6000));
    let many_fields = "accept-encoding: br;q=0\r\n".repeat(60);
    // (the request's extra field lines, the coding expected, whether ACAO is expected)
    let cases: Vec<(Vec<u8>, Option<&str>, bool)> = vec![
        (b"accept-encoding: \xff\xfe gzip\r\n".to_vec(), None, false),
        (b"accept-encoding: gzip;q=abc, br;q=1.0001\r\n".to_vec(), None, false),
        (b"accept-encoding: gzip;q=0.5;q=0.\xff\r\n".to_vec(), None, false),
        (b"accept-encoding: ;;;,,,;q=1, *;q=0.001\r\n".to_vec(), Some("br"), false),
        (many_commas.into_bytes(), Some("gzip"), false),
        (many_fields.into_bytes(), None, false),
        (b"origin: null\r\naccept-encoding: gzip\r\n".to_vec(), Some("gzip"), false),
        (b"origin: https://player.example\xff\r\n".to_vec(), None, false),
        (
            b"origin: https://player.example\r\norigin: https://evil.example\r\n".to_vec(),
            None,
            false,
        ),
        (b"origin: HTTPS://PLAYER.EXAMPLE\r\n".to_vec(), None, false),
        (b"origin: https://player.example\r\naccept-encoding: br\r\n".to_vec(), Some("br"), true),
    ];
    for (fields, want, acao) in cases {
        let mut c = crate::common::Conn::open(reel.data).unwrap();
        let mut req = b"GET /vod/index.m3u8 HTTP/1.1\r\nhost: 127.0.0.1\r\n".to_vec();
        req.extend_from_slice(&fields);
        req.extend_from_slice(b"\r\n");
        std::io::Write::write_all(&mut c.w, &req).unwrap();
        let what = String::from_utf8_lossy(&fields).into_owned();
        let what = &what[..what.len().min(120)];
        let r = c.read_response().unwrap();
        assert_eq!(r.status, 200, "{what}");
        assert_eq!(r.header("content-encoding"), want, "{what}");
        assert!(decoded(&r) == small, "{what}: decodes to the stored body");
        assert_eq!(
            r.header("access-control-allow-origin"),
            acao.then_some("https://player.example"),
            "{what}"
        );
    }
    assert_eq!(
        get_ae(reel.data, "/vod/index.m3u8", "gzip").header("content-encoding"),
        Some("gzip")
    );
}
