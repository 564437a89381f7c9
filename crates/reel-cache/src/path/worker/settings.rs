//! Routing and policy settings of one config generation: which Host is served from which
//! origin group, how its keys are built, and the freshness knobs.
//!
//! reel is never an open proxy: a Host that no site names is refused (unless a site is the
//! catch-all, `hosts = ["*"]`, whose origin group then serves it), and the origin is always
//! chosen from the config, never from the request.

use std::sync::Arc;
use std::time::Duration;

pub use reel_config::{InvalidateOn, Prefetch, Propagate};

use super::encoded::Compress;
use super::hops::Node;
use crate::key::KeyConfig;
use crate::path::answer::cmsd::Cmsd;
use crate::path::answer::edits::ResponseEdits;
use crate::policy::freshness::PolicyConfig;
use crate::policy::rules::TtlRules;

/// One served site.
#[derive(Debug, Clone)]
pub struct Site {
    /// Host patterns (exact names or `*.domain`); empty for the catch-all of `--origin`.
    pub hosts: Vec<String>,
    /// The origin group that serves it.
    pub group: String,
    /// Cache-key options.
    pub key: KeyConfig,
    /// Whether methods other than GET/HEAD pass through to the origin (else 405).
    pub pass_methods: bool,
    /// Which passed-through methods invalidate the URL they target (`invalidate_on`).
    pub invalidate_on: InvalidateOn,
    /// Freshness and storability knobs of this site (the `[cache]` ones with the site's
    /// overrides).
    pub policy: PolicyConfig,
    /// Whether viewers' request cache directives apply (`client_cache_control = "honor"`).
    pub honor_client_cache_control: bool,
    /// LL-HLS prefetch of hinted and listed parts (`prefetch`).
    pub prefetch: Prefetch,
    /// Whether the viewer's CMCD goes on to the origin (`forward_cmcd`); otherwise the
    /// `CMCD=` parameter and the `CMCD-*` fields are left out of every origin request.
    pub forward_cmcd: bool,
    /// Whether a CMCD `nor` (the next object the player will ask for) is warmed into the
    /// cache on a miss (`prefetch_next`).
    pub prefetch_next: bool,
    /// Slice caching (`slice`, `read_ahead`).
    pub slicing: Slicing,
    /// Signed viewer tokens (`[site.token]`); `None`: anyone may fetch.
    pub token: Option<Arc<SiteToken>>,
    /// Viewer access rules (`[site.access]`, `[site.limits]`); `None`: the site has none,
    /// and its requests pay one branch for them.
    pub access: Option<Arc<reel_access::SiteAccess>>,
    /// The fields its responses leave with besides the stored ones (`[site.cors]`,
    /// `[[site.header]]`); `None`: none, and nothing to pay.
    pub edits: Option<Arc<ResponseEdits>>,
    /// Compressed representations of text responses (`[site.compress]`); `None`: off.
    pub compress: Option<Compress>,
    /// The CTA-5006 fields its responses carry (`[site.cmsd]`); `None`: off, one branch.
    pub cmsd: Option<Arc<Cmsd>>,
    /// The site's id in the per-site metrics (the `site` label), carried in the response's
    /// tag; 0: counted under no site.
    pub metrics_id: u16,
}

/// A site's `[site.token]`: how its viewers' tokens are found, verified and passed on.
#[derive(Debug)]
pub struct SiteToken {
    /// The query parameter and cookie that carry the token (`param`).
    pub param: String,
    /// The site's keys, salt, leeway and URL escaping.
    pub verifier: reel_access::token::Verifier,
    /// How the token follows the player (`propagate`).
    pub propagate: Propagate,
    /// Local ports of the TLS listeners: a cookie set on them is `Secure`.
    pub tls_ports: Vec<u16>,
}

