//! Origin group specifications: the plain-data description of where reel may connect.
//!
//! The binary converts its configuration into these types; nothing else in this crate decides a
//! destination. A request can only ever reach an address listed in a [`HostSpec`], whatever its
//! own `Host` header says, so the edge can never be used as an open proxy.

use std::path::PathBuf;
use std::time::Duration;

/// One origin server, reached over plain HTTP/1.1 or over TLS.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostSpec {
    /// `host:port` to connect to (an IP literal such as `127.0.0.1:8081` or `[::1]:80`, or a
    /// DNS name resolved at connect time).
    pub addr: String,
    /// `Host` header to send to this server instead of the one in the request. Origins behind
    /// virtual hosting usually need their own name here. Over TLS it is also the SNI name and
    /// the name the certificate must carry.
    pub host_header: Option<String>,
    /// Speak HTTPS: TLS (1.3 or 1.2) with the group's [`GroupSpec::tls`] verification, SNI from
    /// `host_header` or else the host part of `addr`.
    pub tls: bool,
    /// Relative share of keys under [`Balance::Rendezvous`]; at least 1. Ignored by round robin.
    pub weight: u32,
}

impl HostSpec {
    /// A plain-HTTP host reached at `addr` without a `Host` override, weight 1.
    pub fn new(addr: impl Into<String>) -> Self {
        Self { addr: addr.into(), host_header: None, tls: false, weight: 1 }
    }

    /// The name TLS verifies: `host_header` (without a port) or the host part of `addr`
    /// (without brackets).
    pub fn tls_name(&self) -> &str {
        let name = match &self.host_header {
            Some(h) => strip_port(h),
            None => strip_port(&self.addr),
        };
        name.strip_prefix('[').and_then(|n| n.strip_suffix(']')).unwrap_or(name)
    }
}

/// `host`, `host:port`, `[v6]` or `[v6]:port` without the port.
fn strip_port(hp: &str) -> &str {
    if hp.starts_with('[') {
        return hp.find(']').map_or(hp, |i| &hp[..=i]);
    }
    match hp.rsplit_once(':') {
        Some((h, p)) if !h.contains(':') && p.bytes().all(|b| b.is_ascii_digit()) => h,
        _ => hp,
    }
}

/// A value that must never be shown (a shared secret, a key): its `Debug` is `<redacted>`,
/// whatever prints the spec holding it.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps `value`.
    pub fn new(value: impl Into<String>) -> Self {
        Secret(value.into())
    }

    /// The value, for the code that sends it.
    pub(crate) fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<redacted>")
    }
}

/// AWS Signature Version 4 credentials for S3 and S3-compatible stores: every request to
/// the group is signed (service `s3`, payload `UNSIGNED-PAYLOAD`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct S3Auth {
    /// The region of the signature's scope (`us-east-1`; `auto` for R2).
    pub region: String,
    /// The access key ID.
    pub access_key: Secret,
    /// The secret access key.
    pub secret_key: Secret,
    /// A session token of temporary credentials, sent as `x-amz-security-token`.
    pub session_token: Option<Secret>,
}

/// How a request picks a host inside a tier.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Balance {
    /// Each worker rotates over the tier's available hosts.
    #[default]
    RoundRobin,
    /// Rendezvous (highest random weight) hashing of the request's [`crate::Affinity`]: every
    /// node ranks the hosts of a tier the same way for a key, the best available one serves
    /// and the next ones are the retry order. Losing one of N hosts moves only its share of
    /// keys.
    Rendezvous,
}

/// How the certificates of a group's TLS hosts are checked.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TlsSpec {
    /// PEM bundle of the certificate authorities to trust instead of the system roots; an
    /// origin presenting exactly one of its certificates is accepted too (pinning).
    pub ca_file: Option<PathBuf>,
    /// Accept any certificate. Only for tests and emergencies: it is logged as a warning at
    /// start and reported by [`crate::Origins::warnings`].
    pub insecure_skip_verify: bool,
    /// Offer HTTP/2 by ALPN (`h2`, then `http/1.1`); the origin chooses. Plain-HTTP hosts
    /// always speak HTTP/1.1.
    pub http2: bool,
}

