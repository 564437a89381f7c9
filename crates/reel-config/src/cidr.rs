//! Networks in CIDR notation (`http.trusted_proxies`): `10.0.0.0/8`, `2001:db8::/32`, or
//! one address (`192.0.2.7`, a network of one host).

use std::net::IpAddr;

/// Parses a network: its address and prefix length. Refuses a prefix longer than the
/// address and an address with bits set past the prefix (a typo more often than not).
pub fn parse_cidr(s: &str) -> Result<(IpAddr, u8), String> {
    let (addr, len) = match s.split_once('/') {
        Some((a, l)) => (a, Some(l)),
        None => (s, None),
    };
    let ip: IpAddr = addr
        .parse()
        .map_err(|_| format!("{s:?} is not an IP address or network (e.g. \"10.0.0.0/8\")"))?;
    let max: u8 = if ip.is_ipv4() { 32 } else { 128 };
    let len = match len {
        None => max,
        Some(l) => match l.parse::<u8>() {
            Ok(n) if n <= max && !l.starts_with('+') => n,
            _ => return Err(format!("{s:?}: the prefix length must be 0 to {max}")),
        },
    };
    let net = network(ip, len);
    if net != ip {
        return Err(format!(
            "{s:?} has bits set past its /{len} prefix (the network is {net}/{len})"
        ));
    }
    Ok((ip, len))
}

/// `ip` with all but its first `len` bits cleared.
fn network(ip: IpAddr, len: u8) -> IpAddr {
    match ip {
        IpAddr::V4(a) => {
            let m = u32::MAX.checked_shl(32 - u32::from(len)).unwrap_or(0);
            IpAddr::V4((u32::from(a) & m).into())
        }
        IpAddr::V6(a) => {
            let m = u128::MAX.checked_shl(128 - u32::from(len)).unwrap_or(0);
            IpAddr::V6((u128::from(a) & m).into())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn networks_and_single_addresses_parse() {
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        assert_eq!(parse_cidr("10.0.0.0/8"), Ok((ip("10.0.0.0"), 8)));
        assert_eq!(parse_cidr("192.0.2.7"), Ok((ip("192.0.2.7"), 32)));
        assert_eq!(parse_cidr("192.0.2.7/32"), Ok((ip("192.0.2.7"), 32)));
        assert_eq!(parse_cidr("0.0.0.0/0"), Ok((ip("0.0.0.0"), 0)));
        assert_eq!(parse_cidr("2001:db8::/32"), Ok((ip("2001:db8::"), 32)));
        assert_eq!(parse_cidr("::1"), Ok((ip("::1"), 128)));
    }

    #[test]
    fn bad_networks_say_why() {
        for (s, says) in [
            ("10.0.0.0/33", "0 to 32"),
            ("2001:db8::/129", "0 to 128"),
            ("10.0.0.0/-1", "0 to 32"),
            ("10.0.0.0/+8", "0 to 32"),
            ("10.0.0.0/", "0 to 32"),
            ("example.com", "not an IP address"),
            ("10.0.0.1/8", "the network is 10.0.0.0/8"),
            ("2001:db8::1/64", "the network is 2001:db8::/64"),
            ("", "not an IP address"),
        ] {
            let e = parse_cidr(s).unwrap_err();
            assert!(e.contains(says), "{s}: {e}");
        }
    }
}
