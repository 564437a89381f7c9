//! Keep-alive, pipelining, byte-at-a-time delivery, HEAD, methods and size limits.

use std::io::Write;
use std::thread::sleep;
use std::time::Duration;

use reel_http::{CloseReason, Limits};

use crate::common::{Server, get};

#[test]
fn byte_at_a_time_delivery_of_two_requests() {
    let server = Server::start();
    let mut c = server.connect();
    let mut raw = get("/info?a=1");
    raw.extend_from_slice(b"GET /hello HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n");
    for b in &raw {
        c.stream.write_all(std::slice::from_ref(b)).unwrap();
        sleep(Duration::from_millis(1));
    }
    let r = c.response(false);
    assert_eq!(r.status, 200);
    assert_eq!(r.body, b"GET /info q=a=1 host=test v=1.1 ka=true");
    let r = c.response(false);
    assert_eq!((r.status, &r.body[..]), (200, &b"hello world"[..]));
    assert!(r.closes());
    c.assert_closed();
    let o = server.outcome();
    assert_eq!((o.requests, o.close), (2, CloseReason::NotKeepAlive));
}

#[test]
fn three_pipelined_requests_answered_in_order() {
    let server = Server::start();
    let mut c = server.connect();
    let mut raw = Vec::new();
    for i in 1..=3 {
        raw.extend_from_slice(&get(&format!("/info?n={i}")));
    }
    c.send(&raw);
    for i in 1..=3 {
        let r = c.response(false);
        assert_eq!(r.status, 200);
        assert_eq!(
            String::from_utf8(r.body.clone()).unwrap(),
            format!("GET /info q=n={i} host=test v=1.1 ka=true")
        );
        assert!(!r.closes());
        assert!(r.header("date").is_some_and(|d| d.ends_with(" GMT")));
    }
    // Still usable afterwards.
    c.send(&get("/hello"));
    assert_eq!(c.response(false).body, b"hello world");
}

#[test]
fn keep_alive_decisions_by_version_and_connection_header() {
    let server = Server::start();
    // (request, response has connection: close, server then closes, echo header)
    let cases: &[(&str, bool, Option<&str>)] = &[
        ("GET /hello HTTP/1.1\r\nHost: t\r\n\r\n", false, None),
        ("GET /hello HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n", true, Some("close")),
        ("GET /hello HTTP/1.1\r\nHost: t\r\nConnection: foo, CLOSE\r\n\r\n", true, Some("close")),
        ("GET /hello HTTP/1.0\r\n\r\n", true, Some("close")),
        ("GET /hello HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", false, Some("keep-alive")),
        (
            "GET /hello HTTP/1.0\r\nHost: t\r\nConnection: Keep-Alive\r\n\r\n",
            false,
            Some("keep-alive"),
        ),
    ];
    for (raw, closes, echo) in cases {
        let mut c = server.connect();
        c.send(raw.as_bytes());
        let r = c.response(false);
        assert_eq!(r.status, 200, "{raw}");
        assert_eq!(r.header("connection"), *echo, "{raw}");
        if *closes {
            c.assert_closed();
        } else {
            c.send(&get("/hello"));
            assert_eq!(c.response(false).status, 200, "{raw}");
        }
    }
}

#[test]
fn head_has_no_body_but_the_get_length() {
    let server = Server::start();
    let mut c = server.connect();
    c.send(b"HEAD /hello HTTP/1.1\r\nHost: t\r\n\r\nHEAD /file?off=10&len=777 HTTP/1.1\r\nHost: t\r\n\r\n");
    let r = c.response(true);
    assert_eq!((r.status, r.header("content-length")), (200, Some("11")));
    let r = c.response(true);
    assert_eq!((r.status, r.header("content-length")), (200, Some("777")));
    // If a body had been written, it would appear before this response.
    c.send(&get("/hello"));
    let r = c.response(false);
    assert_eq!(r.body, b"hello world");
}

#[test]
fn methods_405_with_allow_and_501_for_unknown() {
    let server = Server::start();
    let mut c = server.connect();
    c.send(b"POST /methods HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n\r\n");
    let r = c.response(false);
    assert_eq!((r.status, r.header("allow")), (405, Some("GET, HEAD")));
    c.send(b"PURGE /methods HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(c.response(false).status, 501);
    c.send(b"M-SEARCH* /info HTTP/1.1\r\nHost: t\r\n\r\n");
    let r = c.response(false);
    assert_eq!(r.body, b"M-SEARCH* /info q=- host=t v=1.1 ka=true");
}

#[test]
fn absolute_form_and_asterisk_targets() {
    let server = Server::start();
    let mut c = server.connect();
    c.send(b"GET http://origin.example:81/info?x HTTP/1.1\r\nHost: ignored\r\n\r\n");
    assert_eq!(c.response(false).body, b"GET /info q=x host=origin.example:81 v=1.1 ka=true");
    c.send(b"OPTIONS * HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(c.response(false).status, 404);
}

#[test]
fn size_limits_414_and_431_then_close() {
    let limits = Limits {
        max_request_line: 256,
        max_header_bytes: 1024,
        max_headers: 8,
        ..Limits::default()
    };
    let server = Server::with_limits(limits);
    let long_target = format!("/{}", "a".repeat(300));
    let many: String = (0..9).map(|i| format!("X-{i}: v\r\n")).collect();
    let big = format!("X-Big: {}\r\n", "b".repeat(1100));
    let cases: Vec<(String, u16)> = vec![
        (format!("GET {long_target} HTTP/1.1\r\nHost: t\r\n\r\n"), 414),
        // Line limit applies before the line is even complete.
        (format!("GET {long_target}"), 414),
        (format!("GET / HTTP/1.1\r\nHost: t\r\n{many}\r\n"), 431),
        (format!("GET / HTTP/1.1\r\nHost: t\r\n{big}\r\n"), 431),
        // Header section still incomplete but already over the limit.
        (format!("GET / HTTP/1.1\r\nHost: t\r\n{big}"), 431),
    ];
    for (raw, status) in cases {
        let mut c = server.connect();
        c.send(raw.as_bytes());
        let r = c.response(false);
        assert_eq!(r.status, status, "{}", &raw[..40]);
        assert!(r.closes());
        c.assert_closed();
        assert_eq!(server.outcome().close, CloseReason::Rejected(status));
    }
    // Just under the limits is fine.
    let mut c = server.connect();
    let ok: String = (0..7).map(|i| format!("X-{i}: v\r\n")).collect();
    c.send(format!("GET /hello HTTP/1.1\r\nHost: t\r\n{ok}\r\n").as_bytes());
    assert_eq!(c.response(false).status, 200);
}

#[test]
fn many_sequential_keep_alive_requests() {
    let server = Server::start();
    let mut c = server.connect();
    for i in 0..50 {
        c.send(&get("/hello"));
        assert_eq!(c.response(false).body, b"hello world", "request {i}");
        c.send(&get("/file?off=100&len=3000"));
        assert_eq!(c.response(false).body.len(), 3000, "request {i}");
    }
    drop(c);
    let o = server.outcome();
    assert_eq!((o.requests, o.close), (100, CloseReason::PeerClosed));
}
