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
use std::sync::atomic::Ordering;

use super::entry::{Entry, Loc, seq24};
use super::index::{MetaAt, Slot};
use super::purge_rule::Rule;
use super::state::Disk;
use crate::format::{self, MAX_KEY_LEN, VOLUME_HEADER_LEN};

/// File name of the checkpoint in the store directory.
use super::dir::CHECKPOINT_FILE as FILE;
const MAGIC: &[u8; 8] = b"REELCKP1";
const END_MAGIC: &[u8; 8] = b"REELCKPE";
/// 3: entries are the index's (hash and location; keys and metadata stay in the
/// records), with where a refreshed object's metadata is, and the purge rules in force.
/// (2: entries carried their key and metadata; 1 derived the body offset from the
/// metadata length, wrong once a metadata update had grown the header.)
const VERSION: u16 = 3;
const HEADER_LEN: usize = 48;
/// One entry: hash, volume, record offset, body offset in the record, body length,
/// flags.
const ENTRY_FIXED: usize = 8 + 4 + 8 + 4 + 8 + 4;
/// What follows an entry flagged [`REFRESHED`]: its metadata record (volume,
/// incarnation, offset).
const META_AT: usize = 4 + 8 + 8;
const REFRESHED: u32 = 1;
/// Fixed part of a purge rule, before its prefix.
const RULE_FIXED: usize = 4 + 8 + 8;

