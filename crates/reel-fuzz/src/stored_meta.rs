//! `StoredMeta` decoding (`reel_cache::policy::meta`): the metadata blob stored next to
//! every body, read back from disk for each hit, and its round trip.

use reel_cache::policy::meta::StoredMeta;

/// Decodes `data` as a stored metadata blob.
pub fn run(data: &[u8]) {
    let Ok(meta) = StoredMeta::decode(data) else { return };
    let blob = meta.encode();
    let again = StoredMeta::decode(&blob).expect("an encoded blob decodes");
    assert_eq!(again, meta);
    assert_eq!(again.encode(), blob, "encoding is stable");
}
