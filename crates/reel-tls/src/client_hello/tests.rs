use std::sync::Arc;

use rustls::pki_types::ServerName;

use super::*;

fn u16be(n: usize) -> [u8; 2] {
    u16::try_from(n).expect("fits in u16").to_be_bytes()
}

/// A ClientHello handshake message (type, length, body) with `extensions` as given.
fn hello_with(extensions: &[u8]) -> Vec<u8> {
    let mut body = vec![3, 3];
    body.extend_from_slice(&[7; 32]);
    body.extend_from_slice(&[32]);
    body.extend_from_slice(&[9; 32]);
    body.extend_from_slice(&[0, 4, 0x13, 0x01, 0xc0, 0x2f]);
    body.extend_from_slice(&[1, 0]);
    body.extend_from_slice(&u16be(extensions.len()));
    body.extend_from_slice(extensions);
    let len = u32::try_from(body.len()).expect("small").to_be_bytes();
    let mut m = vec![CLIENT_HELLO, len[1], len[2], len[3]];
    m.extend_from_slice(&body);
    m
}

/// An extension block: supported_versions, then `server_name` listing `names` (if any).
fn extensions(names: Option<&[(u8, &[u8])]>) -> Vec<u8> {
    let mut e = vec![0, 43, 0, 3, 2, 3, 4];
    if let Some(names) = names {
        let mut list = Vec::new();
        for (kind, name) in names {
            list.push(*kind);
            list.extend_from_slice(&u16be(name.len()));
            list.extend_from_slice(name);
        }
        let mut data = u16be(list.len()).to_vec();
        data.extend_from_slice(&list);
        e.extend_from_slice(&SERVER_NAME.to_be_bytes());
        e.extend_from_slice(&u16be(data.len()));
        e.extend_from_slice(&data);
    }
    e.extend_from_slice(&[0, 10, 0, 4, 0, 2, 0, 29]);
    e
}

/// `message` in handshake records, cut at `cuts` (offsets into the message).
fn records(message: &[u8], cuts: &[usize]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut at = 0;
    for &end in cuts.iter().chain([&message.len()]) {
        let fragment = &message[at..end];
        out.extend_from_slice(&[HANDSHAKE, 3, 1]);
        out.extend_from_slice(&u16be(fragment.len()));
        out.extend_from_slice(fragment);
        at = end;
    }
    out
}

fn with_name(name: &[u8]) -> Vec<u8> {
    hello_with(&extensions(Some(&[(HOST_NAME, name)])))
}

#[test]
fn ip_addresses_are_told_from_dns_names_and_no_name() {
    let cases: &[(&str, Vec<u8>, bool)] = &[
        ("IPv4", with_name(b"127.0.0.1"), true),
        ("IPv4, another", with_name(b"203.0.113.7"), true),
        ("IPv6", with_name(b"::1"), true),
        ("IPv6, long", with_name(b"2001:db8::8a2e:370:7334"), true),
        ("DNS name", with_name(b"edge.example.test"), false),
        ("DNS name with digits", with_name(b"127.0.0.1.nip.io"), false),
        ("not a name at all", with_name(b"a b"), false),
        ("no server_name", hello_with(&extensions(None)), false),
        ("no extensions", hello_with(&[]), false),
        ("another name type", hello_with(&extensions(Some(&[(1, b"127.0.0.1")]))), false),
        (
            "an address after a DNS name (rustls refuses the duplicate)",
            hello_with(&extensions(Some(&[(HOST_NAME, b"a.test"), (HOST_NAME, b"127.0.0.1")]))),
            false,
        ),
    ];
    for (what, message, want) in cases {
        assert_eq!(sni_is_ip_address(&records(message, &[])), *want, "{what}");
        // Split over two records at every point, and over one record per byte.
        for cut in 1..message.len() {
            assert_eq!(sni_is_ip_address(&records(message, &[cut])), *want, "{what}, cut {cut}");
        }
        let bytewise: Vec<usize> = (1..message.len()).collect();
        assert_eq!(sni_is_ip_address(&records(message, &bytewise)), *want, "{what}, bytewise");
    }
}

#[test]
fn truncated_or_foreign_input_is_no_address_and_never_panics() {
    let whole = records(&with_name(b"127.0.0.1"), &[]);
    assert!(sni_is_ip_address(&whole));
    for end in 0..whole.len() {
        assert!(!sni_is_ip_address(&whole[..end]), "truncated at {end}");
    }
    // Not a handshake record (an HTTP request, an alert), or a record cut short.
    assert!(!sni_is_ip_address(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"));
    let mut alert = whole.clone();
    alert[0] = 21;
    assert!(!sni_is_ip_address(&alert));
    // A handshake message that is not a ClientHello.
    let mut server_hello = whole.clone();
    server_hello[5] = 2;
    assert!(!sni_is_ip_address(&server_hello));
    // Lengths that run past the end, at every length field.
    let message = with_name(b"127.0.0.1");
    for at in 0..message.len() {
        let mut m = message.clone();
        m[at] = 0xff;
        let _ = sni_is_ip_address(&records(&m, &[]));
    }
    // Trailing bytes after the ClientHello (a client's next record) change nothing.
    let mut more = whole.clone();
    more.extend_from_slice(&[20, 3, 3, 0, 1, 1]);
    assert!(sni_is_ip_address(&more));
}

/// The ClientHello a rustls client sends for `name`.
fn rustls_hello(name: &str) -> Vec<u8> {
    let config = rustls::ClientConfig::builder_with_provider(crate::cert::provider())
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_root_certificates(rustls::RootCertStore::empty())
        .with_no_client_auth();
    let name = ServerName::try_from(name.to_owned()).expect("name");
    let mut conn = rustls::ClientConnection::new(Arc::new(config), name).expect("client");
    let mut out = Vec::new();
    conn.write_tls(&mut out).expect("ClientHello");
    out
}

#[test]
fn a_real_client_hello_is_read() {
    // rustls sends a DNS name; the same bytes with an address of the same length in its
    // place are what a client connecting to that address by name would send.
    let dns = rustls_hello("abcde.xyz");
    assert!(!sni_is_ip_address(&dns));
    let at = dns.windows(9).position(|w| w == b"abcde.xyz").expect("the name is sent");
    let mut ip = dns.clone();
    ip[at..at + 9].copy_from_slice(b"127.0.0.1");
    assert!(sni_is_ip_address(&ip));
    // rustls sends no server_name for an address.
    assert!(!sni_is_ip_address(&rustls_hello("127.0.0.1")));
}
