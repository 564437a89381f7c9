//! Routing and policy settings of one config generation: which Host is served from which
//! origin group, how its keys are built, and the freshness knobs.
//!
//! reel is never an open proxy: a Host that no site names is refused, and the origin is
//! always chosen from the config, never from the request.

use std::time::Duration;

use super::hops::Node;
use crate::key::KeyConfig;
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
    /// Freshness and storability knobs of this site (the `[cache]` ones with the site's
    /// overrides).
    pub policy: PolicyConfig,
    /// Whether viewers' request cache directives apply (`client_cache_control = "honor"`).
    pub honor_client_cache_control: bool,
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
    /// This node's `CDN-Loop` and `Cache-Status` names (`[server] cdn_id`, `max_hops`,
    /// `cache_status_name`).
    pub node: Node,
}

impl Settings {
    /// The default of `[cache] fill_drop_headers`, lowercase.
    pub fn default_fill_drop_headers() -> Vec<String> {
        lowercase(&reel_config::DEFAULT_FILL_DROP_HEADERS)
    }

    /// The site serving `host` (port ignored; exact names win over wildcards).
    pub fn site_for(&self, host: &str) -> Option<&Site> {
        let name = reel_config::strip_port(host);
        let exact = self.sites.iter().find(|s| {
            s.hosts
                .iter()
                .any(|p| !p.starts_with("*.") && reel_config::host_pattern_matches(p, name))
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
        exact.or_else(wildcard).or(self.fallback.as_ref())
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
            policy: PolicyConfig::default(),
            honor_client_cache_control: true,
        }
    }

    #[test]
    fn hosts_route_to_sites_and_unknown_hosts_are_refused() {
        let mut s = Settings {
            sites: vec![
                site(&["live.example.com", "*.example.com"], "a"),
                site(&["*.cdn.example.com"], "b"),
            ],
            fallback: None,
            policy: PolicyConfig::default(),
            rules: TtlRules::default(),
            swr_default: Duration::ZERO,
            fill_drop_headers: Settings::default_fill_drop_headers(),
            max_variants: 32,
            lock_timeout: Duration::from_secs(10),
            node: Node::default(),
        };
        assert_eq!(s.site_for("live.example.com:8080").unwrap().group, "a");
        assert_eq!(s.site_for("x.example.com").unwrap().group, "a");
        assert_eq!(s.site_for("v.cdn.example.com").unwrap().group, "b", "longest wildcard wins");
        assert!(s.site_for("evil.com").is_none());
        assert!(s.site_for("example.com").is_none());
        s.fallback = Some(site(&[], "--origin"));
        assert_eq!(s.site_for("evil.com").unwrap().group, "--origin");
        assert_eq!(s.site_for("live.example.com").unwrap().group, "a");
    }
}
