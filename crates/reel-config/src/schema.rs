//! The configuration schema: one struct per TOML section, with the defaults the server uses
//! when a key is absent. Field names are the TOML key names (the contract documented in
//! `docs/configuration.md`); every struct rejects unknown keys.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, SocketAddrV4};
use std::path::{Path, PathBuf};
use std::str::FromStr;

use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::units::{ByteSize, Duration};

const fn v4(a: u8, b: u8, c: u8, d: u8, port: u16) -> SocketAddr {
    SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::new(a, b, c, d), port))
}

/// `[server]`: process-wide behaviour.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServerConfig {
    /// On SIGTERM, stop accepting and let in-flight requests finish for at most this long,
    /// then close what is left. Duration; default `"10s"`; `"0s"` closes immediately.
    pub shutdown_timeout: Duration,
    /// On SIGTERM, first keep accepting and serving for this long while `/healthz` answers
    /// 503 `stopping` and keep-alive clients are told `Connection: close`, so balancers
    /// move traffic away before the drain starts. Duration; default `"0s"`.
    pub shutdown_delay: Duration,
    /// This CDN's name in the `CDN-Loop` field (RFC 8586) of every request sent to an
    /// origin or a parent; the same on every node of one deployment (edges and shields). A
    /// host name, `host:port` or a token; default `"reel"`.
    pub cdn_id: String,
    /// A request that arrives with `cdn_id` in its `CDN-Loop` field more than this many
    /// times is answered `508 Loop Detected` and nothing is fetched. Count, 0-64; default 3.
    pub max_hops: u32,
    /// This node's name in the `Cache-Status` field (RFC 9211), after the entries of the
    /// caches before it. A token; default `""`, which uses `cdn_id`.
    pub cache_status_name: String,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            shutdown_timeout: Duration::from_secs(10),
            shutdown_delay: Duration::ZERO,
            cdn_id: "reel".to_string(),
            max_hops: 3,
            cache_status_name: String::new(),
        }
    }
}

impl ServerConfig {
    /// The name this node gives itself in `Cache-Status`: `cache_status_name`, or `cdn_id`.
    pub fn cache_status_name(&self) -> &str {
        if self.cache_status_name.is_empty() { &self.cdn_id } else { &self.cache_status_name }
    }
}

/// Output format of the process log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// Human-readable lines (tracing's default formatter).
    #[default]
    Human,
    /// One JSON object per line.
    Json,
}

/// `[log]`: the process (diagnostic) log, not the access log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LogConfig {
    /// Filter directive: a level (`trace`, `debug`, `info`, `warn`, `error`, `off`) or a
    /// comma-separated list of `level` / `target=level` items, e.g. `"info,reel_cache=debug"`.
    /// `RUST_LOG`, when set, overrides it. Default `"info"`.
    pub level: String,
    /// `human` or `json`. Default `human`.
    pub format: LogFormat,
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig { level: "info".into(), format: LogFormat::Human }
    }
}

fn default_backlog() -> u32 {
    4096
}

