//! The PROXY protocol header (HAProxy's, versions 1 and 2) that a TCP load balancer sends
//! before the client's first byte: what it says about the client ([`parse`]). Pure: no
//! I/O, and no panic on any input (fuzzed by `reel-fuzz`'s `proxy_header` target).
//!
//! Version 1 is one text line (`PROXY TCP4 src dst sport dport\r\n`, at most 107 bytes);
//! version 2 is binary: a 12-byte signature, the version and command, the address family
//! and transport, a length and the addresses, then TLVs, which are skipped.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// The longest version 1 header, CRLF included (the specification's limit).
pub const V1_MAX: usize = 107;
/// The longest version 2 header accepted (the fixed 16 bytes, the addresses and TLVs):
/// balancers send far less; more is refused rather than buffered.
pub const V2_MAX: usize = 16 + 2048;
/// The version 2 signature.
pub const V2_SIGNATURE: [u8; 12] = *b"\r\n\r\n\0\r\nQUIT\n";
const V1_PREFIX: &[u8] = b"PROXY ";

/// What the first bytes of a connection say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Header {
    /// A complete header of `len` bytes. `client` is the source address it names, `None`
    /// when it names none (v1 `UNKNOWN`, v2 `LOCAL`, or a family other than TCP over
    /// IPv4/IPv6): the connection's own peer is then the client.
    Complete {
        /// The header's length: the connection's own bytes follow it.
        len: usize,
        /// The client's address, when the header names one.
        client: Option<SocketAddr>,
    },
    /// Everything so far is a valid start of a header: more bytes are needed, and all of
    /// these belong to the header.
    Incomplete,
    /// Not a PROXY header (or one this server refuses), with a short reason for logs.
    Invalid(&'static str),
}

/// Reads a PROXY header from the start of `buf`.
pub fn parse(buf: &[u8]) -> Header {
    let probe = buf.len().min(V2_SIGNATURE.len());
    if buf[..probe] == V2_SIGNATURE[..probe] {
        return if probe < V2_SIGNATURE.len() { Header::Incomplete } else { parse_v2(buf) };
    }
    let probe = buf.len().min(V1_PREFIX.len());
    if buf[..probe] == V1_PREFIX[..probe] {
        return if probe < V1_PREFIX.len() { Header::Incomplete } else { parse_v1(buf) };
    }
    Header::Invalid("no PROXY header")
}

fn parse_v1(buf: &[u8]) -> Header {
    let Some(nl) = buf.iter().take(V1_MAX).position(|&b| b == b'\n') else {
        return if buf.len() >= V1_MAX {
            Header::Invalid("v1 header longer than 107 bytes")
        } else {
            Header::Incomplete
        };
    };
    let len = nl + 1;
    let Some(line) = buf[..nl].strip_suffix(b"\r") else {
        return Header::Invalid("v1 header not ended by CRLF");
    };
    let Ok(line) = std::str::from_utf8(&line[V1_PREFIX.len()..]) else {
        return Header::Invalid("v1 header not ASCII");
    };
    let mut words = line.split(' ');
    let family = words.next().unwrap_or("");
    if family == "UNKNOWN" {
        // The rest of the line is to be ignored (the balancer could not say).
        return Header::Complete { len, client: None };
    }
    let (Some(src), Some(_dst), Some(sport), Some(_dport), None) =
        (words.next(), words.next(), words.next(), words.next(), words.next())
    else {
        return Header::Invalid("v1 header needs exactly four addresses and ports");
    };
    let ip: IpAddr = match family {
        "TCP4" => match src.parse::<Ipv4Addr>() {
            Ok(a) => a.into(),
            Err(_) => return Header::Invalid("v1 TCP4 source is not an IPv4 address"),
        },
        "TCP6" => match src.parse::<Ipv6Addr>() {
            Ok(a) => a.into(),
            Err(_) => return Header::Invalid("v1 TCP6 source is not an IPv6 address"),
        },
        _ => return Header::Invalid("v1 family is not TCP4, TCP6 or UNKNOWN"),
    };
    // Ports are decimal without a sign or leading zeros (0 itself is allowed).
    let port_ok = !sport.is_empty()
        && sport.len() <= 5
        && sport.bytes().all(|b| b.is_ascii_digit())
        && (sport == "0" || !sport.starts_with('0'));
    match sport.parse::<u16>() {
        Ok(port) if port_ok => Header::Complete { len, client: Some(SocketAddr::new(ip, port)) },
        _ => Header::Invalid("v1 source port is not a port number"),
    }
}

