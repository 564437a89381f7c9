//! Addresses written where reel wants something else, and what to write instead: the
//! `ip:port` of a socket reel binds (`[[listener]] address`, `[admin] address`,
//! `[demo_origin] address`) given without a port or with a host name, and a URL
//! (`http://media.example.com`) where a host is wanted.

use std::net::{IpAddr, SocketAddr};

use serde::{Deserialize, Deserializer, de};

/// The port the hints below use when the text has none.
const EXAMPLE_PORT: u16 = 8080;

/// Parses the `ip:port` of a socket to bind; a rejected text comes with the form to write.
pub(crate) fn parse_bind(text: &str) -> Result<SocketAddr, String> {
    if let Ok(a) = text.parse::<SocketAddr>() {
        return Ok(a);
    }
    let bad = |why: String| format!("invalid address {text:?}: {why}");
    if let Some(url) = Url::split(text) {
        let port = url.port.unwrap_or(EXAMPLE_PORT);
        return Err(bad(format!(
            "an address to bind is IP:PORT, without a scheme: write \"{}\"",
            ip_for(url.host, port)
        )));
    }
    let trimmed = text.trim();
    if trimmed != text && trimmed.parse::<SocketAddr>().is_ok() {
        return Err(bad(format!("spaces around it: write \"{trimmed}\"")));
    }
    let bare = trimmed.strip_prefix('[').and_then(|t| t.strip_suffix(']')).unwrap_or(trimmed);
    if let Ok(ip) = bare.parse::<IpAddr>() {
        return Err(bad(format!("no port: write \"{}\"", SocketAddr::new(ip, EXAMPLE_PORT))));
    }
    let (host, port) = match trimmed.rsplit_once(':') {
        Some((h, p)) => match p.parse::<u16>() {
            Ok(p) => (h, Some(p)),
            Err(_) if p.bytes().all(|b| b.is_ascii_digit()) && !p.is_empty() => {
                return Err(bad("the port must be 0-65535".into()));
            }
            Err(_) => (trimmed, None),
        },
        None => (trimmed, None),
    };
    let port_or = port.unwrap_or(EXAMPLE_PORT);
    if super::is_dns_name(host) {
        let no_port = if port.is_none() { "no port, and " } else { "" };
        let every = format!(
            "\"0.0.0.0:{port_or}\" for every IPv4 address of this host, \"[::]:{port_or}\" for \
             every IPv6 one"
        );
        let write = if host.eq_ignore_ascii_case("localhost") {
            format!("write \"127.0.0.1:{port_or}\" (or {every})")
        } else {
            format!(
                "write the IP address it names on this host, e.g. \"192.0.2.10:{port_or}\", or {every}"
            )
        };
        return Err(bad(format!(
            "{no_port}{host:?} is a host name: reel binds IP addresses, so {write}"
        )));
    }
    Err(bad(format!(
        "expected IP:PORT, e.g. \"127.0.0.1:{EXAMPLE_PORT}\" or \"[::1]:{EXAMPLE_PORT}\""
    )))
}

/// `host:port` as an address to bind: `localhost` is the loopback address, another name
/// is replaced by every address of the host.
fn ip_for(host: &str, port: u16) -> String {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    match host.parse::<IpAddr>() {
        Ok(ip) => SocketAddr::new(ip, port).to_string(),
        Err(_) if host.eq_ignore_ascii_case("localhost") => format!("127.0.0.1:{port}"),
        Err(_) => format!("0.0.0.0:{port}"),
    }
}

/// serde's `deserialize_with` for the socket addresses of the schema: [`parse_bind`].
pub(crate) fn deserialize_bind<'de, D: Deserializer<'de>>(d: D) -> Result<SocketAddr, D::Error> {
    let text = String::deserialize(d)?;
    parse_bind(&text).map_err(de::Error::custom)
}

/// A URL written where a host is wanted, split into what the config wants instead.
pub(crate) struct Url<'a> {
    /// `http`, `https`, ...
    pub scheme: &'a str,
    /// The host, brackets of an IPv6 address kept.
    pub host: &'a str,
    /// The port the URL names.
    pub port: Option<u16>,
}

impl<'a> Url<'a> {
    /// `scheme://host[:port][/path]`, or `None` for text without `://`.
    pub(crate) fn split(text: &'a str) -> Option<Url<'a>> {
        let (scheme, rest) = text.trim().split_once("://")?;
        let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
        let authority = authority.rsplit_once('@').map_or(authority, |(_, a)| a);
        let (host, port) = match authority.rsplit_once(':') {
            Some((h, p)) if !h.is_empty() && !p.contains(']') => (h, p.parse().ok()),
            _ => (authority, None),
        };
        Some(Url { scheme, host, port })
    }

    /// Whether the scheme is `https` (which an origin tier says with `tls = true`).
    pub(crate) fn is_https(&self) -> bool {
        self.scheme.eq_ignore_ascii_case("https")
    }

    /// `host:port`, the port the scheme's default when the URL names none.
    pub(crate) fn host_port(&self) -> String {
        let port = self.port.unwrap_or(if self.is_https() { 443 } else { 80 });
        format!("{}:{port}", self.host)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bind_addresses_say_what_to_write() {
        assert_eq!(parse_bind("127.0.0.1:80"), Ok("127.0.0.1:80".parse().unwrap()));
        let e = parse_bind("127.0.0.1").unwrap_err();
        assert!(e.contains("no port: write \"127.0.0.1:8080\""), "{e}");
        let e = parse_bind("::1").unwrap_err();
        assert!(e.contains("write \"[::1]:8080\""), "{e}");
        let e = parse_bind("localhost:8080").unwrap_err();
        assert!(e.contains("host name") && e.contains("write \"127.0.0.1:8080\""), "{e}");
        let e = parse_bind("cache.example.com:443").unwrap_err();
        assert!(e.contains("\"0.0.0.0:443\" for every IPv4 address"), "{e}");
        let e = parse_bind("localhost").unwrap_err();
        assert!(e.contains("no port") && e.contains("\"127.0.0.1:8080\""), "{e}");
        let e = parse_bind("http://127.0.0.1:9090/").unwrap_err();
        assert!(e.contains("without a scheme: write \"127.0.0.1:9090\""), "{e}");
        let e = parse_bind("127.0.0.1:99999").unwrap_err();
        assert!(e.contains("0-65535"), "{e}");
        assert!(parse_bind("a b").unwrap_err().contains("expected IP:PORT"));
    }

    #[test]
    fn urls_split_into_host_and_port() {
        let u = Url::split("https://media.example.com/path").unwrap();
        assert_eq!((u.host, u.port, u.is_https()), ("media.example.com", None, true));
        assert_eq!(u.host_port(), "media.example.com:443");
        let u = Url::split("http://[2001:db8::1]:8080").unwrap();
        assert_eq!(u.host_port(), "[2001:db8::1]:8080");
        assert!(Url::split("media.example.com:80").is_none());
    }
}
