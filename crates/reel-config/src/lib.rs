//! TOML configuration schema, parsing and validation for reel.
//!
//! This crate owns the configuration file format: the section structs ([`Config`] and the
//! `*Config` types), the unit newtypes ([`Duration`], [`ByteSize`]), parsing with exact
//! `file:line:column: key: message` reports ([`ConfigProblem`]), semantic validation that
//! reports every problem at once ([`Config::validate`]), the content hash shown on /status
//! ([`Config::hash`]), the effective configuration as TOML with secrets redacted
//! ([`Config::to_effective_toml`]) and which keys a live reload applies ([`RELOAD_KEYS`],
//! [`Config::diff_needs_restart`]). It depends on no other reel crate: the binary converts
//! these types into each crate's own options.
//!
//! ```
//! let cfg = reel_config::Config::parse_and_validate(
//!     "[[listener]]\nname = \"http\"\naddress = \"127.0.0.1:8080\"\n",
//!     "inline.toml",
//! )?;
//! assert_eq!(cfg.listener[0].address.port(), 8080);
//! # Ok::<(), reel_config::ConfigErrors>(())
//! ```
#![forbid(unsafe_code)]

mod cidr;
mod effective;
mod error;
mod reload;
mod schema;
mod spans;
mod units;
mod validate;

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

pub use cidr::parse_cidr;
pub use effective::{PrintError, REDACTED, is_secret_key};
pub use error::{ConfigErrors, ConfigProblem};
pub use reload::{RELOAD_KEYS, Reload, ReloadKey, reload_of};
pub use schema::{
    ACCESS_LOG_FIELDS, AccessLogConfig, AccessLogFormat, AccessLogSample, AccessLogSink,
    AdminConfig, AllowOrigins, CacheConfig, CacheRule, CertificateConfig, ClientCacheControl,
    CmsdConfig, Coding, CollectorUrl, CompressConfig, CoresConfig, CorsConfig, CpuSet,
    DEFAULT_ALT_SVC_MAX_AGE, DEFAULT_COMPRESS_TYPES, DEFAULT_CORS_ALLOW_HEADERS,
    DEFAULT_CORS_EXPOSE_HEADERS, DEFAULT_FILL_DROP_HEADERS, DemoOriginConfig, EnvValue, GeoConfig,
    HeaderAction, HeaderRuleConfig, HealthConfig, HostPort, HttpConfig, InvalidateOn, Ktls,
    ListenerConfig, LogConfig, LogFormat, MethodsPolicy, OriginAuth, OriginBalance,
    OriginGroupConfig, OriginHealthConfig, PathGlob, Prefetch, Propagate, QuicRetry,
    SYSLOG_FACILITIES, ServerConfig, SinkKind, SiteAccessConfig, SiteConfig, SiteKeyConfig,
    SiteLimitsConfig, SliceSize, Steer, StoreAdmission, StoreConfig, StoreIo, SyslogAddress,
    TierConfig, TlsCert, TlsVersion, TokenConfig, TokenFormat, env_value, host_pattern_matches,
    parse_collector_url, parse_syslog_address, strip_port,
};
pub use units::{ByteSize, Duration, UnitError};

/// Where a [`Config`] came from: file name, content hash, and the position of every key.
#[derive(Debug, Default)]
struct Source {
    file: String,
    hash: String,
    positions: HashMap<String, (usize, usize)>,
}

/// The whole configuration file. Every section is optional in the file and takes the
/// defaults documented on its type, except that at least one `[[listener]]` is required.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// `[server]`.
    pub server: ServerConfig,
    /// `[log]`.
    pub log: LogConfig,
    /// `[[listener]]`: data listeners, at least one.
    pub listener: Vec<ListenerConfig>,
    /// `[cores]`.
    pub cores: CoresConfig,
    /// `[http]`.
    pub http: HttpConfig,
    /// `[health]`.
    pub health: HealthConfig,
    /// `[admin]`.
    pub admin: AdminConfig,
    /// `[access_log]`.
    pub access_log: AccessLogConfig,
    /// `[store]`.
    pub store: StoreConfig,
    /// `[cache]` and `[[cache.rule]]`.
    pub cache: CacheConfig,
    /// `[[site]]`: virtual hosts.
    pub site: Vec<SiteConfig>,
    /// `[[origin_group]]`.
    pub origin_group: Vec<OriginGroupConfig>,
    /// `[demo_origin]`.
    pub demo_origin: DemoOriginConfig,
    /// `[geo]`.
    pub geo: GeoConfig,
    /// `[[certificate]]`: certificates chosen by SNI on the TLS listeners.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub certificate: Vec<CertificateConfig>,
    #[serde(skip)]
    source: Arc<Source>,
}

/// The stable content hash used by [`Config::hash`]: xxh3-64 of the bytes, 16 lowercase hex
/// digits.
pub fn content_hash(text: &str) -> String {
    format!("{:016x}", xxhash_rust::xxh3::xxh3_64(text.as_bytes()))
}

impl Config {
    /// Parses TOML `text`; `file_name` is only used in problem reports. Fails on syntax
    /// errors, unknown keys, wrong types and malformed values (durations, sizes, addresses),
    /// reporting as many of them as possible. Does not run [`Config::validate`].
    pub fn parse(text: &str, file_name: &str) -> Result<Config, ConfigErrors> {
        let parsed = spans::deserialize_reporting_all::<Config>(text, file_name)
            .map_err(|problems| ConfigErrors { problems })?;
        let mut config = parsed.value;
        config.source = Arc::new(Source {
            file: file_name.to_owned(),
            hash: content_hash(text),
            positions: parsed.positions,
        });
        Ok(config)
    }

