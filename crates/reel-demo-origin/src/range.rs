//! Single-range `Range` requests (RFC 9110 §14.1.2, §14.2): enough for caches that fill
//! or revalidate by range. Multiple ranges and malformed values are ignored (full `200`),
//! which §14.2 permits.

/// What to send for a `Range` header against a representation of `len` bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RangeSpec {
    /// Ignore the header: send the whole representation.
    Full,
    /// `206` with bytes `[start, end]` (inclusive, as in `Content-Range`).
    Partial(u64, u64),
    /// `416` with `Content-Range: bytes */len` (§15.5.17).
    Unsatisfiable,
}

pub(crate) fn parse_range(value: &str, len: u64) -> RangeSpec {
    let Some((unit, set)) = value.trim().split_once('=') else { return RangeSpec::Full };
    if !unit.trim().eq_ignore_ascii_case("bytes") || set.contains(',') {
        return RangeSpec::Full;
    }
    let Some((a, b)) = set.trim().split_once('-') else { return RangeSpec::Full };
    let num = |s: &str| {
        if s.is_empty() || !s.bytes().all(|c| c.is_ascii_digit()) {
            None
        } else {
            s.parse::<u64>().ok()
        }
    };
    match (a.is_empty(), num(a), num(b)) {
        // suffix-range: the last N bytes (§14.1.3).
        (true, _, Some(n)) => {
            if n == 0 || len == 0 {
                RangeSpec::Unsatisfiable
            } else {
                RangeSpec::Partial(len - n.min(len), len - 1)
            }
        }
        (false, Some(first), last) => {
            if !b.is_empty() && last.is_none() {
                return RangeSpec::Full;
            }
            if last.is_some_and(|l| l < first) {
                return RangeSpec::Full;
            }
            if first >= len {
                return RangeSpec::Unsatisfiable;
            }
            RangeSpec::Partial(first, last.map_or(len - 1, |l| l.min(len - 1)))
        }
        _ => RangeSpec::Full,
    }
}

#[cfg(test)]
mod tests {
    use super::RangeSpec::*;
    use super::*;

    #[test]
    fn table() {
        let cases: &[(&str, u64, RangeSpec)] = &[
            ("bytes=0-99", 1000, Partial(0, 99)),
            ("bytes=100-", 1000, Partial(100, 999)),
            ("bytes=-100", 1000, Partial(900, 999)),
            ("bytes=-5000", 1000, Partial(0, 999)),
            ("bytes=990-2000", 1000, Partial(990, 999)),
            ("BYTES = 5-5", 1000, Partial(5, 5)),
            ("bytes=1000-", 1000, Unsatisfiable),
            ("bytes=-0", 1000, Unsatisfiable),
            ("bytes=0-", 0, Unsatisfiable),
            ("bytes=5-1", 1000, Full),
            ("bytes=0-1,5-6", 1000, Full),
            ("items=0-1", 1000, Full),
            ("bytes=a-b", 1000, Full),
            ("bytes=1-x", 1000, Full),
            ("bytes=+1-2", 1000, Full),
            ("bytes", 1000, Full),
            ("bytes=-", 1000, Full),
        ];
        for (v, len, want) in cases {
            assert_eq!(parse_range(v, *len), *want, "{v} / {len}");
        }
    }
}
