//! Header fields on the way to the origin and back: the stored `Date` reaches clients
//! unchanged, override fields never reach a fill, the origin is sent the Host the key
//! used, and reel's own `X-Forwarded-For` survives what the client lists in `Connection`.

use std::time::{Duration, SystemTime};

use crate::client::{Resp, get, request};
use crate::origin::Route;

fn dates(r: &Resp) -> Vec<&str> {
    r.headers.iter().filter(|(n, _)| n == "date").map(|(_, v)| v.as_str()).collect()
}

/// A stored response's `Date` is the origin's (RFC 9110 6.6.1, RFC 9111 4): the hit path
/// dropped it and the codec wrote the current time instead. Only `Age` is added.
#[test]
fn a_stored_date_reaches_clients_unchanged_with_age_added() {
    let (o, s) = crate::setup();
    let origin_date = httpdate::fmt_http_date(SystemTime::now() - Duration::from_secs(100));
    let d = origin_date.as_str();
    let cc = ("cache-control", "max-age=600");
    o.route("/d", Route::ok("dated", &[cc, ("date", d), ("etag", "\"d\"")]));
    o.route("/dp", Route::ok("passed", &[("cache-control", "no-store"), ("date", d)]));
    let miss = get(&s, "/d", &[]);
    assert_eq!(dates(&miss), vec![d], "the miss");
    let hit = get(&s, "/d", &[]);
    assert!(hit.cache_status().contains("hit"), "{}", hit.cache_status());
    assert_eq!(dates(&hit), vec![d], "the hit carries exactly the origin's Date");
    let age: u64 = hit.header("age").and_then(|v| v.parse().ok()).expect("age");
    assert!(age >= 100, "age {age}");
    let nm = get(&s, "/d", &[("If-None-Match", "\"d\"")]);
    assert_eq!(nm.status, 304);
    assert_eq!(dates(&nm), vec![d], "a 304 from the cache carries the stored Date");
    let head = request(s.addr, "HEAD", "/d", &[]);
    assert_eq!(dates(&head), vec![d]);
    let pass = get(&s, "/dp", &[]);
    assert_eq!(dates(&pass), vec![d], "a response passed through keeps the origin's Date");
    // A response reel makes itself still gets one Date of its own.
    let local = request(s.addr, "GET", "/x", &[("Host", "unknown.example")]);
    assert_eq!(local.status, 421);
    assert_eq!(dates(&local).len(), 1);
}

/// Fields that make origins (or the frameworks behind them) answer for another host or
/// path: sent on a fill they poison the shared copy for everyone.
const OVERRIDES: [(&str, &str); 6] = [
    ("X-Forwarded-Host", "evil.example"),
    ("X-Original-URL", "/admin"),
    ("X-Rewrite-URL", "/admin"),
    ("X-HTTP-Method-Override", "DELETE"),
    ("Forwarded", "host=evil.example"),
    ("X-Forwarded-Proto", "gopher"),
];

#[test]
fn override_fields_are_not_forwarded_on_fills() {
    let (o, s) = crate::setup();
    o.route("/ov", Route::ok("ov", &[("cache-control", "max-age=600")]));
    let mut hs: Vec<(&str, &str)> = OVERRIDES.to_vec();
    hs.push(("X-Custom", "kept"));
    get(&s, "/ov", &hs);
    let seen = &o.seen("/ov")[0];
    for (n, _) in OVERRIDES {
        assert_eq!(seen.header(&n.to_ascii_lowercase()), None, "{n} reached the fill");
    }
    assert_eq!(seen.header("x-custom"), Some("kept"), "other fields go along");
    // A response that varies on a field the fill withheld was not chosen for this viewer.
    o.route(
        "/ovv",
        Route::ok("v", &[("cache-control", "max-age=600"), ("vary", "X-Forwarded-Host")]),
    );
    get(&s, "/ovv", &[("X-Forwarded-Host", "evil.example")]);
    get(&s, "/ovv", &[("X-Forwarded-Host", "evil.example")]);
    assert_eq!(o.count("/ovv"), 2, "not stored as the variant of a value the origin never saw");
}

