//! A URL's Vary marker: the object stored at its primary key when its responses vary
//! (RFC 9111 4.1). It names the request fields the responses vary on, the generation of
//! the URL's variant keys, and the variants stored, oldest first. So a URL's variants are
//! known without scanning the store: invalidation and purge are lookups, and the number
//! of variants per URL has a bound (`[cache] max_variants`).
//!
//! A variant's store key is the primary key, [`VARIANT_SEP`], the marker's generation and
//! the hash of the request's values for the named fields. A new marker (none stored, or
//! other fields named) takes a new generation: variants that no marker lists any more (a
//! marker evicted before them, or removed while they were being written) can never be
//! reached again and leave the store with their volume.
//!
//! A marker is only written by the leader of its primary key's fetch (the in-flight map
//! serialises them), so its read-modify-write never races another fill.
//!
//! Markers written before generations existed name the fields only: their variants are
//! keyed without a generation and none is listed; invalidating such a URL removes the
//! marker, which leaves its variants unreachable the same way.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::{BufMut, Bytes, BytesMut};

use crate::key::CacheKey;
use crate::path::piecewise::store_keys::VARIANT_SEP;

const PREFIX: &[u8] = b"\xffreel-vary\n";

/// A parsed Vary marker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(in crate::path) struct Marker {
    /// The request fields the URL's responses vary on, lowercase.
    pub names: Vec<String>,
    /// The generation of its variant keys; `None` for a marker from before generations.
    pub generation: Option<u64>,
    /// The hashes of the variants stored, oldest first.
    pub variants: Vec<u64>,
}

/// What a request needs of a marker to find its variant, without the variant list.
pub(in crate::path) struct Selector {
    /// The fields to hash.
    pub names: Vec<String>,
    /// The generation of the variant keys.
    pub generation: Option<u64>,
}

fn hex_u64(s: &[u8]) -> Option<u64> {
    if s.len() != 16 {
        return None;
    }
    u64::from_str_radix(std::str::from_utf8(s).ok()?, 16).ok()
}

fn names_of(line: &[u8]) -> Option<Vec<String>> {
    let s = std::str::from_utf8(line).ok()?;
    Some(s.split(',').filter(|n| !n.is_empty()).map(str::to_string).collect())
}

/// The store key of variant `hash` of `primary` in `generation`.
pub(in crate::path) fn variant_key(primary: &[u8], generation: Option<u64>, hash: u64) -> Vec<u8> {
    let mut k = Vec::with_capacity(primary.len() + 33);
    k.extend_from_slice(primary);
    k.push(VARIANT_SEP);
    if let Some(g) = generation {
        k.extend_from_slice(format!("{g:016x}").as_bytes());
    }
    k.extend_from_slice(format!("{hash:016x}").as_bytes());
    k
}

/// A generation no marker has had: distinct per call and per process start.
fn fresh_generation(primary: &[u8]) -> u64 {
    static CALLS: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
    let seed = nanos ^ CALLS.fetch_add(1, Ordering::Relaxed).rotate_left(32);
    xxhash_rust::xxh3::xxh3_64_with_seed(primary, seed)
}

impl Selector {
    /// The fields and generation of a marker blob; `None` if `meta` is not a marker.
    pub(in crate::path) fn parse(meta: &[u8]) -> Option<Selector> {
        let rest = meta.strip_prefix(PREFIX)?;
        let mut lines = rest.splitn(3, |&b| b == b'\n');
        let names = names_of(lines.next()?)?;
        let generation = match lines.next() {
            Some(g) => Some(hex_u64(g)?),
            None => None,
        };
        Some(Selector { names, generation })
    }
}

impl Marker {
    /// A new marker for `names` with a fresh generation and no variant yet.
    pub(in crate::path) fn new(primary: &CacheKey, names: Vec<String>) -> Marker {
        let generation = Some(fresh_generation(primary.as_bytes()));
        Marker { names, generation, variants: Vec::new() }
    }

