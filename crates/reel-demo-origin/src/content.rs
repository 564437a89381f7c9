//! Deterministic object bytes: every generated body is a pure function of
//! `(seed, request path)` and the byte offset, so ranges, retries and separate origin
//! processes with the same seed all agree, and a client can verify what it received.

use crate::latency::mix64;

/// The content key of the object at `path` (the URI path, without query) under `seed`.
pub fn content_key(seed: u64, path: &str) -> u64 {
    // FNV-1a over the path, then mixed with the seed: cheap, stable across versions.
    let mut h: u64 = 0xCBF2_9CE4_8422_2325;
    for b in path.as_bytes() {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01B3);
    }
    mix64(h ^ mix64(seed))
}

/// The content key of the `/obj/` object at `path` in object `version` (bumped by `POST
/// /__origin/version`; version 0 is [`content_key`]).
pub fn object_key(seed: u64, version: u64, path: &str) -> u64 {
    match version {
        0 => content_key(seed, path),
        v => content_key(seed, path) ^ mix64(v.wrapping_mul(0x9E37_79B9_7F4A_7C15)),
    }
}

/// The bytes `[offset, offset + len)` of the `/obj/` object at `path` in `version`.
pub fn object_bytes(seed: u64, version: u64, path: &str, offset: u64, len: usize) -> Vec<u8> {
    let mut v = vec![0; len];
    fill(object_key(seed, version, path), offset, &mut v);
    v
}

/// Writes the object bytes `[offset, offset + buf.len())` of the object with `key`.
pub fn fill(key: u64, offset: u64, buf: &mut [u8]) {
    let mut pos = offset;
    let mut i = 0;
    while i < buf.len() {
        let within = (pos % 8) as usize;
        let word = mix64(key ^ (pos / 8).wrapping_mul(0xD6E8_FEB8_6659_FD93)).to_le_bytes();
        let n = (8 - within).min(buf.len() - i);
        buf[i..i + n].copy_from_slice(&word[within..within + n]);
        i += n;
        pos += n as u64;
    }
}

/// The bytes `[offset, offset + len)` of the object served at `path` under `seed`, for
/// generated objects (segments, `/obj/<n>`, the fixed benchmark paths other than
/// `/live/playlist.m3u8`).
pub fn expected_bytes(seed: u64, path: &str, offset: u64, len: usize) -> Vec<u8> {
    let mut v = vec![0; len];
    fill(content_key(seed, path), offset, &mut v);
    v
}

/// A strong entity tag (RFC 9110 §8.8.3) for an object of `len` bytes with `key`.
pub fn etag(key: u64, len: u64) -> String {
    format!("\"{:016x}-{len:x}\"", mix64(key ^ len))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn any_range_matches_the_whole() {
        let key = content_key(7, "/obj/1000");
        let mut whole = vec![0; 1000];
        fill(key, 0, &mut whole);
        for (off, len) in [(0, 1), (3, 13), (8, 8), (999, 1), (123, 600)] {
            let mut part = vec![0; len];
            fill(key, off as u64, &mut part);
            assert_eq!(part, whole[off..off + len]);
        }
    }

    #[test]
    fn keys_differ_by_path_and_seed() {
        assert_ne!(content_key(0, "/live/seg_1.ts"), content_key(0, "/live/seg_2.ts"));
        assert_ne!(content_key(0, "/live/seg_1.ts"), content_key(1, "/live/seg_1.ts"));
        assert_eq!(content_key(3, "/a"), content_key(3, "/a"));
        assert_ne!(etag(1, 10), etag(1, 11));
        assert_eq!(object_key(3, 0, "/obj/9"), content_key(3, "/obj/9"));
        assert_ne!(object_key(3, 1, "/obj/9"), object_key(3, 2, "/obj/9"));
        assert_eq!(object_bytes(3, 0, "/obj/9", 2, 5), expected_bytes(3, "/obj/9", 2, 5));
    }
}
