//! Byte ranges (RFC 9110 14): parsing `Range`, resolving it against a complete or
//! still-filling representation, and formatting `Content-Range`.
//!
//! Multiple ranges ([`RangeSet::parts`]): unsatisfiable members are dropped; when any two
//! of the rest overlap, touch or are separated by a gap smaller than the overhead of a part
//! ([`SMALL_GAP`]), all are sorted and coalesced (RFC 9110 14.2 allows a server to coalesce,
//! and coalescing is what defuses the "many overlapping ranges" attack that section warns
//! of); otherwise they keep the order of the request (14.2: parts SHOULD follow it). One
//! range left is a single-part 206; several are a `multipart/byteranges` 206 (14.6,
//! framed by `multipart`).
//!
//! A Range header with more than [`MAX_RANGES`] ranges, an unknown unit, or any invalid
//! range-spec is ignored (200), as RFC 9110 14.2 permits.

use std::fmt::Write as _;

use super::headers::trim_ows;

/// More ranges than this in one request: ignore the header (abuse guard, RFC 9110 14.2
/// "ignore ... many small ranges"). Also the most parts of a multipart answer.
pub const MAX_RANGES: usize = 16;

/// Ranges separated by fewer bytes than this are coalesced: about what one more part of a
/// `multipart/byteranges` body costs in boundary and header lines (RFC 9110 14.2).
pub const SMALL_GAP: u64 = 80;

/// Bytes a `multipart/byteranges` body may take on top of its parts' bytes, with a wide
/// margin: [`MAX_RANGES`] part heads naming a media type as long as stored metadata can
/// hold. A representation longer than `u64::MAX` minus this is answered in one part.
pub const MULTIPART_ROOM: u64 = 1 << 32;

/// One range-spec (RFC 9110 14.1.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RangeSpec {
    /// `first-last` (inclusive).
    FromTo(u64, u64),
    /// `first-`.
    From(u64),
    /// `-suffix`: the last `n` bytes.
    Suffix(u64),
}

/// A parsed `Range: bytes=...` header. Construct with [`parse_range`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RangeSet {
    specs: Vec<RangeSpec>,
}

/// A resolved, inclusive byte range `start..=end`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ByteRange {
    /// First byte offset.
    pub start: u64,
    /// Last byte offset (inclusive).
    pub end: u64,
}

impl ByteRange {
    /// Number of bytes in the range.
    pub fn len(&self) -> u64 {
        self.end - self.start + 1
    }

    /// Always false: a resolved range holds at least one byte.
    pub fn is_empty(&self) -> bool {
        false
    }
}

/// How much of the representation exists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Available {
    /// The whole representation, of this length, is stored.
    Complete(u64),
    /// A miss still streaming in: `available` bytes are stored so far, `total` is the
    /// eventual length when the origin announced it (Content-Length).
    Filling {
        /// Bytes stored so far.
        available: u64,
        /// Final length if known.
        total: Option<u64>,
    },
}

/// What to answer for a Range request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RangeOutcome {
    /// Serve the whole representation with 200 (no usable Range).
    Full,
    /// Serve this range with 206; `total` is the complete length for `Content-Range`
    /// (`None` only while filling with an unknown length: use `*`).
    Partial {
        /// The range to send.
        range: ByteRange,
        /// The complete length, if known.
        total: Option<u64>,
    },
    /// The answer depends on bytes not yet received: wait for more data (or completion)
    /// and resolve again.
    Wait,
    /// Several ranges: a `multipart/byteranges` 206 of [`RangeSet::parts`] of `total`.
    Multipart {
        /// The complete length.
        total: u64,
    },
    /// 416 Range Not Satisfiable with `Content-Range: bytes */len` (RFC 9110 15.5.17).
    Unsatisfiable {
        /// The complete length for `Content-Range`.
        total: u64,
    },
}

fn parse_u64(s: &[u8]) -> Option<u64> {
    if s.is_empty() || s.len() > 20 || !s.iter().all(u8::is_ascii_digit) {
        return None;
    }
    s.iter().try_fold(0u64, |acc, &d| acc.checked_mul(10)?.checked_add(u64::from(d - b'0')))
}

