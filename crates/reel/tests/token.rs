//! Signed viewer tokens (`[site.token]`) end to end, with tokens made by Akamai's published
//! EdgeAuth generator (PyPI `akamai-edgeauth`, installed into a venv under the target
//! directory; the tests are skipped when it cannot be installed): admitted viewers share one
//! stored copy, the origin never sees a token, every refusal reason is a 403 counted and
//! logged, keys roll over by reload without a viewer refused, an LL-HLS player follows a
//! tokenised live stream by the playlists' URIs alone, and cookie mode.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::Value;

use crate::common::*;

/// The keys of these tests (hex, as the generator takes them).
pub(crate) const K1: &str = "0a1b2c3d4e5f60718293a4b5c6d7e8f9";
const K2: &str = "ffeeddccbbaa99887766554433221100";

/// A Python with `akamai.edgeauth` importable, installed once per test run.
pub(crate) fn generator() -> Option<PathBuf> {
    static PY: OnceLock<Option<PathBuf>> = OnceLock::new();
    PY.get_or_init(|| {
        let venv = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("edgeauth-venv");
        let py = venv.join("bin/python");
        let ok = |c: &mut Command| c.output().is_ok_and(|o| o.status.success());
        let importable = || ok(Command::new(&py).args(["-c", "import akamai.edgeauth"]));
        if !importable() {
            let made = ok(Command::new("python3").arg("-m").arg("venv").arg(&venv))
                && ok(Command::new(venv.join("bin/pip")).args([
                    "install",
                    "-q",
                    "--disable-pip-version-check",
                    "akamai-edgeauth==0.3.2",
                ]));
            if !made || !importable() {
                return None;
            }
        }
        Some(py)
    })
    .clone()
}

