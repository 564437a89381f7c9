//! `[site.cors]` and `[[site.header]]` against the real binary over HTTP/1.1: preflights
//! answered at the edge and never forwarded, the CORS fields on misses, hits, 206, 304,
//! pass-through and error answers with the origin's own replaced, header rules by path and
//! status that leave what is stored as it was, and both live on reload. (HTTP/2 and HTTP/3:
//! `http3/cors.rs`; a real browser: `browser_cors.rs`.)

use crate::common::*;

const PLAYER: &str = "https://player.example";

/// Every value of the field `name`.
fn all<'a>(r: &'a Resp, name: &str) -> Vec<&'a str> {
    r.headers.iter().filter(|(n, _)| n == name).map(|(_, v)| v.as_str()).collect()
}

/// Whether the response's `Vary` names `Origin`.
fn varies_on_origin(r: &Resp) -> bool {
    all(r, "vary")
        .iter()
        .flat_map(|v| v.split(','))
        .any(|t| t.trim().eq_ignore_ascii_case("origin"))
}

fn req(reel: &Reel, method: &str, target: &str, fields: &[(&str, &str)]) -> Resp {
    request(reel.data, method, "127.0.0.1", target, fields)
}

#[test]
fn cors_fields_go_on_every_answer_and_preflights_stop_at_the_edge() {
    let dir = tempfile::tempdir().unwrap();
    let o = Origin::start("a");
    let body: Vec<u8> = (0..4000u32).map(|i| (i % 251) as u8).collect();
    // An origin with CORS of its own: replaced by the site's, never doubled.
    o.put(
        "/v/seg1.ts",
        Object::ok(body.clone())
            .header("etag", "\"s1\"")
            .header("access-control-allow-origin", "*")
            .header("access-control-expose-headers", "X-Origin"),
    );
    let mut conf = Conf::new(dir.path(), &o);
    conf.site = format!(
        "[site.cors]\nallow_origins = [\"{PLAYER}\", \"https://*.tenant.example\"]\nmax_age = \"10m\"\n"
    );
    // A second site without [site.cors]: the origin's fields and OPTIONS as before.
    conf.extra = "\n[[site]]\nhosts = [\"plain.test\"]\norigin_group = \"o\"\n".into();
    let reel = Reel::start(&conf);
    let from = [("origin", PLAYER)];

    let check = |r: &Resp, what: &str, echo: &str| {
        assert_eq!(all(r, "access-control-allow-origin"), [echo], "{what}: {:?}", r.headers);
        let expose = all(r, "access-control-expose-headers");
        assert_eq!(expose.len(), 1, "{what}: {:?}", r.headers);
        for f in ["Content-Range", "Cache-Status", "Age", "Content-Length"] {
            assert!(expose[0].contains(f), "{what}: {f} not exposed: {expose:?}");
        }
        assert!(varies_on_origin(r), "{what}: {:?}", r.headers);
    };
    let miss = req(&reel, "GET", "/v/seg1.ts", &from);
    assert_eq!(miss.status, 200);
    assert!(miss.cache_status().contains("fwd=miss"), "{}", miss.cache_status());
    assert!(miss.body == body);
    check(&miss, "miss", PLAYER);
    let hit = eventually("a hit", || {
        let r = req(&reel, "GET", "/v/seg1.ts", &from);
        r.cache_status().contains("hit").then_some(r)
    });
    check(&hit, "hit", PLAYER);
    let range = req(&reel, "GET", "/v/seg1.ts", &[("origin", PLAYER), ("range", "bytes=10-19")]);
    assert_eq!(range.status, 206);
    assert!(range.body == body[10..20]);
    check(&range, "206", PLAYER);
    let not_modified =
        req(&reel, "GET", "/v/seg1.ts", &[("origin", PLAYER), ("if-none-match", "\"s1\"")]);
    assert_eq!(not_modified.status, 304);
    check(&not_modified, "304", PLAYER);
    let passed =
        req(&reel, "GET", "/v/seg1.ts", &[("origin", PLAYER), ("cache-control", "no-store")]);
    assert!(passed.cache_status().contains("fwd=request"), "{}", passed.cache_status());
    check(&passed, "pass-through", PLAYER);
    let missing = req(&reel, "GET", "/v/none.ts", &from);
    assert_eq!(missing.status, 404);
    check(&missing, "404", PLAYER);
    let sub = "https://a.b.tenant.example";
    check(&req(&reel, "GET", "/v/seg1.ts", &[("origin", sub)]), "*.domain pattern", sub);

    // Another origin, or none: no allow field, the origin's removed, still Vary: Origin.
    for fields in [&[("origin", "https://evil.example")][..], &[]] {
        let r = req(&reel, "GET", "/v/seg1.ts", fields);
        assert_eq!(r.status, 200);
        assert!(
            !r.headers.iter().any(|(n, _)| n.starts_with("access-control-")),
            "{fields:?}: {:?}",
            r.headers
        );
        assert!(varies_on_origin(&r), "{:?}", r.headers);
    }

    // Preflights: answered here, 204, never forwarded.
    let before = o.hits("/v/seg1.ts");
    let pre = req(
        &reel,
        "OPTIONS",
        "/v/seg1.ts",
        &[
            ("origin", PLAYER),
            ("access-control-request-method", "GET"),
            ("access-control-request-headers", "cmcd-request,cmcd-session"),
        ],
    );
    assert_eq!(pre.status, 204, "{:?}", pre.headers);
    assert_eq!(pre.header("access-control-allow-origin"), Some(PLAYER));
    assert_eq!(pre.header("access-control-allow-methods"), Some("GET, HEAD"));
    let allowed = pre.header("access-control-allow-headers").unwrap_or("");
    assert!(allowed.contains("cmcd-request") && allowed.contains("range"), "{allowed}");
    assert_eq!(pre.header("access-control-max-age"), Some("600"));
    assert!(pre.body.is_empty() && pre.header("cache-status").is_none());
    for refused in [
        &[("origin", "https://evil.example"), ("access-control-request-method", "GET")][..],
        &[("origin", PLAYER), ("access-control-request-method", "POST")],
        &[
            ("origin", PLAYER),
            ("access-control-request-method", "GET"),
            ("access-control-request-headers", "x-secret-token"),
        ],
    ] {
        let r = req(&reel, "OPTIONS", "/v/seg1.ts", refused);
        assert_eq!(r.status, 204, "{refused:?}");
        assert!(
            !r.headers.iter().any(|(n, _)| n.starts_with("access-control-allow")),
            "{refused:?}: {:?}",
            r.headers
        );
    }
    assert_eq!(o.hits("/v/seg1.ts"), before, "a preflight reached the origin");
    // An OPTIONS that is not a preflight passes as any other method.
    let _ = req(&reel, "OPTIONS", "/v/seg1.ts", &from);
    assert_eq!(o.hits("/v/seg1.ts"), before + 1);

    // The site without [site.cors]: the origin's own fields, and its preflight forwarded.
    let plain = request(reel.data, "GET", "plain.test", "/v/seg1.ts", &from);
    assert_eq!(all(&plain, "access-control-allow-origin"), ["*"], "{:?}", plain.headers);
    assert_eq!(all(&plain, "access-control-expose-headers"), ["X-Origin"]);
    let before = o.hits("/v/seg1.ts");
    let pre = request(
        reel.data,
        "OPTIONS",
        "plain.test",
        "/v/seg1.ts",
        &[("origin", PLAYER), ("access-control-request-method", "GET")],
    );
    assert_eq!(pre.status, 200, "{:?}", pre.headers);
    assert_eq!(o.hits("/v/seg1.ts"), before + 1);
}

