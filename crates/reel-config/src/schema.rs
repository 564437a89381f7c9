//! The configuration schema: one struct per TOML section, with the defaults the server uses
//! when a key is absent. Field names are the TOML key names (the contract documented in
//! `docs/configuration.md`); every struct rejects unknown keys.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, SocketAddrV4};
use std::path::PathBuf;
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
}

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
            max_connections_per_worker: 20_000,
            max_connections_per_client: 2048,
            reserved_fds: 256,
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
    pub address: SocketAddr,
    /// Allow binding the admin listener to a non-loopback address. Default `false`.
    pub allow_non_loopback: bool,
    /// Bearer token required on admin requests; empty = no token. Default `""`. Prefer
    /// `token_env` so the secret is not in the file.
    pub token: String,
    /// Name of an environment variable holding the token; empty = unused. Default `""`. At
    /// most one of `token` and `token_env` may be set.
    pub token_env: String,
}

impl Default for AdminConfig {
    fn default() -> Self {
        AdminConfig {
            address: v4(127, 0, 0, 1, 9090),
            allow_non_loopback: false,
            token: String::new(),
            token_env: String::new(),
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

/// Line format of the access log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AccessLogFormat {
    /// One JSON object per request.
    #[default]
    Json,
    /// NCSA combined log format.
    Combined,
}

/// `[access_log]`: one line per client request, batched per worker.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AccessLogConfig {
    /// Write an access log at all. Default `true`.
    pub enabled: bool,
    /// File to append to; `"-"` = standard output. Relative paths are relative to the
    /// working directory. Default `"/var/log/reel/access.log"`.
    pub path: PathBuf,
    /// `json` or `combined`. Default `json`.
    pub format: AccessLogFormat,
    /// Per-worker buffer; a full buffer is handed to the writer thread. Size; default
    /// `"64KiB"`.
    pub buffer: ByteSize,
    /// A partly filled buffer is handed over at least this often. Duration; default `"1s"`.
    pub flush_interval: Duration,
}

impl AccessLogConfig {
    /// True when the log goes to standard output (`path = "-"`).
    pub fn is_stdout(&self) -> bool {
        self.path.as_os_str() == "-"
    }
}

impl Default for AccessLogConfig {
    fn default() -> Self {
        AccessLogConfig {
            enabled: true,
            path: "/var/log/reel/access.log".into(),
            format: AccessLogFormat::Json,
            buffer: ByteSize::kib(64),
            flush_interval: Duration::from_secs(1),
        }
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

/// `[store]`: the on-disk segment store.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StoreConfig {
    /// Directory holding the volume files; created if missing. Relative paths are relative
    /// to the working directory. Default `"/var/cache/reel"`.
    pub path: PathBuf,
    /// Total disk space for cached objects. Size; default `"10GiB"`; at least
    /// 2 × `volume_size`.
    pub size: ByteSize,
    /// Size of one volume file, the unit of eviction. Size; default `"256MiB"`; at least
    /// `"1MiB"`.
    pub volume_size: ByteSize,
    /// `auto`, `uring` or `threads`. Default `auto`.
    pub io: StoreIo,
}

impl Default for StoreConfig {
    fn default() -> Self {
        StoreConfig {
            path: "/var/cache/reel".into(),
            size: ByteSize::gib(10),
            volume_size: ByteSize::mib(256),
            io: StoreIo::Auto,
        }
    }
}

/// A path pattern for `[[cache.rule]]`: `*` matches any run of characters (including `/`
/// and the empty run); every other character matches itself. Matching is against the request
/// path without the query string and is case-sensitive. Examples: `"*.m3u8"`, `"/live/*"`,
/// `"/vod/*/init.mp4"`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct PathGlob(pub String);

impl PathGlob {
    /// True when `path` (no query string) matches the pattern.
    pub fn matches(&self, path: &str) -> bool {
        glob_match(self.0.as_bytes(), path.as_bytes())
    }

