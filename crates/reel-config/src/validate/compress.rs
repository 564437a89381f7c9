//! `[site.compress]`: the media types, codings, sizes and levels of a site's compression.

use super::{Found, bad, is_tchar};
use crate::schema::CompressConfig;
use crate::units::ByteSize;

/// Largest `max_size`: a body is compressed on the worker that first wants it.
const MOST_MAX_SIZE: ByteSize = ByteSize::mib(16);

/// A `type/subtype` media type without parameters (RFC 9110 8.3.1).
fn is_media_type(t: &str) -> bool {
    let Some((ty, sub)) = t.split_once('/') else { return false };
    [ty, sub].iter().all(|p| !p.is_empty() && p.bytes().all(is_tchar))
}

/// `[[site]]` `i`'s `[site.compress]`.
pub(super) fn check_compress(found: &mut Found, i: usize, c: &CompressConfig) {
    let key = |k: &str| format!("site[{i}].compress.{k}");
    for (j, t) in c.types.iter().enumerate() {
        if !is_media_type(t) {
            bad(
                found,
                format!("site[{i}].compress.types[{j}]"),
                format!(
                    "{t:?} is not a media type such as \"application/vnd.apple.mpegurl\" (no parameters)"
                ),
            );
        }
    }
    if c.enabled && c.encodings.is_empty() {
        bad(
            found,
            key("encodings"),
            "list at least one of \"br\", \"gzip\" (or set enabled = false)",
        );
    }
    for (j, e) in c.encodings.iter().enumerate() {
        if c.encodings[..j].contains(e) {
            bad(found, format!("site[{i}].compress.encodings[{j}]"), "listed twice");
        }
    }
    if c.max_size > MOST_MAX_SIZE {
        bad(found, key("max_size"), format!("{} is above the most, {MOST_MAX_SIZE}", c.max_size));
    }
    if c.min_size > c.max_size {
        bad(
            found,
            key("min_size"),
            format!(
                "{} is above max_size ({}): nothing would be compressed",
                c.min_size, c.max_size
            ),
        );
    }
    if c.brotli_quality > 11 {
        bad(found, key("brotli_quality"), "must be between 0 and 11");
    }
    if !(1..=9).contains(&c.gzip_level) {
        bad(found, key("gzip_level"), "must be between 1 and 9");
    }
}