/// Parses a `Range` field value (RFC 9110 14.2). Returns `None` when the header must be
/// ignored: not the `bytes` unit (case-insensitive, 14.1), empty, syntactically invalid,
/// `first > last` (14.1.1), or more than [`MAX_RANGES`] ranges.
pub fn parse_range(value: &[u8]) -> Option<RangeSet> {
    let value = trim_ows(value);
    let eq = value.iter().position(|&b| b == b'=')?;
    if !trim_ows(&value[..eq]).eq_ignore_ascii_case(b"bytes") {
        return None;
    }
    let mut specs = Vec::new();
    for member in value[eq + 1..].split(|&b| b == b',') {
        let member = trim_ows(member);
        if member.is_empty() {
            continue; // 1#element tolerates empty list elements (RFC 9110 5.6.1)
        }
        if specs.len() == MAX_RANGES {
            return None;
        }
        let dash = member.iter().position(|&b| b == b'-')?;
        let (first, last) = (&member[..dash], &member[dash + 1..]);
        let spec = match (first.is_empty(), last.is_empty()) {
            (true, true) => return None,
            (true, false) => RangeSpec::Suffix(parse_u64(last)?),
            (false, true) => RangeSpec::From(parse_u64(first)?),
            (false, false) => {
                let (f, l) = (parse_u64(first)?, parse_u64(last)?);
                if l < f {
                    return None;
                }
                RangeSpec::FromTo(f, l)
            }
        };
        specs.push(spec);
    }
    if specs.is_empty() { None } else { Some(RangeSet { specs }) }
}

impl RangeSet {
    /// The parsed range-specs, in request order.
    pub fn specs(&self) -> &[RangeSpec] {
        &self.specs
    }

    /// Resolves against a complete length: the satisfiable ranges (RFC 9110 14.1.1),
    /// sorted and coalesced.
    pub fn satisfiable(&self, len: u64) -> Vec<ByteRange> {
        let mut out: Vec<ByteRange> =
            self.specs.iter().filter_map(|s| resolve_spec(*s, len)).collect();
        out.sort_unstable_by_key(|r| r.start);
        let mut merged: Vec<ByteRange> = Vec::with_capacity(out.len());
        for r in out {
            match merged.last_mut() {
                Some(last) if r.start <= last.end.saturating_add(1) => {
                    last.end = last.end.max(r.end)
                }
                _ => merged.push(r),
            }
        }
        merged
    }

    /// The parts to send for a representation of `len` bytes, in the order to send them:
    /// the satisfiable ranges in request order, or, when any two of them overlap, touch or
    /// are less than [`SMALL_GAP`] apart, all of them sorted and coalesced (RFC 9110 14.2);
    /// one range spanning them all for a representation within [`MULTIPART_ROOM`] of
    /// 2^64 bytes. At most [`MAX_RANGES`]; empty when none is satisfiable.
    pub fn parts(&self, len: u64) -> Vec<ByteRange> {
        let ordered: Vec<ByteRange> =
            self.specs.iter().filter_map(|s| resolve_spec(*s, len)).collect();
        if ordered.len() < 2 {
            return ordered;
        }
        if len > u64::MAX - MULTIPART_ROOM {
            // A multipart body of this representation might not have a length: one range
            // covering them all (RFC 9110 14.2 lets a server coalesce ranges).
            let start = ordered.iter().map(|r| r.start).min().unwrap_or(0);
            let end = ordered.iter().map(|r| r.end).max().unwrap_or(0);
            return vec![ByteRange { start, end }];
        }
        let mut sorted = ordered.clone();
        sorted.sort_unstable_by_key(|r| r.start);
        let close = |a: &ByteRange, b: &ByteRange| b.start <= a.end.saturating_add(SMALL_GAP);
        if !sorted.windows(2).any(|w| close(&w[0], &w[1])) {
            return ordered;
        }
        let mut merged: Vec<ByteRange> = Vec::with_capacity(sorted.len());
        for r in sorted {
            match merged.last_mut() {
                Some(last) if close(last, &r) => last.end = last.end.max(r.end),
                _ => merged.push(r),
            }
        }
        merged
    }