/// `[[listener]]`: one data (client-facing) listener. Every worker core binds each listener
/// with SO_REUSEPORT.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListenerConfig {
    /// Name used in metrics and logs; unique among listeners. Required.
    pub name: String,
    /// `ip:port` to bind, e.g. `"0.0.0.0:80"` or `"[::]:80"`. Required.
    #[serde(deserialize_with = "addr::deserialize_bind")]
    pub address: SocketAddr,
    /// listen(2) backlog per worker socket. Connections; default 4096.
    #[serde(default = "default_backlog")]
    pub backlog: u32,
    /// The listener's certificate chain (PEM file), or `"self-signed"` for one made in
    /// memory at start. Present = the listener speaks HTTPS. Default: none (plain HTTP).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_cert: Option<TlsCert>,
    /// The private key of `tls_cert` (PEM file); required with a certificate file, not
    /// allowed with `"self-signed"`. Default: none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_key: Option<PathBuf>,
    /// Refuse TLS handshakes whose server name (SNI) matches no certificate, and those
    /// without one. Default `false` (unknown names get the listener's certificate).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub sni_strict: bool,
    /// Offer HTTP/2 by ALPN. Default `true` on TLS listeners; only valid on them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http2: Option<bool>,
    /// Who seals the TLS records after the handshake: `"auto"` hands them to the kernel
    /// (kTLS, with `sendfile` for file bodies) when it has the `tls` module and takes the
    /// cipher, reel's own record layer otherwise; `"off"`, always reel's. Default `"auto"`
    /// on TLS listeners; only valid on them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ktls: Option<Ktls>,
    /// Oldest TLS version a client may negotiate: `"1.2"` (TLS 1.3 and 1.2) or `"1.3"`
    /// (TLS 1.3 only). Default `"1.2"`; `"1.3"` only on TLS listeners.
    #[serde(default, skip_serializing_if = "TlsVersion::is_default")]
    pub min_tls_version: TlsVersion,
    /// Serve HTTP/3 (QUIC) on a UDP socket of the same address and port, with the same
    /// certificates. Default `false`; only valid on TLS listeners.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http3: Option<bool>,
    /// How long clients may remember that HTTP/3 is offered: the `ma` of the
    /// `Alt-Svc: h3=":PORT"` header this listener's HTTP/1.1 and HTTP/2 responses carry.
    /// `"0"` sends no `Alt-Svc`. Default `"24h"`; only valid with `http3 = true`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alt_svc_max_age: Option<Duration>,
    /// Address validation of new QUIC connections with a Retry: `"auto"` (when a worker
    /// has many handshakes in progress, e.g. under a flood of Initials from forged
    /// addresses), `"always"` or `"never"`. Default `"auto"`; only valid with
    /// `http3 = true`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quic_retry: Option<QuicRetry>,
    /// Every connection starts with a PROXY protocol header (v1 or v2, as an AWS NLB, HAProxy
    /// or another TCP balancer sends), read before TLS: the client is the address it names.
    /// Only sources in `http.trusted_proxies` may connect; any other connection, or one
    /// without a valid header, is closed. Default `false`. HTTP/3 (UDP) takes no header.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub proxy_protocol: bool,
}

/// `quic_retry`: when new QUIC connections must prove their address first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum QuicRetry {
    /// Under load (many handshakes in progress on a worker).
    #[default]
    Auto,
    /// Always.
    Always,
    /// Never.
    Never,
}

/// `ktls`: whether a TLS listener hands its sessions' record layer to the kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Ktls {
    /// The kernel when it can, user space otherwise.
    #[default]
    Auto,
    /// Always user space.
    Off,
}

impl Default for ListenerConfig {
    fn default() -> Self {
        ListenerConfig {
            name: "http".into(),
            address: v4(127, 0, 0, 1, 8080),
            backlog: default_backlog(),
            tls_cert: None,
            tls_key: None,
            sni_strict: false,
            http2: None,
            ktls: None,
            min_tls_version: TlsVersion::default(),
            http3: None,
            alt_svc_max_age: None,
            quic_retry: None,
            proxy_protocol: false,
        }
    }
}

impl ListenerConfig {
    /// Whether the listener speaks HTTPS.
    pub fn is_tls(&self) -> bool {
        self.tls_cert.is_some()
    }

    /// Whether HTTP/2 is offered (by ALPN, on TLS listeners only).
    pub fn http2_enabled(&self) -> bool {
        self.is_tls() && self.http2.unwrap_or(true)
    }

    /// Whether HTTP/3 is served (on TLS listeners only).
    pub fn http3_enabled(&self) -> bool {
        self.is_tls() && self.http3.unwrap_or(false)
    }

    /// The `ma` of the listener's `Alt-Svc` header; `None` when none is sent (no HTTP/3,
    /// or `alt_svc_max_age = "0"`).
    pub fn alt_svc_max_age(&self) -> Option<std::time::Duration> {
        let age = self.alt_svc_max_age.map_or(DEFAULT_ALT_SVC_MAX_AGE, |d| d.get());
        (self.http3_enabled() && !age.is_zero()).then_some(age)
    }
}

/// Default `alt_svc_max_age`: a day, as nginx's examples and the large CDNs use.
pub const DEFAULT_ALT_SVC_MAX_AGE: std::time::Duration = std::time::Duration::from_secs(86_400);

/// `tls_cert`: a PEM certificate chain file, or a self-signed certificate made at start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TlsCert {
    /// `"self-signed"`: an in-memory certificate for `localhost`, `127.0.0.1`, `::1` and
    /// the site names, made at start.
    SelfSigned,
    /// A PEM file holding the certificate chain, leaf first. Relative paths are relative
    /// to the working directory.
    File(PathBuf),
}