impl SiteToken {
    /// From a validated `[site.token]` (the keys of `keys_env` read now; an unreadable
    /// variable leaves the listed keys) and the local ports of the TLS listeners.
    pub fn new(t: &reel_config::TokenConfig, tls_ports: Vec<u16>) -> SiteToken {
        let texts = t.key_texts().unwrap_or_else(|e| {
            tracing::warn!(error = %e, "token keys_env unreadable; only the listed keys verify");
            t.keys.clone()
        });
        let keys: Vec<Vec<u8>> =
            texts.iter().filter_map(|k| reel_access::token::parse_hex_key(k).ok()).collect();
        let leeway = t.leeway.get().as_secs();
        let verifier =
            reel_access::token::Verifier::new(&keys, t.salt.as_deref(), leeway, t.escape_early);
        SiteToken { param: t.param.clone(), verifier, propagate: t.propagate, tls_ports }
    }
}

/// A site's slice caching: objects answered from fixed-size slices fetched by `Range`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slicing {
    /// The slice size in bytes; `None` stores objects whole.
    pub size: Option<u64>,
    /// Slices fetched ahead of a sequential viewer (and the most read-ahead fetches one
    /// connection has in flight); 0 = none.
    pub read_ahead: u32,
}

impl Default for Slicing {
    /// Off, with the default read-ahead depth for when it is turned on.
    fn default() -> Self {
        Slicing { size: None, read_ahead: 2 }
    }
}

/// Everything the cache path reads from the config (the binary builds it from `[cache]`,
/// `[[site]]` and `--origin`).
#[derive(Debug, Clone)]
pub struct Settings {
    /// Sites in config order.
    pub sites: Vec<Site>,
    /// The `--origin` catch-all, consulted when no site matches.
    pub fallback: Option<Site>,
    /// Freshness and storability knobs.
    pub policy: PolicyConfig,
    /// Per-path TTL rules, first match wins.
    pub rules: TtlRules,
    /// `stale-while-revalidate` assumed when the origin gives none (zero: none).
    pub swr_default: Duration,
    /// Request fields never sent on fills (`[cache] fill_drop_headers`), lowercase.
    pub fill_drop_headers: Vec<String>,
    /// Most Vary variants stored per URL (`[cache] max_variants`).
    pub max_variants: usize,
    /// How long a follower waits for its leader's origin response (`[cache] lock_timeout`).
    pub lock_timeout: Duration,
    /// Requests of one client connection waiting on the origin at once (`[cache]
    /// max_misses_per_connection`).
    pub max_misses_per_connection: usize,
    /// Most read-ahead slice fetches in flight per worker (`[cache] read_ahead_per_worker`).
    pub read_ahead_per_worker: usize,
    /// Bytes of compressed representations kept, all workers together (`[cache]
    /// compressed_memory`).
    pub compressed_memory: usize,
    /// Longest a fill may take from its origin request to the end of its body.
    pub fill_timeout: Duration,
    /// How long an LL-HLS blocking request waits, leader and followers alike (`[cache]
    /// blocking_timeout`).
    pub blocking_timeout: Duration,
    /// This node's `CDN-Loop` and `Cache-Status` names (`[server] cdn_id`, `max_hops`,
    /// `cache_status_name`).
    pub node: Node,
    /// Which fetched objects are stored (`[store] admission`).
    pub admission: reel_store::AdmissionPolicy,
}

impl Settings {
    /// The default of `[cache] fill_drop_headers`, lowercase.
    pub fn default_fill_drop_headers() -> Vec<String> {
        lowercase(&reel_config::DEFAULT_FILL_DROP_HEADERS)
    }

