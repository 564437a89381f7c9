//! Who the client is: a connection's two addresses ([`Peer`]: the client and the socket's
//! peer it came through), the proxies whose word on the client is believed
//! ([`TrustedProxies`]) and the client they name in `X-Forwarded-For` or `Forwarded`
//! ([`forwarded_client`]).
//!
//! From a trusted peer the client is the right-most address of the list that is not itself
//! a trusted proxy: every address to its right was added by a proxy of ours, the ones to
//! its left by the client, who can write anything there. A malformed entry met on the way
//! ends the walk with no answer, and the peer stays the client.

use std::net::{IpAddr, SocketAddr};

/// The two addresses of a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Peer {
    /// The client: the address a PROXY protocol header named, else the socket's peer.
    pub client: SocketAddr,
    /// The TCP or UDP peer of the socket (a balancer, when a header named the client).
    pub socket: SocketAddr,
}

impl From<SocketAddr> for Peer {
    /// A client connected directly: both addresses are the socket's peer.
    fn from(a: SocketAddr) -> Peer {
        Peer { client: a, socket: a }
    }
}

/// Networks whose hosts are proxies of ours (`http.trusted_proxies`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TrustedProxies {
    nets: Vec<(IpAddr, u8)>,
}

impl TrustedProxies {
    /// The networks `nets` (address, prefix length); host bits are ignored and a prefix
    /// longer than the address is taken as the whole address.
    pub fn new(nets: impl IntoIterator<Item = (IpAddr, u8)>) -> TrustedProxies {
        let nets = nets
            .into_iter()
            .map(|(ip, len)| {
                let ip = ip.to_canonical();
                let len = len.min(bits(ip));
                (mask(ip, len), len)
            })
            .collect();
        TrustedProxies { nets }
    }

    /// Whether no network is trusted.
    pub fn is_empty(&self) -> bool {
        self.nets.is_empty()
    }

    /// Whether `ip` is in one of the networks (an IPv4 address seen as IPv4-mapped IPv6
    /// is the IPv4 address).
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = ip.to_canonical();
        self.nets.iter().any(|&(net, len)| net.is_ipv4() == ip.is_ipv4() && mask(ip, len) == net)
    }
}

fn bits(ip: IpAddr) -> u8 {
    if ip.is_ipv4() { 32 } else { 128 }
}

/// `ip` with all but its first `len` bits cleared.
fn mask(ip: IpAddr, len: u8) -> IpAddr {
    match ip {
        IpAddr::V4(a) => {
            let m = u32::MAX.checked_shl(32 - u32::from(len.min(32))).unwrap_or(0);
            IpAddr::V4((u32::from(a) & m).into())
        }
        IpAddr::V6(a) => {
            let m = u128::MAX.checked_shl(128 - u32::from(len.min(128))).unwrap_or(0);
            IpAddr::V6((u128::from(a) & m).into())
        }
    }
}

/// The client that the request's `X-Forwarded-For` (or, without one, `Forwarded`) names,
/// `headers` being the request's fields in received order: the right-most address not in
/// `trusted`, or the left-most when all are. `None` when neither field is there, or a
/// malformed entry (or an `unknown` or obfuscated node) comes first from the right.
pub fn forwarded_client<'a>(
    headers: impl DoubleEndedIterator<Item = (&'a str, &'a [u8])> + Clone,
    trusted: &TrustedProxies,
) -> Option<IpAddr> {
    let named = |name: &'static str| {
        headers.clone().rev().filter(move |(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v)
    };
    if named("x-forwarded-for").next().is_some() {
        let entries = named("x-forwarded-for").flat_map(|v| v.rsplit(|&b| b == b','));
        return walk(entries.map(xff_entry), trusted);
    }
    if named("forwarded").next().is_some() {
        let entries = named("forwarded").flat_map(|v| v.rsplit(|&b| b == b','));
        return walk(entries.map(forwarded_entry), trusted);
    }
    None
}

/// Walks addresses from the right (`None` for a malformed one).
fn walk(entries: impl Iterator<Item = Option<IpAddr>>, trusted: &TrustedProxies) -> Option<IpAddr> {
    let mut last = None;
    for e in entries {
        let ip = e?.to_canonical();
        if !trusted.contains(ip) {
            return Some(ip);
        }
        last = Some(ip);
    }
    last
}

/// One `X-Forwarded-For` entry: an address, or an address and port (`192.0.2.1:80`,
/// `[2001:db8::1]:80`), as some proxies write.
fn xff_entry(raw: &[u8]) -> Option<IpAddr> {
    let s = std::str::from_utf8(raw).ok()?.trim_matches([' ', '\t']);
    node(s)
}

/// One `Forwarded` element (RFC 7239): its `for=` parameter's node.
fn forwarded_entry(raw: &[u8]) -> Option<IpAddr> {
    let s = std::str::from_utf8(raw).ok()?;
    let value = s.split(';').find_map(|pair| {
        let (k, v) = pair.trim_matches([' ', '\t']).split_once('=')?;
        k.eq_ignore_ascii_case("for").then_some(v)
    })?;
    let value = match value.strip_prefix('"') {
        Some(q) => q.strip_suffix('"')?,
        None => value,
    };
    node(value)
}

