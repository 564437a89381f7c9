//! `[[origin_group]]` with its tiers, health checks and balancing, and `[demo_origin]`.

use std::collections::BTreeMap;

use super::*;

/// An origin address: `host:port` where host is an IPv4 address, a bracketed IPv6 address
/// or a DNS name. The scheme is always http.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct HostPort {
    /// IP address text (without brackets) or DNS name.
    pub host: String,
    /// TCP port, never 0.
    pub port: u16,
}

impl HostPort {
    /// The address as a [`SocketAddr`] when the host is an IP literal (no DNS needed).
    pub fn socket_addr(&self) -> Option<SocketAddr> {
        self.host.parse::<IpAddr>().ok().map(|ip| SocketAddr::new(ip, self.port))
    }
}

impl FromStr for HostPort {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let bad = |why: &str| format!("invalid origin host {text:?}: {why}");
        if let Some(url) = addr::Url::split(text) {
            let tls = if url.is_https() { " and tls = true in this tier" } else { "" };
            return Err(bad(&format!(
                "a host:port, without a scheme: write \"{}\"{tls}",
                url.host_port()
            )));
        }
        let (host, port) = text
            .rsplit_once(':')
            .ok_or_else(|| bad(&format!("no port: write \"{text}:80\" (or the origin's port)")))?;
        let port: u16 = port.parse().map_err(|_| bad("port must be a number 1-65535"))?;
        if port == 0 {
            return Err(bad("port must be a number 1-65535"));
        }
        let host = if let Some(inner) = host.strip_prefix('[') {
            let inner = inner.strip_suffix(']').ok_or_else(|| bad("missing ']'"))?;
            inner.parse::<std::net::Ipv6Addr>().map_err(|_| bad("invalid IPv6 address"))?;
            inner
        } else if host.contains(':') {
            return Err(bad("IPv6 addresses must be in brackets, e.g. [2001:db8::1]:80"));
        } else if host.parse::<Ipv4Addr>().is_ok() || is_dns_name(host) {
            host
        } else {
            return Err(bad("host is neither an IP address nor a valid DNS name"));
        };
        Ok(HostPort { host: host.to_owned(), port })
    }
}

/// RFC 1123 §2.1 host name: dot-separated labels of letters, digits and hyphens, each 1-63
/// characters and not starting or ending with a hyphen, 253 characters at most.
pub(crate) fn is_dns_name(name: &str) -> bool {
    let name = name.strip_suffix('.').unwrap_or(name);
    !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
        })
}

impl fmt::Display for HostPort {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}

impl Serialize for HostPort {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for HostPort {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(de::Error::custom)
    }
}

/// `[origin_group.health]`: active health checks of every origin host in the group.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct OriginHealthConfig {
    /// Run active checks; when `false` every host counts as healthy. Default `true`.
    pub enabled: bool,
    /// Path requested with GET. Must start with `/`. Default `"/healthz"`.
    pub path: String,
    /// Time between checks of one host. Duration; default `"2s"`.
    pub interval: Duration,
    /// A check not answered within this counts as failed; at most `interval`. Duration;
    /// default `"1s"`.
    pub timeout: Duration,
    /// Status code a healthy host answers. Default 200.
    pub expect_status: u16,
    /// Consecutive passes that make an unhealthy host healthy. Count; default 2.
    pub rise: u32,
    /// Consecutive failures that make a healthy host unhealthy. Count; default 3.
    pub fall: u32,
}

impl Default for OriginHealthConfig {
    fn default() -> Self {
        OriginHealthConfig {
            enabled: true,
            path: "/healthz".into(),
            interval: Duration::from_secs(2),
            timeout: Duration::from_secs(1),
            expect_status: 200,
            rise: 2,
            fall: 3,
        }
    }
}

/// `[[origin_group.tier]]`: origin hosts of equal preference.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TierConfig {
    /// Origin hosts as `host:port` (see [`HostPort`]). Required, non-empty.
    pub hosts: Vec<HostPort>,
    /// Host header sent to these origins; empty = the request's Host, normalised as the
    /// cache key's (lowercase, default port removed). Over TLS it is also the SNI name and
    /// the name the certificate must carry. Default `""`.
    #[serde(default)]
    pub host_header: String,
    /// Speak HTTPS to these hosts. Default `false`.
    #[serde(default)]
    pub tls: bool,
    /// Rendezvous weight of each host, in `hosts` order; empty = all 1. Default `[]`.
    #[serde(default)]
    pub weights: Vec<u32>,
}