    /// The pattern text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Wildcard match with `*` only; linear-time greedy algorithm with single backtrack point,
/// which is exact for patterns whose only metacharacter is `*`.
fn glob_match(pat: &[u8], text: &[u8]) -> bool {
    let (mut p, mut t) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        if p < pat.len() && pat[p] == b'*' {
            star = Some((p, t));
            p += 1;
        } else if p < pat.len() && pat[p] == text[t] {
            p += 1;
            t += 1;
        } else if let Some((sp, st)) = star {
            p = sp + 1;
            t = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    pat[p..].iter().all(|&c| c == b'*')
}

/// `[[cache.rule]]`: a per-path freshness override; the first matching rule wins.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CacheRule {
    /// Path pattern (see [`PathGlob`]); must start with `/` or `*`. TOML key `match`. Required.
    #[serde(rename = "match")]
    pub pattern: PathGlob,
    /// Freshness lifetime given to matching responses. Duration; required; `"0s"` = stored
    /// but always stale (every request revalidates).
    pub ttl: Duration,
    /// `false`: `ttl` applies only when the origin gave no explicit freshness
    /// (Cache-Control max-age/s-maxage or Expires). `true`: `ttl` replaces the origin's
    /// freshness. TOML key `override`. Default `false`.
    #[serde(rename = "override", default)]
    pub override_origin: bool,
}

/// `[cache]`: RFC 9111 caching policy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CacheConfig {
    /// Use RFC 9111 §4.2.2 heuristic freshness (10% of the time since Last-Modified,
    /// capped by `heuristic_max`) for heuristically cacheable responses with no explicit
    /// freshness, as Squid and Traffic Server do. A site can switch it off. Default `true`.
    pub heuristic_freshness: bool,
    /// Upper bound of a heuristic freshness lifetime. Duration; default `"1h"`.
    pub heuristic_max: Duration,
    /// Freshness of 404/410 responses that carry no explicit freshness; `"0s"` = do not cache
    /// them. Duration; default `"10s"`.
    pub negative_ttl: Duration,
    /// Store responses that have neither ETag nor Last-Modified (they can only be refetched,
    /// never revalidated). Default `false`.
    pub store_without_validators: bool,
    /// Stale-while-revalidate window (RFC 5861 §3) applied when the origin sends none;
    /// `"0s"` = none. Duration; default `"0s"`.
    pub stale_while_revalidate_default: Duration,
    /// RFC 9213 targeted cache-control fields obeyed instead of `Cache-Control` and
    /// `Expires`, highest precedence first: the first one present with a valid value wins.
    /// Field names; default `["Reel-Cache-Control", "CDN-Cache-Control"]`; `[]` = obey
    /// `Cache-Control` only.
    pub targeted_cache_control: Vec<String>,
    /// How long a request waits for another request's origin fetch of the same object to
    /// get its response (coalescing) before it fetches on its own, uncached. Duration;
    /// default `"10s"` (the default `first_byte_timeout`); greater than 0.
    pub lock_timeout: Duration,
    /// Most `Vary` variants stored per URL. A response for a further variant is stored in
    /// place of the URL's oldest variant. Count, 1-1024; default 32.
    pub max_variants: u32,
    /// Request header fields never sent to the origin on fills (fetches whose response may
    /// be stored and served to everyone): fields that make origins or their frameworks
    /// answer for another host, path, scheme or method, so one viewer could poison the
    /// shared copy. Requests passed through uncached keep them. Field names,
    /// case-insensitive; default [`DEFAULT_FILL_DROP_HEADERS`]; `[]` = forward everything.
    pub fill_drop_headers: Vec<String>,
    /// Per-path overrides, tried in order. Default: none.
    pub rule: Vec<CacheRule>,
}

/// The default of `[cache] fill_drop_headers`: host, path, scheme and method override
/// fields known to be honoured by origin servers and web frameworks.
pub const DEFAULT_FILL_DROP_HEADERS: [&str; 17] = [
    "Forwarded",
    "X-Forwarded-Host",
    "X-Forwarded-Server",
    "X-Forwarded-Proto",
    "X-Forwarded-Scheme",
    "X-Forwarded-Port",
    "X-Forwarded-Prefix",
    "X-Forwarded-Uri",
    "X-Original-URL",
    "X-Original-URI",
    "X-Original-Host",
    "X-Rewrite-URL",
    "X-Host",
    "X-HTTP-Method-Override",
    "X-HTTP-Method",
    "X-Method-Override",
    "X-Envoy-Original-Path",
];

impl Default for CacheConfig {
    fn default() -> Self {
        CacheConfig {
            heuristic_freshness: true,
            heuristic_max: Duration::from_secs(3600),
            negative_ttl: Duration::from_secs(10),
            store_without_validators: false,
            stale_while_revalidate_default: Duration::ZERO,
            targeted_cache_control: vec![
                "Reel-Cache-Control".to_string(),
                "CDN-Cache-Control".to_string(),
            ],
            lock_timeout: Duration::from_secs(10),
            max_variants: 32,
            fill_drop_headers: DEFAULT_FILL_DROP_HEADERS.iter().map(|s| s.to_string()).collect(),
            rule: Vec::new(),
        }
    }
}

impl CacheConfig {
    /// The first rule whose pattern matches `path` (no query string).
    pub fn rule_for(&self, path: &str) -> Option<&CacheRule> {
        self.rule.iter().find(|r| r.pattern.matches(path))
    }
}

/// What to do with request methods other than GET and HEAD.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MethodsPolicy {
    /// Forward them to the origin uncached, extension methods included; TRACE and CONNECT
    /// are never forwarded.
    #[default]
    Pass,
    /// Answer 405 Method Not Allowed.
    Refuse,
}

/// `[[site]]`: a set of Host names served from one origin group.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SiteConfig {
    /// Host header values served: exact names (`"live.example.com"`, `"127.0.0.1"`,
    /// `"[::1]"`) or `"*.example.com"` (any name ending in `.example.com`, not
    /// `example.com` itself). Case-insensitive; the request's port is ignored, so entries
    /// carry no port. A bare `"*"` is not accepted. Required, non-empty.
    pub hosts: Vec<String>,
    /// Name of the `[[origin_group]]` that serves misses. Required.
    pub origin_group: String,
    /// Query parameters removed from the cache key (and kept on the origin request).
    /// Default `[]`.
    #[serde(default)]
    pub ignore_query: Vec<String>,
    /// Remove the whole query string from the cache key (tokenised segment URLs). Default
    /// `false`. Whenever the key leaves out parameters the origin is sent (this, or
    /// `ignore_query`), error answers (400 and above) are not stored: negative caching is
    /// off for such requests.
    #[serde(default)]
    pub drop_query: bool,
    /// `pass` or `refuse`. Default `pass`.
    #[serde(default)]
    pub methods: MethodsPolicy,
    /// Heuristic freshness for this site; unset = `[cache] heuristic_freshness`.
    #[serde(default)]
    pub heuristic_freshness: Option<bool>,
    /// Store responses that carry `Set-Cookie`. The `Set-Cookie` field itself is never
    /// stored, so no viewer ever receives another's cookie (not even the viewer whose
    /// request filled the cache). Default `false`: such responses pass uncached.
    #[serde(default)]
    pub store_set_cookie: bool,
    /// `honor`: request `Cache-Control` / `Pragma` (`no-cache`, `no-store`, `max-age`...)
    /// act as RFC 9111 §5.2.1 describes. `ignore`: they are ignored, as CDNs do for
    /// segments, so viewers cannot force origin fetches. Default `honor`.
    #[serde(default)]
    pub client_cache_control: ClientCacheControl,
}

