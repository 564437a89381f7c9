//! `[site.cors]` and `[[site.header]]`: origins as browsers send them, field names, and no
//! rule on a field the connection or the cache owns.

use super::{Found, bad, is_header_value, is_tchar};
use crate::Config;
use crate::schema::{AllowOrigins, CorsConfig, HeaderAction, HeaderRuleConfig, is_dns_name};

/// Fields no `[[site.header]]` rule may touch, with why. Framing and hop-by-hop fields are
/// the connection's (HTTP/2 and HTTP/3 forbid the hop-by-hop ones outright); `Date`, `Age`,
/// `Content-Range` and `Alt-Svc` are what reel says of the response it sends.
const OWNED: &[(&str, &str)] = &[
    ("content-length", "the connection frames the body"),
    ("transfer-encoding", "the connection frames the body"),
    ("connection", "a hop-by-hop field, the connection's own"),
    ("keep-alive", "a hop-by-hop field, the connection's own"),
    ("upgrade", "a hop-by-hop field, the connection's own"),
    ("te", "a hop-by-hop field, the connection's own"),
    ("trailer", "a hop-by-hop field, the connection's own"),
    ("proxy-connection", "a hop-by-hop field, the connection's own"),
    ("content-range", "it frames a 206's body; reel writes it from the range it sends"),
    ("date", "reel sends the stored response's Date or the time it answers"),
    ("age", "reel computes it for every answer from the store (RFC 9111 5.1)"),
    ("alt-svc", "reel announces HTTP/3 itself on listeners with http3 = true"),
];

/// `[site.cors]` and `[[site.header]]` of every site.
pub(super) fn check_site_edits(found: &mut Found, cfg: &Config) {
    for (i, site) in cfg.site.iter().enumerate() {
        if let Some(cors) = &site.cors {
            check_cors(found, &format!("site[{i}].cors"), cors);
        }
        for (j, rule) in site.header.iter().enumerate() {
            check_rule(found, &format!("site[{i}].header[{j}]"), rule, site.cors.is_some());
        }
    }
}

fn check_cors(found: &mut Found, key: &str, c: &CorsConfig) {
    match &c.allow_origins {
        AllowOrigins::Any if c.allow_credentials => bad(
            found,
            format!("{key}.allow_credentials"),
            "not with allow_origins = \"*\": every web page could read what viewers' cookies \
             unlock (browsers refuse \"*\" with credentials); list the origins instead",
        ),
        AllowOrigins::Any => {}
        AllowOrigins::List(l) if l.is_empty() => {
            bad(found, format!("{key}.allow_origins"), "at least one origin, or \"*\" for any")
        }
        AllowOrigins::List(l) => {
            for (j, o) in l.iter().enumerate() {
                if let Err(e) = check_origin(o) {
                    bad(found, format!("{key}.allow_origins[{j}]"), e);
                }
            }
        }
    }
    for (j, h) in c.allow_headers.iter().enumerate() {
        if h == "*" {
            if c.allow_credentials {
                bad(
                    found,
                    format!("{key}.allow_headers[{j}]"),
                    "\"*\" is not a wildcard for credentialed requests (browsers take it as \
                     a field named \"*\"); list the fields",
                );
            }
        } else if !is_field_name(h) {
            bad(found, format!("{key}.allow_headers[{j}]"), format!("{h:?} is not a field name"));
        }
    }
    for (j, h) in c.expose_headers.iter().enumerate() {
        if !is_field_name(h) {
            bad(found, format!("{key}.expose_headers[{j}]"), format!("{h:?} is not a field name"));
        }
    }
    let max_age = c.max_age.get();
    if max_age.subsec_nanos() != 0 {
        bad(found, format!("{key}.max_age"), "whole seconds (Access-Control-Max-Age)");
    } else if max_age.as_secs() > 86_400 {
        bad(found, format!("{key}.max_age"), "at most 24h (browsers cap it lower still)");
    }
}

