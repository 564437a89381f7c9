//! Rebuild: what the store learns at open (the volume headers: which volumes are free,
//! sealed, in what order) and the index load that follows in the background.
//!
//! The load takes the checkpoint's entries for the volumes it covers (module
//! `checkpoint`), scans the record headers of every other sealed volume (bodies are not
//! read: a record counts once its header checks out and its commit trailer matches),
//! replays the records in log order on top, and merges the result into the live index.
//! Lookups miss until then. Live writes since open all went to fresh incarnations, so
//! they are newer than anything loaded: a live entry always wins, and a key removed or
//! purged while loading is not brought back.

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use super::entry::{Entry, Loc, seq24};
use super::index::{MetaAt, Slot};
use super::purge_rule::Rule;
use super::state::Disk;
use crate::format::{
    self, ALIGN, Kind, LEN_UNKNOWN, RECORD_FIXED_LEN, TRAILER_LEN, VOLUME_HEADER_LEN, VolumeHeader,
};

impl Disk {
    /// At open: reads every volume header and sets up allocation (free volumes, sealed
    /// ones in incarnation order, the next incarnation). A full store keeps every volume:
    /// a fill that finds no free volume while the index loads takes the oldest one then
    /// (`Disk::allocate`), after the load reclaim makes room as usual.
    pub(super) fn read_volume_headers(&self) -> std::io::Result<()> {
        // In parallel on the I/O pool: cold, these reads are what open waits for.
        let (tx, rx) = std::sync::mpsc::channel();
        let pool = Some(self.io.pool());
        for vol in &self.vols {
            let (file, idx, vs, tx) = (vol.file.clone(), vol.idx, self.volume_size, tx.clone());
            let job = move || {
                let mut hdr = vec![0u8; VOLUME_HEADER_LEN as usize];
                let h =
                    file.read_exact_at(&mut hdr, 0).ok().and_then(|_| VolumeHeader::decode(&hdr));
                let seq = match h {
                    Some(h) if h.index == idx && h.volume_size == vs => h.seq,
                    _ => 0,
                };
                let _ = tx.send((seq, idx));
            };
            match pool {
                Some(p) if p.spawn(job.clone()) => {}
                _ => job(),
            }
        }
        drop(tx);
        let mut order: Vec<(u64, u32)> = rx.iter().collect();
        if order.len() != self.vols.len() {
            return Err(std::io::Error::other("volume headers could not be read"));
        }
        for &(seq, v) in &order {
            self.vols[v as usize].seq.store(seq, Ordering::SeqCst);
        }
        order.sort_unstable();
        let mut a = self.lock_alloc();
        for &(seq, v) in &order {
            if seq == 0 {
                a.free.push_back(v);
            } else {
                a.sealed.push_back(v);
                a.next_seq = a.next_seq.max(seq + 1);
            }
        }
        a.next_seq = a.next_seq.max(1);
        self.open_seq.store(a.next_seq, Ordering::SeqCst);
        Ok(())
    }