/// An address with or without a port; `unknown` and obfuscated names are no address.
fn node(s: &str) -> Option<IpAddr> {
    if let Ok(ip) = s.parse::<IpAddr>() {
        return Some(ip);
    }
    if let Ok(sa) = s.parse::<SocketAddr>() {
        return Some(sa.ip());
    }
    // `[2001:db8::1]` without a port.
    s.strip_prefix('[')?.strip_suffix(']')?.parse::<std::net::Ipv6Addr>().ok().map(IpAddr::V6)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trusted(nets: &[&str]) -> TrustedProxies {
        TrustedProxies::new(nets.iter().map(|n| {
            let (ip, len) = n.split_once('/').unwrap();
            (ip.parse().unwrap(), len.parse().unwrap())
        }))
    }

    fn client(fields: &[(&'static str, &'static str)], t: &TrustedProxies) -> Option<IpAddr> {
        let fields: Vec<(&str, &[u8])> = fields.iter().map(|(n, v)| (*n, v.as_bytes())).collect();
        forwarded_client(fields.iter().copied(), t)
    }

    fn ip(s: &str) -> Option<IpAddr> {
        Some(s.parse().unwrap())
    }

    #[test]
    fn networks_contain_their_hosts_in_either_form() {
        let t = trusted(&["10.0.0.0/8", "192.0.2.7/32", "2001:db8::/32", "198.51.100.99/24"]);
        assert!(t.contains("10.200.1.2".parse().unwrap()));
        assert!(t.contains("::ffff:10.1.1.1".parse().unwrap()), "IPv4-mapped");
        assert!(t.contains("192.0.2.7".parse().unwrap()));
        assert!(!t.contains("192.0.2.8".parse().unwrap()));
        assert!(t.contains("2001:db8:1::5".parse().unwrap()));
        assert!(!t.contains("2001:db9::5".parse().unwrap()));
        assert!(t.contains("198.51.100.1".parse().unwrap()), "host bits ignored");
        assert!(!t.contains("11.0.0.1".parse().unwrap()));
        let all = trusted(&["0.0.0.0/0"]);
        assert!(all.contains("203.0.113.1".parse().unwrap()));
        assert!(!all.contains("2001:db8::1".parse().unwrap()), "an IPv4 net holds no IPv6 host");
    }

    #[test]
    fn the_client_is_the_right_most_untrusted_address() {
        let t = trusted(&["10.0.0.0/8"]);
        let xff = |v| client(&[("X-Forwarded-For", v)], &t);
        assert_eq!(xff("203.0.113.9"), ip("203.0.113.9"));
        assert_eq!(xff("198.51.100.1, 203.0.113.9, 10.0.0.2"), ip("203.0.113.9"));
        assert_eq!(xff("10.0.0.3,10.0.0.2"), ip("10.0.0.3"), "all trusted: the left-most");
        assert_eq!(xff("203.0.113.9:4711"), ip("203.0.113.9"));
        assert_eq!(xff("[2001:db8::9]:4711, 10.0.0.1"), ip("2001:db8::9"));
        assert_eq!(xff("garbage, 203.0.113.9"), ip("203.0.113.9"), "a lie left of the client");
        assert_eq!(xff("203.0.113.9, garbage"), None, "malformed first: the peer stays");
        assert_eq!(xff("203.0.113.9, 10.0.0.1, "), None, "an empty entry is malformed");
        assert_eq!(xff("unknown"), None);
        // Several fields are one list, in order.
        let two = [("x-forwarded-for", "203.0.113.9"), ("X-Forwarded-For", "10.0.0.1")];
        assert_eq!(client(&two, &t), ip("203.0.113.9"));
        assert_eq!(client(&[("via", "1.1 a")], &t), None, "no field: no answer");
    }

    #[test]
    fn forwarded_names_the_client_in_for() {
        let t = trusted(&["10.0.0.0/8"]);
        let fwd = |v| client(&[("Forwarded", v)], &t);
        assert_eq!(fwd("for=203.0.113.9;proto=https, for=10.0.0.2"), ip("203.0.113.9"));
        assert_eq!(fwd("for=\"[2001:db8::9]:4711\""), ip("2001:db8::9"));
        assert_eq!(fwd("For=\"[2001:db8::9]\";by=10.0.0.1"), ip("2001:db8::9"));
        assert_eq!(fwd("for=_hidden, for=10.0.0.2"), None, "obfuscated: the peer stays");
        assert_eq!(fwd("proto=https"), None, "no for=");
        // X-Forwarded-For wins when both are there.
        let both = [("Forwarded", "for=198.51.100.1"), ("X-Forwarded-For", "203.0.113.9")];
        assert_eq!(client(&both, &t), ip("203.0.113.9"));
    }
}