/// Checks one `allow_origins` entry: `scheme://host[:port]` as a browser serialises an
/// origin (lowercase, no path, no default port), the host possibly `*.domain`.
pub(super) fn check_origin(o: &str) -> Result<(), String> {
    if o == "*" {
        return Err("\"*\" goes alone: allow_origins = \"*\"".into());
    }
    if o == "null" {
        return Err(
            "\"null\" is the origin of every sandboxed frame and local file; allowing it allows them all"
                .into(),
        );
    }
    let Some((scheme, rest)) = o.split_once("://") else {
        return Err(format!("{o:?} is not an origin: write scheme://host[:port]"));
    };
    let scheme_ok = scheme.bytes().next().is_some_and(|b| b.is_ascii_lowercase())
        && scheme
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"+-.".contains(&b));
    if !scheme_ok {
        return Err(format!("{o:?}: the scheme must be lowercase letters, as browsers send it"));
    }
    if rest.contains(['/', '?', '#', '@']) {
        return Err(format!(
            "{o:?}: an origin has no path, query, fragment or user (\"{scheme}://host[:port]\")"
        ));
    }
    if rest.bytes().any(|b| b.is_ascii_uppercase()) {
        return Err(format!(
            "{o:?}: browsers send origins in lowercase; write {:?}",
            o.to_ascii_lowercase()
        ));
    }
    let (host, port) = split_port(rest);
    if let Some(p) = port {
        match p.parse::<u16>() {
            Ok(0) | Err(_) => return Err(format!("{o:?}: {p:?} is not a port")),
            Ok(n) if (scheme, n) == ("http", 80) || (scheme, n) == ("https", 443) => {
                return Err(format!(
                    "{o:?}: browsers leave out the scheme's default port; write \"{scheme}://{host}\""
                ));
            }
            Ok(_) => {}
        }
    }
    let name = host.strip_prefix("*.").unwrap_or(host);
    let valid = if let Some(v6) = name.strip_prefix('[').and_then(|n| n.strip_suffix(']')) {
        !host.starts_with("*.") && v6.parse::<std::net::Ipv6Addr>().is_ok()
    } else {
        is_dns_name(name) && !name.ends_with('.')
    };
    if valid { Ok(()) } else { Err(format!("{o:?}: {host:?} is not a host name or address")) }
}

/// `host[:port]` split at the port's colon (IPv6 brackets kept).
fn split_port(rest: &str) -> (&str, Option<&str>) {
    let after_host = if rest.starts_with('[') { rest.find(']').map_or(0, |i| i + 1) } else { 0 };
    match rest[after_host..].rfind(':') {
        Some(i) => (&rest[..after_host + i], Some(&rest[after_host + i + 1..])),
        None => (rest, None),
    }
}

fn check_rule(found: &mut Found, key: &str, r: &HeaderRuleConfig, cors: bool) {
    let name = r.name.to_ascii_lowercase();
    if !is_field_name(&r.name) {
        bad(found, format!("{key}.name"), format!("{:?} is not a field name", r.name));
    } else if let Some((_, why)) = OWNED.iter().find(|(n, _)| *n == name) {
        bad(found, format!("{key}.name"), format!("{} cannot be changed: {why}", r.name));
    } else if name.starts_with("proxy-") {
        bad(
            found,
            format!("{key}.name"),
            format!("{} cannot be changed: Proxy-* fields are for proxies, not viewers", r.name),
        );
    } else if name == "cache-status" && r.action != HeaderAction::Remove {
        bad(
            found,
            format!("{key}.name"),
            "Cache-Status is what the caches say of the response; it can only be removed",
        );
    } else if cors && name.starts_with("access-control-") {
        bad(
            found,
            format!("{key}.name"),
            format!("{}: the site's [site.cors] writes the Access-Control fields", r.name),
        );
    }
    match (r.action, &r.value) {
        (HeaderAction::Remove, Some(_)) => {
            bad(found, format!("{key}.value"), "remove takes no value");
        }
        (HeaderAction::Set | HeaderAction::Add, None) => {
            bad(found, format!("{key}.value"), "set and add need a value");
        }
        (_, Some(v)) if !is_header_value(v) => bad(
            found,
            format!("{key}.value"),
            "a field value is visible ASCII, spaces and tabs (no control characters or line breaks)",
        ),
        _ => {}
    }
    if let Some(p) = &r.path {
        let p = p.as_str();
        if !p.starts_with('/') && !p.starts_with('*') {
            bad(
                found,
                format!("{key}.path"),
                format!(
                    "{p:?} can never match: request paths start with \"/\" (use \"/{p}\" or \"*{p}\")"
                ),
            );
        } else if p.contains('?') {
            bad(
                found,
                format!("{key}.path"),
                "patterns match the path only, without the query string; remove '?'",
            );
        }
    }
    for (j, s) in r.status.iter().enumerate() {
        if !(200..=599).contains(s) {
            bad(
                found,
                format!("{key}.status[{j}]"),
                format!("{s} is not a final status code (200-599)"),
            );
        }
    }
}

/// RFC 9110 5.1 `field-name`: a token.
fn is_field_name(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(is_tchar)
}

#[cfg(test)]
mod tests {
    use super::check_origin;

    #[test]
    fn origins_as_browsers_send_them() {
        for ok in [
            "https://player.example.com",
            "http://localhost:8000",
            "https://*.example.com",
            "http://127.0.0.1:9000",
            "http://[::1]:3000",
            "capacitor://localhost",
        ] {
            assert_eq!(check_origin(ok), Ok(()), "{ok}");
        }
        for no in [
            "*",
            "null",
            "player.example.com",
            "https://player.example.com/",
            "https://Player.example.com",
            "HTTPS://player.example.com",
            "https://player.example.com:443",
            "http://x:80",
            "https://x:0",
            "https://x:99999",
            "https://a b",
            "https://u@x",
            "https://",
            "https://*.[::1]",
        ] {
            assert!(check_origin(no).is_err(), "{no}");
        }
    }
}
