//! Target URLs: parsing `http://host:port/path` (or `https://`) and refusing anything
//! that is not loopback, so the generator can never be pointed at a remote host.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// Why a target URL was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TargetError {
    /// Only `http://` and `https://` are supported.
    #[error("only http:// and https:// URLs are supported: {0}")]
    Scheme(String),
    /// Host is not `127.0.0.1`, `localhost` or `[::1]`.
    #[error("refusing non-loopback host {0:?} (only 127.0.0.1, localhost, [::1])")]
    NotLoopback(String),
    /// The URL could not be parsed.
    #[error("malformed URL {0:?}")]
    Malformed(String),
}

/// Where to connect: a loopback address, over TLS or not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Endpoint {
    /// Socket address to connect to (never resolved through DNS).
    pub addr: SocketAddr,
    /// `https://`: TLS (any certificate is accepted; the target is loopback only).
    pub tls: bool,
}

/// A parsed, loopback-only HTTP target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// Socket address to connect to (never resolved through DNS).
    pub addr: SocketAddr,
    /// Whether the URL was `https://`.
    pub tls: bool,
    /// Value for the `Host` header (RFC 9112 §3.2), as written in the URL.
    pub host_header: String,
    /// Path and query, starting with `/`.
    pub path: String,
}

impl Target {
    /// Parses `http://127.0.0.1:8080/path?q`, `http://localhost/x`,
    /// `https://127.0.0.1:8443/` or `http://[::1]:9000/`; any other host is refused.
    pub fn parse(url: &str) -> Result<Self, TargetError> {
        let (rest, tls) = match (url.strip_prefix("http://"), url.strip_prefix("https://")) {
            (Some(r), _) => (r, false),
            (_, Some(r)) => (r, true),
            _ => return Err(TargetError::Scheme(url.to_string())),
        };
        let default_port = if tls { "443" } else { "80" };
        let (authority, path) = match rest.find(['/', '?']) {
            Some(i) if rest.as_bytes()[i] == b'/' => (&rest[..i], rest[i..].to_string()),
            Some(i) => (&rest[..i], format!("/{}", &rest[i..])),
            None => (rest, "/".to_string()),
        };
        if authority.is_empty() || authority.contains('@') {
            return Err(TargetError::Malformed(url.to_string()));
        }
        let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
            let (h, after) =
                v6.split_once(']').ok_or_else(|| TargetError::Malformed(url.to_string()))?;
            let port = match after.strip_prefix(':') {
                Some(p) => p,
                None if after.is_empty() => default_port,
                None => return Err(TargetError::Malformed(url.to_string())),
            };
            (h, port)
        } else {
            match authority.rsplit_once(':') {
                Some((h, p)) => (h, p),
                None => (authority, default_port),
            }
        };
        let port: u16 = port.parse().map_err(|_| TargetError::Malformed(url.to_string()))?;
        let ip = loopback_ip(host).ok_or_else(|| TargetError::NotLoopback(host.to_string()))?;
        Ok(Self { addr: SocketAddr::new(ip, port), tls, host_header: authority.to_string(), path })
    }

    /// Where to connect.
    pub fn endpoint(&self) -> Endpoint {
        Endpoint { addr: self.addr, tls: self.tls }
    }

    /// The same server with another path (used for playlist-relative URIs).
    pub fn with_path(&self, path: impl Into<String>) -> Self {
        Self {
            addr: self.addr,
            tls: self.tls,
            host_header: self.host_header.clone(),
            path: path.into(),
        }
    }

    /// `http://authority/path` (or `https://`), for reports.
    pub fn url(&self) -> String {
        let scheme = if self.tls { "https" } else { "http" };
        format!("{scheme}://{}{}", self.host_header, self.path)
    }
}

/// Maps the three accepted loopback spellings to an address; `None` otherwise.
fn loopback_ip(host: &str) -> Option<IpAddr> {
    match host.to_ascii_lowercase().as_str() {
        "127.0.0.1" | "localhost" => Some(IpAddr::V4(Ipv4Addr::LOCALHOST)),
        "::1" => Some(IpAddr::V6(Ipv6Addr::LOCALHOST)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_loopback_forms() {
        let t = Target::parse("http://127.0.0.1:8080/live/index.m3u8?x=1").unwrap();
        assert_eq!(t.addr, "127.0.0.1:8080".parse().unwrap());
        assert_eq!(t.path, "/live/index.m3u8?x=1");
        assert_eq!(t.host_header, "127.0.0.1:8080");
        let t = Target::parse("http://localhost").unwrap();
        assert_eq!(t.addr, "127.0.0.1:80".parse().unwrap());
        assert_eq!(t.path, "/");
        let t = Target::parse("http://[::1]:9000/a").unwrap();
        assert_eq!(t.addr, "[::1]:9000".parse().unwrap());
        let t = Target::parse("http://127.0.0.1:81?q").unwrap();
        assert_eq!(t.path, "/?q");
        assert!(!t.tls);
        let t = Target::parse("https://127.0.0.1/seg.ts").unwrap();
        assert_eq!((t.addr, t.tls), ("127.0.0.1:443".parse().unwrap(), true));
        assert_eq!(t.url(), "https://127.0.0.1/seg.ts");
        assert_eq!(t.with_path("/x").endpoint(), Endpoint { addr: t.addr, tls: true });
    }

    #[test]
    fn refuses_other_hosts() {
        for u in [
            "http://10.0.0.1/",
            "http://example.com:80/",
            "http://127.0.0.2/",
            "http://0.0.0.0:80/",
            "http://[::2]/",
        ] {
            assert!(matches!(Target::parse(u), Err(TargetError::NotLoopback(_))), "{u}");
        }
        assert!(matches!(Target::parse("ftp://127.0.0.1/"), Err(TargetError::Scheme(_))));
        assert!(matches!(Target::parse("https://10.0.0.1/"), Err(TargetError::NotLoopback(_))));
        assert!(Target::parse("http://user@127.0.0.1/").is_err());
        assert!(Target::parse("http://127.0.0.1:99999/").is_err());
    }
}
