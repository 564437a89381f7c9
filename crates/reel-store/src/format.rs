//! On-disk format, version 1 (see `docs/store-format.md`): the volume header block and
//! the record header / commit trailer that frame every object in the log.
//!
//! Everything is little-endian. Only pure encode/decode lives here; I/O is elsewhere.

/// Alignment of records and object bodies: sendfile from an unaligned offset measured
/// ~30% slower on 2 MiB objects, so every body starts on a 4 KiB boundary.
pub(crate) const ALIGN: u64 = 4096;
/// Size of the volume header block at offset 0 of every volume file.
pub(crate) const VOLUME_HEADER_LEN: u64 = ALIGN;
/// Format version written in volume and record headers.
pub(crate) const FORMAT_VERSION: u16 = 1;
/// Fixed part of a record header, before the key and the metadata blob.
pub(crate) const RECORD_FIXED_LEN: usize = 72;
/// Commit trailer, written last: its presence and checksums make a record valid.
pub(crate) const TRAILER_LEN: usize = 40;
/// Body length written in the header of a fill whose length is not known yet.
pub(crate) const LEN_UNKNOWN: u64 = u64::MAX;
/// Longest key accepted.
pub const MAX_KEY_LEN: usize = 4096;
/// Largest metadata blob accepted.
pub const MAX_META_LEN: usize = 60 * 1024;

const VOLUME_MAGIC: &[u8; 8] = b"REELVOL\0";
const RECORD_MAGIC: u32 = u32::from_le_bytes(*b"REC1");
const TRAILER_MAGIC: u64 = u64::from_le_bytes(*b"REELCMT1");

/// Kind of a log record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A cached object: header, 4 KiB-aligned body, trailer.
    Object = 1,
    /// Replacement metadata for the key's current object (a 304 refresh).
    Meta = 2,
    /// Removal of one key.
    Tombstone = 3,
    /// Removal of every key starting with the record's key (purge).
    PurgePrefix = 4,
}

impl Kind {
    fn from_u8(v: u8) -> Option<Kind> {
        match v {
            1 => Some(Kind::Object),
            2 => Some(Kind::Meta),
            3 => Some(Kind::Tombstone),
            4 => Some(Kind::PurgePrefix),
            _ => None,
        }
    }
}

/// Rounds `v` up to the next multiple of [`ALIGN`].
pub(crate) fn align_up(v: u64) -> u64 {
    v.div_ceil(ALIGN) * ALIGN
}

/// 128-bit xxh3 of a key; the index keys on it and verifies the full key on a hit.
pub(crate) fn key_hash(key: &[u8]) -> u128 {
    xxhash_rust::xxh3::xxh3_128(key)
}

/// The volume header block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct VolumeHeader {
    /// Position of the volume in the store directory.
    pub index: u32,
    /// Size of the volume file in bytes.
    pub volume_size: u64,
    /// Incarnation of the volume: unique and increasing over the store's life. 0 means
    /// "reclaimed, holds nothing".
    pub seq: u64,
}

impl VolumeHeader {
    /// Encodes into a full header block.
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut b = vec![0u8; VOLUME_HEADER_LEN as usize];
        b[0..8].copy_from_slice(VOLUME_MAGIC);
        b[8..10].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
        b[12..16].copy_from_slice(&self.index.to_le_bytes());
        b[16..24].copy_from_slice(&self.volume_size.to_le_bytes());
        b[24..32].copy_from_slice(&self.seq.to_le_bytes());
        let crc = crc32c::crc32c(&b[0..32]);
        b[32..36].copy_from_slice(&crc.to_le_bytes());
        b
    }

    /// Decodes a header block; `None` if it is not a valid version-1 header.
    pub(crate) fn decode(b: &[u8]) -> Option<VolumeHeader> {
        if b.len() < 36 || &b[0..8] != VOLUME_MAGIC || u16_at(b, 8) != FORMAT_VERSION {
            return None;
        }
        if crc32c::crc32c(&b[0..32]) != u32_at(b, 32) {
            return None;
        }
        Some(VolumeHeader { index: u32_at(b, 12), volume_size: u64_at(b, 16), seq: u64_at(b, 24) })
    }
}

/// A decoded record header (fixed part; key and metadata follow it on disk).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct RecordHeader {
    pub kind: Kind,
    pub vol_seq: u64,
    pub key_hash: u128,
    pub key_len: u32,
    pub meta_len: u32,
    pub body_len: u64,
    pub span: u64,
    pub stored_at: u64,
    pub header_crc: u32,
}

impl RecordHeader {
    /// Length of header plus key plus metadata.
    pub(crate) fn header_len(&self) -> u64 {
        RECORD_FIXED_LEN as u64 + u64::from(self.key_len) + u64::from(self.meta_len)
    }

