//! The sites' access rules from `[geo]`, `[site.access]` and `[site.limits]`: the checks
//! `reel check`, start-up and every reload make of them (CIDRs parsed by the server's own
//! parser, the database read), the shared country database of a generation, and each
//! site's [`SiteAccess`]. A reload keeps the database when its path is unchanged (and
//! reads the file again if it changed), and a site's rate limiter, with the budgets its
//! clients spent, when the site's hosts and limits are unchanged.

use std::sync::Arc;
use std::time::Duration;

use reel_access::{
    AddrRules, CidrSet, CountryRules, Geo, GeoError, RateLimiter, RateSpec, Refresh, SiteAccess,
};
use reel_config::{Config, ConfigProblem, SiteConfig};

/// How often the database's file is looked at.
const GEO_CHECK_EVERY: Duration = Duration::from_secs(1);

/// Problems the file's own validation leaves to the binary: every CIDR of `allow` and
/// `deny` parses, and `[geo] database` reads as a MaxMind DB.
pub(crate) fn check(cfg: &Config) -> Vec<ConfigProblem> {
    let mut problems = Vec::new();
    for (i, s) in cfg.site.iter().enumerate() {
        for (name, list) in [("allow", &s.access.allow), ("deny", &s.access.deny)] {
            if let Err((j, e)) = CidrSet::parse(list) {
                problems.push(cfg.problem(&format!("site[{i}].access.{name}[{j}]"), e.to_string()));
            }
        }
    }
    if let Some(path) = cfg.geo.database()
        && let Err(e) = Geo::check(path)
    {
        problems.push(cfg.problem("geo.database", e.to_string()));
    }
    problems
}

/// The generation's country database: the running one's when the path is the same (read
/// again if its file changed), else the file read anew and watched.
pub(crate) fn geo(cfg: &Config, prev: Option<&Arc<Geo>>) -> Result<Option<Arc<Geo>>, GeoError> {
    let Some(path) = cfg.geo.database() else { return Ok(None) };
    if let Some(g) = prev.filter(|g| g.path() == path) {
        match g.refresh() {
            Refresh::Unchanged => {}
            Refresh::Swapped => tracing::info!(path = %path.display(), "geo database reloaded"),
            Refresh::Kept(e) => {
                tracing::error!(error = %e, "geo database not reloaded: keeping the one in use");
            }
        }
        return Ok(Some(g.clone()));
    }
    let g = Arc::new(Geo::open(path)?);
    if let Err(e) = Geo::watch(&g, GEO_CHECK_EVERY) {
        // Without the watcher the file is still read again at every reload.
        tracing::warn!(error = %e, "cannot start the geo database watcher");
    }
    Ok(Some(g))
}

/// Gives each site of `settings` (built from `cfg.site`, in order) its rules, keeping the
/// rate limiters of `prev`'s sites whose hosts and limits are unchanged.
pub(crate) fn attach(
    settings: &mut reel_cache::Settings,
    cfg: &Config,
    geo: Option<&Arc<Geo>>,
    prev: Option<&reel_cache::Settings>,
) {
    for (site, conf) in settings.sites.iter_mut().zip(&cfg.site) {
        let kept = prev
            .and_then(|p| p.sites.iter().find(|s| s.hosts == site.hosts))
            .and_then(|s| s.access.as_ref())
            .and_then(|a| a.rate.clone());
        site.access = site_access(conf, geo, kept).map(Arc::new);
    }
}

/// One site's rules; `None` when it has none. `kept`: the limiter it had.
fn site_access(
    s: &SiteConfig,
    geo: Option<&Arc<Geo>>,
    kept: Option<Arc<RateLimiter>>,
) -> Option<SiteAccess> {
    let a = &s.access;
    // Parsed by `check` before any generation is built from the file.
    let parse = |list: &[String]| CidrSet::parse(list).unwrap_or_default();
    let addr = AddrRules { allow: parse(&a.allow), deny: parse(&a.deny) };
    let countries = match geo {
        Some(geo) if a.has_country_rules() => Some(CountryRules {
            geo: geo.clone(),
            allow: codes(&a.allow_countries),
            deny: codes(&a.deny_countries),
            status: a.geo_status,
        }),
        _ => None,
    };
    let rate = s.limits.enabled().then(|| {
        let spec = RateSpec {
            rate: s.limits.rate,
            burst: s.limits.effective_burst(),
            max_clients: s.limits.max_clients as usize,
        };
        kept.filter(|l| l.spec() == spec).unwrap_or_else(|| Arc::new(RateLimiter::new(spec)))
    });
    let access = SiteAccess { addr, countries, rate };
    (!access.is_empty()).then_some(access)
}

/// Country codes as bytes (validated: two uppercase letters).
fn codes(list: &[String]) -> Vec<[u8; 2]> {
    list.iter().filter_map(|c| <[u8; 2]>::try_from(c.as_bytes()).ok()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(site_lines: &str) -> Config {
        let text = format!(
            "[[listener]]\nname = \"h\"\naddress = \"127.0.0.1:8080\"\n\n[[site]]\nhosts = [\"a.test\"]\n\
             origin_group = \"o\"\n{site_lines}\n\n[[origin_group]]\nname = \"o\"\n\
             [[origin_group.tier]]\nhosts = [\"127.0.0.1:9\"]\n"
        );
        Config::parse_and_validate(&text, "t.toml").expect("valid")
    }

    fn settings(c: &Config, prev: Option<&reel_cache::Settings>) -> reel_cache::Settings {
        let mut s = crate::state::options::cache_settings(c, false);
        attach(&mut s, c, None, prev);
        s
    }

    #[test]
    fn sites_without_rules_get_none_and_bad_cidrs_are_reported_at_their_key() {
        let c = cfg("");
        assert!(settings(&c, None).sites[0].access.is_none());
        assert!(check(&c).is_empty());
        let bad = cfg("[site.access]\ndeny = [\"10.0.0.0/8\", \"10.1.2.3/8\"]\n");
        let p = check(&bad);
        assert_eq!(p.len(), 1, "{p:?}");
        assert_eq!(p[0].key, "site[0].access.deny[1]");
        assert!(p[0].line > 0 && p[0].message.contains("host bits"), "{}", p[0]);
    }

    #[test]
    fn a_reload_keeps_the_limiter_while_the_limits_stay() {
        let c = cfg("[site.limits]\nrate = 5\n");
        let first = settings(&c, None);
        let l1 = first.sites[0].access.as_ref().and_then(|a| a.rate.clone()).expect("limiter");
        assert_eq!(l1.spec().burst, 5);
        let again = settings(&c, Some(&first));
        let l2 = again.sites[0].access.as_ref().and_then(|a| a.rate.clone()).expect("limiter");
        assert!(Arc::ptr_eq(&l1, &l2));
        let changed = cfg("[site.limits]\nrate = 5\nburst = 20\n");
        let l3 = settings(&changed, Some(&again)).sites[0]
            .access
            .as_ref()
            .and_then(|a| a.rate.clone())
            .expect("limiter");
        assert!(!Arc::ptr_eq(&l2, &l3));
        assert_eq!(l3.spec().burst, 20);
    }
}
