//! The index checkpoint: the index written to `DIR/index.ckpt` at a clean close and
//! periodically, so a restart loads it instead of scanning every volume.
//!
//! A checkpoint is trusted per volume: it names the incarnation (`seq`) of every volume
//! when it was taken, and the first incarnation (`from_seq`) whose records it does not
//! cover completely (the active volume, and any volume with a write in flight). At load,
//! entries of a volume whose header still shows the same incarnation, below `from_seq`,
//! are taken as they are; every volume at or past `from_seq`, or with another
//! incarnation (reclaimed, reused), is scanned and its records replayed on top, in log
//! order. Volumes are append-only within an incarnation and a restart always writes into
//! a fresh one, so an old checkpoint is never wrong, only less useful. The file ends with
//! a CRC-32C over all of it; any damage, another geometry or another format version
//! makes the store ignore it and scan everything. Layout: `docs/store-format.md`.

use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Read, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use bytes::Bytes;

use super::Store;
use super::index::{Entry, Slot};
use crate::format::{self, Kind, MAX_KEY_LEN, MAX_META_LEN, VOLUME_HEADER_LEN};

/// File name of the checkpoint in the store directory.
pub(super) const FILE: &str = "index.ckpt";
const MAGIC: &[u8; 8] = b"REELCKP1";
const END_MAGIC: &[u8; 8] = b"REELCKPE";
const VERSION: u16 = 1;
const HEADER_LEN: usize = 48;
/// Fixed part of one entry, before its key and metadata.
const ENTRY_FIXED: usize = 4 + 8 + 8 + 8 + 8 + 4 + 4;

/// A checkpoint read back from disk.
pub(super) struct Loaded {
    /// Incarnation of each volume when the checkpoint was taken.
    pub(super) seqs: Vec<u64>,
    /// Volumes with an incarnation at or past this one are not covered.
    pub(super) from_seq: u64,
    /// (volume, entry) of every object in a covered volume.
    pub(super) entries: Vec<(u128, Entry)>,
}

impl Loaded {
    /// Whether the checkpoint covers volume `v`, whose header now shows `seq`.
    pub(super) fn covers(&self, v: usize, seq: u64) -> bool {
        seq != 0 && self.seqs.get(v) == Some(&seq) && seq < self.from_seq
    }
}

/// CRC-32C of everything written through it.
struct Crc<W> {
    inner: W,
    crc: u32,
}

impl<W: Write> Write for Crc<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.crc = crc32c::crc32c_append(self.crc, &buf[..n]);
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

impl Store {
    /// Writes a checkpoint of the index now (blocking file I/O; the store calls it at a
    /// clean close and from its maintenance thread). Returns the number of entries
    /// written. Does nothing (0) while the index is still loading.
    pub fn checkpoint(&self) -> Result<u64, crate::StoreError> {
        if self.closed.load(Ordering::SeqCst) {
            return Ok(0);
        }
        self.checkpoint_with(false)
    }

