//! Semantic validation: rules that span several keys or restrict a value's range, checked
//! after deserialization. Every rule runs; each violation is reported against the key path
//! that should be changed.

use std::collections::HashMap;
use std::net::SocketAddr;

use crate::Config;
use crate::schema::{
    CpuSet, ListenerConfig, OriginBalance, OriginGroupConfig, OriginHealthConfig, TierConfig,
    TlsCert, is_dns_name,
};
use crate::units::ByteSize;

type Found = Vec<(String, String)>;

fn bad(found: &mut Found, key: impl Into<String>, message: impl Into<String>) {
    found.push((key.into(), message.into()));
}

fn positive_duration(found: &mut Found, key: String, d: crate::Duration) {
    if d.is_zero() {
        bad(found, key, "must be greater than 0s");
    }
}

/// Tracing levels accepted in `log.level` directives.
const LEVELS: [&str; 6] = ["trace", "debug", "info", "warn", "error", "off"];

/// Checks a tracing-subscriber EnvFilter directive list. Stricter than EnvFilter: a bare word
/// must be a level, because EnvFilter would read a misspelt level ("inof") as a target name
/// and silently log nothing useful.
fn check_level(level: &str) -> Result<(), String> {
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

/// Two addresses would collide on bind: same non-zero port and same IP, or either IP is the
/// wildcard address.
fn collide(a: SocketAddr, b: SocketAddr) -> bool {
    a.port() != 0
        && a.port() == b.port()
        && (a.ip() == b.ip() || a.ip().is_unspecified() || b.ip().is_unspecified())
}

/// Checks a `[[site]].hosts` entry; returns the normalised (lowercase) form.
fn check_site_host(host: &str) -> Result<String, String> {
    if host == "*" {
        return Err(
            "a catch-all \"*\" is not supported; list the names, or use \"*.example.com\"".into()
        );
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

fn check_health_path(found: &mut Found, key: String, path: &str) {
    if !path.starts_with('/') {
        bad(found, key, format!("{path:?} must start with \"/\""));
    }
}

fn check_cpu_set(found: &mut Found, key: &str, set: &CpuSet) {
    if let CpuSet::List(cpus) = set {
        if cpus.is_empty() {
            bad(found, key, "an empty CPU list; use \"auto\" or list at least one CPU");
        }
        for (i, cpu) in cpus.iter().enumerate() {
            if cpus[..i].contains(cpu) {
                bad(found, format!("{key}[{i}]"), format!("CPU {cpu} is listed twice"));
            }
        }
    }
}

fn check_origin_health(found: &mut Found, key: &str, h: &OriginHealthConfig) {
    check_health_path(found, format!("{key}.path"), &h.path);
    positive_duration(found, format!("{key}.interval"), h.interval);
    positive_duration(found, format!("{key}.timeout"), h.timeout);
    if h.timeout > h.interval {
        bad(
            found,
            format!("{key}.timeout"),
            format!("{} is longer than interval {}", h.timeout, h.interval),
        );
    }
    if !(100..=599).contains(&h.expect_status) {
        bad(found, format!("{key}.expect_status"), "must be an HTTP status code 100-599");
    }
    if h.rise == 0 {
        bad(found, format!("{key}.rise"), "must be at least 1");
    }
    if h.fall == 0 {
        bad(found, format!("{key}.fall"), "must be at least 1");
    }
}

/// The TLS keys of `[[listener]]` `i`: which combinations make sense. Whether the files
/// exist and hold a matching certificate and key is checked by the server (`reel check`).
fn check_listener_tls(found: &mut Found, i: usize, l: &ListenerConfig) {
    let key = |k: &str| format!("listener[{i}].{k}");
    match (&l.tls_cert, &l.tls_key) {
        (None, Some(_)) => bad(found, key("tls_key"), "set tls_cert too (or remove tls_key)"),
        (Some(TlsCert::File(p)), None) => {
            if p.as_os_str().is_empty() {
                bad(found, key("tls_cert"), "must be a PEM file path or \"self-signed\"");
            } else {
                bad(found, key("tls_cert"), "a certificate file needs tls_key (its private key)");
            }
        }
        (Some(TlsCert::File(p)), Some(k)) => {
            if p.as_os_str().is_empty() {
                bad(found, key("tls_cert"), "must be a PEM file path or \"self-signed\"");
            }
            if k.as_os_str().is_empty() {
                bad(found, key("tls_key"), "must be a PEM file path");
            }
        }
        (Some(TlsCert::SelfSigned), Some(_)) => bad(
            found,
            key("tls_key"),
            "not used with tls_cert = \"self-signed\" (the key is made in memory); remove it",
        ),
        (Some(TlsCert::SelfSigned), None) | (None, None) => {}
    }
    if !l.is_tls() {
        if l.sni_strict {
            bad(found, key("sni_strict"), "only applies to a TLS listener (set tls_cert)");
        }
        if l.http2 == Some(true) {
            bad(found, key("http2"), "HTTP/2 is offered on TLS listeners only (set tls_cert)");
        }
    }
}

/// A `[[certificate]].names` entry: a DNS name or `*.domain` (a wildcard covers exactly
/// one label, RFC 6125 section 6.4.3). Returns the lowercase form.
fn check_cert_name(name: &str) -> Result<String, String> {
    let dns = name.strip_prefix("*.").unwrap_or(name);
    if dns.contains('*') || !is_dns_name(dns) || dns.parse::<std::net::Ipv4Addr>().is_ok() {
        return Err(format!(
            "{name:?} is not a DNS name or \"*.domain\" wildcard (TLS server names carry no IP addresses or ports)"
        ));
    }
    Ok(name.trim_end_matches('.').to_ascii_lowercase())
}

fn check_certificates(found: &mut Found, cfg: &Config) {
    let mut claimed: HashMap<String, usize> = HashMap::new();
    for (i, c) in cfg.certificate.iter().enumerate() {
        if c.names.is_empty() {
            bad(found, format!("certificate[{i}].names"), "at least one server name is required");
        }
        for (j, name) in c.names.iter().enumerate() {
            match check_cert_name(name) {
                Err(e) => bad(found, format!("certificate[{i}].names[{j}]"), e),
                Ok(norm) => {
                    if let Some(other) = claimed.insert(norm, i) {
                        bad(
                            found,
                            format!("certificate[{i}].names[{j}]"),
                            format!("{name:?} is already listed by certificate[{other}]"),
                        );
                    }
                }
            }
        }
        for (k, path) in [("cert", &c.cert), ("key", &c.key)] {
            if path.as_os_str().is_empty() {
                bad(found, format!("certificate[{i}].{k}"), "must be a PEM file path");
            }
        }
    }
    if !cfg.certificate.is_empty() && !cfg.listener.iter().any(ListenerConfig::is_tls) {
        bad(
            found,
            "certificate",
            "[[certificate]] is only used by TLS listeners, and no [[listener]] sets tls_cert",
        );
    }
}

fn check_tier_balance(found: &mut Found, key: &str, tier: &TierConfig, balance: OriginBalance) {
    if tier.weights.is_empty() {
        return;
    }
    if balance != OriginBalance::Rendezvous {
        bad(found, format!("{key}.weights"), "weights need balance = \"rendezvous\" on the group");
    }
    if tier.weights.len() != tier.hosts.len() {
        bad(
            found,
            format!("{key}.weights"),
            format!(
                "{} weights for {} hosts; give one per host, in hosts order",
                tier.weights.len(),
                tier.hosts.len()
            ),
        );
    }
    for (w, weight) in tier.weights.iter().enumerate() {
        if !(1..=MAX_WEIGHT).contains(weight) {
            bad(found, format!("{key}.weights[{w}]"), format!("must be 1-{MAX_WEIGHT}"));
        }
    }
}

/// Largest `weights` entry: enough for any real capacity ratio, small enough that no host can
/// be configured into owning every key by accident.
const MAX_WEIGHT: u32 = 1000;

/// TLS keys of a group: they need a TLS tier, exclude each other, and `ca_file` must be a
/// readable PEM file with a certificate in it (the full parse happens when the groups are
/// built).
fn check_origin_tls(found: &mut Found, key: &str, g: &OriginGroupConfig) {
    for (t, tier) in g.tier.iter().enumerate() {
        if !tier.tls || tier.host_header.is_empty() {
            continue;
        }
        let name = crate::schema::strip_port(&tier.host_header);
        let ip = name
            .strip_prefix('[')
            .and_then(|n| n.strip_suffix(']'))
            .unwrap_or(name)
            .parse::<std::net::IpAddr>()
            .is_ok();
        if !ip && !is_dns_name(name) {
            bad(
                found,
                format!("{key}.tier[{t}].host_header"),
                format!(
                    "{name:?} is the TLS name of this tier and must be a DNS name or IP address"
                ),
            );
        }
    }
    let has_tls = g.tier.iter().any(|t| t.tls);
    let ca = !g.ca_file.as_os_str().is_empty();
    for (set, name) in
        [(ca, "ca_file"), (g.insecure_skip_verify, "insecure_skip_verify"), (g.http2, "http2")]
    {
        if set && !has_tls {
            bad(
                found,
                format!("{key}.{name}"),
                "has no effect: no [[origin_group.tier]] of this group has tls = true",
            );
        }
    }
    if ca && g.insecure_skip_verify {
        bad(
            found,
            format!("{key}.insecure_skip_verify"),
            "contradicts ca_file: either verify against ca_file or skip verification",
        );
    }
    if ca {
        match std::fs::read(&g.ca_file) {
            Err(e) => bad(
                found,
                format!("{key}.ca_file"),
                format!("cannot read {}: {e}", g.ca_file.display()),
            ),
            Ok(pem) if !pem.windows(27).any(|w| w == b"-----BEGIN CERTIFICATE-----") => bad(
                found,
                format!("{key}.ca_file"),
                format!(
                    "{} holds no PEM certificate (-----BEGIN CERTIFICATE-----)",
                    g.ca_file.display()
                ),
            ),
            Ok(_) => {}
        }
    }
}

fn is_header_value(v: &str) -> bool {
    v.bytes().all(|b| b == b'\t' || (b' '..=b'~').contains(&b))
}

/// RFC 9110 5.6.2 `tchar`.
fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// RFC 8586 2 `cdn-id`: a `uri-host [ ":" port ]` or a pseudonym (a token). Bracketed IPv6
/// literals are left out: a name or a token identifies a CDN better than an address.
fn is_cdn_id(id: &str) -> bool {
    !id.is_empty() && id.len() <= 255 && id.bytes().all(|b| is_tchar(b) || b == b':')
}

/// RFC 8941 3.3.4 `sf-token`, the form of a `Cache-Status` cache name (RFC 9211 2).
fn is_sf_token(name: &str) -> bool {
    let b = name.as_bytes();
    !b.is_empty()
        && name.len() <= 255
        && (b[0].is_ascii_alphabetic() || b[0] == b'*')
        && b.iter().all(|&c| is_tchar(c) || c == b':' || c == b'/')
}

/// `[server]`: the names this node uses in `CDN-Loop` and `Cache-Status`.
fn check_server(found: &mut Found, s: &crate::schema::ServerConfig) {
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

/// Runs every rule, appending `(key path, message)` for each violation.
pub(crate) fn check(cfg: &Config, found: &mut Found) {
    check_server(found, &cfg.server);
    if let Err(e) = check_level(&cfg.log.level) {
        bad(found, "log.level", e);
    }

    // Listeners.
    if cfg.listener.is_empty() {
        bad(found, "listener", "at least one [[listener]] is required");
    }
    let mut names: HashMap<&str, usize> = HashMap::new();
    for (i, l) in cfg.listener.iter().enumerate() {
        if l.name.is_empty() {
            bad(found, format!("listener[{i}].name"), "must not be empty");
        } else if let Some(j) = names.insert(&l.name, i) {
            bad(
                found,
                format!("listener[{i}].name"),
                format!("{:?} is also the name of listener[{j}]", l.name),
            );
        }
        for (j, other) in cfg.listener[..i].iter().enumerate() {
            if collide(l.address, other.address) {
                bad(
                    found,
                    format!("listener[{i}].address"),
                    format!("{} collides with listener[{j}] address {}", l.address, other.address),
                );
            }
        }
        if collide(l.address, cfg.admin.address) {
            bad(
                found,
                format!("listener[{i}].address"),
                format!("{} collides with admin.address {}", l.address, cfg.admin.address),
            );
        }
        if cfg.demo_origin.enabled && collide(l.address, cfg.demo_origin.address) {
            bad(
                found,
                format!("listener[{i}].address"),
                format!(
                    "{} collides with demo_origin.address {}",
                    l.address, cfg.demo_origin.address
                ),
            );
        }
        if l.backlog == 0 {
            bad(found, format!("listener[{i}].backlog"), "must be at least 1");
        }
        check_listener_tls(found, i, l);
    }
    check_certificates(found, cfg);

    // Cores.
    check_cpu_set(found, "cores.irq", &cfg.cores.irq);
    check_cpu_set(found, "cores.workers", &cfg.cores.workers);
    for (i, nic) in cfg.cores.nic.iter().enumerate() {
        if nic.is_empty() || nic.len() > 15 || nic.contains(['/', ' ']) {
            bad(
                found,
                format!("cores.nic[{i}]"),
                format!("{nic:?} is not a network interface name"),
            );
        }
    }

    // HTTP.
    let h = &cfg.http;
    for (key, v) in [
        ("http.max_request_line", h.max_request_line),
        ("http.max_header_bytes", h.max_header_bytes),
    ] {
        if v.bytes() < 64 {
            bad(found, key, format!("{v} is too small (at least 64B)"));
        }
    }
    if h.max_request_line > h.max_header_bytes {
        bad(
            found,
            "http.max_request_line",
            format!("{} exceeds http.max_header_bytes {}", h.max_request_line, h.max_header_bytes),
        );
    }
    if h.max_headers == 0 {
        bad(found, "http.max_headers", "must be at least 1");
    }
    positive_duration(found, "http.header_timeout".into(), h.header_timeout);
    positive_duration(found, "http.idle_timeout".into(), h.idle_timeout);
    if h.max_connections_per_worker == 0 {
        bad(found, "http.max_connections_per_worker", "must be at least 1");
    }

    // Health endpoint.
    let hl = &cfg.health;
    check_health_path(found, "health.path".into(), &hl.path);
    if !(1..=100).contains(&hl.max_cpu_percent) {
        bad(found, "health.max_cpu_percent", "must be 1-100");
    }
    if hl.resume_cpu_percent >= hl.max_cpu_percent {
        bad(
            found,
            "health.resume_cpu_percent",
            format!("must be below max_cpu_percent ({})", hl.max_cpu_percent),
        );
    }
    if hl.max_connections == 0 {
        bad(found, "health.max_connections", "must be at least 1");
    }
    if hl.resume_connections >= hl.max_connections {
        bad(
            found,
            "health.resume_connections",
            format!("must be below max_connections ({})", hl.max_connections),
        );
    }
    positive_duration(found, "health.max_hit_p99".into(), hl.max_hit_p99);
    if hl.resume_hit_p99 >= hl.max_hit_p99 {
        bad(
            found,
            "health.resume_hit_p99",
            format!("must be below max_hit_p99 ({})", hl.max_hit_p99),
        );
    }

    // Admin.
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

    // Access log.
    let al = &cfg.access_log;
    if al.enabled {
        if al.path.as_os_str().is_empty() {
            bad(found, "access_log.path", "must not be empty (use \"-\" for standard output)");
        }
        if al.buffer.bytes() < 4096 {
            bad(found, "access_log.buffer", format!("{} is too small (at least 4KiB)", al.buffer));
        }
        positive_duration(found, "access_log.flush_interval".into(), al.flush_interval);
    }

    // Store.
    let s = &cfg.store;
    if s.path.as_os_str().is_empty() {
        bad(found, "store.path", "must not be empty");
    }
    if s.volume_size < ByteSize::mib(1) {
        bad(found, "store.volume_size", format!("{} is below the minimum 1MiB", s.volume_size));
    }
    if s.volume_size.bytes().checked_mul(2).is_none_or(|twice| s.size.bytes() < twice) {
        bad(
            found,
            "store.size",
            format!("{} must be at least twice store.volume_size ({})", s.size, s.volume_size),
        );
    }

    // Cache.
    let c = &cfg.cache;
    if c.heuristic_freshness || cfg.site.iter().any(|s| s.heuristic_freshness == Some(true)) {
        positive_duration(found, "cache.heuristic_max".into(), c.heuristic_max);
    }
    for (i, name) in c.targeted_cache_control.iter().enumerate() {
        let token = !name.is_empty()
            && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
        if !token {
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
    if !(1..=1024).contains(&c.max_variants) {
        bad(found, "cache.max_variants", "must be between 1 and 1024");
    }
    for (i, name) in c.fill_drop_headers.iter().enumerate() {
        let token = !name.is_empty()
            && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
        if !token {
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
    for (i, r) in c.rule.iter().enumerate() {
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

    // Sites.
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
        for (j, q) in site.ignore_query.iter().enumerate() {
            if q.is_empty() || q.contains(['&', '=', '?']) {
                bad(
                    found,
                    format!("site[{i}].ignore_query[{j}]"),
                    format!("{q:?} is not a query parameter name"),
                );
            }
        }
    }

    // Origin groups.
    let mut group_names: HashMap<&str, usize> = HashMap::new();
    for (i, g) in cfg.origin_group.iter().enumerate() {
        let key = format!("origin_group[{i}]");
        if g.name.is_empty() {
            bad(found, format!("{key}.name"), "must not be empty");
        } else if let Some(j) = group_names.insert(&g.name, i) {
            bad(
                found,
                format!("{key}.name"),
                format!("{:?} is also the name of origin_group[{j}]", g.name),
            );
        }
        positive_duration(found, format!("{key}.connect_timeout"), g.connect_timeout);
        positive_duration(found, format!("{key}.first_byte_timeout"), g.first_byte_timeout);
        positive_duration(found, format!("{key}.idle_timeout"), g.idle_timeout);
        check_origin_health(found, &format!("{key}.health"), &g.health);
        if g.tier.is_empty() {
            bad(found, key.clone(), "at least one [[origin_group.tier]] is required");
        }
        for (t, tier) in g.tier.iter().enumerate() {
            if tier.hosts.is_empty() {
                bad(found, format!("{key}.tier[{t}].hosts"), "at least one host:port is required");
            }
            for (h, host) in tier.hosts.iter().enumerate() {
                if tier.hosts[..h].contains(host) {
                    bad(
                        found,
                        format!("{key}.tier[{t}].hosts[{h}]"),
                        format!("{host} is listed twice"),
                    );
                }
            }
            if !is_header_value(&tier.host_header) || tier.host_header.contains([' ', '\t', '/']) {
                bad(
                    found,
                    format!("{key}.tier[{t}].host_header"),
                    format!("{:?} is not a valid Host value", tier.host_header),
                );
            }
            check_tier_balance(found, &format!("{key}.tier[{t}]"), tier, g.balance);
        }
        check_origin_tls(found, &key, g);
    }

    // Demo origin.
    let d = &cfg.demo_origin;
    if !(d.latency_scale.is_finite() && d.latency_scale >= 0.0) {
        bad(found, "demo_origin.latency_scale", "must be a finite number >= 0");
    }
    for (key, rate) in
        [("demo_origin.error_rate", d.error_rate), ("demo_origin.reset_rate", d.reset_rate)]
    {
        if !(0.0..=1.0).contains(&rate) {
            bad(found, key, "must be between 0.0 and 1.0");
        }
    }
    if d.segment_duration < crate::Duration::from_millis(10)
        || d.segment_duration > crate::Duration::from_secs(3600)
    {
        bad(found, "demo_origin.segment_duration", "must be between 10ms and 1h");
    }
    if d.live_segment_size.bytes() == 0 {
        bad(found, "demo_origin.live_segment_size", "must be greater than 0");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cdn_ids_and_cache_status_names() {
        for ok in ["reel", "cdn.example.com", "cdn.example.com:8443", "192.0.2.1", "a_b-c"] {
            assert!(is_cdn_id(ok), "{ok}");
        }
        for no in ["", "a b", "a,b", "a;b", "a=b", "\"q\"", "[::1]"] {
            assert!(!is_cdn_id(no), "{no}");
        }
        for ok in ["reel", "reel-shield", "edge/1", "*x", "a:b"] {
            assert!(is_sf_token(ok), "{ok}");
        }
        for no in ["", "1edge", "-x", "a b", "a;b", "a,b"] {
            assert!(!is_sf_token(no), "{no}");
        }
    }

    #[test]
    fn levels() {
        for ok in ["info", "WARN", "info,reel_cache=debug", "reel=trace, hyper=off"] {
            assert_eq!(check_level(ok), Ok(()), "{ok}");
        }
        for badl in ["", "inof", "reel=verbose", "=info", "info,,"] {
            assert!(check_level(badl).is_err(), "{badl}");
        }
    }

    #[test]
    fn site_hosts() {
        assert_eq!(check_site_host("Live.Example.com"), Ok("live.example.com".into()));
        assert!(check_site_host("*.example.com").is_ok());
        assert!(check_site_host("127.0.0.1").is_ok());
        assert!(check_site_host("[::1]").is_ok());
        for b in ["*", "example.com:80", "::1", "a b", "*.[::1]", "", "*."] {
            assert!(check_site_host(b).is_err(), "{b}");
        }
    }

    #[test]
    fn certificate_names() {
        assert_eq!(check_cert_name("Video.Example.com"), Ok("video.example.com".into()));
        assert_eq!(check_cert_name("*.cdn.example.com"), Ok("*.cdn.example.com".into()));
        for b in ["*", "*.", "a.*.example.com", "10.0.0.1", "example.com:443", "[::1]", "", "**.x"]
        {
            assert!(check_cert_name(b).is_err(), "{b}");
        }
    }

    #[test]
    fn collisions() {
        let p = |s: &str| s.parse::<SocketAddr>().expect("addr");
        assert!(collide(p("127.0.0.1:80"), p("127.0.0.1:80")));
        assert!(collide(p("0.0.0.0:80"), p("127.0.0.1:80")));
        assert!(!collide(p("127.0.0.1:80"), p("127.0.0.2:80")));
        assert!(!collide(p("127.0.0.1:0"), p("127.0.0.1:0")));
    }
}