impl Serialize for TlsCert {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            TlsCert::SelfSigned => s.serialize_str("self-signed"),
            TlsCert::File(p) => p.serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for TlsCert {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        Ok(if text == "self-signed" { TlsCert::SelfSigned } else { TlsCert::File(text.into()) })
    }
}

/// `min_tls_version`: a TLS protocol version, written as a string (`"1.2"`, `"1.3"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum TlsVersion {
    /// `"1.2"`: TLS 1.2 (RFC 5246).
    #[default]
    Tls12,
    /// `"1.3"`: TLS 1.3 (RFC 8446).
    Tls13,
}

impl TlsVersion {
    /// Every version, oldest first.
    pub const ALL: [TlsVersion; 2] = [TlsVersion::Tls12, TlsVersion::Tls13];

    /// The spelling in the configuration: `"1.2"` or `"1.3"`.
    pub fn as_str(self) -> &'static str {
        match self {
            TlsVersion::Tls12 => "1.2",
            TlsVersion::Tls13 => "1.3",
        }
    }

    fn is_default(&self) -> bool {
        *self == TlsVersion::default()
    }
}

impl fmt::Display for TlsVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The accepted spellings, for messages.
const TLS_VERSIONS: &str = "\"1.2\" or \"1.3\"";

impl Serialize for TlsVersion {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for TlsVersion {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = TlsVersion;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(TLS_VERSIONS)
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<TlsVersion, E> {
                TlsVersion::ALL.into_iter().find(|t| t.as_str() == v).ok_or_else(|| {
                    E::custom(format!("invalid TLS version {v:?}: expected {TLS_VERSIONS}"))
                })
            }
            // A bare `1.3` is a TOML float: say how to write it rather than guess.
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<TlsVersion, E> {
                Err(E::custom(format!(
                    "invalid TLS version {v}: expected {TLS_VERSIONS} in quotes"
                )))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<TlsVersion, E> {
                Err(E::custom(format!(
                    "invalid TLS version {v}: expected {TLS_VERSIONS} in quotes"
                )))
            }
        }
        d.deserialize_any(V)
    }
}

/// `[[certificate]]`: a certificate chosen by TLS server name (SNI) on every TLS listener;
/// a listener's own `tls_cert` is the default for names no `[[certificate]]` lists.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CertificateConfig {
    /// Server names it is chosen for: exact names (`"video.example.com"`) or
    /// `"*.cdn.example.com"` (one label in front of `cdn.example.com`). Case-insensitive.
    /// Required, non-empty.
    pub names: Vec<String>,
    /// PEM certificate chain file, leaf first. Required.
    pub cert: PathBuf,
    /// PEM private key file of `cert`. Required.
    pub key: PathBuf,
}

/// A set of CPUs: `"auto"` or an explicit list of CPU numbers, e.g. `[2, 3, 4]`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum CpuSet {
    /// Let the server choose (see `docs/configuration.md`, `[cores]`).
    #[default]
    Auto,
    /// Exactly these CPUs (as numbered by the kernel).
    List(Vec<usize>),
}

impl Serialize for CpuSet {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            CpuSet::Auto => s.serialize_str("auto"),
            CpuSet::List(cpus) => cpus.serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for CpuSet {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = CpuSet;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("\"auto\" or a list of CPU numbers such as [2, 3]")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<CpuSet, E> {
                if v == "auto" {
                    Ok(CpuSet::Auto)
                } else {
                    Err(E::custom(format!(
                        "invalid CPU set {v:?}: expected \"auto\" or a list of CPU numbers such as [2, 3]"
                    )))
                }
            }
            fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<CpuSet, A::Error> {
                let mut cpus = Vec::new();
                while let Some(cpu) = seq.next_element::<usize>()? {
                    cpus.push(cpu);
                }
                Ok(CpuSet::List(cpus))
            }
        }
        d.deserialize_any(V)
    }
}

/// How incoming connections are spread over the worker cores' SO_REUSEPORT sockets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Steer {
    /// The kernel's default 4-tuple hash.
    #[default]
    Hash,
    /// SO_ATTACH_REUSEPORT_CBPF: the socket of the CPU that handled the packet, so a
    /// connection stays on the core that took its interrupt.
    Cpu,
}

