//! Writing one line: the JSON object of the chosen fields, or the combined format.
//!
//! JSON lines are escaped by `serde_json`; request bytes that are not UTF-8 are written as
//! `\xNN` text (the combined format's convention), so a line is always valid JSON.

use std::fmt::Write as _;
use std::io::Write as _;

use super::Entry;
use super::fields::Field;
use super::time::{clf_time, rfc3339};

/// Appends `b` as a JSON string: UTF-8 as is (escaped by serde_json), each byte that is
/// not part of valid UTF-8 as the text `\xNN`.
pub(crate) fn json_str(s: &mut Vec<u8>, b: &[u8]) {
    let text: std::borrow::Cow<'_, str> = match std::str::from_utf8(b) {
        Ok(t) => t.into(),
        Err(_) => {
            let mut t = String::with_capacity(b.len() + 8);
            for chunk in b.utf8_chunks() {
                t.push_str(chunk.valid());
                for byte in chunk.invalid() {
                    let _ = write!(t, "\\x{byte:02x}");
                }
            }
            t.into()
        }
    };
    // Serializing a str into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *s, text.as_ref());
}

/// One JSON object of `fields`, in that order, and a newline.
pub(crate) fn json_line(s: &mut Vec<u8>, e: &Entry<'_>, fields: &[Field]) {
    s.push(b'{');
    let mut first = true;
    for &f in fields {
        let mark = s.len();
        s.extend_from_slice(if first { b"\"" } else { b",\"" });
        s.extend_from_slice(f.name().as_bytes());
        s.extend_from_slice(b"\":");
        if json_field(s, e, f) {
            first = false;
        } else {
            s.truncate(mark);
        }
    }
    if let Some(c) = &e.cmcd {
        let mark = s.len();
        crate::access_log_cmcd::json(s, c);
        if first {
            // No field before it: drop the separator the renderer writes.
            s.remove(mark);
        }
    }
    s.extend_from_slice(b"}\n");
}

/// Appends the value of `f`; `false` when the line has none (the key is then left out).
fn json_field(s: &mut Vec<u8>, e: &Entry<'_>, f: Field) -> bool {
    match f {
        Field::Time => {
            s.push(b'"');
            rfc3339(s, e.time);
            s.push(b'"');
        }
        Field::Client => {
            let _ = write!(s, "\"{}\"", e.client.ip());
        }
        Field::Peer => match e.peer {
            Some(p) => {
                let _ = write!(s, "\"{p}\"");
            }
            None => return false,
        },
        Field::Method => json_str(s, e.method.as_bytes()),
        Field::Host => json_str(s, e.host),
        Field::Path => json_str(s, e.target),
        Field::Protocol => json_str(s, e.protocol.as_bytes()),
        Field::Status => {
            let _ = write!(s, "{}", e.status);
        }
        Field::Bytes => {
            let _ = write!(s, "{}", e.bytes);
        }
        Field::Cache => json_str(s, e.cache.as_bytes()),
        Field::OriginMs => match e.origin_time {
            Some(d) => {
                let _ = write!(s, "{:.3}", d.as_secs_f64() * 1000.0);
            }
            None => s.extend_from_slice(b"null"),
        },
        Field::TotalMs => {
            let _ = write!(s, "{:.3}", e.total_time.as_secs_f64() * 1000.0);
        }
        Field::Ua => json_str(s, e.user_agent),
        Field::Request => match &e.refused {
            Some(r) => json_str(s, r.request_line),
            None => return false,
        },
        Field::Error => match &e.refused {
            Some(r) => json_str(s, r.reason.as_bytes()),
            None => return false,
        },
        Field::Denied => match e.denied {
            Some(d) => json_str(s, d.as_bytes()),
            None => return false,
        },
    }
    true
}

fn quoted(s: &mut Vec<u8>, b: &[u8]) {
    for &c in b {
        match c {
            b'"' | b'\\' => {
                let _ = write!(s, "\\x{:02x}", c);
            }
            0x20..=0x7e => s.push(c),
            _ => {
                let _ = write!(s, "\\x{:02x}", c);
            }
        }
    }
}

/// One line of the combined format, with cache result and times appended.
pub(crate) fn combined_line(s: &mut Vec<u8>, e: &Entry<'_>) {
    let _ = write!(s, "{} - - [", e.client.ip());
    clf_time(s, e.time);
    match &e.refused {
        // `%r` is the request line as it came, as nginx logs a request it refused.
        Some(r) => {
            s.extend_from_slice(b"] \"");
            quoted(s, r.request_line);
        }
        None => {
            let _ = write!(s, "] \"{} ", e.method);
            quoted(s, e.target);
            s.push(b' ');
            quoted(s, e.protocol.as_bytes());
        }
    }
    let _ = write!(s, "\" {} {} \"-\" \"", e.status, e.bytes);
    quoted(s, e.user_agent);
    s.extend_from_slice(b"\" host=\"");
    quoted(s, e.host);
    let _ = write!(s, "\" cache={}", e.cache);
    match e.origin_time {
        Some(d) => {
            let _ = write!(s, " origin_ms={:.3}", d.as_secs_f64() * 1000.0);
        }
        None => s.extend_from_slice(b" origin_ms=-"),
    }
    let _ = write!(s, " total_ms={:.3}", e.total_time.as_secs_f64() * 1000.0);
    if let Some(p) = e.peer {
        let _ = write!(s, " peer={p}");
    }
    if let Some(r) = &e.refused {
        s.extend_from_slice(b" error=\"");
        quoted(s, r.reason.as_bytes());
        s.push(b'"');
    }
    if let Some(d) = e.denied {
        s.extend_from_slice(b" denied=");
        quoted(s, d.as_bytes());
    }
    if let Some(c) = &e.cmcd {
        crate::access_log_cmcd::combined(s, c);
    }
    s.push(b'\n');
}
