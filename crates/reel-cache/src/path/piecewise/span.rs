//! Slice arithmetic, all of it checked: which slice holds a byte ([`index`]), the bytes of
//! slice k of an object ([`bytes`]) or, before its length is known, what the origin is
//! asked for ([`nominal`]), the slice a request without a head learns the object from
//! ([`learn_from`]), the part of a slice a response sends ([`part`]) and whether that part
//! is a sequential read that earns read-ahead ([`reads_most_of`]).
//!
//! Offsets come from the client (`Range`) and from the origin (`Content-Range`), so any of
//! them may lie near `u64::MAX`, and a slice size need not be a power of two: nothing here
//! wraps or panics; a slice that cannot exist is `None`.

use crate::policy::range::ByteRange;

/// The index of the slice of `size` bytes that holds byte `pos` (0 for a size of 0, which
/// the configuration refuses).
pub(in crate::path) fn index(pos: u64, size: u64) -> u64 {
    pos.checked_div(size).unwrap_or(0)
}

/// Bytes `[k·size, (k+1)·size)` whatever the object's length: what a request that has no
/// head yet asks the origin for. `None` when they do not all lie within `u64`.
pub(in crate::path) fn nominal(size: u64, k: u64) -> Option<ByteRange> {
    let start = k.checked_mul(size)?;
    let end = start.checked_add(size.checked_sub(1)?)?;
    Some(ByteRange { start, end })
}

/// The bytes of slice `k` of an object of `total` bytes: its nominal bytes cut at the
/// object's end. `None` when the slice holds none of them.
pub(in crate::path) fn bytes(size: u64, total: u64, k: u64) -> Option<ByteRange> {
    let start = k.checked_mul(size)?;
    if start >= total || size == 0 {
        return None;
    }
    let end = start.saturating_add(size - 1).min(total - 1);
    Some(ByteRange { start, end })
}

/// The slice a request that has no head fetches to learn the object, its first byte being
/// `hint`: the slice holding it, or slice 0 when that slice's bytes do not lie within
/// `u64` (the request's first byte is then beyond any object's end: the answer, a 416,
/// needs the length that slice 0 tells).
pub(in crate::path) fn learn_from(hint: u64, size: u64) -> u64 {
    let k = index(hint, size);
    if nominal(size, k).is_some() { k } else { 0 }
}

/// The part of `slice` a response sends when it is at byte `pos` of a range that ends at
/// `until`: from `pos` to the slice's end or the range's, whichever comes first. `None`
/// when `pos` is not in the slice or lies past `until`.
pub(in crate::path) fn part(slice: ByteRange, pos: u64, until: u64) -> Option<ByteRange> {
    if pos < slice.start || pos > slice.end || pos > until {
        return None;
    }
    Some(ByteRange { start: pos, end: until.min(slice.end) })
}

