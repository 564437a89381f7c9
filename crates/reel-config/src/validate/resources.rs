//! What the node takes from the machine and how much load it accepts: `[cores]`, `[http]`
//! (request and HTTP/2 limits, timeouts), `[health]` (overload thresholds) and `[store]`.

use super::{Found, bad, check_health_path, positive_duration};
use crate::schema::{CoresConfig, CpuSet, HealthConfig, HttpConfig, StoreConfig};
use crate::units::ByteSize;

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

/// `[cores]`: CPU lists and NIC names.
pub(super) fn check_cores(found: &mut Found, cores: &CoresConfig) {
    check_cpu_set(found, "cores.irq", &cores.irq);
    check_cpu_set(found, "cores.workers", &cores.workers);
    for (i, nic) in cores.nic.iter().enumerate() {
        if nic.is_empty() || nic.len() > 15 || nic.contains(['/', ' ']) {
            bad(
                found,
                format!("cores.nic[{i}]"),
                format!("{nic:?} is not a network interface name"),
            );
        }
    }
}

/// `[http]`: request size limits, timeouts, connection caps and HTTP/2 settings.
pub(super) fn check_http(found: &mut Found, h: &HttpConfig) {
    for (i, net) in h.trusted_proxies.iter().enumerate() {
        if let Err(e) = crate::cidr::parse_cidr(net) {
            bad(found, format!("http.trusted_proxies[{i}]"), e);
        }
    }
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
    positive_duration(found, "http.body_timeout".into(), h.body_timeout);
    positive_duration(found, "http.send_timeout".into(), h.send_timeout);
    if h.max_connections_per_worker == 0 {
        bad(found, "http.max_connections_per_worker", "must be at least 1");
    }
    for (key, v) in [
        ("http.h2_max_concurrent_streams", h.h2_max_concurrent_streams),
        ("http.h2_max_resets_per_second", h.h2_max_resets_per_second),
    ] {
        if v == 0 {
            bad(found, key, "must be at least 1");
        }
    }
    // RFC 9113 6.9.2: a window is 65,535 to 2^31-1 octets (the connection's starts at 65,535).
    for (key, v) in [
        ("http.h2_stream_window", h.h2_stream_window),
        ("http.h2_connection_window", h.h2_connection_window),
    ] {
        if !(65_535..=(1 << 31) - 1).contains(&v.bytes()) {
            bad(found, key, format!("{v} is outside 65535B-2GiB (RFC 9113 6.9.2)"));
        }
    }
    if h.h2_stream_buffer.bytes() < 16 * 1024 || h.h2_connection_buffer < h.h2_stream_buffer {
        bad(
            found,
            "http.h2_stream_buffer",
            "must be at least 16KiB and at most h2_connection_buffer",
        );
    }
    if h.h3_send_budget.bytes() < 256 * 1024 {
        bad(found, "http.h3_send_budget", "must be at least 256KiB (one connection's send window)");
    }
}

/// `[health]`: the endpoint's path and the overload thresholds, each resume level below its
/// maximum.
pub(super) fn check_health(found: &mut Found, hl: &HealthConfig) {
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
}

/// Most `[[store.disk]]` tables: more would only be a typo or a generated file gone wrong.
const MAX_DISKS: usize = 256;

/// `[store]`: a path per disk, and room for at least two volumes on each.
pub(super) fn check_store(found: &mut Found, s: &StoreConfig) {
    if s.volume_size < ByteSize::mib(1) {
        bad(found, "store.volume_size", format!("{} is below the minimum 1MiB", s.volume_size));
    }
    if !s.disk.is_empty() {
        let d = StoreConfig::default();
        for (key, set) in [("store.path", s.path != d.path), ("store.size", s.size != d.size)] {
            if set {
                bad(
                    found,
                    key,
                    "set either store.path and store.size or [[store.disk]] tables, not both",
                );
            }
        }
        if s.disk.len() > MAX_DISKS {
            bad(found, "store.disk", format!("{} disks, at most {MAX_DISKS}", s.disk.len()));
        }
    }
    let disks = s.disks();
    for (i, (key, path, size)) in disks.iter().enumerate() {
        if path.as_os_str().is_empty() {
            bad(found, format!("{key}.path"), "must not be empty");
        } else if path.to_string_lossy().contains('\n') {
            bad(found, format!("{key}.path"), "must not contain a line break");
        }
        if let Some((other, ..)) = disks[..i].iter().find(|(_, p, _)| p == path) {
            bad(found, format!("{key}.path"), format!("{} is also {other}.path", path.display()));
        }
        if s.volume_size.bytes().checked_mul(2).is_none_or(|twice| size.bytes() < twice) {
            bad(
                found,
                format!("{key}.size"),
                format!("{size} must be at least twice store.volume_size ({})", s.volume_size),
            );
        }
    }
    if !(MIN_ADMISSION_WINDOW..=MAX_ADMISSION_WINDOW).contains(&s.admission_window) {
        bad(
            found,
            "store.admission_window",
            format!(
                "{} is outside {MIN_ADMISSION_WINDOW}..={MAX_ADMISSION_WINDOW} (objects remembered)",
                s.admission_window
            ),
        );
    }
}

/// Bounds of `store.admission_window`: below, the doorkeeper forgets within a few
/// segments' time; above, its bits take more than 600 MiB.
const MIN_ADMISSION_WINDOW: u64 = 1024;
const MAX_ADMISSION_WINDOW: u64 = 1 << 28;