    /// Decides the answer for this Range against what is stored (see the module doc for the
    /// multi-range policy).
    ///
    /// While filling with a known total, the answer is computed against the total and is
    /// [`RangeOutcome::Wait`] until the range's last byte is stored; with an unknown total,
    /// `first-last` ranges inside the stored prefix are served at once and everything else
    /// waits (a suffix or open range needs the final length).
    pub fn resolve(&self, avail: Available) -> RangeOutcome {
        let (len, have) = match avail {
            Available::Complete(len) => (len, len),
            Available::Filling { available, total: Some(t) } => (t, available.min(t)),
            Available::Filling { available, total: None } => {
                return match self.specs.as_slice() {
                    [RangeSpec::FromTo(f, l)] if *l < available => RangeOutcome::Partial {
                        range: ByteRange { start: *f, end: *l },
                        total: None,
                    },
                    _ => RangeOutcome::Wait,
                };
            }
        };
        let ranges = self.parts(len);
        match ranges.as_slice() {
            [] => RangeOutcome::Unsatisfiable { total: len },
            [r] if r.end < have => RangeOutcome::Partial { range: *r, total: Some(len) },
            [_] => RangeOutcome::Wait,
            // Parts are streamed as their bytes arrive.
            _ => RangeOutcome::Multipart { total: len },
        }
    }
}

/// The bytes one range-spec selects of a representation of `len` bytes, if any (RFC 9110
/// 14.1.1).
fn resolve_spec(spec: RangeSpec, len: u64) -> Option<ByteRange> {
    match spec {
        RangeSpec::FromTo(f, l) if f < len => Some(ByteRange { start: f, end: l.min(len - 1) }),
        RangeSpec::From(f) if f < len => Some(ByteRange { start: f, end: len - 1 }),
        RangeSpec::Suffix(n) if n > 0 && len > 0 => {
            Some(ByteRange { start: len - n.min(len), end: len - 1 })
        }
        _ => None,
    }
}

/// Formats a `Content-Range` value for a partial response (RFC 9110 14.4):
/// `bytes first-last/complete` or `bytes first-last/*`.
pub fn content_range(range: ByteRange, total: Option<u64>) -> String {
    let mut s = String::with_capacity(48);
    let _ = write!(s, "bytes {}-{}/", range.start, range.end);
    match total {
        Some(t) => {
            let _ = write!(s, "{t}");
        }
        None => s.push('*'),
    }
    s
}

/// Parses the `Content-Range` of a 206 (RFC 9110 14.4): `bytes first-last/complete` or
/// `bytes first-last/*`, as the range and the complete length if given. `None` for any
/// other form (another unit, `*/complete`, `last < first`, `last >= complete`).
pub fn parse_content_range(value: &[u8]) -> Option<(ByteRange, Option<u64>)> {
    let value = trim_ows(value);
    let sp = value.iter().position(|&b| b == b' ')?;
    if !value[..sp].eq_ignore_ascii_case(b"bytes") {
        return None;
    }
    let rest = &value[sp + 1..];
    let slash = rest.iter().position(|&b| b == b'/')?;
    let (range, complete) = (&rest[..slash], &rest[slash + 1..]);
    let dash = range.iter().position(|&b| b == b'-')?;
    let (first, last) = (parse_u64(&range[..dash])?, parse_u64(&range[dash + 1..])?);
    let total = match complete {
        b"*" => None,
        t => Some(parse_u64(t)?),
    };
    if last < first || total.is_some_and(|t| last >= t) {
        return None;
    }
    Some((ByteRange { start: first, end: last }, total))
}

