//! Interim responses from the origin (RFC 9110 section 15.2): a `103 Early Hints` reaches
//! the HTTP/1.1 client waiting for the response while the origin still works on it, is
//! never stored (a hit has none), and never reaches an HTTP/1.0 client.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};

use crate::common::*;

const HINT: &str = "HTTP/1.1 103 Early Hints\r\nlink: </style.css>; rel=preload; as=style\r\n\r\n";

fn send(addr: SocketAddr, request: &str) -> TcpStream {
    let mut c = TcpStream::connect(addr).unwrap();
    c.set_read_timeout(Some(PATIENCE)).unwrap();
    c.write_all(request.as_bytes()).unwrap();
    c
}

/// Reads until `buf` holds a complete head after `skip` bytes; returns it and its end.
fn next_head(c: &mut TcpStream, buf: &mut Vec<u8>, skip: usize) -> (String, usize) {
    loop {
        if let Some(i) = buf[skip..].windows(4).position(|w| w == b"\r\n\r\n") {
            let end = skip + i + 4;
            return (String::from_utf8_lossy(&buf[skip..end]).to_lowercase(), end);
        }
        let mut tmp = [0u8; 4096];
        let n = c.read(&mut tmp).expect("a response head");
        assert!(n > 0, "closed: {}", String::from_utf8_lossy(buf));
        buf.extend_from_slice(&tmp[..n]);
    }
}

#[test]
fn early_hints_are_forwarded_while_waiting_and_never_stored() {
    let dir = tempfile::tempdir().unwrap();
    let o = Origin::start("a");
    let gate = Gate::default();
    o.put("/eh/seg.ts", Object::ok("segment").interim(HINT).gated(&gate));
    let reel = Reel::start(&Conf::new(dir.path(), &o));

    // The origin holds the final response back: the hint reaches the client first.
    let mut c = send(reel.data, "GET /eh/seg.ts HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n");
    let mut buf = Vec::new();
    let (hint, end) = next_head(&mut c, &mut buf, 0);
    assert!(hint.starts_with("http/1.1 103 early hints\r\n"), "{hint}");
    assert!(hint.contains("link: </style.css>; rel=preload; as=style"), "{hint}");
    gate.open();
    let (fin, _) = next_head(&mut c, &mut buf, end);
    assert!(fin.starts_with("http/1.1 200 "), "{fin}");
    assert!(fin.contains("fwd=miss; stored"), "{fin}");

    // Stored without it: a hit starts with its final head.
    let hit = eventually("a hit", || {
        let mut c = send(reel.data, "GET /eh/seg.ts HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n");
        let (h, _) = next_head(&mut c, &mut Vec::new(), 0);
        h.contains("cache-status: reel; hit").then_some(h)
    });
    assert!(hit.starts_with("http/1.1 200 ") && !hit.contains("link:"), "{hit}");
    assert_eq!(o.hits("/eh/seg.ts"), 1);

    // An uncached forward (the viewer's no-store) carries it as well.
    let mut c = send(
        reel.data,
        "GET /eh/seg.ts HTTP/1.1\r\nhost: 127.0.0.1\r\ncache-control: no-store\r\n\r\n",
    );
    let mut buf = Vec::new();
    let (h, end) = next_head(&mut c, &mut buf, 0);
    assert!(h.starts_with("http/1.1 103 "), "{h}");
    assert!(next_head(&mut c, &mut buf, end).0.starts_with("http/1.1 200 "));

    // A passed-through POST: after its body went up.
    o.put("/eh/form", Object::ok("posted").interim(HINT));
    let mut c = send(
        reel.data,
        "POST /eh/form HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-length: 5\r\n\r\nhello",
    );
    let mut buf = Vec::new();
    let (h, end) = next_head(&mut c, &mut buf, 0);
    assert!(h.starts_with("http/1.1 103 "), "{h}");
    let (fin, _) = next_head(&mut c, &mut buf, end);
    assert!(fin.starts_with("http/1.1 200 ") && fin.contains("fwd=method"), "{fin}");
}

#[test]
fn an_http10_client_gets_no_interim_response() {
    let dir = tempfile::tempdir().unwrap();
    let o = Origin::start("a");
    o.put("/eh10/seg.ts", Object::ok("segment").interim(HINT));
    let reel = Reel::start(&Conf::new(dir.path(), &o));
    let mut c = send(reel.data, "GET /eh10/seg.ts HTTP/1.0\r\nhost: 127.0.0.1\r\n\r\n");
    let mut out = Vec::new();
    c.read_to_end(&mut out).unwrap();
    let text = String::from_utf8_lossy(&out);
    assert!(text.starts_with("HTTP/1.1 200 "), "{text}");
    assert!(!text.contains("103"), "{text}");
    assert!(text.ends_with("segment"), "{text}");
}