/// A checkpoint read back from disk.
pub(super) struct Loaded {
    /// Incarnation of each volume when the checkpoint was taken.
    pub(super) seqs: Vec<u64>,
    /// Volumes with an incarnation at or past this one are not covered.
    pub(super) from_seq: u64,
    /// The purge rules in force when it was taken.
    pub(super) rules: Vec<Rule>,
    /// The checked file, its header and the volume size, until [`Loaded::entries`]
    /// streams the entries.
    stream: Option<(File, Head, u64)>,
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

impl Disk {
    /// Writes a checkpoint of the index now (blocking file I/O; the store calls it at a
    /// clean close and from its maintenance thread). Returns the number of entries
    /// written. Does nothing (0) while the index is still loading.
    pub(crate) fn checkpoint(&self) -> Result<u64, crate::StoreError> {
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
    pub(crate) fn close(&self) -> Result<u64, crate::StoreError> {
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
        h[32..40].copy_from_slice(&super::state::now_secs().to_le_bytes());
        let rules = self.rules();
        h[40..44].copy_from_slice(&(rules.len() as u32).to_le_bytes());
        w.write_all(&h)?;
        for s in seqs {
            w.write_all(&s.to_le_bytes())?;
        }
        for r in &rules {
            let mut b = [0u8; RULE_FIXED];
            b[0..4].copy_from_slice(&(r.prefix.len() as u32).to_le_bytes());
            b[4..12].copy_from_slice(&r.seq.to_le_bytes());
            b[12..20].copy_from_slice(&r.off.to_le_bytes());
            w.write_all(&b)?;
            w.write_all(&r.prefix)?;
        }
        let covered = |l: &Loc| {
            let seq = seqs.get(l.vol as usize).copied().unwrap_or(0);
            seq != 0
                && seq < from_seq
                && seq24(seq) == l.seq24
                && !self.vols[l.vol as usize].quarantined.load(Ordering::SeqCst)
        };
        let mut n = 0u64;
        let mut batch: Vec<(u64, Loc, bool)> = Vec::new();
        for shard in self.shards.iter() {
            batch.clear();
            if let Ok(s) = shard.read() {
                for (&h, slot) in s.iter() {
                    let e = match slot {
                        Slot::Ready(e) => e,
                        // An object being replaced is still the one on disk until the
                        // fill commits.
                        Slot::Filling(f) => {
                            let r = f.replaced.lock().unwrap_or_else(|p| p.into_inner());
                            match r.as_ref() {
                                Some(e) if covered(&e.loc()) => {
                                    batch.push((h, e.loc(), e.refreshed()));
                                }
                                _ => {}
                            }
                            continue;
                        }
                    };
                    if covered(&e.loc()) {
                        batch.push((h, e.loc(), e.refreshed()));
                    }
                }
            }
            for &(h, l, refreshed) in &batch {
                let meta = if refreshed { self.meta_at(h, &l) } else { None };
                let mut b = [0u8; ENTRY_FIXED];
                b[0..8].copy_from_slice(&h.to_le_bytes());
                b[8..12].copy_from_slice(&l.vol.to_le_bytes());
                b[12..20].copy_from_slice(&l.rec_off.to_le_bytes());
                b[20..24].copy_from_slice(&((l.body_off - l.rec_off) as u32).to_le_bytes());
                b[24..32].copy_from_slice(&l.body_len.to_le_bytes());
                let flags = if meta.is_some() { REFRESHED } else { 0 };
                b[32..36].copy_from_slice(&flags.to_le_bytes());
                w.write_all(&b)?;
                if let Some(m) = meta {
                    let mut b = [0u8; META_AT];
                    b[0..4].copy_from_slice(&m.vol.to_le_bytes());
                    b[4..12].copy_from_slice(&m.seq.to_le_bytes());
                    b[12..20].copy_from_slice(&m.rec_off.to_le_bytes());
                    w.write_all(&b)?;
                }
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

    /// Opens the checkpoint, if there is a valid one for this store's geometry. The file is
    /// read as a stream, twice: once here to check its CRC and structure without keeping
    /// anything, then by [`Loaded::entries`] as the index takes the entries one by one, so
    /// loading holds a buffer, not the file, on top of the index it builds.
    pub(super) fn read_checkpoint(&self) -> Option<Loaded> {
        let f = File::open(self.path.join(FILE)).ok()?;
        match Loaded::open(f, self.vols.len(), self.volume_size) {
            Some(l) => Some(l),
            None => {
                tracing::warn!("store index checkpoint unusable, scanning the volumes");
                None
            }
        }
    }
}

/// The stream buffer of a checkpoint read.
const READ_BUF: usize = 1 << 20;

/// Reads through a buffer, keeping the CRC-32C of what it read.
struct CrcReader<R> {
    inner: std::io::BufReader<R>,
    crc: u32,
    /// Bytes read so far.
    pos: u64,
}

impl<R: Read> CrcReader<R> {
    fn new(inner: R) -> Self {
        CrcReader { inner: std::io::BufReader::with_capacity(READ_BUF, inner), crc: 0, pos: 0 }
    }

    fn fill(&mut self, buf: &mut [u8]) -> Option<()> {
        self.inner.read_exact(buf).ok()?;
        self.crc = crc32c::crc32c_append(self.crc, buf);
        self.pos += buf.len() as u64;
        Some(())
    }

    fn array<const N: usize>(&mut self) -> Option<[u8; N]> {
        let mut b = [0u8; N];
        self.fill(&mut b)?;
        Some(b)
    }

    fn u64(&mut self) -> Option<u64> {
        self.array::<8>().map(u64::from_le_bytes)
    }
}

/// The header of a checkpoint: what [`Loaded`] knows before its entries.
struct Head {
    seqs: Vec<u64>,
    from_seq: u64,
    rules: Vec<Rule>,
    /// Where the entries end (the end marker starts).
    entries_end: u64,
}

/// Reads the header and the volume incarnations; `None` for another format or geometry.
fn read_head<R: Read>(
    r: &mut CrcReader<R>,
    len: u64,
    volumes: usize,
    volume_size: u64,
) -> Option<Head> {
    if len < (HEADER_LEN + 20) as u64 {
        return None;
    }
    let h = r.array::<HEADER_LEN>()?;
    if &h[0..8] != MAGIC || u16_at(&h, 8)? != VERSION {
        return None;
    }
    let n_vols = u32_at(&h, 12)? as usize;
    if n_vols != volumes || u64_at(&h, 16)? != volume_size {
        return None;
    }
    let from_seq = u64_at(&h, 24)?;
    let entries_end = len - 20;
    if (HEADER_LEN + 8 * n_vols) as u64 > entries_end {
        return None;
    }
    let seqs = (0..n_vols).map(|_| r.u64()).collect::<Option<Vec<u64>>>()?;
    let n_rules = u32_at(&h, 40)?;
    let mut rules = Vec::new();
    for _ in 0..n_rules {
        let b = r.array::<RULE_FIXED>()?;
        let len = u32_at(&b, 0)? as usize;
        if len > MAX_KEY_LEN || r.pos + len as u64 > entries_end {
            return None;
        }
        let mut prefix = vec![0u8; len];
        r.fill(&mut prefix)?;
        rules.push(Rule { prefix: prefix.into(), seq: u64_at(&b, 4)?, off: u64_at(&b, 12)? });
    }
    Some(Head { seqs, from_seq, rules, entries_end })
}

/// One entry, checked against the geometry.
struct Fixed {
    h: u64,
    loc: Loc,
    meta: Option<MetaAt>,
}

fn read_fixed<R: Read>(r: &mut CrcReader<R>, head: &Head, volume_size: u64) -> Option<Fixed> {
    let b = r.array::<ENTRY_FIXED>()?;
    let h = u64_at(&b, 0)?;
    let vol = u32_at(&b, 8)?;
    let rec_off = u64_at(&b, 12)?;
    let body_rel = u64::from(u32_at(&b, 20)?);
    let body_len = u64_at(&b, 24)?;
    let flags = u32_at(&b, 32)?;
    let seq = *head.seqs.get(vol as usize)?;
    let body_off = rec_off.checked_add(body_rel)?;
    // The body follows at least a header page, 4 KiB aligned, and ends with its trailer
    // inside the volume.
    let sane = seq != 0
        && u64::from(vol) < super::entry::MAX_VOLUMES
        && body_len <= super::entry::MAX_BODY
        && rec_off >= VOLUME_HEADER_LEN
        && rec_off % format::ALIGN == 0
        && body_off % format::ALIGN == 0
        && (format::ALIGN..=255 * format::ALIGN).contains(&body_rel)
        && body_off
            .checked_add(body_len)
            .and_then(|x| x.checked_add(format::TRAILER_LEN as u64))
            .is_some_and(|x| x <= volume_size);
    if !sane || flags & !REFRESHED != 0 {
        return None;
    }
    let loc = Loc::new(vol, seq, rec_off, body_off, body_len);
    let meta = if flags & REFRESHED != 0 {
        let m = r.array::<META_AT>()?;
        let mvol = u32_at(&m, 0)?;
        let moff = u64_at(&m, 12)?;
        if mvol as usize >= head.seqs.len() || moff >= volume_size {
            return None;
        }
        Some(MetaAt {
            obj: (vol, seq24(seq), rec_off),
            vol: mvol,
            seq: u64_at(&m, 4)?,
            rec_off: moff,
        })
    } else {
        None
    };
    Some(Fixed { h, loc, meta })
}

impl Loaded {
    /// Checks all of `f` in one streaming pass (CRC, header, every entry's bounds, the
    /// count) and keeps it open for [`Loaded::entries`].
    pub(super) fn open(mut f: File, volumes: usize, volume_size: u64) -> Option<Loaded> {
        use std::io::{Seek, SeekFrom};
        let len = f.metadata().ok()?.len();
        let mut r = CrcReader::new(&mut f);
        let head = read_head(&mut r, len, volumes, volume_size)?;
        let mut count = 0u64;
        while r.pos < head.entries_end {
            read_fixed(&mut r, &head, volume_size)?;
            count += 1;
        }
        if r.pos != head.entries_end || &r.array::<8>()? != END_MAGIC || r.u64()? != count {
            return None;
        }
        let crc = r.crc;
        if u32::from_le_bytes(r.array::<4>()?) != crc {
            return None;
        }
        drop(r);
        f.seek(SeekFrom::Start(0)).ok()?;
        Some(Loaded {
            seqs: head.seqs.clone(),
            from_seq: head.from_seq,
            rules: head.rules.clone(),
            stream: Some((f, head, volume_size)),
        })
    }

    /// The entries, decoded as they are read (the file was checked whole by
    /// [`Loaded::open`]; it is open, so a checkpoint written meanwhile under the same name
    /// does not change it). A read error ends the entries early, with a warning.
    pub(super) fn entries(mut self) -> impl Iterator<Item = (u64, Entry, Option<MetaAt>)> {
        let mut state = self.stream.take().and_then(|(f, head, vs)| {
            let mut r = CrcReader::new(f);
            read_head(&mut r, head.entries_end + 20, head.seqs.len(), vs)?;
            Some((r, head, vs))
        });
        std::iter::from_fn(move || {
            let (r, head, vs) = state.as_mut()?;
            if r.pos >= head.entries_end {
                return None;
            }
            let Some(e) = read_fixed(r, head, *vs) else {
                tracing::warn!(
                    "store index checkpoint changed while it was read; the rest is not loaded"
                );
                state = None;
                return None;
            };
            let entry = Entry::new(e.loc);
            if e.meta.is_some() {
                entry.set_refreshed();
            }
            Some((e.h, entry, e.meta))
        })
    }
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
    use crate::format::Kind;

    fn check(b: &[u8], volumes: usize, volume_size: u64) -> Option<Loaded> {
        let mut f = tempfile::tempfile().unwrap();
        f.write_all(b).unwrap();
        use std::io::Seek;
        f.rewind().unwrap();
        Loaded::open(f, volumes, volume_size)
    }

    /// A checkpoint for 2 volumes of 1 MiB with `entries` (key, body length) in volume 0,
    /// the second one refreshed (its metadata in a record of volume 0 at 512 KiB), and
    /// one purge rule.
    fn file(entries: &[(&str, u64)]) -> Vec<u8> {
        let mut b = Vec::new();
        let mut h = [0u8; HEADER_LEN];
        h[0..8].copy_from_slice(MAGIC);
        h[8..10].copy_from_slice(&VERSION.to_le_bytes());
        h[12..16].copy_from_slice(&2u32.to_le_bytes());
        h[16..24].copy_from_slice(&(1u64 << 20).to_le_bytes());
        h[24..32].copy_from_slice(&9u64.to_le_bytes());
        h[40..44].copy_from_slice(&1u32.to_le_bytes());
        b.extend_from_slice(&h);
        b.extend_from_slice(&3u64.to_le_bytes());
        b.extend_from_slice(&0u64.to_le_bytes());
        b.extend_from_slice(&2u32.to_le_bytes());
        b.extend_from_slice(&3u64.to_le_bytes());
        b.extend_from_slice(&8192u64.to_le_bytes());
        b.extend_from_slice(b"a/");
        let mut off = VOLUME_HEADER_LEN;
        for (i, (key, len)) in entries.iter().enumerate() {
            let header_len = (format::RECORD_FIXED_LEN + key.len() + 1) as u64;
            let span = format::span_for(Kind::Object, header_len, *len);
            let mut e = [0u8; ENTRY_FIXED];
            e[0..8].copy_from_slice(&super::super::index::index_hash(key.as_bytes()).to_le_bytes());
            e[8..12].copy_from_slice(&0u32.to_le_bytes());
            e[12..20].copy_from_slice(&off.to_le_bytes());
            let body_rel = format::body_rel(Kind::Object, header_len) as u32;
            e[20..24].copy_from_slice(&body_rel.to_le_bytes());
            e[24..32].copy_from_slice(&len.to_le_bytes());
            let refreshed = i == 1;
            e[32..36].copy_from_slice(&u32::from(refreshed).to_le_bytes());
            b.extend_from_slice(&e);
            if refreshed {
                b.extend_from_slice(&0u32.to_le_bytes());
                b.extend_from_slice(&3u64.to_le_bytes());
                b.extend_from_slice(&(512u64 << 10).to_le_bytes());
            }
            off += span;
        }
        b.extend_from_slice(END_MAGIC);
        b.extend_from_slice(&(entries.len() as u64).to_le_bytes());
        let crc = crc32c::crc32c(&b);
        b.extend_from_slice(&crc.to_le_bytes());
        b
    }

    #[test]
    fn damaged_or_foreign_checkpoints_are_refused() {
        let b = file(&[("a/k1", 100), ("a/k2", 5000)]);
        let l = check(&b, 2, 1 << 20).expect("valid");
        assert_eq!((l.seqs.clone(), l.from_seq), (vec![3, 0], 9));
        assert_eq!(l.rules, vec![Rule { prefix: b"a/"[..].into(), seq: 3, off: 8192 }]);
        assert!(l.covers(0, 3) && !l.covers(0, 4) && !l.covers(1, 0));
        let got: Vec<(u64, u64, Option<u64>)> =
            l.entries().map(|(h, e, m)| (h, e.loc().body_len, m.map(|m| m.rec_off))).collect();
        let h = |k: &str| super::super::index::index_hash(k.as_bytes());
        assert_eq!(got, vec![(h("a/k1"), 100, None), (h("a/k2"), 5000, Some(512 << 10))]);
        assert!(check(&b, 3, 1 << 20).is_none(), "other volume count");
        assert!(check(&b, 2, 2 << 20).is_none(), "other volume size");
        for i in 0..b.len() {
            let mut d = b.clone();
            d[i] ^= 0x10;
            assert!(check(&d, 2, 1 << 20).is_none(), "flip at {i} accepted");
        }
        for cut in [1, 4, 21, b.len() - HEADER_LEN] {
            assert!(check(&b[..b.len() - cut], 2, 1 << 20).is_none(), "truncated by {cut}");
        }
        let empty = file(&[]);
        assert_eq!(check(&empty, 2, 1 << 20).expect("valid").entries().count(), 0);
    }
}