    /// Loads the index (checkpoint, scan of what it does not cover, merge). Runs once,
    /// on the maintenance thread (or in `open` for stores without it).
    pub(super) fn load_index(&self) {
        let t0 = Instant::now();
        let open_seq = self.open_seq.load(Ordering::SeqCst);
        let ckpt = self.read_checkpoint();
        // After a crash the log is replayed here first (tombstones and metadata records
        // need the entries they aim at).
        let mut index = Replay::default();
        let mut scan = Vec::new();
        for vol in &self.vols {
            let seq = vol.seq.load(Ordering::SeqCst);
            if seq == 0 || seq >= open_seq {
                continue;
            }
            if !ckpt.as_ref().is_some_and(|c| c.covers(vol.idx as usize, seq)) {
                scan.push((vol.idx, seq));
            }
        }
        let covered: Vec<bool> = self
            .vols
            .iter()
            .map(|v| {
                ckpt.as_ref()
                    .is_some_and(|c| c.covers(v.idx as usize, v.seq.load(Ordering::SeqCst)))
            })
            .collect();
        let mut from_ckpt = 0u64;
        let in_covered = move |(_, e, _): &(u64, Entry, Option<MetaAt>)| {
            covered.get(e.vol() as usize) == Some(&true)
        };
        // Purges first: lookups apply them to every loaded entry.
        for r in ckpt.iter().flat_map(|c| c.rules.iter()) {
            self.add_rule(r.clone());
        }
        // Streamed: each entry goes into the index as it is read.
        let entries = ckpt.into_iter().flat_map(super::checkpoint::Loaded::entries).inspect(|_| {
            from_ckpt += 1;
        });
        let scanned = scan.len();
        let mut dropped = 0;
        let (objects, bytes) = if scan.is_empty() {
            // A clean restart: the checkpoint is the index.
            self.merge(entries.into_iter().filter(in_covered))
        } else {
            for (h, e, m) in entries.into_iter().filter(in_covered) {
                index.entries.insert(h, e);
                if let Some(m) = m {
                    index.metas.insert(h, m);
                }
            }
            // Replayed in log order as the scans come in, each volume's records dropped
            // once applied: only volumes scanned ahead of their turn wait in memory.
            let mut order: Vec<u64> = scan.iter().map(|&(_, seq)| seq).collect();
            order.sort_unstable();
            let mut next = 0;
            let mut ahead = std::collections::BTreeMap::new();
            for (v, seq, res) in self.scan_volumes(&scan) {
                ahead.insert(seq, (v, res));
                while let Some((v, res)) = order.get(next).and_then(|s| ahead.remove(s)) {
                    dropped += res.dropped;
                    for r in res.records {
                        if let Some(rule) = apply_record(&mut index, v, order[next], r) {
                            self.add_rule(rule);
                        }
                    }
                    next += 1;
                }
            }
            // A scan that never reported (its thread died) holds back none of the others.
            for (seq, (v, res)) in ahead {
                dropped += res.dropped;
                for r in res.records {
                    if let Some(rule) = apply_record(&mut index, v, seq, r) {
                        self.add_rule(rule);
                    }
                }
            }
            let Replay { entries, mut metas } = index;
            self.merge(entries.into_iter().map(|(h, e)| {
                let m = if e.refreshed() { metas.remove(&h) } else { None };
                (h, e, m)
            }))
        };
        self.c.recovered.store(objects, Ordering::Relaxed);
        self.c.dropped.store(dropped, Ordering::Relaxed);
        self.c.load_millis.store(t0.elapsed().as_millis() as u64, Ordering::Relaxed);
        // A load that had to scan writes a fresh checkpoint soon, so the next open
        // need not scan again; otherwise the periodic one comes in its time.
        if scanned > 0 {
            self.c.changes.fetch_add(1, Ordering::SeqCst);
        } else {
            let due = self.started.elapsed().as_secs() + super::maint::CHECKPOINT_EVERY;
            self.c.checkpoint_due.store(due, Ordering::Relaxed);
        }
        {
            // Under the lock `wait_loaded` checks `loading` with: cleared between its check
            // and its wait, the notification would be lost and the waiter sleep for ever.
            let _g = self.load_state.lock().unwrap_or_else(|p| p.into_inner());
            self.loading.store(false, Ordering::SeqCst);
        }
        self.load_cv.notify_all();
        tracing::info!(
            objects,
            bytes,
            dropped,
            from_checkpoint = from_ckpt,
            volumes_scanned = scanned,
            millis = t0.elapsed().as_millis() as u64,
            "store index loaded"
        );
    }

    /// Scans volumes in parallel on the I/O pool (its threads never exit); the results
    /// come as each scan ends.
    fn scan_volumes(
        &self,
        scan: &[(u32, u64)],
    ) -> std::sync::mpsc::IntoIter<(u32, u64, ScanResult)> {
        let (tx, rx) = std::sync::mpsc::channel();
        let pool = Some(self.io.pool());
        for &(v, seq) in scan {
            let file = self.vols[v as usize].file.clone();
            let vs = self.volume_size;
            let tx = tx.clone();
            let job = move || {
                let _ = tx.send((v, seq, scan_volume(&file, seq, vs)));
            };
            match pool {
                Some(p) if p.spawn(job.clone()) => {}
                _ => job(),
            }
        }
        drop(tx);
        rx.into_iter()
    }

