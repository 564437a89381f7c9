//! HTTPS/1.1: the same codec over TLS (real handshakes on 127.0.0.1): smuggling shapes,
//! limits and timeouts behave as over TCP; file bodies are byte-exact and leave as full
//! 16 KiB TLS records; cold file pages are read through the range's own reader.

use std::io::Write;
use std::time::Duration;

use reel_http::{CloseReason, Limits};

use crate::common::{FILE_LEN, Server, file_data, get};

/// Lengths of the TLS application-data records in `wire` (a TLS 1.3 stream as received).
fn app_records(wire: &[u8]) -> Vec<usize> {
    let mut out = Vec::new();
    let mut at = 0;
    while at + 5 <= wire.len() {
        let len = u16::from_be_bytes([wire[at + 3], wire[at + 4]]) as usize;
        if wire[at] == 23 {
            out.push(len);
        }
        at += 5 + len;
    }
    out
}

/// A full record: 16 KiB of plaintext, the inner content type and the 16-byte AEAD tag
/// (RFC 8446 section 5.2).
const FULL: usize = 16 * 1024 + 1 + 16;

#[test]
fn smuggling_shapes_are_refused_and_closed_over_tls() {
    let server = Server::start_tls();
    for (name, raw, status) in crate::smuggling::CASES {
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
fn file_bodies_are_byte_exact_and_leave_as_full_records() {
    let server = Server::start_tls();
    let mut c = server.connect();
    for (off, len) in [(12_345u64, 300_000u64), (0, 1), (FILE_LEN - 10, 10), (777, 0)] {
        c.send(&get(&format!("/file?off={off}&len={len}")));
        let r = c.response(false);
        assert_eq!(r.status, 200);
        assert_eq!(r.header("content-length"), Some(len.to_string().as_str()));
        assert!(r.body == file_data()[off as usize..(off + len) as usize], "off={off} len={len}");
    }
    // The whole 24 MiB file, far beyond the socket buffers, on a fresh connection whose
    // records are counted: the head rides in the first record, and every record but the
    // last of the body (and the two session tickets) is full.
    let mut c = server.connect();
    c.send(&get("/file"));
    let r = c.response(false);
    assert!(r.body == file_data());
    let records = app_records(&c.seen.lock().unwrap());
    let full = records.iter().filter(|&&n| n == FULL).count();
    let body_records = FILE_LEN as usize / (16 * 1024);
    assert!(full >= body_records, "{full} full records of {}", records.len());
    assert!(records.len() - full <= 4, "short records: {:?}", {
        records.iter().filter(|&&n| n != FULL).collect::<Vec<_>>()
    });
}

#[test]
fn cold_file_pages_are_read_through_the_ranges_reader() {
    let server = Server::start_tls();
    let mut c = server.connect();
    let (off, len) = (4096 * 3 + 17, 1_000_000u64);
    // The kernel may keep a few just-written pages through one eviction on a loaded
    // machine (they sit in another CPU's LRU batch): evict again before each of a few
    // tries. A reader that never takes the cold path fails every try.
    let mut n = 0;
    for _ in 0..5 {
        c.send(&get("/evict"));
        assert_eq!(c.response(false).status, 200);
        c.send(&get(&format!("/file?off={off}&len={len}&counted=1")));
        let r = c.response(false);
        assert!(r.body == file_data()[off as usize..off as usize + len as usize]);
        c.send(&get("/cold-reads"));
        n = String::from_utf8(c.response(false).body).unwrap().parse().unwrap();
        if n > 0 {
            break;
        }
    }
    assert!(n > 0, "no read went through read_cold");
    // Warm now: served from the page cache, no further cold read.
    c.send(&get(&format!("/file?off={off}&len={len}&counted=1")));
    assert!(c.response(false).body == file_data()[off as usize..off as usize + len as usize]);
    c.send(&get("/cold-reads"));
    let m: u64 = String::from_utf8(c.response(false).body).unwrap().parse().unwrap();
    assert_eq!(m, n);
}

#[test]
fn file_shorter_than_its_range_closes_mid_body_over_tls() {
    let server = Server::start_tls();
    let mut c = server.connect();
    c.send(&get(&format!("/file?off={}&len=100000", FILE_LEN - 40)));
    // The head travels with the first body bytes, so the client may see nothing at all;
    // never a complete response.
    let raw = c.read_to_eof();
    assert!(raw.len() < 100_000, "{} bytes", raw.len());
    assert_eq!(server.outcome().close, CloseReason::ResponseAborted);
}

#[test]
fn pipelining_keep_alive_head_and_streams_over_tls() {
    let server = Server::start_tls();
    let mut c = server.connect();
    c.send(b"GET /hello HTTP/1.1\r\nHost: t\r\n\r\nHEAD /file?len=5000 HTTP/1.1\r\nHost: t\r\n\r\nGET /stream HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(c.response(false).body, b"hello world");
    let h = c.response(true);
    assert_eq!((h.status, h.header("content-length")), (200, Some("5000")));
    let s = c.response(false);
    assert_eq!(s.header("transfer-encoding"), Some("chunked"));
    assert_eq!(s.body.len(), 3 + 5000 + 20_000);
    c.send(b"POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n");
    assert_eq!(c.response(false).body, b"hello");
    c.send(b"GET /hello HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    assert!(c.response(false).closes());
    c.assert_closed();
}

#[test]
fn limits_and_timeouts_hold_over_tls() {
    let limits = Limits {
        max_request_line: 100,
        header_timeout: Duration::from_millis(300),
        ..Limits::default()
    };
    let server = Server::with_limits_tls(limits);
    let mut c = server.connect();
    c.send(format!("GET /{} HTTP/1.1\r\nHost: t\r\n\r\n", "a".repeat(200)).as_bytes());
    let r = c.response(false);
    assert_eq!(r.status, 414);
    c.assert_closed();
    assert_eq!(server.outcome().close, CloseReason::Rejected(414));
    // Slowloris over TLS: part of a head, then nothing.
    let mut c = server.connect();
    c.send(b"GET /hello HTTP/1.1\r\nHo");
    let r = c.response(false);
    assert_eq!(r.status, 408);
    assert_eq!(server.outcome().close, CloseReason::HeaderTimeout);
}

/// The head's timer starts with the first ciphertext byte of the record that brings the
/// head's first bytes, not when that record is whole: a record sent slowly counts against
/// `header_timeout`. (On a kTLS session the kernel opens records and the timer starts at
/// the first plaintext byte: the test is for reel's record layer.)
#[test]
fn over_tls_the_head_timer_starts_with_the_first_byte_of_its_record() {
    if reel_tls::kernel_has_tls() {
        return;
    }
    let limits = Limits {
        header_timeout: Duration::from_secs(3),
        idle_timeout: Duration::from_secs(60),
        ..Limits::default()
    };
    let server = Server::with_limits_tls(limits);
    let mut c = server.connect();
    c.send(&get("/hello"));
    assert_eq!(c.response(false).status, 200);
    // One record with the head's first bytes, made by the client and sent slowly: its
    // first byte, then the rest 1 s later.
    let crate::common::ClientStream::Tls(s) = &mut c.stream else { panic!("a TLS client") };
    s.conn.writer().write_all(b"GET /hello HTTP/1.1\r\nHo").expect("plaintext");
    let mut rec = Vec::new();
    s.conn.write_tls(&mut rec).expect("record");
    s.sock.tcp.write_all(&rec[..1]).expect("first byte");
    std::thread::sleep(Duration::from_secs(1));
    s.sock.tcp.write_all(&rec[1..]).expect("the rest");
    // The rest of the head 3.6 s after the record's first byte (2.6 s after its last):
    // past the head's time.
    std::thread::sleep(Duration::from_millis(2600));
    let _ = c.stream.write_all(b"st: t\r\n\r\n");
    let r = c.response(false);
    assert_eq!(r.status, 408);
    assert_eq!(server.outcome().close, CloseReason::HeaderTimeout);
}

#[test]
fn interim_responses_go_out_over_tls_ahead_of_the_final_one() {
    let server = Server::start_tls();
    let mut c = server.connect();
    for _ in 0..2 {
        c.send(&get("/hinted"));
        let r = c.response(false);
        assert_eq!(r.status, 103);
        assert_eq!(r.header("link"), Some("</h.css>; rel=preload"));
        let r = c.response(false);
        assert_eq!((r.status, r.body.as_slice()), (200, &b"hinted"[..]));
    }
}
