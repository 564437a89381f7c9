//! Request smuggling and malformed-head shapes: each must get its status with
//! `Connection: close`, and the server must then close the socket.

use reel_http::CloseReason;

use crate::common::Server;

pub(crate) const CASES: &[(&str, &str, u16)] = &[
    (
        "CL and TE",
        "POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        400,
    ),
    (
        "TE and CL",
        "POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n",
        400,
    ),
    (
        "duplicate equal CL",
        "POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\nhello",
        400,
    ),
    (
        "duplicate different CL",
        "POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello",
        400,
    ),
    ("CL list", "POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 5, 5\r\n\r\nhello", 400),
    ("CL plus sign", "POST / HTTP/1.1\r\nHost: t\r\nContent-Length: +5\r\n\r\nhello", 400),
    ("CL minus", "POST / HTTP/1.1\r\nHost: t\r\nContent-Length: -1\r\n\r\n", 400),
    ("CL inner space", "POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 1 0\r\n\r\n", 400),
    ("CL hex", "POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 0x5\r\n\r\n", 400),
    (
        "CL overflow",
        "POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 18446744073709551616\r\n\r\n",
        400,
    ),
    ("CL empty", "POST / HTTP/1.1\r\nHost: t\r\nContent-Length: \r\n\r\n", 400),
    (
        "TE chunked, gzip",
        "POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked, gzip\r\n\r\n",
        400,
    ),
    ("TE xchunked", "POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: xchunked\r\n\r\n", 400),
    (
        "TE chunked twice",
        "POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked, chunked\r\n\r\n",
        400,
    ),
    (
        "TE chunked in two fields",
        "POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
        400,
    ),
    ("TE on HTTP/1.0", "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400),
    ("TE empty", "POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: \r\n\r\n", 400),
    ("TE identity", "POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: identity\r\n\r\n", 400),
    (
        "TE gzip, chunked",
        "POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
        501,
    ),
    ("obs-fold", "GET / HTTP/1.1\r\nHost: t\r\nX-A: a\r\n b\r\n\r\n", 400),
    ("obs-fold tab", "GET / HTTP/1.1\r\nHost: t\r\nX-A: a\r\n\tb\r\n\r\n", 400),
    ("space before colon", "GET / HTTP/1.1\r\nHost: t\r\nContent-Length : 5\r\n\r\n", 400),
    ("tab before colon", "GET / HTTP/1.1\r\nHost\t: t\r\n\r\n", 400),
    ("NUL in value", "GET / HTTP/1.1\r\nHost: t\r\nX-A: a\0b\r\n\r\n", 400),
    ("CTL in value", "GET / HTTP/1.1\r\nHost: t\r\nX-A: a\x01b\r\n\r\n", 400),
    ("DEL in value", "GET / HTTP/1.1\r\nHost: t\r\nX-A: a\x7fb\r\n\r\n", 400),
    ("bare CR in value", "GET / HTTP/1.1\r\nHost: t\r\nX-A: a\rb\r\n\r\n", 400),
    ("bad byte in name", "GET / HTTP/1.1\r\nHost: t\r\nX(A): a\r\n\r\n", 400),
    ("missing Host", "GET / HTTP/1.1\r\nX-A: a\r\n\r\n", 400),
    ("two Hosts", "GET / HTTP/1.1\r\nHost: a\r\nHost: a\r\n\r\n", 400),
    ("invalid Host", "GET / HTTP/1.1\r\nHost: a b/c\r\n\r\n", 400),
    ("two Hosts on 1.0", "GET / HTTP/1.0\r\nHost: a\r\nHost: b\r\n\r\n", 400),
    ("ftp absolute-form", "GET ftp://t/x HTTP/1.1\r\nHost: t\r\n\r\n", 400),
    ("relative target", "GET x/y HTTP/1.1\r\nHost: t\r\n\r\n", 400),
    ("asterisk for GET", "GET * HTTP/1.1\r\nHost: t\r\n\r\n", 400),
    ("userinfo in absolute-form", "GET http://u@t/ HTTP/1.1\r\nHost: t\r\n\r\n", 400),
    ("space in target", "GET /a b HTTP/1.1\r\nHost: t\r\n\r\n", 400),
    ("missing version", "GET /\r\nHost: t\r\n\r\n", 400),
    ("garbage", "\x16\x03\x01\x02\x00\x01\x00\x01\x03\x03\r\n\r\n", 400),
    ("HTTP/2.0", "GET / HTTP/2.0\r\nHost: t\r\n\r\n", 505),
    ("unknown expectation", "GET / HTTP/1.1\r\nHost: t\r\nExpect: teapot\r\n\r\n", 417),
    (
        "CL over max_body_bytes",
        "POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 99999999999\r\n\r\n",
        413,
    ),
    (
        "bad chunk size",
        "POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n",
        400,
    ),
    (
        "negative chunk size",
        "POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n-5\r\nhello\r\n0\r\n\r\n",
        400,
    ),
    (
        "chunk size overflow",
        "POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n10000000000000000\r\nx\r\n0\r\n\r\n",
        400,
    ),
    (
        "missing CRLF after chunk",
        "POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhelloXX0\r\n\r\n",
        400,
    ),
    (
        "bare LF chunk line",
        "POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n5\nhello\r\n0\r\n\r\n",
        400,
    ),
];

#[test]
fn smuggling_shapes_are_refused_and_closed() {
    let server = Server::start();
    for (name, raw, status) in CASES {
        let mut c = server.connect();
        c.send(raw.as_bytes());
        let r = c.response(false);
        assert_eq!(r.status, *status, "{name}");
        assert!(r.closes(), "{name}: no Connection: close");
        c.assert_closed();
        let o = server.outcome();
        assert!(
            matches!(o.close, CloseReason::Rejected(s) if s == *status)
                || matches!(o.close, CloseReason::Body(_)),
            "{name}: {o:?}"
        );
    }
}

#[test]
fn oversized_chunk_extension_is_refused() {
    let server = Server::start();
    let mut c = server.connect();
    let ext = "a".repeat(reel_http::MAX_CHUNK_LINE + 10);
    let raw = format!(
        "POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n5;{ext}\r\nhello\r\n0\r\n\r\n"
    );
    c.send(raw.as_bytes());
    let r = c.response(false);
    assert_eq!(r.status, 400);
    c.assert_closed();
}

#[test]
fn smuggled_second_request_is_never_answered() {
    // A classic CL.TE probe: a lenient parser would see a second request in the body.
    let server = Server::start();
    let mut c = server.connect();
    c.send(b"POST /hello HTTP/1.1\r\nHost: t\r\nContent-Length: 44\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /info HTTP/1.1\r\nHost: t\r\n\r\n");
    let r = c.response(false);
    assert_eq!(r.status, 400);
    c.assert_closed();
}
