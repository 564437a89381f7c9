//! Entry points for the fuzz targets of `crates/reel-fuzz` (`docs/fuzzing.md`): the
//! decoders of what the store reads back from its disk at a restart (the volume header,
//! the record headers and commit trailers of a volume scan, the index checkpoint), which
//! are crate-private. Not an API: hidden, and only the fuzz targets call it.
//!
//! Checksums stop almost every random input at the first check, so [`seal_volume`] and
//! [`seal_checkpoint`] write the checksums an input's bytes call for: a target decodes
//! the input as it is and, sealed, past the checksums.

use std::fs::File;

use super::checkpoint::Loaded;
use super::rebuild::scan_volume as scan;
use crate::format::{
    self, ALIGN, Kind, LEN_UNKNOWN, RECORD_FIXED_LEN, TRAILER_LEN, VOLUME_HEADER_LEN, VolumeHeader,
    u32_at, u64_at,
};

/// What a volume scan kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scanned {
    /// Records accepted.
    pub records: usize,
    /// Records skipped (unfinished fills, a bad trailer).
    pub dropped: u64,
}

/// Decodes a volume header block: `(index, volume size, incarnation)`.
pub fn volume_header(b: &[u8]) -> Option<(u32, u64, u64)> {
    VolumeHeader::decode(b).map(|h| (h.index, h.volume_size, h.seq))
}

/// Scans `file` as volume incarnation `seq` of `volume_size` bytes, as a restart without
/// a checkpoint does.
pub fn scan_volume(file: &File, seq: u64, volume_size: u64) -> Scanned {
    let r = scan(file, seq, volume_size);
    Scanned { records: r.records.len(), dropped: r.dropped }
}

/// Checks `file` as the index checkpoint of `volumes` volumes of `volume_size` bytes and
/// reads every entry, as a restart does: the number of entries, `None` when refused.
pub fn load_checkpoint(file: File, volumes: usize, volume_size: u64) -> Option<u64> {
    let loaded = Loaded::open(file, volumes, volume_size)?;
    for (v, seq) in loaded.seqs.clone().into_iter().enumerate() {
        let _ = loaded.covers(v, seq);
    }
    Some(loaded.entries().count() as u64)
}

/// Writes the checksums of a volume image in place: the header block's, and for each
/// record the scan would reach, its key hash, header checksum and trailer (for the
/// incarnation and lengths the record's bytes give), so a scan gets past them.
pub fn seal_volume(b: &mut [u8]) {
    if b.len() < VOLUME_HEADER_LEN as usize {
        return;
    }
    let crc = crc32c::crc32c(&b[0..32]);
    b[32..36].copy_from_slice(&crc.to_le_bytes());
    let mut off = VOLUME_HEADER_LEN as usize;
    while off.checked_add(RECORD_FIXED_LEN).is_some_and(|end| end <= b.len()) {
        let r = &mut b[off..];
        let kind = match r[6] {
            1 => Kind::Object,
            2 => Kind::Meta,
            3 => Kind::Tombstone,
            _ => Kind::PurgePrefix,
        };
        let key_len = u32_at(r, 32) as usize;
        let meta_len = u32_at(r, 36) as usize;
        let header_len = RECORD_FIXED_LEN + key_len + meta_len;
        if header_len > r.len() {
            return;
        }
        let key = format::key_hash(&r[RECORD_FIXED_LEN..RECORD_FIXED_LEN + key_len]);
        r[16..32].copy_from_slice(&key.to_le_bytes());
        let mut crc = crc32c::crc32c(&r[..RECORD_FIXED_LEN - 4]);
        crc = crc32c::crc32c_append(crc, &r[RECORD_FIXED_LEN..header_len]);
        r[RECORD_FIXED_LEN - 4..RECORD_FIXED_LEN].copy_from_slice(&crc.to_le_bytes());
        let (seq, body_len, span) = (u64_at(r, 8), u64_at(r, 40), u64_at(r, 48));
        let body_rel = format::body_rel(kind, header_len as u64) as usize;
        let body_end = usize::try_from(body_len).ok().and_then(|n| body_rel.checked_add(n));
        let fits = |e: &usize| e.checked_add(TRAILER_LEN).is_some_and(|x| x <= r.len());
        if let Some(end) = body_end.filter(|e| body_len != LEN_UNKNOWN && fits(e)) {
            let body_crc = match kind {
                Kind::Object => 0,
                _ => crc32c::crc32c(&r[body_rel..end]),
            };
            let t = format::encode_trailer(seq, body_len, body_crc, crc);
            r[end..end + TRAILER_LEN].copy_from_slice(&t);
        }
        // The next record where the scan would look for it.
        match usize::try_from(span) {
            Ok(s) if s > 0 && s.is_multiple_of(ALIGN as usize) => off = off.saturating_add(s),
            _ => return,
        }
    }
}

/// Writes a checkpoint image's closing checksum (its last 4 bytes: CRC-32C of all before).
pub fn seal_checkpoint(b: &mut [u8]) {
    if let Some(n) = b.len().checked_sub(4) {
        let crc = crc32c::crc32c(&b[..n]);
        b[n..].copy_from_slice(&crc.to_le_bytes());
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    /// Fuzzing (target `store_volume`): a record of unknown length whose span reaches past
    /// 2^64 overflowed the scan's next offset.
    #[test]
    fn a_scan_stops_at_a_record_spanning_past_2_64() {
        let mut img = VolumeHeader { index: 0, volume_size: 1 << 20, seq: 3 }.encode();
        img.resize(1 << 16, 0);
        let span = u64::MAX - (ALIGN - 1);
        let (rec, _) =
            format::encode_record_header(Kind::Object, 3, b"k", b"", LEN_UNKNOWN, span, 0);
        img[VOLUME_HEADER_LEN as usize..][..rec.len()].copy_from_slice(&rec);
        let mut f = tempfile::tempfile().unwrap();
        f.write_all(&img).unwrap();
        assert_eq!(scan_volume(&f, 3, img.len() as u64), Scanned { records: 0, dropped: 0 });
    }
}
