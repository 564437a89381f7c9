//! Semantic validation: rules that span several keys or restrict a value's range, checked
//! after deserialization. Every rule runs; each violation is reported against the key path
//! that should be changed.
//!
//! [`check`] runs one function per section; the sections live in submodules by area:
//! `server` (`[server]`, `[log]`, `[admin]`), `access_log` (`[access_log]`), `resources` (`[cores]`,
//! `[http]`, `[health]`, `[store]`), `listener` (`[[listener]]`, `[[certificate]]`), `cache`
//! (`[cache]`, `[[cache.rule]]`, `[[site]]`), `access` (`[geo]`, `[site.access]`,
//! `[site.limits]`), `edits` (`[site.cors]`, `[[site.header]]`), `telemetry` (`[[site]].name`,
//! `[site.cmsd]`), `origin`
//! (`[[origin_group]]`, `[demo_origin]`) and `origin_auth` (`request_headers`, `auth` and
//! its credentials).

mod access;
mod access_log;
mod cache;
mod compress;
mod edits;
mod listener;
mod origin;
mod origin_auth;
mod resources;
mod server;
mod telemetry;
mod token;

use crate::Config;

/// Problems found so far: `(key path, message)`, in the order the rules ran.
type Found = Vec<(String, String)>;

fn bad(found: &mut Found, key: impl Into<String>, message: impl Into<String>) {
    found.push((key.into(), message.into()));
}

fn positive_duration(found: &mut Found, key: String, d: crate::Duration) {
    if d.is_zero() {
        bad(found, key, "must be greater than 0s");
    }
}

fn check_health_path(found: &mut Found, key: String, path: &str) {
    if !path.starts_with('/') {
        bad(found, key, format!("{path:?} must start with \"/\""));
    }
}

fn is_header_value(v: &str) -> bool {
    v.bytes().all(|b| b == b'\t' || (b' '..=b'~').contains(&b))
}

/// RFC 9110 5.6.2 `tchar`.
fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// Runs every rule, appending `(key path, message)` for each violation.
pub(crate) fn check(cfg: &Config, found: &mut Found) {
    server::check_server(found, &cfg.server);
    server::check_log(found, &cfg.log);
    listener::check_listeners(found, cfg);
    listener::check_certificates(found, cfg);
    resources::check_cores(found, &cfg.cores);
    resources::check_http(found, &cfg.http);
    resources::check_health(found, &cfg.health);
    server::check_admin(found, cfg);
    access_log::check_access_log(found, &cfg.access_log);
    resources::check_store(found, &cfg.store);
    cache::check_cache(found, cfg);
    cache::check_cache_rules(found, &cfg.cache.rule);
    cache::check_sites(found, cfg);
    access::check_access(found, cfg);
    edits::check_site_edits(found, cfg);
    telemetry::check_telemetry(found, cfg);
    origin::check_origin_groups(found, &cfg.origin_group);
    origin::check_demo_origin(found, &cfg.demo_origin);
}

/// Runs the rules of keys that are accepted but have no effect where they stand,
/// appending `(key path, message)` for each: warnings, never refusals.
pub(crate) fn warnings(cfg: &Config, found: &mut Found) {
    listener::warn_listeners(found, cfg);
}

#[cfg(test)]
mod tests;