    /// Moves the loaded entries into the live index: live entries (newer) win, keys
    /// removed while loading stay removed. Returns the objects and bytes added.
    fn merge(&self, index: impl IntoIterator<Item = (u64, Entry, Option<MetaAt>)>) -> (u64, u64) {
        let mut g = self.load_state.lock().unwrap_or_else(|p| p.into_inner());
        let (mut objects, mut bytes) = (0, 0);
        for (h, e, meta) in index {
            let l = e.loc();
            let vol = &self.vols[l.vol as usize];
            let seq = vol.seq.load(Ordering::SeqCst);
            if vol.quarantined.load(Ordering::SeqCst) || seq == 0 || seq24(seq) != l.seq24 {
                continue;
            }
            if let Some(key) = g.unmatched.get(&h) {
                // Removed during the load with nothing live to match: now it is known
                // to be on disk, its tombstone is due.
                let due = (key.clone(), (seq, l.rec_off));
                g.tombstones_due.push(due);
                continue;
            }
            if g.keys.contains(&h) {
                continue;
            }
            let Ok(mut s) = self.shard(h).write() else { continue };
            let span = e.span();
            match s.get(&h) {
                None => {
                    s.insert(h, Slot::Ready(e));
                    objects += 1;
                    bytes += span;
                }
                // A fill started since open: the loaded object is what it replaces (and
                // what comes back if it aborts).
                Some(Slot::Filling(f)) => {
                    let mut r = f.replaced.lock().unwrap_or_else(|p| p.into_inner());
                    if r.is_some() {
                        continue;
                    }
                    *r = Some(e);
                }
                Some(Slot::Ready(_)) => continue,
            }
            if let Some(m) = meta {
                self.set_meta_at(h, m);
            }
            drop(s);
            vol.objects.lock().unwrap_or_else(|p| p.into_inner()).push(h);
        }
        self.c.objects.fetch_add(objects, Ordering::Relaxed);
        self.c.bytes_used.fetch_add(bytes, Ordering::Relaxed);
        g.active = false;
        g.keys = HashSet::new();
        g.unmatched = HashMap::new();
        (objects, bytes)
    }

    /// Writes the tombstones of keys removed during the load that the load found on
    /// disk (each aimed at the record it found, so a newer copy written since is not
    /// touched). Run by the maintenance pass that follows the load.
    pub(super) async fn write_load_tombstones(self: &Arc<Self>) {
        let due = std::mem::take(
            &mut self.load_state.lock().unwrap_or_else(|p| p.into_inner()).tombstones_due,
        );
        for (key, target) in due {
            if let Err(e) = self.append_small(Kind::Tombstone, &key, &[], Some(target)).await {
                tracing::warn!(error = %e, "tombstone of a key removed during the index load not written");
            }
        }
    }

    /// Blocks until the index is loaded (tools and tests; serving does not wait).
    pub(crate) fn wait_loaded(&self) {
        let mut g = self.load_state.lock().unwrap_or_else(|p| p.into_inner());
        while g.active || self.loading.load(Ordering::SeqCst) {
            g = self.load_cv.wait(g).unwrap_or_else(|p| p.into_inner());
        }
    }
}

/// The log replayed after a crash: hash to entry, and where refreshed entries' metadata
/// is (apart: few entries have one).
#[derive(Default)]
pub(super) struct Replay {
    pub(super) entries: HashMap<u64, Entry, Pass>,
    pub(super) metas: HashMap<u64, MetaAt, Pass>,
}

type Pass = std::hash::BuildHasherDefault<super::index::PassHasher>;

/// A record found by the scan: the key's hash, not the key (a purge's prefix excepted).
pub(super) struct ScannedRecord {
    pub(super) kind: Kind,
    pub(super) h: u64,
    pub(super) prefix: Option<Box<[u8]>>,
    pub(super) rec_off: u64,
    pub(super) body_off: u64,
    pub(super) body_len: u64,
    pub(super) target: Option<(u64, u64)>,
}

#[derive(Default)]
pub(super) struct ScanResult {
    pub(super) records: Vec<ScannedRecord>,
    pub(super) dropped: u64,
}

/// Reads a volume front to back through a window, so small records cost no read of
/// their own and large ones only their header and trailer.
struct Window<'a> {
    file: &'a File,
    buf: Vec<u8>,
    start: u64,
    len: usize,
    end: u64,
}

impl Window<'_> {
    /// `n` bytes at `off`; a miss reads `max(n, want)` bytes from `off` (up to the
    /// volume's end). `None` if the file ends first or a read fails.
    fn get(&mut self, off: u64, n: usize, want: usize) -> Option<&[u8]> {
        let hit = off >= self.start && off + n as u64 <= self.start + self.len as u64;
        if !hit {
            let size = (n.max(want) as u64).min(self.end.saturating_sub(off)) as usize;
            if size < n {
                return None;
            }
            if self.buf.len() < size {
                self.buf.resize(size, 0);
            }
            self.file.read_exact_at(&mut self.buf[..size], off).ok()?;
            (self.start, self.len) = (off, size);
        }
        let at = (off - self.start) as usize;
        Some(&self.buf[at..at + n])
    }
}

