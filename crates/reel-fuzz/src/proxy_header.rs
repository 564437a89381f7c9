//! Who the client is, from bytes a peer sends: the PROXY protocol header a balancer
//! prepends to a connection (`reel_runtime::proxy_header::parse`, v1 and v2) and the
//! `X-Forwarded-For`/`Forwarded` walk (`reel_http::forwarded_client`).

use reel_runtime::proxy_header::{self, Header};

/// Parses `data` as the first bytes of a connection, every prefix of it too, and as the
/// value of both forwarding fields.
pub fn run(data: &[u8]) {
    let whole = proxy_header::parse(data);
    if let Header::Complete { len, client } = whole {
        assert!(len <= data.len() && len <= proxy_header::V2_MAX, "{len} of {}", data.len());
        // The header's end does not depend on what follows it.
        assert_eq!(proxy_header::parse(&data[..len]), Header::Complete { len, client });
    }
    // A prefix of a complete or incomplete header is incomplete, never invalid: the
    // reader waits for more bytes only while this holds.
    if !matches!(whole, Header::Invalid(_)) {
        let end = match whole {
            Header::Complete { len, .. } => len,
            _ => data.len(),
        };
        for n in 0..end {
            assert_eq!(proxy_header::parse(&data[..n]), Header::Incomplete, "prefix of {n}");
        }
    }
    let trusted = reel_http::TrustedProxies::new([
        ("10.0.0.0".parse().expect("address"), 8),
        ("2001:db8::".parse().expect("address"), 32),
    ]);
    for name in ["x-forwarded-for", "forwarded"] {
        let fields = [(name, data), ("x-forwarded-for", b"10.1.2.3".as_slice())];
        if let Some(ip) = reel_http::forwarded_client(fields.iter().copied(), &trusted) {
            let _ = ip.to_string();
        }
    }
}
