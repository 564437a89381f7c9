//! `[[listener]]` (names, addresses, TLS keys) and `[[certificate]]`.

use std::collections::HashMap;
use std::net::SocketAddr;

use super::{Found, bad};
use crate::Config;
use crate::schema::{ListenerConfig, TlsCert, TlsVersion, is_dns_name};

/// Two addresses would collide on bind: same non-zero port and same IP, or either IP is the
/// wildcard address.
pub(super) fn collide(a: SocketAddr, b: SocketAddr) -> bool {
    a.port() != 0
        && a.port() == b.port()
        && (a.ip() == b.ip() || a.ip().is_unspecified() || b.ip().is_unspecified())
}

/// `[[listener]]`: at least one; unique names; addresses that collide with no other
/// listener, the admin listener or the demo origin.
pub(super) fn check_listeners(found: &mut Found, cfg: &Config) {
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
        if l.proxy_protocol && cfg.http.trusted_proxies.is_empty() {
            bad(
                found,
                format!("listener[{i}].proxy_protocol"),
                "takes connections only from http.trusted_proxies, which is empty: list the \
                 balancers that send the PROXY header",
            );
        }
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
        if l.ktls.is_some() {
            bad(found, key("ktls"), "only applies to a TLS listener (set tls_cert)");
        }
        if l.min_tls_version != TlsVersion::default() {
            bad(found, key("min_tls_version"), "only applies to a TLS listener (set tls_cert)");
        }
        if l.http3 == Some(true) {
            bad(found, key("http3"), "HTTP/3 is served on TLS listeners only (set tls_cert)");
        }
    }
}

/// Keys of `[[listener]]` that are accepted but do nothing: `alt_svc_max_age` and
/// `quic_retry` without HTTP/3, so that turning HTTP/3 off is the one word `http3 = false`
/// (a reload that also had to delete them would fail on the first try).
pub(super) fn warn_listeners(found: &mut Found, cfg: &Config) {
    for (i, l) in cfg.listener.iter().enumerate() {
        if l.http3_enabled() {
            continue;
        }
        for (name, set) in [
            ("alt_svc_max_age", l.alt_svc_max_age.is_some()),
            ("quic_retry", l.quic_retry.is_some()),
        ] {
            if set {
                bad(
                    found,
                    format!("listener[{i}].{name}"),
                    "does nothing without HTTP/3 (http3 = false): ignored; remove it when \
                     HTTP/3 stays off",
                );
            }
        }
    }
}

/// A `[[certificate]].names` entry: a DNS name or `*.domain` (a wildcard covers exactly
/// one label, RFC 6125 section 6.4.3). Returns the lowercase form.
pub(super) fn check_cert_name(name: &str) -> Result<String, String> {
    let dns = name.strip_prefix("*.").unwrap_or(name);
    if dns.contains('*') || !is_dns_name(dns) || dns.parse::<std::net::Ipv4Addr>().is_ok() {
        return Err(format!(
            "{name:?} is not a DNS name or \"*.domain\" wildcard (TLS server names carry no IP addresses or ports)"
        ));
    }
    Ok(name.trim_end_matches('.').to_ascii_lowercase())
}

/// `[[certificate]]`: server names claimed once each, PEM paths, and a TLS listener to use
/// them.
pub(super) fn check_certificates(found: &mut Found, cfg: &Config) {
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