    /// [`Config::parse`] then [`Config::validate`]; fails with every problem found.
    pub fn parse_and_validate(text: &str, file_name: &str) -> Result<Config, ConfigErrors> {
        let config = Config::parse(text, file_name)?;
        let problems = config.validate();
        if problems.is_empty() { Ok(config) } else { Err(ConfigErrors { problems }) }
    }

    /// Reads and parses the file at `path` (see [`Config::parse`]); problems name the file
    /// as `path` was written.
    pub fn load(path: impl AsRef<Path>) -> Result<Config, ConfigErrors> {
        let path = path.as_ref();
        let file = path.display().to_string();
        match std::fs::read_to_string(path) {
            Ok(text) => Config::parse(&text, &file),
            Err(e) => Err(ConfigErrors {
                problems: vec![ConfigProblem {
                    file,
                    line: 0,
                    column: 0,
                    key: String::new(),
                    message: format!("cannot read configuration file: {e}"),
                }],
            }),
        }
    }

    /// The file name this configuration was parsed from; empty for [`Config::default`].
    pub fn file_name(&self) -> &str {
        &self.source.file
    }

    /// Stable hash of the file contents (see [`content_hash`]) for /status, so operators
    /// can tell which file a running server loaded. For a [`Config`] not parsed from text it
    /// is the hash of the empty string.
    pub fn hash(&self) -> String {
        if self.source.hash.is_empty() { content_hash("") } else { self.source.hash.clone() }
    }

    /// Checks cross-field rules and value ranges and returns every problem found (empty =
    /// valid). Each problem points at the offending key in the file, or at the nearest
    /// enclosing table present when the key itself was left at its default.
    pub fn validate(&self) -> Vec<ConfigProblem> {
        let mut found = Vec::new();
        validate::check(self, &mut found);
        let mut problems: Vec<ConfigProblem> = found
            .into_iter()
            .map(|(key, message)| {
                let (line, column) = self.locate(&key);
                ConfigProblem { file: self.source.file.clone(), line, column, key, message }
            })
            .collect();
        problems.sort_by(|a, b| (a.line, a.column, &a.key).cmp(&(b.line, b.column, &b.key)));
        problems
    }

    /// Keys that are valid but do nothing where they stand (`alt_svc_max_age` on a
    /// listener without HTTP/3), located like the problems of [`Config::validate`]: what
    /// `reel check` prints as warnings and `serve` and reloads log.
    pub fn warnings(&self) -> Vec<ConfigProblem> {
        let mut found = Vec::new();
        validate::warnings(self, &mut found);
        found.into_iter().map(|(key, message)| self.problem(&key, message)).collect()
    }

    /// Keys whose values differ between `self` (running) and `new` (reloaded) but can only
    /// take effect after a restart ([`Reload::Restart`] in [`RELOAD_KEYS`]), as key paths
    /// (`store.size`, `cores.workers`). Empty = the reload applies fully.
    pub fn diff_needs_restart(&self, new: &Config) -> Vec<String> {
        reload::needs_restart(self, new)
    }

    /// `self` (a reloaded file) with the restart keys of [`RELOAD_KEYS`] set back to their
    /// values in `running`, so what runs stays coherent until the next start. Its
    /// [`Config::hash`] and key positions stay those of `self`.
    pub fn keeping_restart_keys(&self, running: &Config) -> Config {
        reload::keeping_restart_keys(self, running)
    }

    /// A problem about `key` (a key path such as `demo_origin.enabled`) located in the file
    /// like those of [`Config::validate`]: for checks the binary makes beyond the file's
    /// own rules.
    pub fn problem(&self, key: &str, message: impl Into<String>) -> ConfigProblem {
        let (line, column) = self.locate(key);
        ConfigProblem {
            file: self.source.file.clone(),
            line,
            column,
            key: key.to_owned(),
            message: message.into(),
        }
    }

    /// The site serving request Host `host` (with or without `:port`): an exact entry of any
    /// site first, else the wildcard entry with the longest domain, else the catch-all
    /// (`"*"`). Returns the site's index in [`Config::site`] and the site.
    pub fn site_for_host(&self, host: &str) -> Option<(usize, &SiteConfig)> {
        let name = strip_port(host);
        let name = name.strip_suffix('.').unwrap_or(name);
        let exact = self.site.iter().enumerate().find(|(_, s)| {
            s.hosts.iter().any(|p| !p.starts_with('*') && p.eq_ignore_ascii_case(name))
        });
        if exact.is_some() {
            return exact;
        }
        self.site
            .iter()
            .enumerate()
            .flat_map(|(i, s)| s.hosts.iter().map(move |p| (i, s, p)))
            .filter(|(_, _, p)| p.starts_with("*.") && host_pattern_matches(p, name))
            .max_by_key(|(i, _, p)| (p.len(), std::cmp::Reverse(*i)))
            .map(|(i, s, _)| (i, s))
            .or_else(|| {
                self.site.iter().enumerate().find(|(_, s)| s.hosts.iter().any(|p| p == "*"))
            })
    }

    /// Position of `key`, else of its nearest ancestor present in the file, else 1:1.
    fn locate(&self, key: &str) -> (usize, usize) {
        let mut k = key;
        loop {
            if let Some(&pos) = self.source.positions.get(k) {
                return pos;
            }
            let cut = if k.ends_with(']') { k.rfind('[') } else { k.rfind('.') };
            match cut {
                Some(i) => k = &k[..i],
                None => return (1, 1),
            }
        }
    }
}

/// Reads, parses and validates the file at `path`, returning every problem found.
pub fn load_and_validate(path: impl AsRef<Path>) -> Result<Config, ConfigErrors> {
    let config = Config::load(path)?;
    let problems = config.validate();
    if problems.is_empty() { Ok(config) } else { Err(ConfigErrors { problems }) }
}
