//! `[[origin_group]]` with its tiers, health checks, balancing and TLS, and `[demo_origin]`.

use std::collections::HashMap;

use super::{Found, bad, check_health_path, is_header_value, positive_duration};
use crate::schema::{
    DemoOriginConfig, OriginBalance, OriginGroupConfig, OriginHealthConfig, TierConfig, is_dns_name,
};

/// Largest `weights` entry: enough for any real capacity ratio, small enough that no host can
/// be configured into owning every key by accident.
const MAX_WEIGHT: u32 = 1000;

/// `[[origin_group]]`: unique names, timeouts, health checks, tiers and TLS.
pub(super) fn check_origin_groups(found: &mut Found, groups: &[OriginGroupConfig]) {
    let mut group_names: HashMap<&str, usize> = HashMap::new();
    for (i, g) in groups.iter().enumerate() {
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
        if g.max_connections == 0 {
            bad(found, format!("{key}.max_connections"), "must be at least 1");
        }
        check_origin_health(found, &format!("{key}.health"), &g.health);
        if g.tier.is_empty() {
            bad(found, key.clone(), "at least one [[origin_group.tier]] is required");
        }
        for (t, tier) in g.tier.iter().enumerate() {
            check_tier(found, &format!("{key}.tier[{t}]"), tier, g.balance);
        }
        check_origin_tls(found, &key, g);
        super::origin_auth::check_origin_auth(found, &key, g);
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

/// One `[[origin_group.tier]]` (`key` is its path): hosts listed once, a valid Host value,
/// and weights that fit the group's balance.
fn check_tier(found: &mut Found, key: &str, tier: &TierConfig, balance: OriginBalance) {
    if tier.hosts.is_empty() {
        bad(found, format!("{key}.hosts"), "at least one host:port is required");
    }
    for (h, host) in tier.hosts.iter().enumerate() {
        if tier.hosts[..h].contains(host) {
            bad(found, format!("{key}.hosts[{h}]"), format!("{host} is listed twice"));
        }
    }
    if !is_header_value(&tier.host_header) || tier.host_header.contains([' ', '\t', '/']) {
        bad(
            found,
            format!("{key}.host_header"),
            format!("{:?} is not a valid Host value", tier.host_header),
        );
    }
    check_tier_balance(found, key, tier, balance);
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

/// `[demo_origin]`: simulation rates and sizes.
pub(super) fn check_demo_origin(found: &mut Found, d: &DemoOriginConfig) {
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