fn parse_v2(buf: &[u8]) -> Header {
    let [ver_cmd, fam, l0, l1] = match buf.get(12..16) {
        Some(&[a, b, c, d]) => [a, b, c, d],
        _ => return Header::Incomplete,
    };
    if ver_cmd >> 4 != 2 {
        return Header::Invalid("v2 version is not 2");
    }
    let local = match ver_cmd & 0x0f {
        0 => true,
        1 => false,
        _ => return Header::Invalid("v2 command is neither LOCAL nor PROXY"),
    };
    let len = 16 + usize::from(u16::from_be_bytes([l0, l1]));
    if len > V2_MAX {
        return Header::Invalid("v2 header longer than reel accepts");
    }
    let Some(body) = buf.get(16..len) else { return Header::Incomplete };
    if local {
        // A connection of the balancer's own (a health check): its address is the client.
        return Header::Complete { len, client: None };
    }
    let client = match fam {
        // TCP over IPv4: source, destination, source port, destination port.
        0x11 => match body.get(..12) {
            Some(a) => {
                let ip = Ipv4Addr::new(a[0], a[1], a[2], a[3]);
                Some(SocketAddr::new(ip.into(), u16::from_be_bytes([a[8], a[9]])))
            }
            None => return Header::Invalid("v2 TCP4 addresses shorter than 12 bytes"),
        },
        // TCP over IPv6.
        0x21 => match body.get(..36) {
            Some(a) => {
                let mut src = [0u8; 16];
                src.copy_from_slice(&a[..16]);
                let port = u16::from_be_bytes([a[32], a[33]]);
                Some(SocketAddr::new(Ipv6Addr::from(src).into(), port))
            }
            None => return Header::Invalid("v2 TCP6 addresses shorter than 36 bytes"),
        },
        // UNSPEC: the receiver uses the connection's own addresses.
        0x00 => None,
        _ => return Header::Invalid("v2 transport is not TCP over IPv4 or IPv6"),
    };
    Header::Complete { len, client }
}

/// A version 1 header naming `client` (to `server`): what a balancer sends, for tests.
pub fn v1(client: SocketAddr, server: SocketAddr) -> Vec<u8> {
    let family = if client.is_ipv4() { "TCP4" } else { "TCP6" };
    format!(
        "PROXY {family} {} {} {} {}\r\n",
        client.ip(),
        server.ip(),
        client.port(),
        server.port()
    )
    .into_bytes()
}