/// Tokens made by the generator: one per `EdgeAuth(**args)` of `specs` (JSON objects with
/// the constructor's arguments plus `acl` or `url`).
fn tokens(py: &std::path::Path, specs: &[Value]) -> Vec<String> {
    const SCRIPT: &str = "import json, sys, time\nfrom akamai.edgeauth import EdgeAuth\nout = []\n\
        for s in json.loads(sys.argv[1]):\n    acl = s.pop('acl', None); url = s.pop('url', None)\n\
        \x20   for k in ('start_time', 'end_time'):\n        if k in s and isinstance(s[k], str) and s[k] != 'now':\n\
        \x20           s[k] = int(time.time()) + int(s[k])\n\
        \x20   e = EdgeAuth(**s)\n    out.append(e.generate_acl_token(acl) if acl else e.generate_url_token(url))\n\
        print(json.dumps(out))\n";
    let arg = serde_json::to_string(specs).unwrap();
    let o = Command::new(py).args(["-c", SCRIPT, &arg]).output().expect("run the generator");
    assert!(o.status.success(), "generator: {}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).expect("the generator's tokens")
}

/// An ACL token for `acl` signed with `key`, valid for five minutes from now.
pub(crate) fn acl_token(py: &std::path::Path, key: &str, acl: &str) -> String {
    tokens(py, &[serde_json::json!({"key": key, "window_seconds": 300, "acl": acl})]).remove(0)
}

/// The `[site.token]` table of these tests.
pub(crate) fn token_table(keys: &[&str], propagate: &str) -> String {
    let keys: Vec<String> = keys.iter().map(|k| format!("\"{k}\"")).collect();
    format!(
        "\n[site.token]\nformat = \"edgeauth\"\nkeys = [{}]\npropagate = \"{propagate}\"\n",
        keys.join(", ")
    )
}

fn get_with(addr: SocketAddr, target: &str, headers: &[(&str, &str)]) -> Resp {
    request(addr, "GET", "127.0.0.1", target, headers)
}

#[test]
fn generator_tokens_admit_viewers_who_share_one_copy_and_the_origin_sees_no_token() {
    let Some(py) = generator() else {
        return reel_test_support::skip("akamai-edgeauth could not be installed with pip");
    };
    let dir = tempfile::tempdir().unwrap();
    let origin = Origin::start("o");
    origin.put("/v/seg_1.ts", Object::ok(vec![b's'; 1024]));
    origin.put("/v/seg_2.ts", Object::ok(vec![b't'; 1024]));
    let mut conf = Conf::new(dir.path(), &origin);
    conf.extra = token_table(&[K1], "off");
    let reel = Reel::start(&conf);
    let t = tokens(
        &py,
        &[
            serde_json::json!({"key": K1, "window_seconds": 300, "acl": "/v/*"}),
            serde_json::json!({"key": K1, "window_seconds": 600, "acl": ["/x/*", "/v/*.ts"],
                               "session_id": "viewer 2", "escape_early": true}),
            serde_json::json!({"key": K1, "window_seconds": 300, "url": "/v/seg_2.ts"}),
        ],
    );
    let a = get_with(reel.data, &format!("/v/seg_1.ts?hdnts={}", t[0]), &[]);
    assert_eq!((a.status, a.body.len()), (200, 1024), "{}", a.text());
    assert!(!a.cache_status().contains("hit"), "{}", a.cache_status());
    // Another viewer, another token (and a parameter of its own that stays in the key
    // only when it is not the token): the copy the first one's miss stored.
    // (It may join the first one's fill before that fill ends; then a hit.)
    eventually("a hit for another token", || {
        let b = get_with(reel.data, &format!("/v/seg_1.ts?hdnts={}", t[1]), &[]);
        assert_eq!(b.status, 200, "{}", b.text());
        b.cache_status().contains("hit").then_some(())
    });
    // The token as a cookie, beside other cookies: a hit too.
    let cookie = format!("theme=dark; hdnts={}; lang=en", t[0]);
    let c = get_with(reel.data, "/v/seg_1.ts", &[("cookie", &cookie)]);
    assert!(c.status == 200 && c.cache_status().contains("hit"), "{}", c.cache_status());
    assert_eq!(origin.hits("/v/seg_1.ts"), 1, "one origin request for every viewer");
    // A URL token's miss with the token in a cookie: the origin gets the other cookies.
    let cookie = format!("theme=dark; hdnts={}; lang=en", t[2]);
    let d = get_with(reel.data, "/v/seg_2.ts", &[("cookie", &cookie)]);
    assert_eq!(d.status, 200, "{}", d.text());
    assert_eq!(origin.cookies("/v/seg_2.ts"), ["theme=dark; lang=en"]);
    let targets = origin.targets();
    assert!(!targets.is_empty() && targets.iter().all(|t| !t.contains("hdnts")), "{targets:?}");
    let e = get_with(reel.data, &format!("/v/seg_1.ts?hdnts={}", t[2]), &[]);
    assert_eq!(e.status, 403, "a URL token names one URL");
}

#[test]
fn every_refusal_is_a_403_that_never_reaches_the_origin_counted_and_logged_by_reason() {
    let Some(py) = generator() else {
        return reel_test_support::skip("akamai-edgeauth could not be installed with pip");
    };
    let dir = tempfile::tempdir().unwrap();
    let origin = Origin::start("o");
    origin.put_default(Object::ok("secret"));
    let mut conf = Conf::new(dir.path(), &origin);
    conf.extra = token_table(&[K1], "off");
    let reel = Reel::start(&conf);
    let spec = |extra: Value| {
        let mut s = serde_json::json!({"key": K1, "acl": "/v/*"});
        s.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        s
    };
    let t = tokens(
        &py,
        &[
            spec(serde_json::json!({"start_time": "-600", "end_time": "-300"})),
            spec(serde_json::json!({"start_time": "300", "end_time": "600"})),
            spec(serde_json::json!({"key": K2, "window_seconds": 300})),
            spec(serde_json::json!({"window_seconds": 300, "acl": "/other/*"})),
            spec(serde_json::json!({"window_seconds": 300, "ip": "192.0.2.1"})),
            spec(serde_json::json!({"window_seconds": 300, "ip": "127.0.0.1"})),
        ],
    );
    let cases = [
        ("/v/a.ts".to_string(), "token_missing"),
        ("/v/a.ts?hdnts=exp%3D1".to_string(), "token_malformed"),
        (format!("/v/a.ts?hdnts={}", t[0]), "token_expired"),
        (format!("/v/a.ts?hdnts={}", t[1]), "token_not_yet_valid"),
        (format!("/v/a.ts?hdnts={}", t[2]), "token_bad_hmac"),
        (format!("/v/a.ts?hdnts={}", t[3]), "token_acl"),
        (format!("/v/a.ts?hdnts={}", t[4]), "token_ip"),
    ];
    for (target, reason) in &cases {
        let r = get_with(reel.data, target, &[]);
        assert_eq!(r.status, 403, "{reason}: {}", r.text());
        assert!(!r.text().contains("token") && !r.text().contains("secret"), "{}", r.text());
    }
    let head = request(reel.data, "HEAD", "127.0.0.1", "/v/a.ts", &[]);
    assert_eq!(head.status, 403, "HEAD needs a token too");
    let post = request(reel.data, "POST", "127.0.0.1", "/v/a.ts", &[]);
    assert_eq!(post.status, 403, "so does a method passed to the origin");
    assert!(origin.targets().is_empty(), "no refusal reached the origin: {:?}", origin.targets());
    // Bound to this client's address: admitted.
    let ok = get_with(reel.data, &format!("/v/a.ts?hdnts={}", t[5]), &[]);
    assert_eq!((ok.status, ok.text().as_str()), (200, "secret"));
    let m = reel.metrics();
    for (_, reason) in &cases {
        let want = if *reason == "token_missing" { 3.0 } else { 1.0 };
        let got = metric(&m, &format!("reel_denied_total{{reason=\"{reason}\"}}"));
        assert_eq!(got, Some(want), "{reason}");
    }
    let log = dir.path().join("access.log");
    let lines = eventually("the refusals in the access log", || {
        let text = std::fs::read_to_string(&log).ok()?;
        let lines: Vec<Value> = text.lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
        (lines.len() >= cases.len() + 3).then_some(lines)
    });
    for (target, reason) in &cases {
        let line = lines.iter().find(|l| l["denied"] == *reason).expect("logged");
        // The token's value never reaches the log: it is a credential.
        let shown = match target.split_once("?hdnts=") {
            Some((path, _)) => format!("{path}?hdnts=REDACTED"),
            None => target.clone(),
        };
        assert_eq!((line["status"].as_u64(), line["path"].as_str()), (Some(403), Some(&*shown)));
    }
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(t.iter().all(|t| !text.contains(t.as_str())), "{text}");
    let admitted = lines.iter().find(|l| l["status"] == 200).expect("the admitted line");
    assert!(admitted.get("denied").is_none(), "{admitted}");
}

#[test]
fn a_key_rolls_over_by_reload_without_refusing_a_viewer() {
    let Some(py) = generator() else {
        return reel_test_support::skip("akamai-edgeauth could not be installed with pip");
    };
    let dir = tempfile::tempdir().unwrap();
    let origin = Origin::start("o");
    origin.put("/v/seg.ts", Object::ok(vec![b's'; 1024]));
    let mut conf = Conf::new(dir.path(), &origin);
    conf.extra = token_table(&[K1], "off");
    let mut reel = Reel::start(&conf);
    let (old, new) = (acl_token(&py, K1, "/v/*"), acl_token(&py, K2, "/v/*"));
    let at = |t: &str| format!("/v/seg.ts?hdnts={t}");
    assert_eq!(get_with(reel.data, &at(&old), &[]).status, 200);
    assert_eq!(get_with(reel.data, &at(&new), &[]).status, 403, "not a key yet");
    // A viewer with the old token keeps playing through both reloads' first step.
    let stop = std::sync::Arc::new(AtomicBool::new(false));
    let (data, path, halt) = (reel.data, at(&old), stop.clone());
    let viewer = std::thread::spawn(move || {
        let mut statuses = Vec::new();
        while !halt.load(Ordering::Relaxed) {
            statuses.push(get_with(data, &path, &[]).status);
        }
        statuses
    });
    conf.extra = token_table(&[K1, K2], "off");
    reel.rewrite(&conf);
    assert_eq!(reel.sighup_reload()["reload"]["last_ok"], true);
    eventually("the new key accepted", || {
        (get_with(reel.data, &at(&new), &[]).status == 200).then_some(())
    });
    stop.store(true, Ordering::Relaxed);
    let statuses = viewer.join().unwrap();
    assert!(!statuses.is_empty() && statuses.iter().all(|&s| s == 200), "{statuses:?}");
    // The old key retired: its tokens are refused, the new ones still admitted.
    conf.extra = token_table(&[K2], "off");
    reel.rewrite(&conf);
    assert_eq!(reel.sighup_reload()["reload"]["last_ok"], true);
    eventually("the old key retired", || {
        (get_with(reel.data, &at(&old), &[]).status == 403).then_some(())
    });
    assert_eq!(get_with(reel.data, &at(&new), &[]).status, 200);
    let m = reel.metrics();
    assert_eq!(
        metric(&m, "reel_denied_total{reason=\"token_bad_hmac\"}").map(|v| v >= 2.0),
        Some(true)
    );
}

/// Whether every URI `playlist` lists carries the token `t`.
fn every_uri_carries(playlist: &str, t: &str) -> bool {
    let want = format!("hdnts={t}");
    playlist.lines().all(|l| {
        let l = l.trim();
        if l.is_empty() {
            true
        } else if !l.starts_with('#') {
            l.contains(&want)
        } else {
            !l.contains("URI=\"") || l.contains(&want)
        }
    })
}

/// The `URI` of the playlist's `EXT-X-PRELOAD-HINT` and the media sequence number and part
/// index its name gives (`seg_MSN.partK.ts?...`).
fn preload_hint(playlist: &str) -> (String, u64, u64) {
    let uri = playlist
        .lines()
        .find_map(|l| l.strip_prefix("#EXT-X-PRELOAD-HINT:TYPE=PART,URI=\""))
        .and_then(|r| r.split('"').next())
        .unwrap_or_else(|| panic!("no preload hint in\n{playlist}"))
        .to_string();
    let name = uri.split('?').next().unwrap_or("");
    let (msn, part) = name
        .strip_prefix("seg_")
        .and_then(|r| r.strip_suffix(".ts"))
        .and_then(|r| r.split_once(".part"))
        .unwrap_or_else(|| panic!("unexpected part URI {uri}"));
    (uri.clone(), msn.parse().unwrap(), part.parse().unwrap())
}

#[test]
fn an_llhls_player_follows_a_tokenised_live_stream_by_the_playlists_uris_alone() {
    use reel_demo_origin::DemoOriginConfig;
    let Some(py) = generator() else {
        return reel_test_support::skip("akamai-edgeauth could not be installed with pip");
    };
    let origin =
        reel_demo_origin::spawn("127.0.0.1:0".parse().unwrap(), DemoOriginConfig::no_latency())
            .expect("demo origin");
    let dir = tempfile::tempdir().unwrap();
    let unused = Origin::start("unused");
    let mut conf = Conf::new(dir.path(), &unused);
    conf.raw = Some(shipped_demo_config(origin.local_addr(), false) + &token_table(&[K1], "query"));
    let reel = Reel::start(&conf);
    let t = acl_token(&py, K1, "/live/*");
    // What the player was given: the playlist's URL with the token. Everything else it
    // asks for comes from the playlists' URIs (relative to /live/) or is that URL with
    // the LL-HLS delivery directives added, as players do.
    let playlist_url = format!("/live/index.m3u8?hdnts={t}");
    let mut conn = Conn::open(reel.data).unwrap();
    let mut fetch = |target: &str| {
        let r = conn.get("127.0.0.1", target).unwrap();
        assert_eq!(r.status, 200, "{target}: {} {}", r.cache_status(), r.text());
        r
    };
    let first = fetch(&playlist_url);
    let mut text = first.text();
    assert!(every_uri_carries(&text, &t), "the playlist's URIs carry the token:\n{text}");
    assert_eq!(first.header("etag"), None, "no ETag of the stored body");
    let cc: Vec<&str> = first
        .headers
        .iter()
        .filter(|(n, _)| n == "cache-control")
        .map(|(_, v)| v.as_str())
        .collect();
    assert_eq!(cc, ["private, no-store"], "one viewer's playlist stays out of shared caches");
    assert_eq!(first.header("content-length"), Some(first.body.len().to_string().as_str()));
    let mut followed = 0;
    for _ in 0..6 {
        let (hint, msn, part) = preload_hint(&text);
        let part_body = fetch(&format!("/live/{hint}"));
        assert!(!part_body.body.is_empty(), "the hinted part");
        let segment = text.lines().rfind(|l| !l.starts_with('#') && !l.trim().is_empty());
        if let Some(seg) = segment {
            fetch(&format!("/live/{}", seg.trim()));
        }
        let reload = fetch(&format!("{playlist_url}&_HLS_msn={msn}&_HLS_part={part}"));
        text = reload.text();
        assert!(every_uri_carries(&text, &t), "a blocking reload's URIs carry the token:\n{text}");
        assert!(text.contains(&hint), "the reload lists the part it waited for:\n{text}");
        followed += 1;
    }
    assert_eq!(followed, 6);
    // Without the token the same part is refused: the player got through on the URIs.
    let (hint, ..) = preload_hint(&text);
    let bare = hint.split('?').next().unwrap();
    assert_eq!(get(reel.data, &format!("/live/{bare}")).status, 403);
    // The origin was asked for playlists and parts, never with a token.
    let stats = json_at(origin.local_addr(), "/__origin/stats");
    let targets = stats["requests_by_target"].as_object().cloned().unwrap_or_default();
    assert!(!targets.is_empty() && targets.keys().all(|k| !k.contains("hdnts")), "{targets:?}");
}

fn json_at(addr: SocketAddr, target: &str) -> Value {
    get(addr, target).json()
}

#[test]
fn cookie_mode_gives_the_token_back_as_a_cookie_scoped_to_its_acl() {
    let Some(py) = generator() else {
        return reel_test_support::skip("akamai-edgeauth could not be installed with pip");
    };
    let dir = tempfile::tempdir().unwrap();
    let origin = Origin::start("o");
    origin.put(
        "/dash/manifest.mpd",
        Object::ok("<MPD/>").header("content-type", "application/dash+xml"),
    );
    origin.put("/dash/seg_1.m4s", Object::ok(vec![b'm'; 2048]));
    let mut conf = Conf::new(dir.path(), &origin);
    conf.extra = token_table(&[K1], "cookie");
    let reel = Reel::start(&conf);
    let t = acl_token(&py, K1, "/dash/*");
    let m = get_with(reel.data, &format!("/dash/manifest.mpd?hdnts={t}"), &[]);
    assert_eq!((m.status, m.text().as_str()), (200, "<MPD/>"));
    let set = m.header("set-cookie").expect("the token as a cookie");
    assert_eq!(set, format!("hdnts={t}; Path=/dash/; HttpOnly"), "plain HTTP: not Secure");
    // The player's next requests carry the cookie only, as a browser sends it.
    let cookie = set.split(';').next().unwrap();
    let s = get_with(reel.data, "/dash/seg_1.m4s", &[("cookie", cookie)]);
    assert_eq!((s.status, s.body.len()), (200, 2048));
    assert_eq!(s.header("set-cookie"), None, "a cookie is not set again");
    assert_eq!(get(reel.data, "/dash/seg_1.m4s").status, 403, "without it: refused");
    assert_eq!(origin.cookies("/dash/seg_1.m4s"), Vec::<String>::new(), "the origin gets no token");
}
