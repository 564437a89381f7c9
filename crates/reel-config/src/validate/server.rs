//! `[server]` (the names this node uses in `CDN-Loop` and `Cache-Status`), `[log]` and
//! `[admin]`.

use super::listener::collide;
use super::{Found, bad, is_header_value, is_tchar};
use crate::Config;
use crate::schema::{LogConfig, ServerConfig};

/// Tracing levels accepted in `log.level` directives.
const LEVELS: [&str; 6] = ["trace", "debug", "info", "warn", "error", "off"];

/// RFC 8586 2 `cdn-id`: a `uri-host [ ":" port ]` or a pseudonym (a token). Bracketed IPv6
/// literals are left out: a name or a token identifies a CDN better than an address.
pub(super) fn is_cdn_id(id: &str) -> bool {
    !id.is_empty() && id.len() <= 255 && id.bytes().all(|b| is_tchar(b) || b == b':')
}

/// RFC 8941 3.3.4 `sf-token`, the form of a `Cache-Status` cache name (RFC 9211 2).
pub(super) fn is_sf_token(name: &str) -> bool {
    let b = name.as_bytes();
    !b.is_empty()
        && name.len() <= 255
        && (b[0].is_ascii_alphabetic() || b[0] == b'*')
        && b.iter().all(|&c| is_tchar(c) || c == b':' || c == b'/')
}

/// `[server]`: the names this node uses in `CDN-Loop` and `Cache-Status`.
pub(super) fn check_server(found: &mut Found, s: &ServerConfig) {
    if !is_cdn_id(&s.cdn_id) {
        bad(
            found,
            "server.cdn_id",
            format!(
                "{:?} is not a CDN-Loop cdn-id (RFC 8586): a host name, host:port or a token",
                s.cdn_id
            ),
        );
    }
    if s.max_hops > 64 {
        bad(found, "server.max_hops", "must be 0-64");
    }
    let name = s.cache_status_name();
    if !is_sf_token(name) {
        let key = if s.cache_status_name.is_empty() {
            "server.cdn_id"
        } else {
            "server.cache_status_name"
        };
        let hint =
            if s.cache_status_name.is_empty() { "; set server.cache_status_name" } else { "" };
        bad(
            found,
            key,
            format!(
                "{name:?} is not a Cache-Status cache name (RFC 9211): a token starting with a letter{hint}"
            ),
        );
    }
}

/// `[log]`: the level directives.
pub(super) fn check_log(found: &mut Found, log: &LogConfig) {
    if let Err(e) = check_level(&log.level) {
        bad(found, "log.level", e);
    }
}

/// Checks a tracing-subscriber EnvFilter directive list. Stricter than EnvFilter: a bare word
/// must be a level, because EnvFilter would read a misspelt level ("inof") as a target name
/// and silently log nothing useful.
pub(super) fn check_level(level: &str) -> Result<(), String> {
    if level.trim().is_empty() {
        return Err("must not be empty (e.g. \"info\")".into());
    }
    for directive in level.split(',').map(str::trim) {
        let lvl = match directive.rsplit_once('=') {
            Some((target, lvl)) if !target.trim().is_empty() => lvl,
            Some(_) => return Err(format!("directive {directive:?} has no target before '='")),
            None => directive,
        };
        if !LEVELS.contains(&lvl.trim().to_ascii_lowercase().as_str()) {
            return Err(format!(
                "invalid level {:?} in directive {directive:?}: expected one of {}",
                lvl.trim(),
                LEVELS.join(", ")
            ));
        }
    }
    Ok(())
}

/// `[admin]`: where the admin listener binds and how it is authenticated.
pub(super) fn check_admin(found: &mut Found, cfg: &Config) {
    let a = &cfg.admin;
    if !a.allow_non_loopback && !a.address.ip().is_loopback() {
        bad(
            found,
            "admin.address",
            format!(
                "{} is not a loopback address; set admin.allow_non_loopback = true to expose the admin API",
                a.address
            ),
        );
    }
    if !a.address.ip().is_loopback()
        && a.token.is_empty()
        && a.token_env.is_empty()
        && !a.insecure_no_token
    {
        bad(
            found,
            "admin.token",
            format!(
                "the admin API on {} (not loopback) has no token: anyone who reaches it can purge, \
                 reload and drain; set admin.token or admin.token_env, or admin.insecure_no_token \
                 = true if a firewall guards it",
                a.address
            ),
        );
    }
    if !a.token.is_empty() && !a.token_env.is_empty() {
        bad(found, "admin.token_env", "set either admin.token or admin.token_env, not both");
    }
    if !is_header_value(&a.token) || a.token.contains([' ', '\t']) {
        bad(found, "admin.token", "must be printable ASCII without spaces");
    }
    if a.token_env.contains(['=', '\0']) {
        bad(
            found,
            "admin.token_env",
            format!("{:?} is not an environment variable name", a.token_env),
        );
    }
    if cfg.demo_origin.enabled && collide(a.address, cfg.demo_origin.address) {
        bad(
            found,
            "demo_origin.address",
            format!("{} collides with admin.address", cfg.demo_origin.address),
        );
    }
}