/// `[[origin_group]].balance`: how a request picks a host inside a tier.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OriginBalance {
    /// Each worker takes the tier's healthy hosts in turn.
    #[default]
    RoundRobin,
    /// Rendezvous hashing of the cache key: one host owns each key.
    Rendezvous,
}

/// A value read from the environment when the config is loaded: `{ env = "NAME" }`. The
/// file names the variable, never the value, so secrets stay out of the file, `/status`
/// and the config hash.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnvValue {
    /// The environment variable's name.
    pub env: String,
}

/// `[[origin_group]].auth`: how requests to the group's hosts are authenticated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OriginAuth {
    /// No signature (`request_headers` may still carry a shared secret).
    #[default]
    None,
    /// AWS Signature Version 4 with the service name `s3`.
    S3,
}

/// The value of environment variable `name`: set, valid Unicode and non-empty; else why not
/// (a sentence for a problem report, without the value).
pub fn env_value(name: &str) -> Result<String, String> {
    if name.is_empty() {
        return Err("names no environment variable".into());
    }
    match std::env::var(name) {
        Ok(v) if !v.is_empty() => Ok(v),
        Ok(_) => Err(format!("environment variable {name:?} is empty")),
        Err(std::env::VarError::NotPresent) => {
            Err(format!("environment variable {name:?} is not set"))
        }
        Err(std::env::VarError::NotUnicode(_)) => {
            Err(format!("environment variable {name:?} is not valid UTF-8"))
        }
    }
}

fn default_connect_timeout() -> Duration {
    Duration::from_secs(2)
}
fn default_first_byte_timeout() -> Duration {
    Duration::from_secs(10)
}
fn default_origin_idle_timeout() -> Duration {
    Duration::from_secs(30)
}
fn default_max_idle_per_host() -> u32 {
    32
}
fn default_max_connections() -> u32 {
    128
}
fn default_retries() -> u32 {
    1
}

/// `[[origin_group]]`: where misses are fetched from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OriginGroupConfig {
    /// Name referenced by `[[site]].origin_group`; unique. Required.
    pub name: String,
    /// TCP connect timeout. Duration; default `"2s"`.
    #[serde(default = "default_connect_timeout")]
    pub connect_timeout: Duration,
    /// Time from sending the request to the first byte of the response head. Duration;
    /// default `"10s"`.
    #[serde(default = "default_first_byte_timeout")]
    pub first_byte_timeout: Duration,
    /// Longest gap between body bytes from the origin. Duration; default `"30s"`.
    #[serde(default = "default_origin_idle_timeout")]
    pub idle_timeout: Duration,
    /// Idle keep-alive connections kept per origin host, per worker. Count; default 32.
    #[serde(default = "default_max_idle_per_host")]
    pub max_idle_per_host: u32,
    /// HTTP/1.1 connections to one host of the group carrying a request at once, across
    /// every worker; a request beyond waits up to `connect_timeout`, then gets 503. Count,
    /// at least 1; default 128.
    #[serde(default = "default_max_connections")]
    pub max_connections: u32,
    /// Further attempts on another host after a connect failure or an error before the first
    /// byte. Count; default 1.
    #[serde(default = "default_retries")]
    pub retries: u32,
    /// `round_robin` or `rendezvous`. Default `round_robin`.
    #[serde(default)]
    pub balance: OriginBalance,
    /// PEM bundle of the certificate authorities trusted for the group's TLS tiers, each also
    /// pinned (an origin presenting exactly that certificate is accepted, self-signed `CA:TRUE`
    /// included); empty = the system roots. Default `""`.
    #[serde(default)]
    pub ca_file: PathBuf,
    /// Accept any certificate from the group's TLS tiers (warned about in the log and on
    /// /status). Default `false`.
    #[serde(default)]
    pub insecure_skip_verify: bool,
    /// Offer HTTP/2 by ALPN to the group's TLS tiers. Default `false`.
    #[serde(default)]
    pub http2: bool,
    /// Fields added to every request sent to the group's hosts (fills, revalidations,
    /// passed-through requests and health checks), each read from an environment variable
    /// at load and reload: `{ "X-Origin-Secret" = { env = "ORIGIN_SECRET" } }`. A viewer's
    /// field of the same name is replaced. Never shown to viewers, logged or reported.
    /// Default `{}`.
    #[serde(default)]
    pub request_headers: BTreeMap<String, EnvValue>,
    /// How requests to the group are authenticated: `none`, or `s3` (AWS Signature
    /// Version 4 for S3 and S3-compatible stores, with `region`, `access_key_env`,
    /// `secret_key_env` and `session_token_env`). Default `none`.
    #[serde(default)]
    pub auth: OriginAuth,
    /// With `auth = "s3"`: the region in the signature's scope (`us-east-1`; `auto` for R2).
    /// Default `""`.
    #[serde(default)]
    pub region: String,
    /// With `auth = "s3"`: the environment variable holding the access key ID. Default `""`.
    #[serde(default)]
    pub access_key_env: String,
    /// With `auth = "s3"`: the environment variable holding the secret access key. Default
    /// `""`.
    #[serde(default)]
    pub secret_key_env: String,
    /// With `auth = "s3"`: the environment variable holding a session token (temporary
    /// credentials), sent as `x-amz-security-token`; empty = none. Default `""`.
    #[serde(default)]
    pub session_token_env: String,
    /// Active health checks.
    #[serde(default)]
    pub health: OriginHealthConfig,
    /// Tiers in preference order: requests go to the first tier with a healthy host. At
    /// least one.
    #[serde(default)]
    pub tier: Vec<TierConfig>,
}