/// Active health checking of every host of a group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HealthSpec {
    /// Whether the active checker probes the hosts of this group.
    pub enabled: bool,
    /// Path (origin-form, starting with `/`) requested with `GET`.
    pub path: String,
    /// Time between two probes of one host. With active checks disabled this is also the
    /// cool-down after which a passively ejected host gets live traffic again.
    pub interval: Duration,
    /// Budget for one probe: connect, send, and receive the status line.
    pub timeout: Duration,
    /// Status a healthy host answers with.
    pub expect_status: u16,
    /// Consecutive successful probes that bring an unhealthy host back.
    pub rise: u32,
    /// Consecutive failed probes (or passive failures seen by workers) that take a host down.
    pub fall: u32,
}

impl Default for HealthSpec {
    fn default() -> Self {
        Self {
            enabled: true,
            path: "/".to_owned(),
            interval: Duration::from_secs(5),
            timeout: Duration::from_secs(2),
            expect_status: 200,
            rise: 2,
            fall: 3,
        }
    }
}

/// A named group of origin hosts organised in ordered tiers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupSpec {
    /// Name the caller routes requests by.
    pub name: String,
    /// Hosts by preference: tier 0 serves while any of its hosts is healthy, then tier 1, ...
    pub tiers: Vec<Vec<HostSpec>>,
    /// Host choice inside a tier.
    pub balance: Balance,
    /// Certificate verification and ALPN for the hosts with [`HostSpec::tls`].
    pub tls: TlsSpec,
    /// Budget for establishing the TCP connection.
    pub connect_timeout: Duration,
    /// Budget from sending the request head until the response head has arrived.
    pub first_byte_timeout: Duration,
    /// Longest silence allowed between two response body chunks.
    pub idle_timeout: Duration,
    /// Idle keep-alive connections kept per host by each worker.
    pub max_idle_per_host: usize,
    /// HTTP/1.1 connections to one host carrying a request at once, across every worker. A
    /// request beyond it waits up to `connect_timeout` for one to free, then fails with
    /// [`crate::ErrorKind::ConnectionLimit`]. Idle pooled connections are bounded apart (by
    /// `max_idle_per_host` per worker), as is HTTP/2 (one multiplexed connection per worker
    /// and host); health checks are not counted. They are shared out by whom the request is
    /// for ([`crate::Requester`]): the node's own room, a client address's fair share (see
    /// the `places` module). At least 1.
    pub max_connections: usize,
    /// How long an idle pooled connection may wait for reuse before it is closed.
    pub pool_idle_timeout: Duration,
    /// Extra attempts on other hosts for idempotent requests that failed before any response
    /// byte arrived.
    pub retries: u32,
    /// When no host of any tier is healthy: `true` sends the request to tier 0 anyway (a wrong
    /// health check must not take the site down; a dead origin fails fast with connect errors),
    /// `false` fails at once with [`crate::ErrorKind::NoHealthyHost`].
    pub fail_open: bool,
    /// Active health checking.
    pub health: HealthSpec,
    /// Fields set on every request to the group's hosts, health checks included, replacing
    /// a viewer's of the same name (a shared secret the origin checks).
    pub request_headers: Vec<(String, Secret)>,
    /// Sign every request to the group's hosts, health checks included.
    pub s3: Option<S3Auth>,
}

impl GroupSpec {
    /// A group with the given tiers and conservative defaults for everything else.
    pub fn new(name: impl Into<String>, tiers: Vec<Vec<HostSpec>>) -> Self {
        Self {
            name: name.into(),
            tiers,
            balance: Balance::RoundRobin,
            tls: TlsSpec::default(),
            connect_timeout: Duration::from_secs(2),
            first_byte_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(10),
            max_idle_per_host: 32,
            max_connections: 256,
            pool_idle_timeout: Duration::from_secs(30),
            retries: 1,
            fail_open: true,
            health: HealthSpec::default(),
            request_headers: Vec::new(),
            s3: None,
        }
    }
}

