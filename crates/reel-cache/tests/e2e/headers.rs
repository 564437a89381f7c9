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