    /// Closes the store for writing and writes the checkpoint the next open loads, so a
    /// clean restart needs no scan. New fills and removals fail with
    /// [`StoreError::Closed`](crate::StoreError::Closed) from then on; lookups still
    /// work. Call it at shutdown: dropping the last handle does the same, but possibly
    /// on a background thread that the exiting process does not wait for.
    pub fn close(&self) -> Result<u64, crate::StoreError> {
        self.closed.store(true, Ordering::SeqCst);
        if self.loading.load(Ordering::SeqCst) {
            return Ok(0);
        }
        // Wait out a periodic checkpoint in progress, then write the final one.
        while self.checkpointing.swap(true, Ordering::SeqCst) {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let r = self.checkpoint_now(true);
        self.checkpointing.store(false, Ordering::SeqCst);
        r
    }

    /// `closing`: the store is being dropped, nothing more will be written into the
    /// active volume (the next open writes into a fresh one), so it is covered too.
    pub(super) fn checkpoint_with(&self, closing: bool) -> Result<u64, crate::StoreError> {
        if self.loading.load(Ordering::SeqCst) || self.checkpointing.swap(true, Ordering::SeqCst) {
            return Ok(0);
        }
        let r = self.checkpoint_now(closing);
        self.checkpointing.store(false, Ordering::SeqCst);
        r
    }

    fn checkpoint_now(&self, closing: bool) -> Result<u64, crate::StoreError> {
        let change = self.c.changes.load(Ordering::SeqCst);
        let (seqs, from_seq) = {
            let a = self.lock_alloc();
            let seqs: Vec<u64> = self.vols.iter().map(|v| v.seq.load(Ordering::SeqCst)).collect();
            let mut from = a.next_seq;
            for (v, &seq) in self.vols.iter().zip(&seqs) {
                let partial =
                    (!closing && a.active == Some(v.idx)) || v.writers.load(Ordering::SeqCst) > 0;
                if seq != 0 && partial {
                    from = from.min(seq);
                }
            }
            (seqs, from)
        };
        let tmp = self.path.join(format!("{FILE}.tmp"));
        let n = self
            .write_checkpoint(&tmp, &seqs, from_seq)
            .map_err(|source| crate::StoreError::Open { path: tmp.clone(), source })?;
        std::fs::rename(&tmp, self.path.join(FILE))
            .map_err(|source| crate::StoreError::Open { path: tmp.clone(), source })?;
        self.c.checkpointed.store(change, Ordering::SeqCst);
        tracing::debug!(entries = n, from_seq, "store index checkpoint written");
        Ok(n)
    }

    fn write_checkpoint(
        &self,
        path: &std::path::Path,
        seqs: &[u64],
        from_seq: u64,
    ) -> std::io::Result<u64> {
        let f = OpenOptions::new().write(true).create(true).truncate(true).open(path)?;
        let mut w = Crc { inner: BufWriter::with_capacity(1 << 20, f), crc: 0 };
        let mut h = [0u8; HEADER_LEN];
        h[0..8].copy_from_slice(MAGIC);
        h[8..10].copy_from_slice(&VERSION.to_le_bytes());
        h[12..16].copy_from_slice(&(seqs.len() as u32).to_le_bytes());
        h[16..24].copy_from_slice(&self.volume_size.to_le_bytes());
        h[24..32].copy_from_slice(&from_seq.to_le_bytes());
        h[32..40].copy_from_slice(&super::now_secs().to_le_bytes());
        w.write_all(&h)?;
        for s in seqs {
            w.write_all(&s.to_le_bytes())?;
        }
        let covered = |e: &Entry| {
            e.seq < from_seq
                && seqs.get(e.vol as usize) == Some(&e.seq)
                && !self.vols[e.vol as usize].quarantined.load(Ordering::SeqCst)
        };
        let mut n = 0u64;
        let mut batch: Vec<Arc<Entry>> = Vec::new();
        for shard in self.shards.iter() {
            batch.clear();
            if let Ok(s) = shard.read() {
                for slot in s.values() {
                    match slot {
                        Slot::Ready(e) if covered(e) => batch.push(e.clone()),
                        // An object being replaced is still the one on disk until the
                        // fill commits.
                        Slot::Filling(f) => {
                            let r = f.replaced.lock().unwrap_or_else(|p| p.into_inner());
                            if let Some(e) = r.as_ref().filter(|e| covered(e)) {
                                batch.push(e.clone());
                            }
                        }
                        Slot::Ready(_) => {}
                    }
                }
            }
            for e in &batch {
                let mut b = [0u8; ENTRY_FIXED];
                b[0..4].copy_from_slice(&e.vol.to_le_bytes());
                b[4..12].copy_from_slice(&e.rec_off.to_le_bytes());
                b[12..20].copy_from_slice(&e.body_len.to_le_bytes());
                b[20..28].copy_from_slice(&e.span.to_le_bytes());
                b[28..36].copy_from_slice(&e.stored_at.to_le_bytes());
                b[36..40].copy_from_slice(&(e.key.len() as u32).to_le_bytes());
                b[40..44].copy_from_slice(&(e.meta.len() as u32).to_le_bytes());
                w.write_all(&b)?;
                w.write_all(&e.key)?;
                w.write_all(&e.meta)?;
                n += 1;
            }
        }
        w.write_all(END_MAGIC)?;
        w.write_all(&n.to_le_bytes())?;
        let crc = w.crc;
        let mut f = w.inner.into_inner().map_err(|e| e.into_error())?;
        // No fsync: a file torn by a power loss fails its CRC and is ignored (the
        // volumes are scanned then), so waiting for the disk here buys nothing.
        f.write_all(&crc.to_le_bytes())?;
        Ok(n)
    }

    /// Reads the checkpoint, if there is a valid one for this store's geometry.
    pub(super) fn read_checkpoint(&self) -> Option<Loaded> {
        let mut f = File::open(self.path.join(FILE)).ok()?;
        let len = f.metadata().ok()?.len();
        let mut b = Vec::with_capacity(usize::try_from(len).ok()?);
        f.read_to_end(&mut b).ok()?;
        match decode(&b, self.vols.len(), self.volume_size) {
            Some(l) => Some(l),
            None => {
                tracing::warn!("store index checkpoint unusable, scanning the volumes");
                None
            }
        }
    }
}

/// Decodes a checkpoint file; `None` unless all of it checks out.
fn decode(b: &[u8], volumes: usize, volume_size: u64) -> Option<Loaded> {
    if b.len() < HEADER_LEN + 20 || &b[0..8] != MAGIC || u16_at(b, 8)? != VERSION {
        return None;
    }
    let (body, crc) = b.split_at(b.len() - 4);
    if crc32c::crc32c(body) != u32::from_le_bytes(crc.try_into().ok()?) {
        return None;
    }
    let n_vols = u32_at(b, 12)? as usize;
    if n_vols != volumes || u64_at(b, 16)? != volume_size {
        return None;
    }
    let from_seq = u64_at(b, 24)?;
    let mut pos = HEADER_LEN;
    let mut seqs = Vec::with_capacity(n_vols);
    for _ in 0..n_vols {
        seqs.push(u64_at(b, pos)?);
        pos += 8;
    }
    let end = body.len().checked_sub(16)?;
    if &body[end..end + 8] != END_MAGIC {
        return None;
    }
    let count = u64_at(body, end + 8)?;
    let mut entries = Vec::new();
    while pos < end {
        let vol = u32_at(body, pos)?;
        let rec_off = u64_at(body, pos + 4)?;
        let body_len = u64_at(body, pos + 12)?;
        let span = u64_at(body, pos + 20)?;
        let stored_at = u64_at(body, pos + 28)?;
        let key_len = u32_at(body, pos + 36)? as usize;
        let meta_len = u32_at(body, pos + 40)? as usize;
        pos += ENTRY_FIXED;
        if key_len > MAX_KEY_LEN || meta_len > MAX_META_LEN || pos + key_len + meta_len > end {
            return None;
        }
        let key: Box<[u8]> = body[pos..pos + key_len].into();
        let meta = Bytes::copy_from_slice(&body[pos + key_len..pos + key_len + meta_len]);
        pos += key_len + meta_len;
        let seq = *seqs.get(vol as usize)?;
        let header_len = (format::RECORD_FIXED_LEN + key_len + meta_len) as u64;
        let body_off = rec_off.checked_add(format::body_rel(Kind::Object, header_len))?;
        let sane = seq != 0
            && rec_off >= VOLUME_HEADER_LEN
            && rec_off % format::ALIGN == 0
            && span >= format::span_for(Kind::Object, header_len, body_len)
            && rec_off.checked_add(span).is_some_and(|e| e <= volume_size);
        if !sane {
            return None;
        }
        let h = format::key_hash(&key);
        entries.push((
            h,
            Entry {
                key,
                meta,
                vol,
                seq,
                rec_off,
                body_off,
                body_len,
                span,
                stored_at,
                accessed: AtomicBool::new(false),
            },
        ));
    }
    if pos != end || entries.len() as u64 != count {
        return None;
    }
    Some(Loaded { seqs, from_seq, entries })
}

fn u16_at(b: &[u8], o: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(o..o + 2)?.try_into().ok()?))
}
fn u32_at(b: &[u8], o: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(o..o + 4)?.try_into().ok()?))
}
fn u64_at(b: &[u8], o: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(o..o + 8)?.try_into().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn damaged_or_foreign_checkpoints_are_refused() {
        // A checkpoint with no entries for 2 volumes of 1 MiB.
        let mut b = Vec::new();
        let mut h = [0u8; HEADER_LEN];
        h[0..8].copy_from_slice(MAGIC);
        h[8..10].copy_from_slice(&VERSION.to_le_bytes());
        h[12..16].copy_from_slice(&2u32.to_le_bytes());
        h[16..24].copy_from_slice(&(1u64 << 20).to_le_bytes());
        h[24..32].copy_from_slice(&9u64.to_le_bytes());
        b.extend_from_slice(&h);
        b.extend_from_slice(&3u64.to_le_bytes());
        b.extend_from_slice(&0u64.to_le_bytes());
        b.extend_from_slice(END_MAGIC);
        b.extend_from_slice(&0u64.to_le_bytes());
        let crc = crc32c::crc32c(&b);
        b.extend_from_slice(&crc.to_le_bytes());
        let l = decode(&b, 2, 1 << 20).expect("valid");
        assert_eq!((l.seqs.clone(), l.from_seq, l.entries.len()), (vec![3, 0], 9, 0));
        assert!(l.covers(0, 3) && !l.covers(0, 4) && !l.covers(1, 0));
        assert!(decode(&b, 3, 1 << 20).is_none(), "other volume count");
        assert!(decode(&b, 2, 2 << 20).is_none(), "other volume size");
        for i in 0..b.len() {
            let mut d = b.clone();
            d[i] ^= 0x10;
            assert!(decode(&d, 2, 1 << 20).is_none(), "flip at {i} accepted");
        }
        assert!(decode(&b[..b.len() - 1], 2, 1 << 20).is_none(), "truncated");
    }
}
