//! Address rules: CIDR sets kept as sorted, merged ranges (one binary search per
//! lookup, no allocation), and a site's `allow` / `deny` lists over them. IPv4-mapped IPv6
//! addresses (`::ffff:a.b.c.d`, what a dual-stack socket reports for an IPv4 client) are
//! looked up as the IPv4 address they carry.

use std::net::IpAddr;
use std::str::FromStr;

/// Why a CIDR does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CidrError {
    /// The address part is not an IPv4 or IPv6 address.
    #[error(
        "{0:?} is not an IP address (expected \"192.0.2.0/24\", \"2001:db8::/32\" or an address)"
    )]
    Address(String),
    /// The prefix length is not a number or is too long for the address family.
    #[error("prefix length {len:?} must be a number from 0 to {max}")]
    Prefix {
        /// The prefix length as written.
        len: String,
        /// 32 or 128.
        max: u8,
    },
    /// Bits are set past the prefix: `10.1.2.3/8` is most likely a typo of `10.0.0.0/8`.
    #[error("{0:?} has host bits set past its prefix length (write the network address)")]
    HostBits(String),
}

/// The address as it is matched: an IPv4-mapped IPv6 address becomes its IPv4 address.
pub fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// One network: an address and a prefix length (a bare address is a /32 or /128).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    addr: IpAddr,
    len: u8,
}

impl FromStr for Cidr {
    type Err = CidrError;

    fn from_str(s: &str) -> Result<Cidr, CidrError> {
        let (a, l) = match s.split_once('/') {
            Some((a, l)) => (a, Some(l)),
            None => (s, None),
        };
        let addr: IpAddr = a.parse().map_err(|_| CidrError::Address(a.to_owned()))?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let len = match l {
            None => max,
            Some(l) => match l.parse::<u8>() {
                Ok(n) if n <= max && !l.starts_with('+') => n,
                _ => return Err(CidrError::Prefix { len: l.to_owned(), max }),
            },
        };
        let c = Cidr { addr, len };
        let (lo, _) = c.range();
        let set = match addr {
            IpAddr::V4(v4) => u128::from(u32::from(v4)),
            IpAddr::V6(v6) => u128::from(v6),
        };
        if lo != set {
            return Err(CidrError::HostBits(s.to_owned()));
        }
        Ok(c)
    }
}

impl Cidr {
    /// First and last address, as integers of the family's width.
    fn range(self) -> (u128, u128) {
        let (bits, width) = match self.addr {
            IpAddr::V4(v4) => (u128::from(u32::from(v4)), 32u32),
            IpAddr::V6(v6) => (u128::from(v6), 128),
        };
        let host = width - u32::from(self.len);
        let mask = if host == 0 { 0 } else { u128::MAX >> (128 - host) };
        (bits & !mask, bits | mask)
    }
}

/// A set of networks: sorted, merged ranges per family.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CidrSet {
    v4: Vec<(u32, u32)>,
    v6: Vec<(u128, u128)>,
}

impl CidrSet {
    /// The set of `cidrs`. An IPv4-mapped IPv6 network (`::ffff:10.0.0.0/104`) is kept as
    /// the IPv4 network it covers, since addresses are matched [`canonical`].
    pub fn new(cidrs: impl IntoIterator<Item = Cidr>) -> CidrSet {
        let mut v4 = Vec::new();
        let mut v6 = Vec::new();
        for c in cidrs {
            let (lo, hi) = c.range();
            match c.addr {
                IpAddr::V4(_) => v4.push((lo as u32, hi as u32)),
                IpAddr::V6(_) => {
                    const MAPPED: u128 = 0xffff << 32;
                    // The part of the range inside ::ffff:0:0/96 is IPv4.
                    let (mlo, mhi) = (lo.max(MAPPED), hi.min(MAPPED | u128::from(u32::MAX)));
                    if mlo <= mhi {
                        v4.push((mlo as u32, mhi as u32));
                    }
                    v6.push((lo, hi));
                }
            }
        }
        CidrSet { v4: merge(v4), v6: merge(v6) }
    }

    /// Parses every entry, or says which one is wrong (its index and why).
    pub fn parse<S: AsRef<str>>(items: &[S]) -> Result<CidrSet, (usize, CidrError)> {
        let mut cidrs = Vec::with_capacity(items.len());
        for (i, s) in items.iter().enumerate() {
            cidrs.push(s.as_ref().parse::<Cidr>().map_err(|e| (i, e))?);
        }
        Ok(CidrSet::new(cidrs))
    }

    /// Whether the set has no network.
    pub fn is_empty(&self) -> bool {
        self.v4.is_empty() && self.v6.is_empty()
    }

    /// Whether `ip` (made [`canonical`]) is in one of the networks.
    pub fn contains(&self, ip: IpAddr) -> bool {
        match canonical(ip) {
            IpAddr::V4(v4) => within(&self.v4, u32::from(v4)),
            IpAddr::V6(v6) => within(&self.v6, u128::from(v6)),
        }
    }
}

/// Sorts ranges and joins those that overlap or touch.
fn merge<T: Ord + Copy + num::Succ>(mut r: Vec<(T, T)>) -> Vec<(T, T)> {
    r.sort_unstable();
    let mut out: Vec<(T, T)> = Vec::with_capacity(r.len());
    for (lo, hi) in r {
        match out.last_mut() {
            Some(last) if last.1.succ().is_none_or(|n| lo <= n) => last.1 = last.1.max(hi),
            _ => out.push((lo, hi)),
        }
    }
    out.shrink_to_fit();
    out
}

