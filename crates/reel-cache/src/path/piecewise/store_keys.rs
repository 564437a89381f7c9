//! The store keys and metadata blobs derived from a URL's cache key `K`, all in one place:
//! what a sliced object, a partially stored object and a varying URL keep besides `K`.
//!
//! A normalised cache key never contains [`VARIANT_SEP`], so no derived key can collide
//! with a URL's key:
//!
//! ```text
//! K ␀ <generation><hash>          a Vary variant (`variants`)
//! K ␀ s                           a sliced object's head: the representation's stored
//!                                 metadata as a 200, total length as its body length
//! K ␀ s <cut> <k>                 slice k of one version cut by one size (16 hex digits each)
//! K ␀ s # <size>.<k>              not stored: coalesces fetches of slice k
//! K ␀ p                           a partial object's index: metadata, length, pieces
//! K ␀ p <version><start><end>     a piece (16 hex digits each)
//! K ␀ p # <start>                 not stored: coalesces fetches of a gap starting there
//! K ␀ p #i                        not stored: serialises the index's read-modify-write
//! ```
//!
//! A representation's *version* is a hash of what every slice or piece of it shares:
//! `ETag`, `Last-Modified` and the total length (RFC 9111 3.4 combines partial responses
//! only when they agree).

use bytes::{BufMut, Bytes, BytesMut};

use crate::policy::HeaderLookup;
use crate::policy::range::ByteRange;

/// Separates a primary key from what is derived from it in store keys: a byte that a
/// normalised key never contains.
pub const VARIANT_SEP: u8 = 0x00;

/// The tag after the separator of every sliced key.
const SLICE_TAG: u8 = b's';
/// The tag after the separator of every partial key.
const PARTIAL_TAG: u8 = b'p';
/// Marks in-flight keys.
const LOCK: u8 = b'#';
/// Metadata of a stored slice: this prefix, then its version and index.
pub(in crate::path) const SLICE_META: &[u8] = b"\xffreel-slice\n";
/// The start of an index's metadata blob.
const INDEX_META: &[u8] = b"\xffreel-part\n";
/// The start of a piece's metadata blob.
const PIECE_META: &[u8] = b"\xffreel-piece\n";

/// The key of an object's head.
pub(in crate::path) fn head_key(primary: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(primary.len() + 35);
    k.extend_from_slice(primary);
    k.extend_from_slice(&[VARIANT_SEP, SLICE_TAG]);
    k
}

/// What names the slices of `version` cut by `size`: a change of either (a reload may
/// change the size) names other slices.
fn cut(version: u64, size: u64) -> u64 {
    let mut x = [0u8; 16];
    x[..8].copy_from_slice(&version.to_le_bytes());
    x[8..].copy_from_slice(&size.to_le_bytes());
    xxhash_rust::xxh3::xxh3_64(&x)
}

/// The key of slice `k` of `version` cut by `size`.
pub(in crate::path) fn slice_key(primary: &[u8], version: u64, size: u64, k: u64) -> Vec<u8> {
    let mut key = head_key(primary);
    key.extend_from_slice(format!("{:016x}{k:016x}", cut(version, size)).as_bytes());
    key
}

/// The in-flight key of slice `k` by `size`, whatever its version: one fetch of it at a
/// time.
pub(in crate::path) fn slice_lock_key(primary: &[u8], size: u64, k: u64) -> Vec<u8> {
    let mut key = head_key(primary);
    key.push(LOCK);
    key.extend_from_slice(format!("{size:x}.{k:016x}").as_bytes());
    key
}

/// The metadata blob of a stored slice.
pub(in crate::path) fn slice_meta(version: u64, size: u64, k: u64) -> Bytes {
    let mut b = SLICE_META.to_vec();
    b.extend_from_slice(format!("{version:016x}{size:x}.{k:016x}").as_bytes());
    b.into()
}

/// Bytes in slice `k` of an object of `total` bytes (0 past its end, however far).
pub(in crate::path) fn slice_len(size: u64, total: u64, k: u64) -> u64 {
    k.checked_mul(size).map_or(0, |start| total.saturating_sub(start).min(size))
}

/// The key of a URL's index of partial responses.
pub(in crate::path) fn index_key(primary: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(primary.len() + 51);
    k.extend_from_slice(primary);
    k.extend_from_slice(&[VARIANT_SEP, PARTIAL_TAG]);
    k
}

/// The key of the piece `r` of `version`.
pub(in crate::path) fn piece_key(primary: &[u8], version: u64, r: ByteRange) -> Vec<u8> {
    let mut k = index_key(primary);
    k.extend_from_slice(format!("{version:016x}{:016x}{:016x}", r.start, r.end).as_bytes());
    k
}

/// The metadata blob of the piece `r` of `version`.
pub(in crate::path) fn piece_meta(version: u64, r: ByteRange) -> Bytes {
    let mut b = PIECE_META.to_vec();
    b.extend_from_slice(format!("{version:016x}{:016x}{:016x}", r.start, r.end).as_bytes());
    b.into()
}

/// An in-flight key of a partial object: `what` is `i` for its index, or a gap's start.
pub(in crate::path) fn partial_lock_key(primary: &[u8], what: &str) -> Vec<u8> {
    let mut k = index_key(primary);
    k.push(LOCK);
    k.extend_from_slice(what.as_bytes());
    k
}