#[test]
fn header_rules_change_what_leaves_not_what_is_stored_and_reload_live() {
    let dir = tempfile::tempdir().unwrap();
    let o = Origin::start("a");
    o.put(
        "/live/index.m3u8",
        Object::ok("#EXTM3U\n")
            .header("etag", "\"p1\"")
            .header("cache-control", "max-age=60")
            .header("x-origin-secret", "s3cr3t"),
    );
    o.put("/live/seg1.ts", Object::ok("segment").header("cache-control", "max-age=60"));
    let mut conf = Conf::new(dir.path(), &o);
    conf.site =
        "[[site.header]]\naction = \"set\"\nname = \"Cache-Control\"\nvalue = \"max-age=1\"\n\
                 path = \"*.m3u8\"\nstatus = [200]\n\n[[site.header]]\naction = \"add\"\n\
                 name = \"Timing-Allow-Origin\"\nvalue = \"*\"\n\n[[site.header]]\n\
                 action = \"remove\"\nname = \"X-Origin-Secret\"\n"
            .into();
    let mut reel = Reel::start(&conf);

    let playlist = |reel: &Reel| req(reel, "GET", "/live/index.m3u8", &[]);
    let miss = playlist(&reel);
    assert!(miss.cache_status().contains("fwd=miss"), "{}", miss.cache_status());
    for r in [&miss, &playlist(&reel)] {
        assert_eq!(r.status, 200);
        assert_eq!(all(r, "cache-control"), ["max-age=1"], "{:?}", r.headers);
        assert_eq!(all(r, "timing-allow-origin"), ["*"]);
        assert!(r.header("x-origin-secret").is_none(), "{:?}", r.headers);
        assert_eq!(r.text(), "#EXTM3U\n");
    }
    // The edge keeps its own freshness (the stored max-age=60): a hit seconds later.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let later = playlist(&reel);
    assert!(later.cache_status().contains("hit"), "{}", later.cache_status());
    assert_eq!(o.hits("/live/index.m3u8"), 1);
    // Only where the path and the status match.
    let seg = req(&reel, "GET", "/live/seg1.ts", &[]);
    assert_eq!(all(&seg, "cache-control"), ["max-age=60"]);
    assert_eq!(all(&seg, "timing-allow-origin"), ["*"]);
    let nm = req(&reel, "GET", "/live/index.m3u8", &[("if-none-match", "\"p1\"")]);
    assert_eq!(nm.status, 304);
    assert_eq!(all(&nm, "cache-control"), ["max-age=60"], "{:?}", nm.headers);
    // No-sites (421) and /healthz are not the site's.
    let other = request(reel.data, "GET", "elsewhere.test", "/live/index.m3u8", &[]);
    assert_eq!(other.status, 421);
    assert!(other.header("timing-allow-origin").is_none());

    // Without the rules (a reload), the same stored object leaves as the origin sent it.
    conf.site = String::new();
    reel.rewrite(&conf);
    let st = reel.sighup_reload();
    assert_eq!(st["reload"]["last_ok"], true, "{st}");
    let r = playlist(&reel);
    assert!(r.cache_status().contains("hit"), "{}", r.cache_status());
    assert_eq!(all(&r, "cache-control"), ["max-age=60"], "{:?}", r.headers);
    assert_eq!(r.header("x-origin-secret"), Some("s3cr3t"));
    assert!(r.header("timing-allow-origin").is_none());
    assert_eq!(o.hits("/live/index.m3u8"), 1);

    // And a rule added by a reload applies to the next hit.
    conf.site = "[site.cors]\nallow_origins = \"*\"\n".into();
    reel.rewrite(&conf);
    let st = reel.sighup_reload();
    assert_eq!(st["reload"]["last_ok"], true, "{st}");
    let r = req(&reel, "GET", "/live/index.m3u8", &[("origin", PLAYER)]);
    assert_eq!(all(&r, "access-control-allow-origin"), ["*"], "{:?}", r.headers);
    assert!(!varies_on_origin(&r), "\"*\" does not vary: {:?}", r.headers);
}