/// A version 2 `PROXY` header naming `client` (to `server`, of the same family), with
/// `tlvs` appended as they are: what a balancer sends, for tests.
pub fn v2(client: SocketAddr, server: SocketAddr, tlvs: &[u8]) -> Vec<u8> {
    let mut addrs = Vec::with_capacity(36);
    let fam = match (client.ip(), server.ip()) {
        (IpAddr::V4(c), IpAddr::V4(s)) => {
            addrs.extend_from_slice(&c.octets());
            addrs.extend_from_slice(&s.octets());
            0x11
        }
        (c, s) => {
            let six = |a: IpAddr| match a {
                IpAddr::V4(a) => a.to_ipv6_mapped(),
                IpAddr::V6(a) => a,
            };
            addrs.extend_from_slice(&six(c).octets());
            addrs.extend_from_slice(&six(s).octets());
            0x21
        }
    };
    addrs.extend_from_slice(&client.port().to_be_bytes());
    addrs.extend_from_slice(&server.port().to_be_bytes());
    let len = u16::try_from(addrs.len() + tlvs.len()).unwrap_or(u16::MAX);
    let mut h = V2_SIGNATURE.to_vec();
    h.extend_from_slice(&[0x21, fam]);
    h.extend_from_slice(&len.to_be_bytes());
    h.extend_from_slice(&addrs);
    h.extend_from_slice(tlvs);
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sa(s: &str) -> SocketAddr {
        s.parse().expect("address")
    }

    #[test]
    fn v1_tcp4_and_tcp6_name_the_client_and_end_at_the_crlf() {
        let h = b"PROXY TCP4 203.0.113.7 192.0.2.1 40000 80\r\nGET / HTTP/1.1\r\n";
        let len = h.iter().position(|&b| b == b'\n').unwrap() + 1;
        assert_eq!(parse(h), Header::Complete { len, client: Some(sa("203.0.113.7:40000")) });
        let h = v1(sa("[2001:db8::7]:5"), sa("[2001:db8::1]:443"));
        assert_eq!(
            parse(&h),
            Header::Complete { len: h.len(), client: Some(sa("[2001:db8::7]:5")) }
        );
        assert_eq!(
            parse(b"PROXY UNKNOWN whatever\r\n"),
            Header::Complete { len: 24, client: None }
        );
    }

    #[test]
    fn v1_prefixes_are_incomplete_and_bad_lines_invalid() {
        let h = b"PROXY TCP4 203.0.113.7 192.0.2.1 40000 80\r\n";
        for n in 0..h.len() {
            assert_eq!(parse(&h[..n]), Header::Incomplete, "{n} bytes");
        }
        for bad in [
            &b"PROXY TCP4 203.0.113.7 192.0.2.1 40000\r\n"[..],
            b"PROXY TCP4 2001:db8::1 192.0.2.1 1 2\r\n",
            b"PROXY TCP6 203.0.113.7 192.0.2.1 1 2\r\n",
            b"PROXY TCP4 203.0.113.7 192.0.2.1 070000 80\r\n",
            b"PROXY TCP4 203.0.113.7 192.0.2.1 01 80\r\n",
            b"PROXY TCP4 203.0.113.7 192.0.2.1 +1 80\r\n",
            b"PROXY TCP4 203.0.113.7 192.0.2.1 1 80\n",
            b"PROXY UDP4 203.0.113.7 192.0.2.1 1 80\r\n",
            b"PROXY TCP4  203.0.113.7 192.0.2.1 1 80\r\n",
            b"GET / HTTP/1.1\r\n",
            b"proxy TCP4 203.0.113.7 192.0.2.1 1 80\r\n",
        ] {
            assert!(matches!(parse(bad), Header::Invalid(_)), "{:?}", String::from_utf8_lossy(bad));
        }
        let long = [b"PROXY UNKNOWN ".as_slice(), &[b'x'; 120]].concat();
        assert!(matches!(parse(&long), Header::Invalid(_)), "longer than 107 bytes");
    }

    #[test]
    fn v2_names_the_client_skips_tlvs_and_knows_local() {
        let tlv = [0x04, 0x00, 0x03, b'a', b'b', b'c'];
        let mut h = v2(sa("198.51.100.9:1234"), sa("192.0.2.1:443"), &tlv);
        let len = h.len();
        h.extend_from_slice(b"\x16\x03\x01");
        assert_eq!(parse(&h), Header::Complete { len, client: Some(sa("198.51.100.9:1234")) });
        for n in 0..len {
            assert_eq!(parse(&h[..n]), Header::Incomplete, "{n} bytes");
        }
        let h = v2(sa("[2001:db8::9]:1"), sa("[2001:db8::1]:443"), &[]);
        assert_eq!(parse(&h), Header::Complete { len: 52, client: Some(sa("[2001:db8::9]:1")) });
        let mut local = v2(sa("198.51.100.9:1234"), sa("192.0.2.1:443"), &[]);
        local[12] = 0x20;
        assert_eq!(parse(&local), Header::Complete { len: 28, client: None });
    }

    #[test]
    fn v2_refuses_other_versions_commands_transports_and_short_addresses() {
        let good = v2(sa("198.51.100.9:1234"), sa("192.0.2.1:443"), &[]);
        let with = |i: usize, b: u8| {
            let mut h = good.clone();
            h[i] = b;
            h
        };
        for bad in [with(12, 0x11), with(12, 0x22), with(13, 0x12), with(13, 0x31), with(15, 4)] {
            assert!(matches!(parse(&bad), Header::Invalid(_)), "{bad:?}");
        }
        let mut huge = good[..14].to_vec();
        huge.extend_from_slice(&u16::MAX.to_be_bytes());
        assert!(matches!(parse(&huge), Header::Invalid(_)), "longer than V2_MAX");
    }
}