/// A group set that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpecError {
    /// Two groups share a name.
    #[error("origin group {0:?} is defined twice")]
    DuplicateGroup(String),
    /// A group without any host.
    #[error("origin group {0:?} has no hosts")]
    EmptyGroup(String),
    /// A tier without any host.
    #[error("origin group {group:?}: tier {tier} has no hosts")]
    EmptyTier {
        /// Group name.
        group: String,
        /// Tier index.
        tier: usize,
    },
    /// An address that is not `host:port`.
    #[error("origin group {group:?}: address {addr:?} is not host:port")]
    BadAddr {
        /// Group name.
        group: String,
        /// Offending address.
        addr: String,
    },
    /// A `Host` override that is not a valid header value.
    #[error("origin group {group:?}: host header {value:?} is not a valid header value")]
    BadHostHeader {
        /// Group name.
        group: String,
        /// Offending value.
        value: String,
    },
    /// Health check settings that cannot work.
    #[error("origin group {group:?}: health check: {reason}")]
    BadHealth {
        /// Group name.
        group: String,
        /// What is wrong.
        reason: &'static str,
    },
    /// A host weight of zero.
    #[error("origin group {group:?}: host {addr:?} has weight 0 (at least 1)")]
    ZeroWeight {
        /// Group name.
        group: String,
        /// Offending host.
        addr: String,
    },
    /// A TLS host whose name cannot be used for SNI and certificate checks.
    #[error("origin group {group:?}: {name:?} is not a DNS name or IP address usable for TLS")]
    BadTlsName {
        /// Group name.
        group: String,
        /// Offending name.
        name: String,
    },
    /// TLS settings that cannot be used: an unreadable or empty `ca_file`, contradicting keys.
    #[error("origin group {group:?}: {reason}")]
    Tls {
        /// Group name.
        group: String,
        /// What is wrong.
        reason: String,
    },
    /// A `request_headers` entry that cannot be sent (its value is not shown).
    #[error("origin group {group:?}: request header {name:?} has an invalid name or value")]
    BadRequestHeader {
        /// Group name.
        group: String,
        /// Offending field name.
        name: String,
    },
    /// S3 credentials that cannot be sent in a field.
    #[error("origin group {group:?}: S3 credentials: {reason}")]
    BadS3 {
        /// Group name.
        group: String,
        /// What is wrong.
        reason: &'static str,
    },
    /// A timeout of zero would fail every request.
    #[error("origin group {group:?}: {field} must be greater than zero")]
    ZeroTimeout {
        /// Group name.
        group: String,
        /// Field name.
        field: &'static str,
    },
}

/// `host:port` with a non-empty host and a numeric port; brackets for IPv6 literals.
pub(crate) fn valid_addr(addr: &str) -> bool {
    let Some((host, port)) = addr.rsplit_once(':') else {
        return false;
    };
    if host.is_empty() || port.parse::<u16>().is_err() {
        return false;
    }
    if host.contains(':') {
        return host.starts_with('[') && host.ends_with(']');
    }
    !host.contains(['/', ' ', '@', '?', '#'])
}

