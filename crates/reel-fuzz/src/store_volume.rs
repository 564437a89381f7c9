//! The segment store's record decoding (`reel_store::fuzzing`): a volume file read at a
//! restart, its header block and then every record header and commit trailer the scan
//! finds (`docs/store-format.md`).
//!
//! Input: a first byte (bit 0: write the checksums the bytes call for, so the scan gets
//! past them), then the volume's bytes, from its header block.

use std::fs::File;
use std::io::{Seek, Write};

use reel_store::fuzzing;

/// Largest volume image tried: the scan reads 1 MiB windows.
const MAX: usize = 4 << 20;

/// Scans `data` as a volume file.
pub fn run(data: &[u8]) {
    let Some((&flags, bytes)) = data.split_first() else { return };
    let mut img = bytes[..bytes.len().min(MAX)].to_vec();
    if flags & 1 == 1 {
        fuzzing::seal_volume(&mut img);
    }
    // A restart scans a volume whose header names it and the configured size; the size is
    // the file's, here the image's.
    let seq = match fuzzing::volume_header(&img) {
        Some((_, _, seq)) if seq != 0 => seq,
        _ => return,
    };
    let file = with_bytes(&img);
    let s = fuzzing::scan_volume(&file, seq, img.len() as u64);
    assert!(s.records as u64 + s.dropped <= img.len() as u64 / 4096, "{s:?}");
}

/// A temporary file holding `bytes`, positioned at its start.
pub(crate) fn with_bytes(bytes: &[u8]) -> File {
    let mut f = tempfile::tempfile().expect("a temporary file");
    f.write_all(bytes).expect("write the image");
    f.rewind().expect("rewind the image");
    f
}