    /// The marker in a metadata blob; `None` if `meta` is not one.
    pub(in crate::path) fn parse(meta: &[u8]) -> Option<Marker> {
        let Selector { names, generation } = Selector::parse(meta)?;
        let rest = meta.strip_prefix(PREFIX)?;
        let variants = match rest.splitn(3, |&b| b == b'\n').nth(2) {
            Some(list) => list
                .split(|&b| b == b',')
                .filter(|h| !h.is_empty())
                .map(hex_u64)
                .collect::<Option<Vec<u64>>>()?,
            None => Vec::new(),
        };
        Some(Marker { names, generation, variants })
    }

    /// The metadata blob of this marker.
    pub(in crate::path) fn encode(&self) -> Bytes {
        let mut b = BytesMut::with_capacity(PREFIX.len() + 64 + 17 * self.variants.len());
        b.put_slice(PREFIX);
        b.put_slice(self.names.join(",").as_bytes());
        if let Some(g) = self.generation {
            b.put_slice(format!("\n{g:016x}\n").as_bytes());
            for (i, h) in self.variants.iter().enumerate() {
                if i > 0 {
                    b.put_u8(b',');
                }
                b.put_slice(format!("{h:016x}").as_bytes());
            }
        }
        b.freeze()
    }

    /// The store key of variant `hash` of this marker's URL.
    pub(in crate::path) fn key(&self, primary: &[u8], hash: u64) -> Vec<u8> {
        variant_key(primary, self.generation, hash)
    }

    /// The store keys of every variant listed.
    pub(in crate::path) fn keys<'a>(
        &'a self,
        primary: &'a [u8],
    ) -> impl Iterator<Item = Vec<u8>> + 'a {
        self.variants.iter().map(move |&h| self.key(primary, h))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::KeyConfig;

    #[test]
    fn markers_roundtrip_and_old_markers_still_parse() {
        let k = CacheKey::build(b"h", b"/v", &KeyConfig::default()).unwrap();
        let mut m = Marker::new(&k, vec!["accept-encoding".into(), "origin".into()]);
        assert_eq!(Marker::parse(&m.encode()), Some(m.clone()));
        m.variants = vec![1, u64::MAX, 0xabc];
        let blob = m.encode();
        assert_eq!(Marker::parse(&blob), Some(m.clone()));
        let sel = Selector::parse(&blob).unwrap();
        assert_eq!((sel.names, sel.generation), (m.names.clone(), m.generation));
        // A new marker never reuses a generation.
        assert_ne!(Marker::new(&k, vec![]).generation, m.generation);
        // Keys: primary, separator, generation, hash; distinct per generation.
        let key = m.key(k.as_bytes(), 0xabc);
        assert!(key.starts_with(k.as_bytes()) && key[k.as_bytes().len()] == VARIANT_SEP);
        assert_eq!(key.len(), k.as_bytes().len() + 33);
        assert_eq!(m.keys(k.as_bytes()).nth(2), Some(key.clone()));
        let other = Marker { generation: Some(7), ..m.clone() };
        assert_ne!(other.key(k.as_bytes(), 0xabc), key);

        // A marker from before generations: names only, no list, keys without generation.
        let old = b"\xffreel-vary\naccept-encoding";
        let p = Marker::parse(old).unwrap();
        assert_eq!(p.names, vec!["accept-encoding".to_string()]);
        assert_eq!((p.generation, p.variants.len()), (None, 0));
        assert_eq!(p.key(b"hk", 1), b"hk\x000000000000000001".to_vec());

        for bad in [
            &b"no marker"[..],
            b"\xffreel-vary\na\nnothex\n",
            b"\xffreel-vary\na\n0000000000000001\nzz",
        ] {
            assert!(Marker::parse(bad).is_none(), "{bad:?}");
        }
    }
}
