//! `[cache]`, its `[[cache.rule]]` path rules, and `[[site]]`.

use std::collections::HashMap;

use super::{Found, bad, is_tchar, positive_duration};
use crate::Config;
use crate::schema::{CacheRule, SiteConfig, SliceSize, is_dns_name};
use crate::units::ByteSize;

/// RFC 9110 5.1 `field-name`: a token.
fn is_field_name(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(is_tchar)
}

/// `[cache]`: timeouts, limits and the header field lists.
pub(super) fn check_cache(found: &mut Found, cfg: &Config) {
    let c = &cfg.cache;
    if c.heuristic_freshness || cfg.site.iter().any(|s| s.heuristic_freshness == Some(true)) {
        positive_duration(found, "cache.heuristic_max".into(), c.heuristic_max);
    }
    for (i, name) in c.targeted_cache_control.iter().enumerate() {
        if !is_field_name(name) {
            bad(
                found,
                format!("cache.targeted_cache_control[{i}]"),
                format!("{name:?} is not a header field name"),
            );
        } else if name.eq_ignore_ascii_case("cache-control") {
            bad(
                found,
                format!("cache.targeted_cache_control[{i}]"),
                "Cache-Control is what targeted fields override; list only targeted fields",
            );
        }
    }
    positive_duration(found, "cache.lock_timeout".into(), c.lock_timeout);
    if c.read_ahead_per_worker > 4096 {
        bad(found, "cache.read_ahead_per_worker", "at most 4096");
    }
    positive_duration(found, "cache.fill_timeout".into(), c.fill_timeout);
    positive_duration(found, "cache.blocking_timeout".into(), c.blocking_timeout);
    if c.max_misses_per_connection == 0 {
        bad(found, "cache.max_misses_per_connection", "must be at least 1");
    }
    if !(1..=1024).contains(&c.max_variants) {
        bad(found, "cache.max_variants", "must be between 1 and 1024");
    }
    for (i, name) in c.fill_drop_headers.iter().enumerate() {
        if !is_field_name(name) {
            bad(
                found,
                format!("cache.fill_drop_headers[{i}]"),
                format!("{name:?} is not a header field name"),
            );
        } else if name.eq_ignore_ascii_case("host") {
            bad(
                found,
                format!("cache.fill_drop_headers[{i}]"),
                "Host is always sent (the one the cache key names); it cannot be dropped",
            );
        }
    }
}

/// `[[cache.rule]]`: patterns that can match a request path.
pub(super) fn check_cache_rules(found: &mut Found, rules: &[CacheRule]) {
    for (i, r) in rules.iter().enumerate() {
        let p = r.pattern.as_str();
        if p.is_empty() {
            bad(found, format!("cache.rule[{i}].match"), "must not be empty");
        } else if !p.starts_with('/') && !p.starts_with('*') {
            bad(
                found,
                format!("cache.rule[{i}].match"),
                format!(
                    "{p:?} can never match: request paths start with \"/\" (use \"/{p}\" or \"*{p}\")"
                ),
            );
        } else if p.contains('?') {
            bad(
                found,
                format!("cache.rule[{i}].match"),
                "patterns match the path only, without the query string; remove '?'",
            );
        }
    }
}

/// Checks a `[[site]].hosts` entry; returns the normalised (lowercase) form.
pub(super) fn check_site_host(host: &str) -> Result<String, String> {
    if host == "*" {
        // The catch-all: claimed like a name, so a second one is "already claimed".
        return Ok("*".into());
    }
    let name = host.strip_prefix("*.").unwrap_or(host);
    let valid = if let Some(v6) = name.strip_prefix('[').and_then(|n| n.strip_suffix(']')) {
        !host.starts_with("*.") && v6.parse::<std::net::Ipv6Addr>().is_ok()
    } else if name.contains(':') {
        return Err(format!(
            "{host:?} has a port or an unbracketed IPv6 address; ports are ignored when matching, so leave them out"
        ));
    } else {
        is_dns_name(name)
    };
    if valid {
        Ok(host.to_ascii_lowercase())
    } else {
        Err(format!("{host:?} is not a host name, IP address or \"*.domain\" wildcard"))
    }
}