/// The keys a URL's key `primary` may have besides its own object: a sliced object's head
/// and a partial object's index. Purge and invalidation remove them with the URL (what
/// they describe can then no longer be reached).
pub(in crate::path) fn derived_keys(primary: &[u8]) -> [Vec<u8>; 2] {
    [head_key(primary), index_key(primary)]
}

/// An index blob: the prefix, the piece count and pieces, then the representation's
/// stored metadata.
pub(in crate::path) fn encode_index(meta: &[u8], pieces: &[ByteRange]) -> Bytes {
    let mut b = BytesMut::with_capacity(INDEX_META.len() + 4 + 16 * pieces.len() + meta.len());
    b.put_slice(INDEX_META);
    b.put_u32_le(pieces.len() as u32);
    for r in pieces {
        b.put_u64_le(r.start);
        b.put_u64_le(r.end);
    }
    b.put_slice(meta);
    b.freeze()
}

/// The metadata and pieces of an index blob (the metadata shares the blob's memory, so
/// the per-worker metadata cache recognises it).
pub(in crate::path) fn decode_index(blob: &Bytes) -> Option<(Bytes, Vec<ByteRange>)> {
    let rest = blob.strip_prefix(INDEX_META)?;
    let n = u32::from_le_bytes(rest.get(..4)?.try_into().ok()?) as usize;
    let list = rest.get(4..4 + n.checked_mul(16)?)?;
    let pieces = list
        .chunks_exact(16)
        .map(|c| {
            let start = u64::from_le_bytes(c[..8].try_into().unwrap_or_default());
            let end = u64::from_le_bytes(c[8..].try_into().unwrap_or_default());
            ByteRange { start, end }
        })
        .filter(|r| r.start <= r.end)
        .collect();
    let at = INDEX_META.len() + 4 + 16 * n;
    Some((blob.slice(at..), pieces))
}

/// The version of a representation: its validators and total length (see the module doc).
pub(in crate::path) fn version_of<H: HeaderLookup + ?Sized>(h: &H, total: u64) -> u64 {
    let mut x = Vec::with_capacity(128);
    x.extend_from_slice(h.get_first("etag").unwrap_or_default());
    x.push(0);
    x.extend_from_slice(h.get_first("last-modified").unwrap_or_default());
    x.push(0);
    x.extend_from_slice(&total.to_le_bytes());
    xxhash_rust::xxh3::xxh3_64(&x)
}

/// The version a head's (or an index's) metadata blob describes.
pub(in crate::path) fn head_version(blob: &[u8]) -> Option<u64> {
    let m = crate::policy::meta::StoredMeta::decode(blob).ok()?;
    Some(version_of(m.headers(), m.body_len()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(start: u64, end: u64) -> ByteRange {
        ByteRange { start, end }
    }

    #[test]
    fn slice_keys_are_distinct_and_never_a_urls() {
        let p = b"h/obj";
        let (h, s, l) = (head_key(p), slice_key(p, 7, 1 << 20, 3), slice_lock_key(p, 1 << 20, 3));
        assert!(s.starts_with(&h) && l.starts_with(&h));
        assert_ne!(s, slice_key(p, 8, 1 << 20, 3), "a version has its own slices");
        assert_ne!(s, slice_key(p, 7, 2 << 20, 3), "and so has a slice size");
        assert_ne!(s, slice_key(p, 7, 1 << 20, 4));
        assert_ne!(l, slice_lock_key(p, 2 << 20, 3));
        assert_eq!(h[p.len()], VARIANT_SEP, "not a URL's key");
        assert_eq!(s.len(), h.len() + 32);
        assert!(slice_meta(7, 1 << 20, 3).starts_with(SLICE_META));
        assert_ne!(slice_meta(7, 1 << 20, 3), slice_meta(7, 2 << 20, 3));
    }

    #[test]
    fn versions_follow_validators_and_length() {
        let a: Vec<(&str, &str)> = vec![("etag", "\"a\""), ("last-modified", "x")];
        let b: Vec<(&str, &str)> = vec![("etag", "\"b\""), ("last-modified", "x")];
        assert_eq!(version_of(&a[..], 10), version_of(&a[..], 10));
        assert_ne!(version_of(&a[..], 10), version_of(&b[..], 10));
        assert_ne!(version_of(&a[..], 10), version_of(&a[..], 11));
        assert_eq!((slice_len(4, 10, 0), slice_len(4, 10, 2)), (4, 2));
    }

    #[test]
    fn index_blobs_roundtrip_and_bad_ones_are_refused() {
        let pieces = [r(0, 9), r(100, 199)];
        let blob = encode_index(b"meta", &pieces);
        let (meta, got) = decode_index(&blob).expect("decodes");
        assert_eq!((&meta[..], got.as_slice()), (&b"meta"[..], &pieces[..]));
        assert!(decode_index(&Bytes::from_static(b"\xffreel-part\n\x05\0\0\0")).is_none());
        assert!(decode_index(&Bytes::from_static(b"other")).is_none());
        let (k, p) = (index_key(b"h/x"), piece_key(b"h/x", 1, r(0, 9)));
        assert!(p.starts_with(&k) && k[3] == VARIANT_SEP);
        assert_ne!(p, piece_key(b"h/x", 2, r(0, 9)));
        assert_ne!(p, piece_key(b"h/x", 1, r(0, 10)));
        assert_ne!(partial_lock_key(b"h/x", "i"), partial_lock_key(b"h/x", &format!("{:016x}", 0)));
        assert_ne!(index_key(b"h/x"), head_key(b"h/x"), "a sliced head is not an index");
    }
}