/// Formats the `Content-Range` value of a 416 (RFC 9110 14.4, 15.5.17): `bytes */len`.
pub fn content_range_unsatisfied(total: u64) -> String {
    format!("bytes */{total}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use RangeSpec::*;

    #[test]
    fn parse_table() {
        let cases: &[(&str, Option<&[RangeSpec]>)] = &[
            ("bytes=0-499", Some(&[FromTo(0, 499)])),
            ("bytes=500-999", Some(&[FromTo(500, 999)])),
            ("bytes=-500", Some(&[Suffix(500)])),
            ("bytes=9500-", Some(&[From(9500)])),
            ("bytes=0-0,-1", Some(&[FromTo(0, 0), Suffix(1)])),
            ("BYTES=0-1", Some(&[FromTo(0, 1)])),
            (" bytes = 0-1 , 5-6 ", Some(&[FromTo(0, 1), FromTo(5, 6)])),
            ("bytes=0-1,,", Some(&[FromTo(0, 1)])),
            ("bytes=5-5", Some(&[FromTo(5, 5)])),
            ("bytes=5-4", None),
            ("bytes=", None),
            ("bytes=-", None),
            ("bytes=a-b", None),
            ("bytes=1", None),
            ("bytes=0-1,x", None),
            ("bytes=--1", None),
            ("bytes=-1-2", None),
            ("bytes=+1-2", None),
            ("items=0-1", None),
            ("0-1", None),
            ("", None),
            ("bytes=99999999999999999999-", None),
            ("bytes=18446744073709551615-", Some(&[From(u64::MAX)])),
            ("bytes=0 - 1", None),
        ];
        for (input, want) in cases {
            let got = parse_range(input.as_bytes());
            assert_eq!(got.as_ref().map(|r| r.specs()), *want, "{input}");
        }
    }

    #[test]
    fn too_many_ranges_ignored() {
        let ok = (0..16).map(|i| format!("{}-{}", i * 10, i * 10 + 1)).collect::<Vec<_>>();
        assert!(parse_range(format!("bytes={}", ok.join(",")).as_bytes()).is_some());
        let bad = (0..17).map(|i| format!("{}-{}", i * 10, i * 10 + 1)).collect::<Vec<_>>();
        assert!(parse_range(format!("bytes={}", bad.join(",")).as_bytes()).is_none());
        let huge = format!("bytes={}", "0-1,".repeat(100_000));
        assert!(parse_range(huge.as_bytes()).is_none());
    }

    fn r(s: u64, e: u64) -> ByteRange {
        ByteRange { start: s, end: e }
    }

    #[test]
    fn resolve_complete_table() {
        use RangeOutcome::*;
        let p = |s, e, t| Partial { range: r(s, e), total: Some(t) };
        let cases: &[(&str, u64, RangeOutcome)] = &[
            ("bytes=0-499", 10000, p(0, 499, 10000)),
            ("bytes=0-499", 100, p(0, 99, 100)),
            ("bytes=-500", 10000, p(9500, 9999, 10000)),
            ("bytes=-500", 100, p(0, 99, 100)),
            ("bytes=9500-", 10000, p(9500, 9999, 10000)),
            ("bytes=10000-", 10000, Unsatisfiable { total: 10000 }),
            ("bytes=10000-20000", 10000, Unsatisfiable { total: 10000 }),
            ("bytes=-0", 10000, Unsatisfiable { total: 10000 }),
            ("bytes=0-", 0, Unsatisfiable { total: 0 }),
            ("bytes=-5", 0, Unsatisfiable { total: 0 }),
            // unsatisfiable members are dropped when others are satisfiable
            ("bytes=20000-,0-9", 100, p(0, 9, 100)),
            // coalescing: overlap and adjacency become one range
            ("bytes=0-9,5-19", 100, p(0, 19, 100)),
            ("bytes=0-9,10-19", 100, p(0, 19, 100)),
            ("bytes=10-19,0-9", 100, p(0, 19, 100)),
            ("bytes=0-49,-60", 100, p(0, 99, 100)),
            // disjoint multiple ranges: multipart, unless close enough to coalesce
            ("bytes=0-9,200-209", 1000, Multipart { total: 1000 }),
            ("bytes=0-0,-1", 1000, Multipart { total: 1000 }),
            ("bytes=0-9,20-29", 100, p(0, 29, 100)),
        ];
        for (input, len, want) in cases {
            let set = parse_range(input.as_bytes()).unwrap();
            assert_eq!(set.resolve(Available::Complete(*len)), *want, "{input} len {len}");
        }
    }

    #[test]
    fn resolve_filling_table() {
        use RangeOutcome::*;
        let f = |a, t| Available::Filling { available: a, total: t };
        let cases: &[(&str, Available, RangeOutcome)] = &[
            ("bytes=0-99", f(100, Some(1000)), Partial { range: r(0, 99), total: Some(1000) }),
            ("bytes=0-100", f(100, Some(1000)), Wait),
            ("bytes=-10", f(100, Some(1000)), Wait),
            ("bytes=-10", f(1000, Some(1000)), Partial { range: r(990, 999), total: Some(1000) }),
            ("bytes=5000-", f(100, Some(1000)), Unsatisfiable { total: 1000 }),
            ("bytes=0-99", f(100, None), Partial { range: r(0, 99), total: None }),
            ("bytes=0-100", f(100, None), Wait),
            ("bytes=0-", f(100, None), Wait),
            ("bytes=-1", f(100, None), Wait),
            ("bytes=0-1,5-6", f(100, None), Wait),
            ("bytes=0-9,200-209", f(100, Some(1000)), Multipart { total: 1000 }),
        ];
        for (input, avail, want) in cases {
            let set = parse_range(input.as_bytes()).unwrap();
            assert_eq!(set.resolve(*avail), *want, "{input} {avail:?}");
        }
    }

    #[test]
    fn parts_keep_request_order_unless_they_must_be_coalesced() {
        let parts = |v: &str, len| parse_range(v.as_bytes()).unwrap().parts(len);
        // Disjoint and far apart: the request's order.
        assert_eq!(parts("bytes=500-599,0-99", 1000), [r(500, 599), r(0, 99)]);
        assert_eq!(parts("bytes=-10,0-9", 1000), [r(990, 999), r(0, 9)]);
        // Overlap anywhere: everything sorted and merged (three overlapping ranges, the
        // pattern RFC 9110 14.2 names, become one).
        assert_eq!(parts("bytes=500-599,0-99,50-149", 1000), [r(0, 149), r(500, 599)]);
        assert_eq!(parts("bytes=0-,0-,0-", 1000), [r(0, 999)]);
        // A gap smaller than a part's overhead is sent rather than framed.
        assert_eq!(parts("bytes=0-9,50-59", 1000), [r(0, 59)]);
        assert_eq!(parts("bytes=0-9,90-99", 1000), [r(0, 9), r(90, 99)]);
        // Unsatisfiable members are dropped.
        assert_eq!(parts("bytes=5000-,0-9,500-509", 1000), [r(0, 9), r(500, 509)]);
        assert!(parts("bytes=5000-", 1000).is_empty());
    }

    #[test]
    fn content_ranges_parse() {
        assert_eq!(parse_content_range(b"bytes 0-499/1234"), Some((r(0, 499), Some(1234))));
        assert_eq!(parse_content_range(b"bytes 7-7/*"), Some((r(7, 7), None)));
        assert_eq!(parse_content_range(b" BYTES 1-2/3 "), Some((r(1, 2), Some(3))));
        for bad in [
            &b"bytes */1234"[..],
            b"bytes 5-4/10",
            b"bytes 0-10/10",
            b"items 0-1/2",
            b"bytes 0-1",
            b"bytes0-1/2",
            b"bytes a-1/2",
            b"",
        ] {
            assert_eq!(parse_content_range(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn content_range_format() {
        assert_eq!(content_range(r(0, 499), Some(1234)), "bytes 0-499/1234");
        assert_eq!(content_range(r(0, 499), None), "bytes 0-499/*");
        assert_eq!(content_range_unsatisfied(1234), "bytes */1234");
        assert_eq!(r(5, 5).len(), 1);
        assert!(!r(5, 5).is_empty());
    }
}
