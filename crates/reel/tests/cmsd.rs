//! `[site.cmsd]` over HTTP/1.1: `CMSD-Static` with the object's type and `CMSD-Dynamic`
//! naming the edge on a miss, a hit, a 206, a 304 and an error of a site that has it;
//! nothing on a site without it; the origin's own `CMSD-Static` kept; and `du` while the
//! node is overloaded (too many open connections), gone once it recovers. (HTTP/2 and
//! HTTP/3: `http3/cmsd.rs`.)

use crate::common::*;

/// The site of the test config gets CMSD; `plain.test` does not.
const PLAIN_SITE: &str = "\n[[site]]\nhosts = [\"plain.test\"]\norigin_group = \"o\"\n";

fn cmsd(r: &Resp) -> (Option<&str>, Option<&str>) {
    (r.header("cmsd-static"), r.header("cmsd-dynamic"))
}

#[test]
fn object_types_on_every_answer_of_a_cmsd_site_and_none_elsewhere() {
    let origin = Origin::start("o");
    let cached = |b: &str, ct: &str| {
        Object::ok(b.to_string())
            .header("content-type", ct)
            .header("etag", "\"e1\"")
            .header("cache-control", "max-age=600")
    };
    origin.put("/v/index.m3u8", cached("#EXTM3U\n", "application/vnd.apple.mpegurl"));
    origin.put("/v/seg1.ts", cached("segment one", "video/mp2t"));
    origin.put("/v/init.mp4", cached("init", "video/mp4"));
    origin.put("/v/a/seg1.m4s", cached("audio", "audio/mp4"));
    origin.put("/v/k/key1.key", cached("0123456789abcdef", "application/octet-stream"));
    origin.put("/v/sub/en.vtt", cached("WEBVTT\n", "text/vtt"));
    origin.put("/v/manifest", cached("<MPD/>", "application/dash+xml"));
    origin.put("/v/own.m4s", cached("v", "video/mp4").header("cmsd-static", "ot=v,d=2002"));
    origin.put("/v/gone.ts", Object { status: 502, ..Object::ok("bad gateway") });
    let dir = tempfile::tempdir().unwrap();
    let mut conf = Conf::new(dir.path(), &origin);
    conf.site = "[site.cmsd]\nenabled = true\nid = \"edge-7\"\n".into();
    conf.extra = PLAIN_SITE.into();
    let reel = Reel::start(&conf);
    let mut c = Conn::open(reel.data).unwrap();

    for (path, ot) in [
        ("/v/index.m3u8", "ot=m"),
        ("/v/seg1.ts", "ot=av"),
        ("/v/init.mp4", "ot=i"),
        ("/v/a/seg1.m4s", "ot=a"),
        ("/v/k/key1.key", "ot=k"),
        ("/v/sub/en.vtt", "ot=c"),
        ("/v/manifest", "ot=m"),
    ] {
        let miss = c.get("127.0.0.1", path).unwrap();
        assert_eq!(miss.status, 200, "{path}");
        assert!(miss.cache_status().contains("miss"), "{path}: {}", miss.cache_status());
        assert_eq!(cmsd(&miss), (Some(ot), Some("\"edge-7\"")), "{path} miss");
        let hit = eventually("a hit", || {
            let r = c.get("127.0.0.1", path).unwrap();
            r.cache_status().contains("hit").then_some(r)
        });
        assert_eq!(cmsd(&hit), (Some(ot), Some("\"edge-7\"")), "{path} hit");
    }
    let range = c.request("GET", "127.0.0.1", "/v/seg1.ts", &[("range", "bytes=0-3")]).unwrap();
    assert_eq!((range.status, range.text().as_str()), (206, "segm"));
    assert_eq!(cmsd(&range), (Some("ot=av"), Some("\"edge-7\"")), "206");
    let not_modified =
        c.request("GET", "127.0.0.1", "/v/seg1.ts", &[("if-none-match", "\"e1\"")]).unwrap();
    assert_eq!(not_modified.status, 304);
    assert_eq!(cmsd(&not_modified), (Some("ot=av"), Some("\"edge-7\"")), "304");
    let error = c.get("127.0.0.1", "/v/gone.ts").unwrap();
    assert_eq!(error.status, 502);
    assert_eq!(cmsd(&error), (Some("ot=av"), Some("\"edge-7\"")), "502");

    // The origin's own CMSD-Static says more (its duration): it is kept, not doubled.
    for _ in 0..2 {
        let own = c.get("127.0.0.1", "/v/own.m4s").unwrap();
        let statics: Vec<&str> =
            own.headers.iter().filter(|(n, _)| n == "cmsd-static").map(|(_, v)| &**v).collect();
        assert_eq!(statics, ["ot=v,d=2002"]);
        assert_eq!(own.header("cmsd-dynamic"), Some("\"edge-7\""));
    }
    // What is stored is untouched: a site without CMSD serves the same objects without it.
    for path in ["/v/seg1.ts", "/v/index.m3u8"] {
        let plain = c.get("plain.test", path).unwrap();
        assert_eq!(plain.status, 200);
        assert_eq!(cmsd(&plain), (None, None), "{path} on plain.test: {:?}", plain.headers);
    }
    assert_eq!(origin.hits("/v/seg1.ts"), 2, "one fill per site: the host keys");
}

#[test]
fn duress_while_overloaded_and_not_after() {
    let origin = Origin::start("o");
    origin.put("/live/s1.ts", Object::ok("seg").header("cache-control", "max-age=600"));
    let dir = tempfile::tempdir().unwrap();
    let mut conf = Conf::new(dir.path(), &origin);
    // The default identity: the machine's host name.
    conf.site = "[site.cmsd]\nenabled = true\n".into();
    conf.health = "max_connections = 5\nresume_connections = 2\nmax_cpu_percent = 100\n\
                   resume_cpu_percent = 99\nmax_hit_p99 = \"1h\"\nresume_hit_p99 = \"30m\"\n"
        .into();
    let reel = Reel::start(&conf);
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    let me = format!("\"{}\"", host.trim());
    let mut conns: Vec<Conn> = vec![Conn::open(reel.data).unwrap()];
    let first = conns[0].get("127.0.0.1", "/live/s1.ts").unwrap();
    assert_eq!(first.header("cmsd-dynamic"), Some(me.as_str()), "healthy: no du");

    // Six open connections: the node is overloaded, and players are told.
    conns.extend((0..5).map(|_| Conn::open(reel.data).unwrap()));
    for c in conns.iter_mut() {
        assert_eq!(c.get("127.0.0.1", "/live/s1.ts").unwrap().status, 200);
    }
    let duress = format!("{me};du");
    let r = eventually("du with six connections", || {
        let r = conns[0].get("127.0.0.1", "/live/s1.ts").unwrap();
        (r.header("cmsd-dynamic") == Some(duress.as_str())).then_some(r)
    });
    assert!(r.cache_status().contains("hit"), "{}", r.cache_status());
    assert_eq!(r.header("cmsd-static"), Some("ot=av"));
    assert_eq!(get(reel.data, "/healthz").json()["status"], "overloaded");

    // One connection: under resume_connections, healthy again, and du is gone.
    conns.truncate(1);
    eventually("no du with one connection", || {
        let r = conns[0].get("127.0.0.1", "/live/s1.ts").unwrap();
        (r.header("cmsd-dynamic") == Some(me.as_str())).then_some(())
    });
    let (s, j) = {
        let r = conns[0].get("127.0.0.1", "/healthz").unwrap();
        (r.status, r.json())
    };
    assert_eq!((s, &j["status"]), (200, &serde_json::json!("ok")), "{j}");
}