/// How a site treats the cache directives of viewers' requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ClientCacheControl {
    /// RFC 9111 §5.2.1 request directives apply.
    #[default]
    Honor,
    /// Request directives are ignored.
    Ignore,
}

impl SiteConfig {
    /// True when the request `Host` value (optionally with `:port`) is one of `hosts`.
    pub fn matches_host(&self, host: &str) -> bool {
        let name = strip_port(host);
        self.hosts.iter().any(|p| host_pattern_matches(p, name))
    }
}

/// Removes a trailing `:port` from a Host header value, keeping IPv6 brackets.
pub fn strip_port(host: &str) -> &str {
    if host.starts_with('[') {
        return match host.find(']') {
            Some(end) => &host[..=end],
            None => host,
        };
    }
    match host.rsplit_once(':') {
        Some((name, port)) if port.bytes().all(|b| b.is_ascii_digit()) => name,
        _ => host,
    }
}

/// True when Host name `name` (no port) matches a `[[site]].hosts` entry.
pub fn host_pattern_matches(pattern: &str, name: &str) -> bool {
    let name = name.strip_suffix('.').unwrap_or(name);
    match pattern.strip_prefix("*.") {
        Some(domain) => {
            name.len() > domain.len() + 1
                && name.as_bytes()[name.len() - domain.len() - 1] == b'.'
                && name[name.len() - domain.len()..].eq_ignore_ascii_case(domain)
        }
        None => pattern.eq_ignore_ascii_case(name),
    }
}

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
        let (host, port) = text.rsplit_once(':').ok_or_else(|| bad("expected host:port"))?;
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
    /// Further attempts on another host after a connect failure or an error before the first
    /// byte. Count; default 1.
    #[serde(default = "default_retries")]
    pub retries: u32,
    /// `round_robin` or `rendezvous`. Default `round_robin`.
    #[serde(default)]
    pub balance: OriginBalance,
    /// PEM bundle of the certificate authorities trusted for the group's TLS tiers; empty =
    /// the system roots. Default `""`.
    #[serde(default)]
    pub ca_file: PathBuf,
    /// Accept any certificate from the group's TLS tiers (warned about in the log and on
    /// /status). Default `false`.
    #[serde(default)]
    pub insecure_skip_verify: bool,
    /// Offer HTTP/2 by ALPN to the group's TLS tiers. Default `false`.
    #[serde(default)]
    pub http2: bool,
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
            retries: default_retries(),
            balance: OriginBalance::default(),
            ca_file: PathBuf::new(),
            insecure_skip_verify: false,
            http2: false,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn glob_matching() {
        let cases: &[(&str, &str, bool)] = &[
            ("*.m3u8", "/live/index.m3u8", true),
            ("*.m3u8", "/live/index.m3u8x", false),
            ("/live/*", "/live/a/b.ts", true),
            ("/live/*", "/vod/a.ts", false),
            ("/vod/*/init.mp4", "/vod/x/y/init.mp4", true),
            ("/vod/*/init.mp4", "/vod/init.mp4", false),
            ("*seg*", "/a/seg1.ts", true),
            ("/exact.ts", "/exact.ts", true),
            ("/exact.ts", "/exact.tsx", false),
            ("*", "/anything", true),
            ("*a*b*c", "/xaybzc", true),
            ("*a*b*c", "/xaybzcd", false),
        ];
        for (pat, path, want) in cases {
            assert_eq!(PathGlob((*pat).into()).matches(path), *want, "{pat} vs {path}");
        }
    }

    #[test]
    fn host_patterns() {
        let site = SiteConfig {
            hosts: vec!["live.example.com".into(), "*.cdn.example.com".into(), "[::1]".into()],
            ..SiteConfig::default()
        };
        assert!(site.matches_host("live.example.com"));
        assert!(site.matches_host("LIVE.example.com:8080"));
        assert!(site.matches_host("a.cdn.example.com"));
        assert!(site.matches_host("a.b.cdn.example.com."));
        assert!(site.matches_host("[::1]:8080"));
        assert!(!site.matches_host("cdn.example.com"));
        assert!(!site.matches_host("xcdn.example.com"));
        assert!(!site.matches_host("example.com"));
        assert_eq!(strip_port("127.0.0.1:8080"), "127.0.0.1");
        assert_eq!(strip_port("localhost"), "localhost");
    }

    #[test]
    fn host_port_parsing() {
        let hp: HostPort = "10.0.0.1:80".parse().expect("v4");
        assert_eq!(hp.socket_addr(), Some("10.0.0.1:80".parse().expect("addr")));
        let hp: HostPort = "[2001:db8::1]:8080".parse().expect("v6");
        assert_eq!((hp.host.as_str(), hp.port), ("2001:db8::1", 8080));
        assert_eq!(hp.to_string(), "[2001:db8::1]:8080");
        let hp: HostPort = "origin-1.example.com:80".parse().expect("name");
        assert_eq!(hp.socket_addr(), None);
        for bad in ["10.0.0.1", "10.0.0.1:0", "x:99999", "2001:db8::1:80", "bad_name:80", ":80"] {
            assert!(bad.parse::<HostPort>().is_err(), "{bad}");
        }
    }

    #[test]
    fn cpu_set_serde() {
        #[derive(Deserialize, Serialize)]
        struct W {
            c: CpuSet,
        }
        let w: W = toml::from_str("c = \"auto\"").expect("auto");
        assert_eq!(w.c, CpuSet::Auto);
        let w: W = toml::from_str("c = [1, 3]").expect("list");
        assert_eq!(w.c, CpuSet::List(vec![1, 3]));
        assert_eq!(toml::to_string(&w).expect("ser").trim(), "c = [1, 3]");
        let e = toml::from_str::<W>("c = \"all\"").err().map(|e| e.message().to_owned());
        assert!(e.is_some_and(|m| m.contains("expected \"auto\"")));
    }
}