/// `[cores]`: which CPUs take NIC interrupts and which run workers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CoresConfig {
    /// Network interfaces whose IRQs are placed on the `irq` CPUs. Default `[]` (leave IRQ
    /// affinity alone).
    pub nic: Vec<String>,
    /// CPUs that take the NIC interrupts: `"auto"` or a list. Default `"auto"`.
    pub irq: CpuSet,
    /// CPUs that run one pinned worker thread each: `"auto"` or a list. Default `"auto"`.
    pub workers: CpuSet,
    /// `hash` or `cpu`. Default `hash`.
    pub steer: Steer,
}

impl Default for CoresConfig {
    fn default() -> Self {
        CoresConfig {
            nic: Vec::new(),
            irq: CpuSet::Auto,
            workers: CpuSet::Auto,
            steer: Steer::Hash,
        }
    }
}

/// `[http]`: client-side HTTP/1.1 limits and timeouts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HttpConfig {
    /// Longest accepted request line; longer gets 414. Size; default `"8KiB"`.
    pub max_request_line: ByteSize,
    /// Largest accepted header block; larger gets 431. Size; default `"64KiB"`.
    pub max_header_bytes: ByteSize,
    /// Most header fields per request; more gets 431. Count; default 100.
    pub max_headers: u32,
    /// Largest request body accepted (passed-through methods); larger gets 413. Size;
    /// default `"64MiB"`.
    pub max_body: ByteSize,
    /// Time allowed to receive a complete request head; then 408 and close. Duration;
    /// default `"10s"`.
    pub header_timeout: Duration,
    /// A keep-alive connection with no request in flight is closed after this long. Duration;
    /// default `"60s"`.
    pub idle_timeout: Duration,
    /// Time to receive a whole request body, from the end of its head; then 408 and
    /// close. Duration; default `"120s"`.
    pub body_timeout: Duration,
    /// A plain HTTP/1.1 keep-alive connection waiting this long for its next request is
    /// parked: kept without a task until it speaks again. Duration; `"0s"` never parks;
    /// default `"1s"`.
    pub park_after: Duration,
    /// HTTP/2: how long a response stream may make no progress (a client that stopped
    /// reading) before it is reset and its buffers go back to the pool. Duration; default
    /// `"10s"`.
    pub send_timeout: Duration,
    /// Open client connections per worker core; beyond this new connections are closed at
    /// accept. Count; default 20000.
    pub max_connections_per_worker: u32,
    /// Open connections from one client address (all workers); beyond this new ones from
    /// it are closed at accept. Count; default 2048; 0 = no cap.
    pub max_connections_per_client: u32,
    /// File descriptors kept free of client connections (for the admin listener, health
    /// probes, origin connections): client connections are capped at the descriptor limit
    /// minus these and what the process holds at start. Count; default 256.
    pub reserved_fds: u32,
    /// HTTP/2: streams a client may have open at once (SETTINGS_MAX_CONCURRENT_STREAMS).
    /// Count; default 128.
    pub h2_max_concurrent_streams: u32,
    /// HTTP/2: our receive window per stream (request bodies). Size; default `"256KiB"`.
    pub h2_stream_window: ByteSize,
    /// HTTP/2: our receive window per connection. Size; default `"1MiB"`.
    pub h2_connection_window: ByteSize,
    /// HTTP/2: stream resets a client may send per second before GOAWAY
    /// (`ENHANCE_YOUR_CALM`, CVE-2023-44487). Count; default 100.
    pub h2_max_resets_per_second: u32,
    /// HTTP/2: response bytes buffered per stream for a slow reader. Size; default `"256KiB"`.
    pub h2_stream_buffer: ByteSize,
    /// HTTP/2: response bytes buffered per connection. Size; default `"1MiB"`.
    pub h2_connection_buffer: ByteSize,
    /// HTTP/3: response bytes the QUIC connections of one worker may hold unacknowledged
    /// between them; each new connection's send window is its share. Size; default
    /// `"64MiB"`.
    pub h3_send_budget: ByteSize,
    /// Proxies and balancers in front of reel: networks (`"10.0.0.0/8"`, `"2001:db8::/32"`)
    /// or addresses. From these peers the client of a request is the right-most address of
    /// `X-Forwarded-For` (or `Forwarded`) that is not in this list; only these may connect
    /// to a `proxy_protocol` listener. Default `[]` (no proxy: the peer is the client).
    pub trusted_proxies: Vec<String>,
}

