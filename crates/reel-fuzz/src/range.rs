//! `Range` (RFC 9110 14.2) and its resolution against a stored or filling representation,
//! the `multipart/byteranges` layout of several parts, and `Content-Range` (14.4) as an
//! origin's 206 carries it.

use reel_cache::policy::multipart::{Multipart, fresh_boundary};
use reel_cache::policy::range::{
    Available, MAX_RANGES, RangeOutcome, RangeSpec, content_range, parse_content_range, parse_range,
};

/// Parses `data` as a `Range` and as a `Content-Range` value.
pub fn run(data: &[u8]) {
    if let Some((r, total)) = parse_content_range(data) {
        assert!(r.start <= r.end && total.is_none_or(|t| r.end < t), "{r:?} of {total:?}");
        let again = content_range(r, total);
        assert_eq!(parse_content_range(again.as_bytes()), Some((r, total)), "{again}");
    }
    let Some(set) = parse_range(data) else { return };
    assert!((1..=MAX_RANGES).contains(&set.specs().len()));
    // Lengths at the edges of what was asked, and some fixed ones.
    let mut lens = vec![0, 1, 100, 1 << 20, u64::MAX];
    for s in set.specs() {
        let (a, b) = match *s {
            RangeSpec::FromTo(f, l) => (f, l),
            RangeSpec::From(f) => (f, f),
            RangeSpec::Suffix(n) => (n, n),
        };
        lens.extend([a, a.saturating_add(1), b, b.saturating_add(1)]);
    }
    for len in lens {
        let sat = set.satisfiable(len);
        for w in sat.windows(2) {
            assert!(w[0].end.saturating_add(1) < w[1].start, "not coalesced: {sat:?}");
        }
        let parts = set.parts(len);
        assert!(parts.len() <= MAX_RANGES);
        for r in &parts {
            assert!(r.start <= r.end && r.end < len, "{r:?} of {len}");
            assert!(r.len() <= len);
        }
        assert_eq!(sat.is_empty(), parts.is_empty());
        if parts.len() > 1 {
            let m = Multipart::new(&parts, len, Some(b"video/mp4"), fresh_boundary(data));
            assert_eq!(m.parts().len(), parts.len());
            let _ = m.content_length();
        }
        let half = len / 2;
        for avail in [
            Available::Complete(len),
            Available::Filling { available: half, total: Some(len) },
            Available::Filling { available: half, total: None },
        ] {
            match set.resolve(avail) {
                RangeOutcome::Partial { range, total } => {
                    assert!(range.start <= range.end, "{range:?}");
                    assert!(total.is_none_or(|t| range.end < t), "{range:?} of {total:?}");
                }
                RangeOutcome::Unsatisfiable { total } | RangeOutcome::Multipart { total } => {
                    assert_eq!(total, len)
                }
                RangeOutcome::Full | RangeOutcome::Wait => {}
            }
        }
    }
}
