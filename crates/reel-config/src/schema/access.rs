//! `[geo]`, and the viewer access rules of a site: `[site.access]` (addresses and
//! countries) and `[site.limits]` (request rate).

use super::*;

/// `[geo]`: where the countries of client addresses come from.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GeoConfig {
    /// A MaxMind DB file (GeoLite2 / GeoIP2 Country or City) giving the country of an
    /// address; read again when the file changes (checked once a second) and at every
    /// reload. Default: none (country rules cannot be used).
    pub database: PathBuf,
}

impl GeoConfig {
    /// The database file, if one is configured.
    pub fn database(&self) -> Option<&Path> {
        (!self.database.as_os_str().is_empty()).then_some(self.database.as_path())
    }
}

fn default_geo_status() -> u16 {
    403
}

/// `[site.access]`: which clients a site serves, by address and by country. A refused
/// request never reaches the cache or the origin.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SiteAccessConfig {
    /// CIDRs (`"192.0.2.0/24"`, `"2001:db8::/32"`) or addresses served; when not empty,
    /// every other address is refused (403). Default `[]`.
    pub allow: Vec<String>,
    /// CIDRs or addresses refused (403), whatever `allow` says. Default `[]`.
    pub deny: Vec<String>,
    /// ISO 3166-1 alpha-2 codes (`"DE"`) served; when not empty, other countries and
    /// addresses of no known country are refused. Needs `[geo] database`. Default `[]`.
    pub allow_countries: Vec<String>,
    /// Countries refused. Needs `[geo] database`. Default `[]`.
    pub deny_countries: Vec<String>,
    /// The status of a refusal by country: 403, or 451 (RFC 7725). Default 403.
    pub geo_status: u16,
}

impl Default for SiteAccessConfig {
    fn default() -> Self {
        SiteAccessConfig {
            allow: Vec::new(),
            deny: Vec::new(),
            allow_countries: Vec::new(),
            deny_countries: Vec::new(),
            geo_status: default_geo_status(),
        }
    }
}

impl SiteAccessConfig {
    /// Whether a country rule is set.
    pub fn has_country_rules(&self) -> bool {
        !self.allow_countries.is_empty() || !self.deny_countries.is_empty()
    }
}

fn default_max_clients() -> u32 {
    100_000
}

/// `[site.limits]`: the request rate one client may use (its address, an IPv6 client by
/// its /64, or its token's identity), counted across all workers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SiteLimitsConfig {
    /// Requests per second a client may sustain; beyond it, 429 with `Retry-After`.
    /// A positive number; `0` = no limit. Default `0`.
    pub rate: f64,
    /// Requests a client may make at once after being idle. `0` = one second's worth
    /// (`rate` rounded up). Default `0`.
    pub burst: u32,
    /// Most clients tracked at once; a new client beyond it takes the place of the oldest.
    /// Default 100000.
    pub max_clients: u32,
}

impl Default for SiteLimitsConfig {
    fn default() -> Self {
        SiteLimitsConfig { rate: 0.0, burst: 0, max_clients: default_max_clients() }
    }
}

impl SiteLimitsConfig {
    /// Whether a rate limit is set.
    pub fn enabled(&self) -> bool {
        self.rate > 0.0
    }

    /// The burst in force: `burst`, or one second of `rate` rounded up (at least 1).
    pub fn effective_burst(&self) -> u32 {
        if self.burst > 0 { self.burst } else { (self.rate.ceil() as u32).max(1) }
    }
}