impl Default for HttpConfig {
    fn default() -> Self {
        HttpConfig {
            max_request_line: ByteSize::kib(8),
            max_header_bytes: ByteSize::kib(64),
            max_headers: 100,
            max_body: ByteSize::mib(64),
            header_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            body_timeout: Duration::from_secs(120),
            park_after: Duration::from_secs(1),
            send_timeout: Duration::from_secs(10),
            max_connections_per_worker: 20_000,
            max_connections_per_client: 2048,
            reserved_fds: 256,
            h2_max_concurrent_streams: 128,
            h2_stream_window: ByteSize::kib(256),
            h2_connection_window: ByteSize::mib(1),
            h2_max_resets_per_second: 100,
            h2_stream_buffer: ByteSize::kib(256),
            h2_connection_buffer: ByteSize::mib(1),
            h3_send_budget: ByteSize::mib(64),
            trusted_proxies: Vec::new(),
        }
    }
}

/// `[health]`: the load balancer health endpoint served on the data listeners. It answers 503
/// when any `max_*` is exceeded and 200 again only once every value is below its `resume_*`
/// (hysteresis, so a node near a threshold does not flap).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HealthConfig {
    /// Request path of the endpoint. Must start with `/`. Default `"/healthz"`.
    pub path: String,
    /// Worker-core CPU use above which health fails. Percent (1-100); default 90.
    pub max_cpu_percent: u32,
    /// Worker-core CPU use below which health recovers. Percent; default 75.
    pub resume_cpu_percent: u32,
    /// Open client connections (all workers) above which health fails. Count; default 100000.
    pub max_connections: u64,
    /// Open client connections below which health recovers. Count; default 80000.
    pub resume_connections: u64,
    /// 99th percentile time to serve a cache hit above which health fails. Duration;
    /// default `"50ms"`.
    pub max_hit_p99: Duration,
    /// Hit p99 below which health recovers. Duration; default `"20ms"`.
    pub resume_hit_p99: Duration,
}

impl Default for HealthConfig {
    fn default() -> Self {
        HealthConfig {
            path: "/healthz".into(),
            max_cpu_percent: 90,
            resume_cpu_percent: 75,
            max_connections: 100_000,
            resume_connections: 80_000,
            max_hit_p99: Duration::from_millis(50),
            resume_hit_p99: Duration::from_millis(20),
        }
    }
}

/// `[admin]`: the admin listener (status, metrics, reload, purge).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AdminConfig {
    /// `ip:port` to bind. Must be a loopback address unless `allow_non_loopback`. Default
    /// `"127.0.0.1:9090"`.
    #[serde(deserialize_with = "addr::deserialize_bind")]
    pub address: SocketAddr,
    /// Allow binding the admin listener to a non-loopback address. Default `false`.
    pub allow_non_loopback: bool,
    /// Bearer token required on admin requests; empty = no token. Default `""`. Prefer
    /// `token_env` so the secret is not in the file.
    pub token: String,
    /// Name of an environment variable holding the token; empty = unused. Default `""`. At
    /// most one of `token` and `token_env` may be set.
    pub token_env: String,
    /// Serve a non-loopback admin address without a token, on purpose (behind a firewall
    /// that does the guarding): without it such a config is refused, and with it every
    /// start warns. Default `false`.
    pub insecure_no_token: bool,
}

impl Default for AdminConfig {
    fn default() -> Self {
        AdminConfig {
            address: v4(127, 0, 0, 1, 9090),
            allow_non_loopback: false,
            token: String::new(),
            token_env: String::new(),
            insecure_no_token: false,
        }
    }
}

impl AdminConfig {
    /// The bearer token to require: `token` if set, else the value of the `token_env`
    /// variable if that is set and non-empty, else `None` (no authentication).
    ///
    /// Callers should refuse to start when `token_env` is set but this returns `None`.
    pub fn resolved_token(&self) -> Option<String> {
        if !self.token.is_empty() {
            return Some(self.token.clone());
        }
        if self.token_env.is_empty() {
            return None;
        }
        std::env::var(&self.token_env).ok().filter(|t| !t.is_empty())
    }
}

/// Disk I/O engine of the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StoreIo {
    /// io_uring when the kernel supports it, else threads.
    #[default]
    Auto,
    /// io_uring; startup fails if unavailable.
    Uring,
    /// A blocking thread pool.
    Threads,
}