    /// Offset of the body relative to the record start: 4 KiB-aligned for objects.
    pub(crate) fn body_rel(&self) -> u64 {
        body_rel(self.kind, self.header_len())
    }
}

/// Offset of the body relative to the record start for a header of `header_len` bytes.
pub(crate) fn body_rel(kind: Kind, header_len: u64) -> u64 {
    match kind {
        Kind::Object => align_up(header_len),
        _ => header_len,
    }
}

/// Span on disk of a record whose body is `body_len` bytes.
pub(crate) fn span_for(kind: Kind, header_len: u64, body_len: u64) -> u64 {
    align_up(body_rel(kind, header_len) + body_len + TRAILER_LEN as u64)
}

/// [`span_for`] of lengths read from disk: `None` where they overflow.
fn checked_span(kind: Kind, header_len: u64, body_len: u64) -> Option<u64> {
    let end = body_rel(kind, header_len).checked_add(body_len)?;
    end.checked_add(TRAILER_LEN as u64)?.checked_next_multiple_of(ALIGN)
}

/// Encodes a record header with its key and metadata; returns the bytes and the
/// header checksum (which the trailer checksum chains from).
#[allow(clippy::too_many_arguments)]
pub(crate) fn encode_record_header(
    kind: Kind,
    vol_seq: u64,
    key: &[u8],
    meta: &[u8],
    body_len: u64,
    span: u64,
    stored_at: u64,
) -> (Vec<u8>, u32) {
    let mut b = Vec::with_capacity(RECORD_FIXED_LEN + key.len() + meta.len());
    b.extend_from_slice(&RECORD_MAGIC.to_le_bytes());
    b.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    b.push(kind as u8);
    b.push(0);
    b.extend_from_slice(&vol_seq.to_le_bytes());
    b.extend_from_slice(&key_hash(key).to_le_bytes());
    b.extend_from_slice(&(key.len() as u32).to_le_bytes());
    b.extend_from_slice(&(meta.len() as u32).to_le_bytes());
    b.extend_from_slice(&body_len.to_le_bytes());
    b.extend_from_slice(&span.to_le_bytes());
    b.extend_from_slice(&stored_at.to_le_bytes());
    b.extend_from_slice(&0u32.to_le_bytes());
    debug_assert_eq!(b.len(), RECORD_FIXED_LEN - 4);
    let mut crc = crc32c::crc32c(&b);
    crc = crc32c::crc32c_append(crc, key);
    crc = crc32c::crc32c_append(crc, meta);
    b.extend_from_slice(&crc.to_le_bytes());
    b.extend_from_slice(key);
    b.extend_from_slice(meta);
    (b, crc)
}

/// Decodes the fixed part of a record header. Checks magic, version, kind and the
/// volume incarnation; the header checksum needs the key and metadata, see
/// [`verify_header_crc`].
pub(crate) fn decode_record_fixed(b: &[u8], vol_seq: u64) -> Option<RecordHeader> {
    if b.len() < RECORD_FIXED_LEN || u32_at(b, 0) != RECORD_MAGIC || u16_at(b, 4) != FORMAT_VERSION
    {
        return None;
    }
    let kind = Kind::from_u8(b[6])?;
    let h = RecordHeader {
        kind,
        vol_seq: u64_at(b, 8),
        key_hash: u128::from_le_bytes(b[16..32].try_into().ok()?),
        key_len: u32_at(b, 32),
        meta_len: u32_at(b, 36),
        body_len: u64_at(b, 40),
        span: u64_at(b, 48),
        stored_at: u64_at(b, 56),
        header_crc: u32_at(b, 68),
    };
    if h.vol_seq != vol_seq
        || h.key_len as usize > MAX_KEY_LEN
        || h.meta_len as usize > MAX_META_LEN
        || h.span == 0
        || !h.span.is_multiple_of(ALIGN)
    {
        return None;
    }
    if h.body_len != LEN_UNKNOWN
        && checked_span(kind, h.header_len(), h.body_len).is_none_or(|n| h.span < n)
    {
        return None;
    }
    Some(h)
}

/// Checks the header checksum given the full header bytes (fixed part, key, metadata).
pub(crate) fn verify_header_crc(h: &RecordHeader, full: &[u8]) -> bool {
    let n = h.header_len() as usize;
    if full.len() < n {
        return false;
    }
    let mut crc = crc32c::crc32c(&full[..RECORD_FIXED_LEN - 4]);
    crc = crc32c::crc32c_append(crc, &full[RECORD_FIXED_LEN..n]);
    crc == h.header_crc
        && key_hash(&full[RECORD_FIXED_LEN..RECORD_FIXED_LEN + h.key_len as usize]) == h.key_hash
}

