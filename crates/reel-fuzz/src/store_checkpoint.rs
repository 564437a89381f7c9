//! The segment store's index checkpoint (`reel_store::fuzzing`), read at a restart to
//! skip the scan (`docs/store-format.md`): checked whole, then its entries streamed.
//!
//! Input: a first byte (bit 0: write the closing checksum the bytes call for), then the
//! file. The store's geometry is the one the file's header names, so the checks past it
//! are reached.

use reel_store::fuzzing;

/// Loads `data` as a checkpoint file.
pub fn run(data: &[u8]) {
    let Some((&flags, bytes)) = data.split_first() else { return };
    let mut img = bytes.to_vec();
    if flags & 1 == 1 {
        fuzzing::seal_checkpoint(&mut img);
    }
    // Header: magic, version, volumes (u32 at 12), volume size (u64 at 16).
    let (volumes, volume_size) = match (img.get(12..16), img.get(16..24)) {
        (Some(v), Some(s)) => (
            u32::from_le_bytes(v.try_into().unwrap_or_default()) as usize,
            u64::from_le_bytes(s.try_into().unwrap_or_default()),
        ),
        _ => (1, 1 << 20),
    };
    let file = crate::store_volume::with_bytes(&img);
    if let Some(n) = fuzzing::load_checkpoint(file, volumes, volume_size) {
        assert!(n <= img.len() as u64 / 36, "{n} entries in {} bytes", img.len());
    }
}
