//! `[access_log]`: the file, the chosen fields, the sampling fractions and each
//! `[[access_log.sink]]`; checked only when the log is enabled.

use super::{Found, bad, positive_duration};
use crate::schema::{
    ACCESS_LOG_FIELDS, AccessLogConfig, AccessLogFormat, AccessLogSink, SYSLOG_FACILITIES,
    SinkKind, parse_collector_url, parse_syslog_address,
};

/// Longest APP-NAME RFC 5424 allows.
const APP_NAME_MAX: usize = 48;

pub(super) fn check_access_log(found: &mut Found, al: &AccessLogConfig) {
    if !al.enabled {
        return;
    }
    if al.path.as_os_str().is_empty() && al.sink.is_empty() {
        bad(
            found,
            "access_log.path",
            "must not be empty (use \"-\" for standard output) unless an [[access_log.sink]] \
             takes the lines",
        );
    }
    if al.buffer.bytes() < 4096 {
        bad(found, "access_log.buffer", format!("{} is too small (at least 4KiB)", al.buffer));
    }
    positive_duration(found, "access_log.flush_interval".into(), al.flush_interval);
    check_fields(found, &al.fields);
    check_cmcd_keys(found, &al.cmcd_keys);
    for (class, rate) in al.sample.classes() {
        if !(0.0..=1.0).contains(&rate) {
            bad(
                found,
                format!("access_log.sample.{class}"),
                format!("{rate} is not a fraction from 0 (none) to 1 (every request)"),
            );
        }
    }
    let mut names: Vec<&str> = Vec::new();
    if !al.path.as_os_str().is_empty() {
        names.push("file");
    }
    for (i, s) in al.sink.iter().enumerate() {
        check_sink(found, i, s, al.format);
        let name = s.label();
        if names.contains(&name) {
            let why = if s.name.is_empty() && name == "file" && !al.path.as_os_str().is_empty() {
                "the file of access_log.path is named \"file\""
            } else {
                "another sink has that name"
            };
            bad(
                found,
                format!("access_log.sink[{i}].name"),
                format!("{name:?} is taken ({why}): give each sink its own name"),
            );
        }
        names.push(name);
    }
}

/// `access_log.cmcd_keys`: CMCD keys (RFC 8941 `key`: lowercase, digits, `_-.*`), each
/// once, at most 32.
fn check_cmcd_keys(found: &mut Found, keys: &[String]) {
    if keys.len() > 32 {
        bad(found, "access_log.cmcd_keys", format!("{} keys; at most 32", keys.len()));
    }
    for (i, k) in keys.iter().enumerate() {
        let b = k.as_bytes();
        let first = b.first().is_some_and(|c| c.is_ascii_lowercase() || *c == b'*');
        let rest = b.iter().all(|&c| {
            c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, b'_' | b'-' | b'.' | b'*')
        });
        if !first || !rest || b.len() > 64 {
            bad(
                found,
                format!("access_log.cmcd_keys[{i}]"),
                format!(
                    "{k:?} is not a CMCD key (lowercase letters, digits, _ - . *, such as \"sid\" or \"br\")"
                ),
            );
        } else if keys[..i].contains(k) {
            bad(found, format!("access_log.cmcd_keys[{i}]"), format!("{k:?} is listed twice"));
        }
    }
}

fn check_fields(found: &mut Found, fields: &[String]) {
    if fields.is_empty() {
        bad(
            found,
            "access_log.fields",
            format!("must name at least one field: {}", ACCESS_LOG_FIELDS.join(", ")),
        );
    }
    for (i, f) in fields.iter().enumerate() {
        if !ACCESS_LOG_FIELDS.contains(&f.as_str()) {
            bad(
                found,
                format!("access_log.fields[{i}]"),
                format!("unknown field {f:?}: known fields are {}", ACCESS_LOG_FIELDS.join(", ")),
            );
        } else if fields[..i].contains(f) {
            bad(found, format!("access_log.fields[{i}]"), format!("{f:?} is listed twice"));
        }
    }
}

fn check_sink(found: &mut Found, i: usize, s: &AccessLogSink, format: AccessLogFormat) {
    let key = |k: &str| format!("access_log.sink[{i}].{k}");
    let Some(kind) = s.kind else {
        bad(
            found,
            format!("access_log.sink[{i}]"),
            "needs kind = \"file\", \"syslog\" or \"http\"",
        );
        return;
    };
    let foreign = |found: &mut Found, set: bool, k: &str, owner: &str| {
        if set {
            bad(found, key(k), format!("applies to kind = \"{owner}\", not \"{}\"", kind.as_str()));
        }
    };
    foreign(found, kind != SinkKind::File && !s.path.as_os_str().is_empty(), "path", "file");
    foreign(found, kind != SinkKind::Syslog && !s.address.is_empty(), "address", "syslog");
    foreign(found, kind != SinkKind::Http && !s.url.is_empty(), "url", "http");
    if !s.name.is_empty()
        && !s.name.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
    {
        bad(found, key("name"), format!("{:?}: use letters, digits, '-', '_' and '.'", s.name));
    }
    match kind {
        SinkKind::File if s.path.as_os_str().is_empty() => {
            bad(found, key("path"), "a file sink needs a path (\"-\" for standard output)")
        }
        SinkKind::File => {}
        SinkKind::Syslog => {
            if let Err(e) = parse_syslog_address(&s.address) {
                bad(found, key("address"), e);
            }
            if !SYSLOG_FACILITIES.contains(&s.facility.as_str()) {
                bad(
                    found,
                    key("facility"),
                    format!(
                        "unknown facility {:?}: one of {}",
                        s.facility,
                        SYSLOG_FACILITIES.join(", ")
                    ),
                );
            }
            if s.app_name.is_empty()
                || s.app_name.len() > APP_NAME_MAX
                || !s.app_name.bytes().all(|b| b.is_ascii_graphic())
            {
                bad(
                    found,
                    key("app_name"),
                    format!(
                        "{:?}: 1-48 printable ASCII characters without spaces (RFC 5424)",
                        s.app_name
                    ),
                );
            }
            positive_duration(found, key("timeout"), s.timeout);
        }
        SinkKind::Http => {
            if let Err(e) = parse_collector_url(&s.url) {
                bad(found, key("url"), e);
            }
            if format != AccessLogFormat::Json {
                bad(
                    found,
                    key("kind"),
                    "an http sink posts NDJSON: it needs access_log.format = \"json\"",
                );
            }
            if s.batch_lines == 0 {
                bad(found, key("batch_lines"), "must be at least 1");
            }
            if s.batch_bytes.bytes() < 1024 {
                bad(
                    found,
                    key("batch_bytes"),
                    format!("{} is too small (at least 1KiB)", s.batch_bytes),
                );
            }
            if s.retries > 10 {
                bad(found, key("retries"), format!("{} is too many (at most 10)", s.retries));
            }
            positive_duration(found, key("interval"), s.interval);
            positive_duration(found, key("timeout"), s.timeout);
        }
    }
}