    /// The site serving `host` (port ignored): exact names win over wildcards, wildcards
    /// over the catch-all site (`hosts = ["*"]`), and that over the `--origin` fallback.
    pub fn site_for(&self, host: &str) -> Option<&Site> {
        let name = reel_config::strip_port(host);
        let exact = self.sites.iter().find(|s| {
            s.hosts
                .iter()
                .any(|p| !p.starts_with('*') && reel_config::host_pattern_matches(p, name))
        });
        let wildcard = || {
            self.sites
                .iter()
                .filter_map(|s| {
                    s.hosts
                        .iter()
                        .filter(|p| {
                            p.starts_with("*.") && reel_config::host_pattern_matches(p, name)
                        })
                        .map(|p| p.len())
                        .max()
                        .map(|l| (l, s))
                })
                .max_by_key(|(l, _)| *l)
                .map(|(_, s)| s)
        };
        // Only for a Host no name or wildcard claims (before: 421), so a served Host pays
        // nothing for it.
        let catch_all = || self.sites.iter().find(|s| s.hosts.iter().any(|p| p == "*"));
        exact.or_else(wildcard).or_else(catch_all).or(self.fallback.as_ref())
    }
}

#[cfg(test)]
impl Settings {
    /// The config defaults with `sites`, for unit tests.
    pub(crate) fn for_tests(sites: Vec<Site>) -> Settings {
        Settings {
            sites,
            fallback: None,
            policy: PolicyConfig::default(),
            rules: TtlRules::default(),
            swr_default: Duration::ZERO,
            fill_drop_headers: Settings::default_fill_drop_headers(),
            max_variants: 32,
            lock_timeout: Duration::from_secs(10),
            max_misses_per_connection: 32,
            read_ahead_per_worker: 64,
            compressed_memory: 32 << 20,
            fill_timeout: Duration::from_secs(600),
            blocking_timeout: Duration::from_secs(3),
            node: Node::default(),
            admission: reel_store::AdmissionPolicy::Always,
        }
    }
}

fn lowercase<S: AsRef<str>>(names: &[S]) -> Vec<String> {
    names.iter().map(|n| n.as_ref().to_ascii_lowercase()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn site(hosts: &[&str], group: &str) -> Site {
        Site {
            hosts: hosts.iter().map(|h| h.to_string()).collect(),
            group: group.into(),
            key: KeyConfig::default(),
            pass_methods: true,
            invalidate_on: InvalidateOn::Standard,
            policy: PolicyConfig::default(),
            honor_client_cache_control: true,
            slicing: Slicing::default(),
            prefetch: Prefetch::Off,
            forward_cmcd: false,
            prefetch_next: false,
            token: None,
            access: None,
            edits: None,
            compress: None,
            cmsd: None,
            metrics_id: 0,
        }
    }

    #[test]
    fn hosts_route_to_sites_and_unknown_hosts_are_refused() {
        let mut s = Settings::for_tests(vec![
            site(&["live.example.com", "*.example.com"], "a"),
            site(&["*.cdn.example.com"], "b"),
        ]);
        assert_eq!(s.site_for("live.example.com:8080").unwrap().group, "a");
        assert_eq!(s.site_for("x.example.com").unwrap().group, "a");
        assert_eq!(s.site_for("v.cdn.example.com").unwrap().group, "b", "longest wildcard wins");
        assert!(s.site_for("evil.com").is_none());
        assert!(s.site_for("example.com").is_none());
        s.fallback = Some(site(&[], "--origin"));
        assert_eq!(s.site_for("evil.com").unwrap().group, "--origin");
        assert_eq!(s.site_for("live.example.com").unwrap().group, "a");
    }

    #[test]
    fn the_catch_all_site_takes_only_what_no_name_or_wildcard_claims() {
        let mut s = Settings::for_tests(vec![
            site(&["*"], "any"),
            site(&["live.example.com"], "a"),
            site(&["*.cdn.example.com"], "b"),
        ]);
        assert_eq!(s.site_for("live.example.com").unwrap().group, "a", "exact over catch-all");
        assert_eq!(s.site_for("v.cdn.example.com").unwrap().group, "b", "wildcard over it");
        assert_eq!(s.site_for("evil.com:8080").unwrap().group, "any");
        assert_eq!(s.site_for("[::1]").unwrap().group, "any");
        s.fallback = Some(site(&[], "--origin"));
        assert_eq!(s.site_for("evil.com").unwrap().group, "any", "the config's over the flag's");
    }
}
