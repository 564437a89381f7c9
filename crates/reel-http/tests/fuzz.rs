//! Property tests on stable Rust: the request-head parser never panics and parses the
//! same head the same way however its bytes arrive; the chunked decoder (through a real
//! connection) yields exactly the encoded body for any chunking and any split of the wire
//! bytes, and refuses a corrupted encoding with 400 rather than returning wrong bytes.

use std::net::SocketAddr;

use proptest::prelude::*;
use reel_http::{HeadStatus, Limits, Request};

use crate::common::Server;

fn addr() -> SocketAddr {
    "127.0.0.1:1".parse().unwrap()
}

fn parse(buf: &[u8]) -> Result<HeadStatus, u16> {
    let mut r = Request::new(addr(), addr());
    r.parse_head(buf, &Limits::default()).map_err(|e| e.status)
}

/// Request heads built from plausible and hostile pieces.
fn head() -> impl Strategy<Value = Vec<u8>> {
    let method =
        prop_oneof![Just("GET"), Just("HEAD"), Just("POST"), Just("BREW"), Just("G ET"), Just("")];
    let target = prop_oneof![
        Just("/".to_string()),
        Just("/live/seg_1.ts?x=1".to_string()),
        Just("http://h/a?b".to_string()),
        Just("*".to_string()),
        Just("/a#frag".to_string()),
        "/[ -~]{0,20}",
    ];
    let version =
        prop_oneof![Just("HTTP/1.1"), Just("HTTP/1.0"), Just("HTTP/2.0"), Just("HTTP/1.1 ")];
    let field = prop_oneof![
        Just("Host: h".to_string()),
        Just("Host: h".to_string()),
        Just("Content-Length: 5".to_string()),
        Just("Content-Length: 5, 5".to_string()),
        Just("Transfer-Encoding: chunked".to_string()),
        Just("Transfer-Encoding: gzip, chunked".to_string()),
        Just("Connection: close".to_string()),
        Just("Expect: 100-continue".to_string()),
        Just(" folded".to_string()),
        Just("Bad Name: x".to_string()),
        Just("X: \u{1}".to_string()),
        "[A-Za-z-]{1,12}: [ -~]{0,30}",
    ];
    let eol = prop_oneof![Just("\r\n"), Just("\r\n"), Just("\n")];
    (method, target, version, prop::collection::vec((field, eol.clone()), 0..8), eol).prop_map(
        |(m, t, v, fields, end)| {
            let mut out = format!("{m} {t} {v}\r\n").into_bytes();
            for (f, e) in fields {
                out.extend_from_slice(f.as_bytes());
                out.extend_from_slice(e.as_bytes());
            }
            out.extend_from_slice(end.as_bytes());
            out.extend_from_slice(b"BODY");
            out
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1024, ..ProptestConfig::default() })]

    #[test]
    fn head_parser_never_panics_on_arbitrary_bytes(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        let _ = parse(&bytes);
    }

    /// Every prefix of a head that parses completely is `Partial`, so a head is never
    /// accepted early, refused early, or parsed differently when it arrives byte by byte;
    /// a refused head is refused with the same status once enough bytes are in.
    #[test]
    fn head_parser_is_consistent_over_prefixes(h in head()) {
        match parse(&h) {
            Ok(HeadStatus::Complete(n)) => {
                prop_assert!(n <= h.len());
                for cut in 0..n {
                    prop_assert_eq!(parse(&h[..cut]), Ok(HeadStatus::Partial), "cut {}", cut);
                }
                // Trailing bytes never change where the head ends.
                let mut more = h.clone();
                more.extend_from_slice(b"\r\n\r\nGET / HTTP/1.1\r\n");
                prop_assert_eq!(parse(&more), Ok(HeadStatus::Complete(n)));
            }
            Ok(HeadStatus::Partial) => {}
            Err(status) => {
                prop_assert!([400, 413, 414, 417, 431, 501, 505].contains(&status), "{}", status);
                for cut in 0..h.len() {
                    match parse(&h[..cut]) {
                        Ok(HeadStatus::Partial) => {}
                        Err(s) => prop_assert_eq!(s, status, "cut {}", cut),
                        Ok(HeadStatus::Complete(n)) => prop_assert!(false, "prefix {} complete at {}", cut, n),
                    }
                }
            }
        }
    }
}

/// A chunked encoding of `body` in chunks of the given sizes, with optional extensions and
/// trailers.
fn encode_chunked(body: &[u8], sizes: &[usize], ext: bool, trailer: bool, upper: bool) -> Vec<u8> {
    let mut out = Vec::new();
    let mut rest = body;
    let mut i = 0;
    while !rest.is_empty() {
        let n = sizes.get(i % sizes.len().max(1)).copied().unwrap_or(1).clamp(1, rest.len());
        i += 1;
        let size = if upper { format!("{n:X}") } else { format!("{n:x}") };
        out.extend_from_slice(size.as_bytes());
        if ext {
            out.extend_from_slice(b";name=\"v;x\"");
        }
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(&rest[..n]);
        out.extend_from_slice(b"\r\n");
        rest = &rest[n..];
    }
    out.extend_from_slice(b"0\r\n");
    if trailer {
        out.extend_from_slice(b"X-Sum: 1\r\n");
    }
    out.extend_from_slice(b"\r\n");
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Any chunking of any body, delivered in arbitrary pieces, reaches the handler byte-exact.
    #[test]
    fn chunked_bodies_decode_exactly_however_they_are_split(
        body in prop::collection::vec(any::<u8>(), 0..3000),
        sizes in prop::collection::vec(1usize..700, 1..6),
        ext in any::<bool>(),
        trailer in any::<bool>(),
        upper in any::<bool>(),
        split in 1usize..64,
    ) {
        let server = Server::start();
        let mut c = server.connect();
        let mut wire = b"POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
        wire.extend_from_slice(&encode_chunked(&body, &sizes, ext, trailer, upper));
        for piece in wire.chunks(split) {
            c.send(piece);
        }
        let r = c.response(false);
        prop_assert_eq!(r.status, 200);
        prop_assert_eq!(r.body, body);
    }

    /// A corrupted encoding is refused (400) or, where the damage still spells a valid
    /// encoding, decodes to some body; it never hangs or panics, and the connection ends.
    #[test]
    fn corrupted_chunked_bodies_never_hang_or_panic(
        body in prop::collection::vec(any::<u8>(), 1..400),
        at in any::<prop::sample::Index>(),
        val in any::<u8>(),
    ) {
        let mut enc = encode_chunked(&body, &[100], false, false, false);
        let i = at.index(enc.len());
        prop_assume!(enc[i] != val);
        enc[i] = val;
        let server = Server::start();
        let mut c = server.connect();
        let mut wire = b"POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n".to_vec();
        wire.extend_from_slice(&enc);
        c.send(&wire);
        let _ = c.stream.tcp().shutdown(std::net::Shutdown::Write);
        let out = c.read_to_eof();
        if !out.is_empty() {
            let status = std::str::from_utf8(&out[9..12]).unwrap_or("").to_string();
            prop_assert!(status == "200" || status == "400" || status == "413", "{}", status);
        }
    }
}