/// `[[site]]`: hosts claimed by one site each, an existing origin group, slicing and the
/// cache key's query parameters.
pub(super) fn check_sites(found: &mut Found, cfg: &Config) {
    let groups: HashMap<&str, usize> =
        cfg.origin_group.iter().enumerate().map(|(i, g)| (g.name.as_str(), i)).collect();
    let mut claimed: HashMap<String, usize> = HashMap::new();
    for (i, site) in cfg.site.iter().enumerate() {
        if site.hosts.is_empty() {
            bad(found, format!("site[{i}].hosts"), "at least one host is required");
        }
        for (j, host) in site.hosts.iter().enumerate() {
            match check_site_host(host) {
                Err(e) => bad(found, format!("site[{i}].hosts[{j}]"), e),
                Ok(norm) => {
                    if let Some(other) = claimed.insert(norm, i) {
                        let whose = if other == i {
                            "this site".to_owned()
                        } else {
                            format!("site[{other}]")
                        };
                        bad(
                            found,
                            format!("site[{i}].hosts[{j}]"),
                            format!("{host:?} is already claimed by {whose}"),
                        );
                    }
                }
            }
        }
        if site.origin_group.is_empty() {
            bad(found, format!("site[{i}].origin_group"), "must name an [[origin_group]]");
        } else if !groups.contains_key(site.origin_group.as_str()) {
            bad(
                found,
                format!("site[{i}].origin_group"),
                format!("no [[origin_group]] is named {:?}", site.origin_group),
            );
        }
        check_slice(found, i, site.slice, cfg.store.volume_size);
        super::compress::check_compress(found, i, &site.compress);
        if site.read_ahead > 16 {
            bad(found, format!("site[{i}].read_ahead"), "at most 16 slices");
        }
        if let Some(t) = &site.token {
            super::token::check_token(found, i, t);
        }
        check_key(found, i, site);
    }
}

/// `[[site]]` `i`'s query rules: parameter names, and a keep-list that no drop rule
/// contradicts.
fn check_key(found: &mut Found, i: usize, site: &SiteConfig) {
    for (list, names) in [
        ("ignore_query", &site.ignore_query),
        ("key.query", &site.key.query),
        ("key.drop", &site.key.drop),
    ] {
        for (j, q) in names.iter().enumerate() {
            if q.is_empty() || q.contains(['&', '=', '?', '#']) {
                bad(
                    found,
                    format!("site[{i}].{list}[{j}]"),
                    format!("{q:?} is not a query parameter name"),
                );
            }
        }
    }
    if site.key.query.is_empty() {
        if site.drop_query && !site.key.drop.is_empty() {
            bad(
                found,
                format!("site[{i}].key.drop"),
                "has no effect: drop_query = true already drops every parameter",
            );
        }
        return;
    }
    for (set, other) in [
        (site.drop_query, "drop_query"),
        (!site.ignore_query.is_empty(), "ignore_query"),
        (!site.key.drop.is_empty(), "key.drop"),
    ] {
        if set {
            bad(
                found,
                format!("site[{i}].key.query"),
                format!(
                    "contradicts {other}: key.query keeps only the parameters it names and drops the others; use one of them"
                ),
            );
        }
    }
}

/// `[[site]]` `i`'s `slice`: at least 64KiB, and two of them fit in a volume.
fn check_slice(found: &mut Found, i: usize, slice: SliceSize, volume_size: ByteSize) {
    if let Some(size) = slice.0 {
        let most = volume_size.bytes() / 2;
        if size < ByteSize::kib(64) {
            bad(found, format!("site[{i}].slice"), format!("{size} is below the minimum 64KiB"));
        } else if size.bytes() > most {
            bad(
                found,
                format!("site[{i}].slice"),
                format!(
                    "{size} is more than half of store.volume_size ({volume_size}): a volume must \
                     hold at least two slices"
                ),
            );
        }
    }
}
