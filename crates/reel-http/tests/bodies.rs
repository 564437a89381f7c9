//! Response bodies (sendfile, streams) and request bodies (Content-Length, chunked,
//! 100-continue, unread bodies).

use std::io::Write;
use std::time::Duration;

use reel_http::{BodyError, CloseReason, Limits};

use crate::common::{FILE_LEN, Server, file_data, get};

fn expected(off: u64, len: u64) -> &'static [u8] {
    &file_data()[off as usize..(off + len) as usize]
}

#[test]
fn file_body_via_sendfile_at_offset_is_byte_exact() {
    let server = Server::start();
    let mut c = server.connect();
    for (off, len) in [(12_345u64, 300_000u64), (0, 1), (FILE_LEN - 10, 10), (777, 0)] {
        c.send(&get(&format!("/file?off={off}&len={len}")));
        let r = c.response(false);
        assert_eq!(r.status, 200);
        assert_eq!(r.header("content-length"), Some(len.to_string().as_str()));
        assert!(r.body == expected(off, len), "off={off} len={len}");
    }
    // Whole 24 MiB file in one response, far beyond the socket buffers.
    c.send(&get("/file"));
    let r = c.response(false);
    assert_eq!(r.body.len() as u64, FILE_LEN);
    assert!(r.body == expected(0, FILE_LEN));
}

#[test]
fn file_range_past_end_of_file_closes_instead_of_short_body() {
    let server = Server::start();
    let mut c = server.connect();
    c.send(&get(&format!("/file?off={}&len=100", FILE_LEN - 40)));
    let raw = c.read_to_eof();
    let head_end = raw.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    assert!(String::from_utf8_lossy(&raw[..head_end]).contains("content-length: 100"));
    assert_eq!(raw.len() - head_end, 40);
    assert_eq!(server.outcome().close, CloseReason::ResponseAborted);
}

#[test]
fn streams_mix_memory_and_file_chunks() {
    let server = Server::start();
    let mut want = b"abc".to_vec();
    want.extend_from_slice(expected(1000, 5000));
    want.extend(vec![b'z'; 20_000]);
    let total = want.len();
    let mut c = server.connect();
    // Unknown length on HTTP/1.1: chunked.
    c.send(&get("/stream"));
    let r = c.response(false);
    assert_eq!(r.header("transfer-encoding"), Some("chunked"));
    assert!(r.body == want);
    // Declared length: Content-Length, connection stays usable.
    c.send(&get(&format!("/stream?len={total}")));
    let r = c.response(false);
    assert_eq!(r.header("content-length"), Some(total.to_string().as_str()));
    assert!(r.body == want);
    c.send(&get("/hello"));
    assert_eq!(c.response(false).status, 200);
    // HTTP/1.0 unknown length: close-delimited.
    let mut c = server.connect();
    c.send(b"GET /stream HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    let r = c.response(false);
    assert!(r.closes() && r.header("transfer-encoding").is_none());
    assert!(r.body == want);
}

#[test]
fn stream_error_or_short_stream_closes_the_connection() {
    let server = Server::start();
    // Errors midway with a declared length: fewer bytes, then EOF.
    for path in ["/stream?fail=1&len=100000", "/stream?len=100000"] {
        let mut c = server.connect();
        c.send(&get(path));
        let raw = c.read_to_eof();
        let head_end = raw.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
        assert!(String::from_utf8_lossy(&raw[..head_end]).contains("content-length: 100000"));
        assert_eq!(raw.len() - head_end, 3 + 5000 + 20_000, "{path}");
        assert_eq!(server.outcome().close, CloseReason::ResponseAborted);
    }
    // Errors midway while chunked: no terminating zero chunk.
    let mut c = server.connect();
    c.send(&get("/stream?fail=1"));
    let raw = c.read_to_eof();
    assert!(!raw.ends_with(b"0\r\n\r\n"));
    assert_eq!(server.outcome().close, CloseReason::ResponseAborted);
    // A stream longer than declared is cut, not overrun.
    let mut c = server.connect();
    c.send(&get("/stream?len=10"));
    let raw = c.read_to_eof();
    let head_end = raw.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    assert!(raw.len() - head_end < 10);
}

#[test]
fn request_bodies_content_length_and_chunked() {
    let server = Server::start();
    let mut c = server.connect();
    c.send(b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 11\r\n\r\nhello world");
    assert_eq!(c.response(false).body, b"hello world");
    let chunked = b"POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\n1\r\n \r\nA \t; x\r\n0123456789\r\n0\r\nX-Trailer: yes\r\n\r\n";
    c.send(chunked);
    assert_eq!(c.response(false).body, b"hello 0123456789");
    // Same body delivered in pieces that split every line.
    for piece in chunked.chunks(3) {
        c.send(piece);
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(c.response(false).body, b"hello 0123456789");
    c.send(&get("/hello"));
    assert_eq!(c.response(false).status, 200);
}

#[test]
fn chunked_body_over_limit_gets_413_and_close() {
    let server = Server::with_limits(Limits { max_body_bytes: 1000, ..Limits::default() });
    let mut c = server.connect();
    c.send(b"POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n");
    c.send(b"200\r\n");
    c.send(&[b'x'; 512]);
    c.send(b"\r\n200\r\n");
    c.send(&[b'y'; 512]);
    c.send(b"\r\n0\r\n\r\n");
    let r = c.response(false);
    assert_eq!(r.status, 413);
    assert!(r.closes());
    c.assert_closed();
    assert_eq!(server.outcome().close, CloseReason::Body(BodyError::TooLarge));
    // Content-Length over the limit is refused before the handler.
    let mut c = server.connect();
    c.send(b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 1001\r\n\r\n");
    assert_eq!(c.response(false).status, 413);
    c.assert_closed();
}

#[test]
fn unread_small_body_is_drained_and_large_one_closes() {
    let server = Server::start();
    let mut c = server.connect();
    // /hello never reads its body; the next pipelined request must still parse.
    c.send(b"POST /hello HTTP/1.1\r\nHost: t\r\nContent-Length: 6\r\n\r\nGET /xGET /info HTTP/1.1\r\nHost: t\r\n\r\n");
    let r = c.response(false);
    assert_eq!((r.status, r.closes()), (200, false));
    assert_eq!(c.response(false).body, b"GET /info q=- host=t v=1.1 ka=true");
    // Larger than the drain limit: answered with close.
    let mut c = server.connect();
    let len = reel_http::DRAIN_LIMIT + 1;
    c.send(
        format!("POST /hello HTTP/1.1\r\nHost: t\r\nContent-Length: {len}\r\n\r\nabc").as_bytes(),
    );
    let r = c.response(false);
    assert_eq!(r.status, 200);
    assert!(r.closes());
    c.assert_closed();
}

#[test]
fn expect_100_continue_is_sent_when_the_body_is_read() {
    let server = Server::start();
    let mut c = server.connect();
    c.send(b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 4\r\nExpect: 100-continue\r\n\r\n");
    let interim = c.response(false);
    assert_eq!(interim.status, 100);
    c.stream.write_all(b"data").unwrap();
    let r = c.response(false);
    assert_eq!((r.status, &r.body[..]), (200, &b"data"[..]));
    // Handler that never reads: no 100, and the connection closes after the answer.
    c.send(b"POST /hello HTTP/1.1\r\nHost: t\r\nContent-Length: 4\r\nExpect: 100-continue\r\n\r\n");
    let r = c.response(false);
    assert_eq!(r.status, 200);
    assert!(r.closes());
}