/// Whether `x` is in one of the sorted, disjoint `ranges`.
fn within<T: Ord + Copy>(ranges: &[(T, T)], x: T) -> bool {
    let i = ranges.partition_point(|&(lo, _)| lo <= x);
    i > 0 && ranges.get(i - 1).is_some_and(|&(_, hi)| x <= hi)
}

mod num {
    /// The next integer, if there is one.
    pub(super) trait Succ: Sized {
        fn succ(self) -> Option<Self>;
    }
    impl Succ for u32 {
        fn succ(self) -> Option<u32> {
            self.checked_add(1)
        }
    }
    impl Succ for u128 {
        fn succ(self) -> Option<u128> {
            self.checked_add(1)
        }
    }
}

/// A site's address rules: an address in `deny` is refused; when `allow` is not empty, an
/// address outside it is refused too.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AddrRules {
    /// Addresses served (empty: all but those denied).
    pub allow: CidrSet,
    /// Addresses refused, whatever `allow` says.
    pub deny: CidrSet,
}

impl AddrRules {
    /// Whether `ip` may be served.
    pub fn admits(&self, ip: IpAddr) -> bool {
        !self.deny.contains(ip) && (self.allow.is_empty() || self.allow.contains(ip))
    }

    /// Whether there is no rule at all.
    pub fn is_empty(&self) -> bool {
        self.allow.is_empty() && self.deny.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn set(items: &[&str]) -> CidrSet {
        CidrSet::parse(items).unwrap()
    }

    #[test]
    fn cidrs_parse_with_precise_errors() {
        assert!("10.0.0.0/8".parse::<Cidr>().is_ok());
        assert!("2001:db8::/32".parse::<Cidr>().is_ok());
        assert!("192.0.2.7".parse::<Cidr>().is_ok());
        assert!("0.0.0.0/0".parse::<Cidr>().is_ok());
        assert!("::/0".parse::<Cidr>().is_ok());
        assert_eq!(
            "10.0.0.0/33".parse::<Cidr>(),
            Err(CidrError::Prefix { len: "33".into(), max: 32 })
        );
        assert_eq!(
            "::/129".parse::<Cidr>(),
            Err(CidrError::Prefix { len: "129".into(), max: 128 })
        );
        assert_eq!(
            "10.0.0.0/+8".parse::<Cidr>(),
            Err(CidrError::Prefix { len: "+8".into(), max: 32 })
        );
        assert_eq!("10.0.0.0/".parse::<Cidr>(), Err(CidrError::Prefix { len: "".into(), max: 32 }));
        assert_eq!("10.0.0/8".parse::<Cidr>(), Err(CidrError::Address("10.0.0".into())));
        assert_eq!("10.1.2.3/8".parse::<Cidr>(), Err(CidrError::HostBits("10.1.2.3/8".into())));
        assert_eq!(CidrSet::parse(&["10.0.0.0/8", "x"]), Err((1, CidrError::Address("x".into()))));
    }

    #[test]
    fn sets_match_their_ranges_and_nothing_else() {
        let s =
            set(&["10.0.0.0/8", "192.0.2.0/24", "192.0.3.0/24", "2001:db8::/32", "203.0.113.9"]);
        for yes in
            ["10.0.0.0", "10.255.255.255", "192.0.2.0", "192.0.3.255", "2001:db8::1", "203.0.113.9"]
        {
            assert!(s.contains(ip(yes)), "{yes}");
        }
        for no in [
            "9.255.255.255",
            "11.0.0.0",
            "192.0.4.0",
            "192.0.1.255",
            "2001:db9::",
            "203.0.113.8",
            "::",
        ] {
            assert!(!s.contains(ip(no)), "{no}");
        }
        // Adjacent /24s merge into one range; overlaps too.
        assert_eq!(s.v4.len(), 3);
        assert!(set(&["0.0.0.0/0"]).contains(ip("255.255.255.255")));
        assert!(set(&["::/0"]).contains(ip("ffff::1")));
        assert!(!set(&[]).contains(ip("10.0.0.1")));
    }

    #[test]
    fn ipv4_mapped_addresses_match_as_ipv4() {
        let s = set(&["10.0.0.0/8"]);
        assert!(s.contains(ip("::ffff:10.1.2.3")));
        assert!(!s.contains(ip("::ffff:11.1.2.3")));
        // A mapped network in the list covers the IPv4 addresses it names.
        let m = set(&["::ffff:192.0.2.0/120"]);
        assert!(m.contains(ip("192.0.2.77")));
        assert!(m.contains(ip("::ffff:192.0.2.77")));
        assert!(!m.contains(ip("192.0.3.1")));
    }

    #[test]
    fn deny_wins_and_a_non_empty_allow_list_admits_only_its_members() {
        let r = AddrRules { allow: set(&["10.0.0.0/8"]), deny: set(&["10.9.0.0/16"]) };
        assert!(r.admits(ip("10.1.1.1")));
        assert!(!r.admits(ip("10.9.1.1")));
        assert!(!r.admits(ip("192.0.2.1")));
        let deny_only = AddrRules { allow: CidrSet::default(), deny: set(&["192.0.2.0/24"]) };
        assert!(deny_only.admits(ip("10.1.1.1")));
        assert!(!deny_only.admits(ip("192.0.2.200")));
        assert!(AddrRules::default().admits(ip("::1")));
    }
}