impl GroupSpec {
    pub(crate) fn validate(&self) -> Result<(), SpecError> {
        let group = || self.name.clone();
        if self.tiers.is_empty() {
            return Err(SpecError::EmptyGroup(group()));
        }
        for (tier, hosts) in self.tiers.iter().enumerate() {
            if hosts.is_empty() {
                return Err(SpecError::EmptyTier { group: group(), tier });
            }
            for h in hosts {
                if !valid_addr(&h.addr) {
                    return Err(SpecError::BadAddr { group: group(), addr: h.addr.clone() });
                }
                if let Some(v) = &h.host_header
                    && (v.is_empty() || http::HeaderValue::from_str(v).is_err())
                {
                    return Err(SpecError::BadHostHeader { group: group(), value: v.clone() });
                }
                if h.weight == 0 {
                    return Err(SpecError::ZeroWeight { group: group(), addr: h.addr.clone() });
                }
                if h.tls && rustls::pki_types::ServerName::try_from(h.tls_name()).is_err() {
                    return Err(SpecError::BadTlsName {
                        group: group(),
                        name: h.tls_name().into(),
                    });
                }
            }
        }
        for (field, d) in [
            ("connect_timeout", self.connect_timeout),
            ("first_byte_timeout", self.first_byte_timeout),
            ("idle_timeout", self.idle_timeout),
        ] {
            if d.is_zero() {
                return Err(SpecError::ZeroTimeout { group: group(), field });
            }
        }
        if self.tls.insecure_skip_verify && self.tls.ca_file.is_some() {
            return Err(SpecError::Tls {
                group: group(),
                reason: "ca_file and insecure_skip_verify exclude each other".into(),
            });
        }
        let h = &self.health;
        let bad = |reason| Err(SpecError::BadHealth { group: group(), reason });
        if h.rise == 0 || h.fall == 0 {
            return bad("rise and fall must be at least 1");
        }
        if h.interval.is_zero() {
            return bad("interval must be greater than zero");
        }
        if h.enabled {
            if !h.path.starts_with('/') || h.path.parse::<http::uri::PathAndQuery>().is_err() {
                return bad("path must be an origin-form path starting with '/'");
            }
            if h.timeout.is_zero() {
                return bad("timeout must be greater than zero");
            }
            if http::StatusCode::from_u16(h.expect_status).is_err() {
                return bad("expect_status is not a valid status code");
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addr_forms() {
        for ok in ["127.0.0.1:80", "[::1]:8080", "origin.example:443"] {
            assert!(valid_addr(ok), "{ok}");
        }
        for bad in ["127.0.0.1", ":80", "host:", "host:99999", "::1:80", "a/b:80", "u@h:80"] {
            assert!(!valid_addr(bad), "{bad}");
        }
    }

    #[test]
    fn tls_names() {
        let mut h = HostSpec::new("origin.example:443");
        assert_eq!(h.tls_name(), "origin.example");
        h.addr = "[::1]:443".into();
        assert_eq!(h.tls_name(), "::1");
        h.addr = "127.0.0.1:443".into();
        assert_eq!(h.tls_name(), "127.0.0.1");
        h.host_header = Some("cdn.example.com".into());
        assert_eq!(h.tls_name(), "cdn.example.com");
        h.host_header = Some("cdn.example.com:8443".into());
        assert_eq!(h.tls_name(), "cdn.example.com");
    }

    #[test]
    fn validation() {
        let mut g = GroupSpec::new("g", vec![vec![HostSpec::new("127.0.0.1:1")]]);
        assert_eq!(g.validate(), Ok(()));
        g.health.fall = 0;
        assert!(matches!(g.validate(), Err(SpecError::BadHealth { .. })));
        g.health.fall = 1;
        g.health.path = "health".into();
        assert!(matches!(g.validate(), Err(SpecError::BadHealth { .. })));
        g.health.enabled = false;
        assert_eq!(g.validate(), Ok(()));
        g.tiers.push(vec![]);
        assert!(matches!(g.validate(), Err(SpecError::EmptyTier { tier: 1, .. })));
        let mut h = HostSpec::new("h:1");
        h.host_header = Some("a\nb".into());
        g.tiers = vec![vec![h.clone()]];
        assert!(matches!(g.validate(), Err(SpecError::BadHostHeader { .. })));
        h.host_header = None;
        h.weight = 0;
        g.tiers = vec![vec![h.clone()]];
        assert!(matches!(g.validate(), Err(SpecError::ZeroWeight { .. })));
        h.weight = 1;
        h.tls = true;
        h.host_header = Some("bad name!".into());
        g.tiers = vec![vec![h.clone()]];
        assert!(matches!(g.validate(), Err(SpecError::BadTlsName { .. })));
        h.host_header = Some("origin.example:443".into());
        g.tiers = vec![vec![h]];
        assert_eq!(g.validate(), Ok(()));
        g.tls.insecure_skip_verify = true;
        g.tls.ca_file = Some("ca.pem".into());
        assert!(matches!(g.validate(), Err(SpecError::Tls { .. })));
        g.tiers.clear();
        assert!(matches!(g.validate(), Err(SpecError::EmptyGroup(_))));
    }
}
