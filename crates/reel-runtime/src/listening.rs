//! Whether any socket listens on an address, from the kernel's socket tables
//! (`/proc/net/tcp`, `/proc/net/tcp6`): the difference between "another process already
//! listens here" and a port only held bound, when a bind fails with `EADDRINUSE`.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// `st` of a listening socket in `/proc/net/tcp*`.
const TCP_LISTEN: &str = "0A";

/// True when a socket in this network namespace listens on a port and address that a bind
/// of `addr` would conflict with (the same address, or either one unspecified).
pub(crate) fn listens(addr: SocketAddr) -> bool {
    ["/proc/net/tcp", "/proc/net/tcp6"].iter().any(|f| {
        std::fs::read_to_string(f)
            .map(|text| listening(&text).any(|l| overlaps(l, addr)))
            .unwrap_or(false)
    })
}

/// The local addresses of the listening sockets of one `/proc/net/tcp*` table.
fn listening(text: &str) -> impl Iterator<Item = SocketAddr> + '_ {
    text.lines().skip(1).filter_map(|line| {
        let mut f = line.split_whitespace();
        let local = f.nth(1)?;
        let state = f.nth(1)?;
        if state != TCP_LISTEN {
            return None;
        }
        parse_local(local)
    })
}

/// `0100007F:1F90` or a 32-digit IPv6 form: the kernel prints each 32-bit word of the
/// address as a native-endian integer, then the port in hex.
fn parse_local(s: &str) -> Option<SocketAddr> {
    let (ip, port) = s.split_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?;
    let word = |i: usize| -> Option<[u8; 4]> {
        Some(u32::from_str_radix(ip.get(i * 8..i * 8 + 8)?, 16).ok()?.to_ne_bytes())
    };
    let ip = match ip.len() {
        8 => IpAddr::V4(Ipv4Addr::from(word(0)?)),
        32 => {
            let mut b = [0u8; 16];
            for i in 0..4 {
                b[i * 4..i * 4 + 4].copy_from_slice(&word(i)?);
            }
            IpAddr::V6(Ipv6Addr::from(b))
        }
        _ => return None,
    };
    Some(SocketAddr::new(ip, port))
}

/// Whether a socket listening on `l` holds what a bind of `want` needs.
fn overlaps(l: SocketAddr, want: SocketAddr) -> bool {
    if l.port() != want.port() {
        return false;
    }
    let canon = |ip: IpAddr| match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    };
    let (a, b) = (canon(l.ip()), canon(want.ip()));
    a == b
        || a.is_unspecified() && (a.is_ipv4() == b.is_ipv4() || a.is_ipv6())
        || b.is_unspecified() && (a.is_ipv4() == b.is_ipv4() || b.is_ipv6())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_parse_and_addresses_overlap() {
        let text = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 1 1 0 100 0 0 10 0\n   1: 0100007F:1F91 0100007F:C000 01 00000000:00000000 00:00000000 00000000  1000        0 2 1 0 100 0 0 10 0\n";
        let got: Vec<SocketAddr> = listening(text).collect();
        assert_eq!(got, vec!["127.0.0.1:8080".parse::<SocketAddr>().unwrap()]);
        let v6 = parse_local("00000000000000000000000001000000:0050").unwrap();
        assert_eq!(v6, "[::1]:80".parse::<SocketAddr>().unwrap());
        let a = |s: &str| s.parse::<SocketAddr>().unwrap();
        assert!(overlaps(a("0.0.0.0:80"), a("127.0.0.1:80")));
        assert!(overlaps(a("127.0.0.1:80"), a("0.0.0.0:80")));
        assert!(overlaps(a("[::]:80"), a("10.0.0.1:80")));
        assert!(!overlaps(a("127.0.0.1:80"), a("127.0.0.2:80")));
        assert!(!overlaps(a("127.0.0.1:80"), a("127.0.0.1:81")));
    }

    #[test]
    fn a_listener_listens_and_a_bound_socket_does_not() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        assert!(listens(l.local_addr().unwrap()));
        let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
        s.bind(&"127.0.0.1:0".parse::<SocketAddr>().unwrap().into()).unwrap();
        let bound = s.local_addr().unwrap().as_socket().unwrap();
        assert!(!listens(bound));
    }
}