/// Encodes the commit trailer: the body checksum plus the header checksum it belongs
/// to, so together they cover header and body.
pub(crate) fn encode_trailer(
    vol_seq: u64,
    body_len: u64,
    body_crc: u32,
    header_crc: u32,
) -> [u8; TRAILER_LEN] {
    let mut b = [0u8; TRAILER_LEN];
    b[0..8].copy_from_slice(&TRAILER_MAGIC.to_le_bytes());
    b[8..16].copy_from_slice(&vol_seq.to_le_bytes());
    b[16..24].copy_from_slice(&body_len.to_le_bytes());
    b[24..28].copy_from_slice(&body_crc.to_le_bytes());
    b[28..32].copy_from_slice(&header_crc.to_le_bytes());
    let c = crc32c::crc32c(&b[0..32]);
    b[32..36].copy_from_slice(&c.to_le_bytes());
    b
}

/// Decodes a trailer; returns the body checksum if it is a valid commit marker for the
/// record with this header checksum, `body_len` and volume incarnation.
pub(crate) fn decode_trailer(
    b: &[u8],
    vol_seq: u64,
    body_len: u64,
    header_crc: u32,
) -> Option<u32> {
    trailer_body_crc(b, vol_seq, body_len).filter(|_| u32_at(b, 28) == header_crc)
}

/// [`decode_trailer`] without the header checksum: for a copy of a record already
/// known good, which checks its body against it.
pub(crate) fn trailer_body_crc(b: &[u8], vol_seq: u64, body_len: u64) -> Option<u32> {
    if b.len() < TRAILER_LEN
        || u64_at(b, 0) != TRAILER_MAGIC
        || u64_at(b, 8) != vol_seq
        || u64_at(b, 16) != body_len
        || crc32c::crc32c(&b[0..32]) != u32_at(b, 32)
    {
        return None;
    }
    Some(u32_at(b, 24))
}

fn u16_at(b: &[u8], o: usize) -> u16 {
    u16::from_le_bytes([b[o], b[o + 1]])
}
/// The little-endian `u32` at `o` (the caller has checked the length).
pub(crate) fn u32_at(b: &[u8], o: usize) -> u32 {
    u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]])
}
/// The little-endian `u64` at `o` (the caller has checked the length).
pub(crate) fn u64_at(b: &[u8], o: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[o..o + 8]);
    u64::from_le_bytes(a)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_header_round_trips_and_rejects_other_incarnations() {
        let (b, crc) = encode_record_header(Kind::Object, 7, b"k1", b"meta", 10, 8192, 99);
        let h = decode_record_fixed(&b, 7).expect("valid header");
        assert_eq!(h.header_crc, crc);
        assert_eq!((h.key_len, h.meta_len, h.body_len, h.span, h.stored_at), (2, 4, 10, 8192, 99));
        assert!(verify_header_crc(&h, &b));
        assert_eq!(h.body_rel(), 4096);
        assert!(decode_record_fixed(&b, 8).is_none());
        let mut bad = b.clone();
        let last = bad.len() - 1;
        bad[last] ^= 1;
        assert!(!verify_header_crc(&h, &bad));
    }

    /// Fuzzing (`crates/reel-fuzz`, target `store_volume`): a header whose body length is
    /// near 2^64 overflowed the span it needs while it was checked.
    #[test]
    fn a_record_header_whose_lengths_overflow_is_refused() {
        for body_len in [u64::MAX - 1, u64::MAX - 4096, u64::MAX - 40] {
            let (b, _) = encode_record_header(Kind::Object, 7, b"k", b"m", body_len, 8192, 0);
            assert_eq!(decode_record_fixed(&b, 7), None, "{body_len}");
            let (b, _) = encode_record_header(Kind::Meta, 7, b"k", b"m", body_len, 8192, 0);
            assert_eq!(decode_record_fixed(&b, 7), None, "{body_len}");
        }
    }

    #[test]
    fn trailer_and_volume_header_round_trip() {
        let t = encode_trailer(3, 100, 0xabcd, 9);
        assert_eq!(decode_trailer(&t, 3, 100, 9), Some(0xabcd));
        assert_eq!(decode_trailer(&t, 3, 101, 9), None);
        assert_eq!(decode_trailer(&t, 3, 100, 8), None);
        assert_eq!(trailer_body_crc(&t, 3, 100), Some(0xabcd));
        assert_eq!(trailer_body_crc(&t, 4, 100), None);
        let v = VolumeHeader { index: 2, volume_size: 1 << 20, seq: 5 };
        assert_eq!(VolumeHeader::decode(&v.encode()), Some(v));
        let mut e = v.encode();
        e[24] ^= 1;
        assert_eq!(VolumeHeader::decode(&e), None);
    }
}