/// Gateways behind the origin (WSGI, CGI) map `_` in a field name to `-`, so an
/// underscore spelling of an override field reached the fill and still moved the host;
/// scheme overrides were not on the default list at all. Like nginx
/// (`underscores_in_headers off`), fills send no field with `_` in its name; a request
/// passed through for one viewer keeps them.
#[test]
fn underscore_and_scheme_override_fields_are_not_forwarded_on_fills() {
    const SNEAKY: [(&str, &str); 9] = [
        ("X_Forwarded_Host", "evil.example"),
        ("x-forwarded_host", "evil.example"),
        ("X_Original_URL", "/admin"),
        ("X_Rewrite_URL", "/admin"),
        ("X_HTTP_Method_Override", "DELETE"),
        ("X-Forwarded-Ssl", "on"),
        ("X-Url-Scheme", "https"),
        ("Front-End-Https", "on"),
        ("X-Forwarded-Protocol", "https"),
    ];
    let (o, s) = crate::setup();
    o.route("/us", Route::ok("us", &[("cache-control", "max-age=600")]));
    o.route("/usp", Route::ok("usp", &[]));
    let mut hs: Vec<(&str, &str)> = SNEAKY.to_vec();
    hs.push(("X_Custom", "underscored"));
    hs.push(("X-Custom", "kept"));
    assert_eq!(get(&s, "/us", &hs).status, 200);
    let seen = &o.seen("/us")[0];
    for (n, _) in SNEAKY.iter().chain([("X_Custom", "")].iter()) {
        assert_eq!(seen.header(&n.to_ascii_lowercase()), None, "{n} reached the fill");
    }
    assert!(seen.headers.iter().all(|(n, _)| !n.contains('_')), "{:?}", seen.headers);
    assert_eq!(seen.header("x-custom"), Some("kept"), "other fields go along");
    // Passed through for this viewer alone: its fields go along as they were.
    let mut post = hs.clone();
    post.push(("Content-Length", "0"));
    assert_eq!(request(s.addr, "POST", "/usp", &post).status, 200);
    let seen = &o.seen("/usp")[0];
    assert_eq!(seen.header("x_forwarded_host"), Some("evil.example"));
    assert_eq!(seen.header("x_custom"), Some("underscored"));
    assert_eq!(seen.header("x-forwarded-ssl"), Some("on"));
    // A response that varies on an underscored field the fill withheld was not chosen for
    // this viewer, whichever spelling the Vary uses.
    for (path, vary) in [("/usv1", "X_Forwarded_Host"), ("/usv2", "x_forwarded_host")] {
        o.route(path, Route::ok("v", &[("cache-control", "max-age=600"), ("vary", vary)]));
        get(&s, path, &[("X_Forwarded_Host", "evil.example")]);
        get(&s, path, &[("X_Forwarded_Host", "evil.example")]);
        assert_eq!(o.count(path), 2, "{vary}: stored as the variant of a value never sent");
    }
}

#[test]
fn the_dropped_fields_are_configurable() {
    let drop = vec!["x-custom".into(), "x_other".into()];
    let (o, s) = crate::setup_with(|opts| opts.fill_drop_headers = drop);
    o.route("/ov", Route::ok("ov", &[("cache-control", "max-age=600")]));
    get(&s, "/ov", &[("X-Custom", "x"), ("X-Other", "y"), ("X-Forwarded-Host", "h.example")]);
    let seen = &o.seen("/ov")[0];
    assert_eq!(seen.header("x-custom"), None);
    assert_eq!(seen.header("x-other"), None, "`_` in a listed name matches `-`");
    assert_eq!(seen.header("x-forwarded-host"), Some("h.example"));
}

/// The origin is asked with the Host the key was built from: lowercased, default port
/// removed, the authority of an absolute-form target rather than the Host field.
#[test]
fn the_origin_gets_the_normalised_host_of_the_key() {
    let (o, s) = crate::setup();
    o.route("/h1", Route::ok("h", &[("cache-control", "max-age=600")]));
    o.route("/h2", Route::ok("h", &[("cache-control", "max-age=600")]));
    o.route("/h3", Route::ok("h", &[]));
    get(&s, "/h1", &[("Host", "TEST.Local:80")]);
    let mut c = crate::client::Conn::open(s.addr);
    c.send(b"GET http://Test.LOCAL/h2 HTTP/1.1\r\nHost: other\r\nConnection: close\r\n\r\n");
    assert_eq!(c.read_response(false).status, 200);
    request(s.addr, "POST", "/h3", &[("Host", "TEST.LOCAL:80"), ("Content-Length", "0")]);
    for p in ["/h1", "/h2", "/h3"] {
        assert_eq!(o.seen(p)[0].header("host"), Some(crate::server::HOST), "{p}");
    }
}

/// `Connection: X-Forwarded-For` from a client made the origin client's hop-by-hop
/// stripping remove the `X-Forwarded-For` reel adds.
#[test]
fn reels_x_forwarded_for_survives_a_hostile_connection_list() {
    let (o, s) = crate::setup();
    o.route("/xf", Route::ok("x", &[("cache-control", "max-age=600")]));
    o.route("/xp", Route::ok("x", &[]));
    let hostile = ("Connection", "X-Forwarded-For, X-Real-Thing");
    get(&s, "/xf", &[hostile, ("X-Forwarded-For", "6.6.6.6"), ("X-Real-Thing", "1")]);
    request(s.addr, "POST", "/xp", &[hostile, ("Content-Length", "0")]);
    for p in ["/xf", "/xp"] {
        let seen = &o.seen(p)[0];
        let xff: Vec<&str> = seen
            .headers
            .iter()
            .filter(|(n, _)| n == "x-forwarded-for")
            .map(|(_, v)| v.as_str())
            .collect();
        assert_eq!(xff, vec!["127.0.0.1"], "{p}: only reel's own, the client's was hop-by-hop");
        assert_eq!(seen.header("x-real-thing"), None, "{p}: listed in Connection");
    }
}
