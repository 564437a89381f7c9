//! `[geo]`, `[site.access]` and `[site.limits]`: country codes, the database country
//! rules need, the refusal status and the rate limit's numbers. The CIDRs of `allow` and
//! `deny` are parsed by the binary's preflight, with the parser the server runs.

use super::{Found, bad};
use crate::Config;

/// `[site.access]` and `[site.limits]` of every site.
pub(super) fn check_access(found: &mut Found, cfg: &Config) {
    let has_geo = cfg.geo.database().is_some();
    for (i, site) in cfg.site.iter().enumerate() {
        let a = &site.access;
        for (list, codes) in
            [("allow_countries", &a.allow_countries), ("deny_countries", &a.deny_countries)]
        {
            for (j, c) in codes.iter().enumerate() {
                if c.len() != 2 || !c.bytes().all(|b| b.is_ascii_uppercase()) {
                    bad(
                        found,
                        format!("site[{i}].access.{list}[{j}]"),
                        format!(
                            "{c:?} is not an ISO 3166-1 alpha-2 country code (two uppercase \
                             letters, such as \"DE\")"
                        ),
                    );
                }
            }
            if !codes.is_empty() && !has_geo {
                bad(
                    found,
                    format!("site[{i}].access.{list}"),
                    "country rules need a MaxMind DB: set [geo] database",
                );
            }
        }
        if a.geo_status != 403 && a.geo_status != 451 {
            bad(found, format!("site[{i}].access.geo_status"), "must be 403 or 451");
        }
        let l = &site.limits;
        if !l.rate.is_finite() || l.rate < 0.0 {
            bad(
                found,
                format!("site[{i}].limits.rate"),
                "must be a number of requests per second, 0 (no limit) or more",
            );
        } else if l.rate > 0.0 && l.rate < 0.001 {
            bad(found, format!("site[{i}].limits.rate"), "at least 0.001 (one request in 1000s)");
        } else if l.rate > 1e9 {
            bad(found, format!("site[{i}].limits.rate"), "at most 1000000000");
        }
        if l.burst > 1_000_000 {
            bad(found, format!("site[{i}].limits.burst"), "at most 1000000");
        } else if l.burst > 0 && l.rate == 0.0 {
            bad(found, format!("site[{i}].limits.burst"), "needs a rate (site.limits.rate)");
        }
        if !(64..=10_000_000).contains(&l.max_clients) {
            bad(found, format!("site[{i}].limits.max_clients"), "must be between 64 and 10000000");
        }
    }
}