/// Which fetched objects the store takes (`store.admission`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StoreAdmission {
    /// Every storable response is stored when first fetched.
    #[default]
    Always,
    /// Stored the second time its key misses within `admission_window`; the first fetch is
    /// served (and shared by concurrent requests) but not kept.
    SecondHit,
}

/// `[store]`: the on-disk segment store, on one directory (`path`, `size`) or on several
/// disks (`[[store.disk]]` tables, and then neither `path` nor `size`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StoreConfig {
    /// Directory holding the volume files of a store on one disk; created if missing.
    /// Relative paths are relative to the working directory. Default `"/var/cache/reel"`.
    pub path: PathBuf,
    /// Total disk space for cached objects of a store on one disk. Size; default
    /// `"10GiB"`; at least 2 × `volume_size`.
    pub size: ByteSize,
    /// `[[store.disk]]`: the disks of a store on several disks. Keys are spread over them
    /// in proportion to their sizes; a disk that fails moves only its own share.
    pub disk: Vec<StoreDisk>,
    /// I/O errors on one disk that take it out of service (its objects are fetched again
    /// and stored on the other disks); 0 = never. Default 10.
    pub disk_error_limit: u64,
    /// Size of one volume file, the unit of eviction. Size; default `"256MiB"`; at least
    /// `"1MiB"`.
    pub volume_size: ByteSize,
    /// `auto`, `uring` or `threads`. Default `auto`.
    pub io: StoreIo,
    /// Bytes per second the background scrub reads stored objects back to verify their
    /// checksums; a corrupt one is removed and fetched again on its next request. Size
    /// per second; default `"4MiB"`; `"0"` = off.
    pub scrub_rate: ByteSize,
    /// `always` or `second-hit`. Default `always`.
    pub admission: StoreAdmission,
    /// With `second-hit`: how many distinct missed objects are remembered (at least this
    /// many, at most twice). Count; default 1 000 000; 1024 to 268 435 456.
    pub admission_window: u64,
    /// Memory for the keys and metadata of hot objects (the index itself keeps neither);
    /// a hit on any other object reads them from its record on disk. Size; default
    /// `"64MiB"`, shared out over the disks; `"0"` = none.
    pub record_cache: ByteSize,
}

/// One `[[store.disk]]` table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoreDisk {
    /// The disk's directory. It must exist: reel does not create it, so that a path
    /// inside the disk's mount point is missing, not filled on the root file system, when
    /// the disk is not mounted.
    pub path: PathBuf,
    /// Disk space for cached objects on it. Size; at least 2 × `volume_size`.
    pub size: ByteSize,
}

impl StoreConfig {
    /// The disks as `(key prefix for messages, path, size)`: the `[[store.disk]]` tables,
    /// or `[store] path` and `size` as the one disk.
    pub fn disks(&self) -> Vec<(String, &std::path::Path, ByteSize)> {
        if self.disk.is_empty() {
            return vec![("store".to_owned(), self.path.as_path(), self.size)];
        }
        self.disk
            .iter()
            .enumerate()
            .map(|(i, d)| (format!("store.disk[{i}]"), d.path.as_path(), d.size))
            .collect()
    }
}

impl Default for StoreConfig {
    fn default() -> Self {
        StoreConfig {
            path: "/var/cache/reel".into(),
            size: ByteSize::gib(10),
            disk: Vec::new(),
            disk_error_limit: 10,
            volume_size: ByteSize::mib(256),
            io: StoreIo::Auto,
            // Modest on purpose: about 2% of one hard disk's sequential bandwidth and well
            // under 1% of a core for the checksums, while still covering a 1 TiB store
            // about every 3 days, far more often than bit rot appears.
            scrub_rate: ByteSize::mib(4),
            admission: StoreAdmission::Always,
            admission_window: 1_000_000,
            record_cache: ByteSize::mib(64),
        }
    }
}

mod access;
mod access_log;
pub(crate) mod addr;
mod cache;
mod compress;
mod edits;
mod origin;
mod telemetry;
mod token;
pub use access::*;
pub use access_log::*;
pub use cache::*;
pub use compress::*;
pub use edits::*;
pub use origin::*;
pub use telemetry::*;
pub use token::*;

#[cfg(test)]
mod tests;