impl Default for OriginGroupConfig {
    fn default() -> Self {
        OriginGroupConfig {
            name: "main".into(),
            connect_timeout: default_connect_timeout(),
            first_byte_timeout: default_first_byte_timeout(),
            idle_timeout: default_origin_idle_timeout(),
            max_idle_per_host: default_max_idle_per_host(),
            max_connections: default_max_connections(),
            retries: default_retries(),
            balance: OriginBalance::default(),
            ca_file: PathBuf::new(),
            insecure_skip_verify: false,
            http2: false,
            request_headers: BTreeMap::new(),
            auth: OriginAuth::None,
            region: String::new(),
            access_key_env: String::new(),
            secret_key_env: String::new(),
            session_token_env: String::new(),
            health: OriginHealthConfig::default(),
            tier: Vec::new(),
        }
    }
}

/// `[demo_origin]`: the built-in origin simulator (live HLS and a VOD catalog), for the
/// default config, demos and tests.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DemoOriginConfig {
    /// Start the simulator inside the server process. Default `false`.
    pub enabled: bool,
    /// `ip:port` it listens on. Default `"127.0.0.1:8081"`.
    #[serde(deserialize_with = "addr::deserialize_bind")]
    pub address: SocketAddr,
    /// Multiplier of the simulator's latency percentile table; 0 = no added latency.
    /// Default 1.0.
    pub latency_scale: f64,
    /// Fraction of requests answered 503, 0.0-1.0. Default 0.0.
    pub error_rate: f64,
    /// Fraction of response bodies cut off midway (connection reset), 0.0-1.0. Default 0.0.
    pub reset_rate: f64,
    /// Media duration of one live segment (and `#EXTINF` of VOD segments). Duration,
    /// 10ms-1h; default `"2s"`.
    pub segment_duration: Duration,
    /// Size of one generated live segment. Size, at least 1 byte; default `"1MiB"` (about
    /// 4 Mbit/s at 2 s segments).
    pub live_segment_size: ByteSize,
}

impl Default for DemoOriginConfig {
    fn default() -> Self {
        DemoOriginConfig {
            enabled: false,
            address: v4(127, 0, 0, 1, 8081),
            latency_scale: 1.0,
            error_rate: 0.0,
            reset_rate: 0.0,
            segment_duration: Duration::from_secs(2),
            live_segment_size: ByteSize::mib(1),
        }
    }
}