/// Whether sending `part` of `slice` is reading it sequentially, so that the slices after
/// it are worth reading ahead: the part runs to the slice's end and holds at least half of
/// the slice (it started at or before the slice's midpoint). A player reading a file
/// through (one open range, whole slices, or chunks of half a slice or more) meets it for
/// every slice it reads; a small range at a slice's end does not.
pub(in crate::path) fn reads_most_of(slice: ByteRange, part: ByteRange) -> bool {
    part.end >= slice.end && part.len() >= slice.len().div_ceil(2)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::path::piecewise::store_keys::slice_len;

    fn r(start: u64, end: u64) -> ByteRange {
        ByteRange { start, end }
    }

    #[test]
    fn slices_near_the_end_of_u64() {
        let size = 3_000_000;
        let k = index(u64::MAX, size);
        assert_eq!(nominal(size, k), None, "its last byte lies beyond u64");
        assert_eq!(learn_from(u64::MAX, size), 0);
        assert!(nominal(size, k - 1).is_some_and(|s| s.end < u64::MAX));
        assert_eq!(nominal(1 << 20, index(u64::MAX, 1 << 20)).map(|s| s.end), Some(u64::MAX));
        assert_eq!(bytes(size, u64::MAX, k), Some(r(k * size, u64::MAX - 1)));
        assert_eq!(bytes(size, 5_000_000, 2), None);
        assert_eq!(bytes(size, 5_000_000, 1), Some(r(3_000_000, 4_999_999)));
        assert_eq!(bytes(size, 5_000_000, u64::MAX), None);
        assert_eq!((index(5, 0), nominal(0, 0), bytes(0, 9, 0)), (0, None, None));
    }

    #[test]
    fn read_ahead_needs_half_a_slice_read_to_its_end() {
        let s = r(1000, 1999);
        assert!(reads_most_of(s, r(1000, 1999)));
        assert!(reads_most_of(s, r(1500, 1999)), "from the midpoint");
        assert!(!reads_most_of(s, r(1501, 1999)));
        assert!(!reads_most_of(s, r(1999, 1999)), "the last byte alone");
        assert!(!reads_most_of(s, r(1000, 1998)), "not to the end");
        let last = r(5000, 5002);
        assert!(reads_most_of(last, r(5001, 5002)) && !reads_most_of(last, r(5002, 5002)));
    }

    /// Slice sizes that are not powers of two, from tiny to huge.
    fn size() -> impl Strategy<Value = u64> {
        prop_oneof![3u64..5000, 65_537u64..1 << 40, (1u64 << 40)..u64::MAX]
            .prop_filter("not a power of two", |s| !s.is_power_of_two())
    }

    /// Offsets, often near the end of u64.
    fn offset() -> impl Strategy<Value = u64> {
        prop_oneof![any::<u64>(), (0u64..1 << 24).prop_map(|d| u64::MAX - d), 0u64..1 << 24]
    }

    proptest! {
        #[test]
        fn mapped_slices_cover_exactly_the_requested_bytes(
            size in size(),
            total in offset(),
            a in offset(),
            (whole, extra) in (0u64..8, any::<u64>()),
        ) {
            // A range over a few slices, as resolved against the object: within it.
            prop_assume!(total > 0);
            let b = a.saturating_add(whole.saturating_mul(size)).saturating_add(extra % size);
            let want = r(a.min(total - 1), b.min(total - 1));
            // The walk: the slice holding each next byte, the part of it sent.
            let mut pos = want.start;
            let mut sent = 0u64;
            let mut slices = 0;
            loop {
                let k = index(pos, size);
                let slice = bytes(size, total, k).expect("a byte of the object has a slice");
                prop_assert!(slice.start <= pos && pos <= slice.end && slice.end < total);
                prop_assert!(slice.len() <= size);
                prop_assert_eq!(Some(slice.start), k.checked_mul(size));
                if let Some(n) = nominal(size, k) {
                    prop_assert!(n.start == slice.start && n.end >= slice.end);
                }
                let p = part(slice, pos, want.end).expect("pos is in the slice");
                prop_assert_eq!(p.start, pos);
                prop_assert!(p.end <= want.end && p.end <= slice.end);
                sent += p.len();
                slices += 1;
                if p.end == want.end {
                    break;
                }
                prop_assert_eq!(p.end, slice.end, "a part short of the range ends its slice");
                pos = p.end + 1;
                prop_assert!(slices <= 1 + want.len() / size + 1);
            }
            prop_assert_eq!(sent, want.len());
        }

        #[test]
        fn any_request_learns_from_a_slice_that_exists(size in size(), hint in offset()) {
            let k = learn_from(hint, size);
            let n = nominal(size, k).expect("a nameable slice");
            prop_assert!(n.start <= n.end && n.len() == size);
            prop_assert!(k == 0 || (n.start <= hint && hint <= n.end));
        }

        #[test]
        fn slice_bytes_never_overflow(size in any::<u64>(), total in offset(), k in offset()) {
            let len = slice_len(size, total, k);
            if let Some(s) = bytes(size, total, k) {
                prop_assert!(s.start <= s.end && s.end < total && s.len() <= size);
                prop_assert_eq!(len, s.len());
            } else {
                prop_assert_eq!(len, 0);
            }
            if let Some(n) = nominal(size, k) {
                prop_assert!(n.start <= n.end && n.len() == size);
            }
        }
    }
}
