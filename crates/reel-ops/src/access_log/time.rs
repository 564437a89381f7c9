//! Timestamps of log lines, in UTC: RFC 3339 with milliseconds (JSON, syslog) and the
//! combined format's `[18/Nov/2026:11:06:40 +0000]`.

use std::io::Write as _;
use std::time::{SystemTime, UNIX_EPOCH};

/// (year, month, day, hour, minute, second, millisecond) in UTC.
fn civil(t: SystemTime) -> (i64, u32, u32, u32, u32, u32, u32) {
    let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = d.as_secs() as i64;
    let days = secs.div_euclid(86_400);
    let sod = secs.rem_euclid(86_400) as u32;
    // Howard Hinnant's days-to-civil algorithm.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day, sod / 3600, sod / 60 % 60, sod % 60, d.subsec_millis())
}

/// `2026-11-18T11:06:40.123Z`.
pub(crate) fn rfc3339(s: &mut Vec<u8>, t: SystemTime) {
    let (y, mo, d, h, mi, se, ms) = civil(t);
    let _ = write!(s, "{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{se:02}.{ms:03}Z");
}

/// `18/Nov/2026:11:06:40 +0000`.
pub(crate) fn clf_time(s: &mut Vec<u8>, t: SystemTime) {
    const M: [&str; 12] =
        ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
    let (y, mo, d, h, mi, se, _) = civil(t);
    let _ = write!(s, "{d:02}/{}/{y:04}:{h:02}:{mi:02}:{se:02} +0000", M[(mo - 1) as usize % 12]);
}