#[test]
fn reel_check_refuses_bad_cors_and_rules_at_their_position() {
    let dir = tempfile::tempdir().unwrap();
    let o = Origin::start("a");
    let mut conf = Conf::new(dir.path(), &o);
    conf.site = "[site.cors]\nallow_origins = \"*\"\nallow_credentials = true\n\n[[site.header]]\n\
                 action = \"set\"\nname = \"Transfer-Encoding\"\nvalue = \"chunked\"\n"
        .into();
    conf.write();
    let text = conf.render();
    let line_of = |needle: &str| text[..text.find(needle).expect(needle)].lines().count() + 1;
    let out = std::process::Command::new(BIN)
        .arg("check")
        .arg("--config")
        .arg(conf.path())
        .output()
        .expect("reel check");
    assert_eq!(out.status.code(), Some(64));
    let err = String::from_utf8_lossy(&out.stderr);
    let file = conf.path().display().to_string();
    for (needle, key, says) in [
        ("allow_credentials = true", "site[0].cors.allow_credentials", "list the origins"),
        ("name = \"Transfer-Encoding\"", "site[0].header[0].name", "frames the body"),
    ] {
        let at = format!("{file}:{}:", line_of(needle));
        assert!(
            err.lines().any(|l| l.starts_with(&at) && l.contains(key) && l.contains(says)),
            "{key} at {at}:\n{err}"
        );
    }
}
