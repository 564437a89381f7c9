//! Slice keys, versions and lengths.

use super::*;

#[test]
fn keys_are_distinct_and_never_a_urls() {
    let p = b"h/obj";
    let (h, s, l) = (head_key(p), slice_key(p, 7, 1 << 20, 3), lock_key(p, 1 << 20, 3));
    assert!(s.starts_with(&h) && l.starts_with(&h));
    assert_ne!(s, slice_key(p, 8, 1 << 20, 3), "a version has its own slices");
    assert_ne!(s, slice_key(p, 7, 2 << 20, 3), "and so has a slice size");
    assert_ne!(s, slice_key(p, 7, 1 << 20, 4));
    assert_ne!(l, lock_key(p, 2 << 20, 3));
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
