//! Routing and policy settings of one config generation: which Host is served from which
//! origin group, how its keys are built, and the freshness knobs.
//!
//! reel is never an open proxy: a Host that no site names is refused, and the origin is
//! always chosen from the config, never from the request.

use std::time::Duration;

use reel_config::{ClientCacheControl, Config, MethodsPolicy};

use crate::key::KeyConfig;
use crate::policy::freshness::PolicyConfig;
use crate::policy::rules::{TtlRule, TtlRules};

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

/// Everything the cache path reads from the config.
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
}

impl Settings {
    /// Builds the settings of a config; `flag_group` is the group `--origin` created.
    pub fn from_config(cfg: &Config, flag_group: Option<&str>) -> Settings {
        let c = &cfg.cache;
        let policy = PolicyConfig {
            heuristic: c.heuristic_freshness,
            heuristic_max: c.heuristic_max.get(),
            store_without_validators: c.store_without_validators,
            negative_ttl: (!c.negative_ttl.get().is_zero()).then(|| c.negative_ttl.get()),
            targeted: c.targeted_cache_control.iter().map(|n| n.to_ascii_lowercase()).collect(),
            store_set_cookie: false,
        };
        let sites = cfg
            .site
            .iter()
            .map(|s| Site {
                hosts: s.hosts.clone(),
                group: s.origin_group.clone(),
                key: KeyConfig { ignore_query: s.ignore_query.clone(), drop_query: s.drop_query },
                pass_methods: s.methods == MethodsPolicy::Pass,
                policy: PolicyConfig {
                    heuristic: s.heuristic_freshness.unwrap_or(policy.heuristic),
                    store_set_cookie: s.store_set_cookie,
                    ..policy.clone()
                },
                honor_client_cache_control: s.client_cache_control == ClientCacheControl::Honor,
            })
            .collect();
        let fallback = flag_group.map(|g| Site {
            hosts: Vec::new(),
            group: g.to_string(),
            key: KeyConfig::default(),
            pass_methods: true,
            policy: policy.clone(),
            honor_client_cache_control: true,
        });
        let rules = TtlRules::new(c.rule.iter().map(|r| {
            (
                r.pattern.as_str().to_string(),
                TtlRule { ttl: r.ttl.get(), override_origin: r.override_origin },
            )
        }));
        Settings {
            sites,
            fallback,
            policy,
            rules,
            swr_default: c.stale_while_revalidate_default.get(),
            fill_drop_headers: lowercase(&c.fill_drop_headers),
            max_variants: c.max_variants as usize,
            lock_timeout: c.lock_timeout.get(),
        }
    }

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

    const CFG: &str = r#"
[[listener]]
name = "http"
address = "127.0.0.1:8080"
[[site]]
hosts = ["live.example.com", "*.example.com"]
origin_group = "a"
ignore_query = ["token"]
[[site]]
hosts = ["*.cdn.example.com"]
origin_group = "b"
methods = "refuse"
[[origin_group]]
name = "a"
  [[origin_group.tier]]
  hosts = ["127.0.0.1:1"]
[[origin_group]]
name = "b"
  [[origin_group.tier]]
  hosts = ["127.0.0.1:2"]
"#;

    #[test]
    fn hosts_route_to_sites_and_unknown_hosts_are_refused() {
        let cfg = Config::parse_and_validate(CFG, "t.toml").unwrap();
        let s = Settings::from_config(&cfg, None);
        assert_eq!(s.site_for("live.example.com:8080").unwrap().group, "a");
        assert_eq!(s.site_for("x.example.com").unwrap().group, "a");
        assert_eq!(s.site_for("v.cdn.example.com").unwrap().group, "b", "longest wildcard wins");
        assert!(!s.site_for("v.cdn.example.com").unwrap().pass_methods);
        assert!(s.site_for("evil.com").is_none());
        assert!(s.site_for("example.com").is_none());
        let f = Settings::from_config(&cfg, Some("--origin"));
        assert_eq!(f.site_for("evil.com").unwrap().group, "--origin");
        assert_eq!(f.site_for("live.example.com").unwrap().group, "a");
    }
}