/// Read size when the records seen so far are small: many of them per read.
const WINDOW_SMALL: usize = 1 << 20;
/// Read size next to large records: their header (or trailer and the next header).
const WINDOW_LARGE: usize = 16 << 10;

/// Scans the record headers of one volume of incarnation `seq`. A record counts if its
/// header checks out (magic, version, incarnation, lengths, header CRC) and its commit
/// trailer matches (incarnation, length, header CRC, its own CRC); the body of an
/// object is not read. The small body of a metadata, tombstone or purge record is read
/// and checked against the trailer's CRC.
pub(super) fn scan_volume(file: &File, seq: u64, volume_size: u64) -> ScanResult {
    let mut res = ScanResult::default();
    let mut w = Window { file, buf: Vec::new(), start: 0, len: 0, end: volume_size };
    let mut off = VOLUME_HEADER_LEN;
    let mut want = WINDOW_SMALL;
    while off + ALIGN <= volume_size {
        let Some(h) =
            w.get(off, RECORD_FIXED_LEN, want).and_then(|b| format::decode_record_fixed(b, seq))
        else {
            break;
        };
        if off.checked_add(h.span).is_none_or(|end| end > volume_size) {
            break;
        }
        let Some(full) = w.get(off, h.header_len() as usize, want) else { break };
        if !format::verify_header_crc(&h, full) {
            break;
        }
        let k1 = RECORD_FIXED_LEN + h.key_len as usize;
        let prefix = (h.kind == Kind::PurgePrefix).then(|| full[RECORD_FIXED_LEN..k1].into());
        let next = off + h.span;
        want = if h.span < WINDOW_SMALL as u64 / 8 { WINDOW_SMALL } else { WINDOW_LARGE };
        if h.body_len == LEN_UNKNOWN {
            res.dropped += 1;
            off = next;
            continue;
        }
        let body_off = off + h.body_rel();
        let small = h.kind != Kind::Object;
        // For a small record, its body with the trailer; for an object, the trailer.
        let (at, n) = if small {
            (body_off, h.body_len as usize + TRAILER_LEN)
        } else {
            (body_off + h.body_len, TRAILER_LEN)
        };
        let mut target = None;
        let valid = w.get(at, n, want).is_some_and(|b| {
            let (body, t) = b.split_at(n - TRAILER_LEN);
            match format::decode_trailer(t, seq, h.body_len, h.header_crc) {
                Some(crc) if small => {
                    if body.len() == 16 {
                        let s = u64::from_le_bytes(body[..8].try_into().unwrap_or_default());
                        let o = u64::from_le_bytes(body[8..].try_into().unwrap_or_default());
                        target = Some((s, o));
                    }
                    crc32c::crc32c(body) == crc
                }
                Some(_) => true,
                None => false,
            }
        });
        if !valid {
            res.dropped += 1;
            off = next;
            continue;
        }
        res.records.push(ScannedRecord {
            kind: h.kind,
            h: h.key_hash as u64,
            prefix,
            rec_off: off,
            body_off,
            body_len: h.body_len,
            target,
        });
        off = next;
    }
    res
}

/// Replays one record onto the index being rebuilt, in log order. A purge becomes the
/// rule it returns (lookups apply it; module `purge`).
pub(super) fn apply_record(index: &mut Replay, v: u32, seq: u64, r: ScannedRecord) -> Option<Rule> {
    let h = r.h;
    match r.kind {
        Kind::Object => {
            let e = Entry::new(Loc::new(v, seq, r.rec_off, r.body_off, r.body_len));
            index.entries.insert(h, e);
            index.metas.remove(&h);
        }
        Kind::Meta => {
            if let Some(e) = index.entries.get(&h)
                && let Some((ts, to)) = r.target
                && e.loc().seq24 == seq24(ts)
                && e.loc().rec_off == to
            {
                let l = e.loc();
                e.set_refreshed();
                let at =
                    MetaAt { obj: (l.vol, l.seq24, l.rec_off), vol: v, seq, rec_off: r.rec_off };
                index.metas.insert(h, at);
            }
        }
        Kind::Tombstone => {
            if let Some(e) = index.entries.get(&h)
                && r.target
                    .is_none_or(|(ts, to)| e.loc().seq24 == seq24(ts) && e.loc().rec_off == to)
            {
                index.entries.remove(&h);
                index.metas.remove(&h);
            }
        }
        Kind::PurgePrefix => {
            return r.prefix.map(|prefix| Rule { prefix, seq, off: r.rec_off });
        }
    }
    None
}
