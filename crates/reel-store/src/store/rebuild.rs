//! Rebuild: the start-up scan of every volume and the replay of its records, in log
//! order, into the index.

use std::collections::HashMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use bytes::Bytes;

use super::Store;
use super::index::{Entry, Slot};
use crate::format::{
    self, ALIGN, Kind, LEN_UNKNOWN, RECORD_FIXED_LEN, TRAILER_LEN, VOLUME_HEADER_LEN, VolumeHeader,
};
use crate::io;

impl Store {
    pub(super) fn rebuild(&self) -> std::io::Result<()> {
        // Scan volumes in parallel on the I/O pool (its threads never exit).
        let (tx, rx) = std::sync::mpsc::channel();
        let vs = self.volume_size;
        let pool = io::pool().ok();
        for vol in &self.vols {
            let (file, idx, tx) = (vol.file.clone(), vol.idx, tx.clone());
            let job = move || {
                let _ = tx.send(scan_volume(&file, idx, vs));
            };
            match pool {
                Some(p) if p.spawn(job.clone()) => {}
                _ => job(),
            }
        }
        drop(tx);
        let mut results: Vec<(u32, u64, ScanResult)> = rx.iter().collect();
        if results.len() != self.vols.len() {
            return Err(std::io::Error::other("volume scan did not complete"));
        }
        results.sort_by_key(|r| r.1);
        let mut index: HashMap<u128, Entry> = HashMap::new();
        let mut a = self.lock_alloc();
        let mut dropped = 0;
        for (v, seq, scan) in &results {
            dropped += scan.dropped;
            if *seq == 0 {
                a.free.push_back(*v);
                continue;
            }
            self.vols[*v as usize].seq.store(*seq, Ordering::SeqCst);
            a.next_seq = a.next_seq.max(seq + 1);
            a.sealed.push_back(*v);
            for r in &scan.records {
                apply_record(&mut index, *v, *seq, r);
            }
        }
        a.next_seq = a.next_seq.max(1);
        let mut objects = 0;
        let mut bytes = 0;
        for (h, e) in index {
            objects += 1;
            bytes += e.span;
            self.vols[e.vol as usize].objects.lock().unwrap_or_else(|p| p.into_inner()).push(h);
            if let Ok(mut s) = self.shard(h).write() {
                s.insert(h, Slot::Ready(Arc::new(e)));
            }
        }
        self.c.objects.store(objects, Ordering::Relaxed);
        self.c.bytes_used.store(bytes, Ordering::Relaxed);
        self.c.recovered.store(objects, Ordering::Relaxed);
        self.c.dropped.store(dropped, Ordering::Relaxed);
        // Keep a free volume so the first fill never waits for a reclaim: drop the
        // oldest volume outright (no second chance at start-up).
        if a.free.is_empty()
            && let Some(v) = a.sealed.pop_front()
        {
            let vol = &self.vols[v as usize];
            let seq = vol.seq.load(Ordering::SeqCst);
            drop(a);
            let n = self.drop_volume_entries(vol, seq);
            self.c.evictions.fetch_add(n, Ordering::Relaxed);
            vol.seq.store(0, Ordering::SeqCst);
            let hdr = VolumeHeader { index: v, volume_size: self.volume_size, seq: 0 }.encode();
            vol.file.write_all_at(&hdr, 0)?;
            self.lock_alloc().free.push_back(v);
        }
        tracing::info!(objects, dropped, "store index rebuilt");
        Ok(())
    }
}

pub(super) struct ScannedRecord {
    pub(super) kind: Kind,
    pub(super) key: Box<[u8]>,
    pub(super) meta: Bytes,
    pub(super) rec_off: u64,
    pub(super) body_off: u64,
    pub(super) body_len: u64,
    pub(super) span: u64,
    pub(super) stored_at: u64,
    pub(super) target: Option<(u64, u64)>,
}

#[derive(Default)]
struct ScanResult {
    records: Vec<ScannedRecord>,
    dropped: u64,
}

/// Scans one volume. Returns (volume, incarnation, records); incarnation 0 = empty.
fn scan_volume(file: &File, idx: u32, volume_size: u64) -> (u32, u64, ScanResult) {
    let mut res = ScanResult::default();
    let mut hdr = vec![0u8; VOLUME_HEADER_LEN as usize];
    let seq = match file.read_exact_at(&mut hdr, 0).ok().and_then(|_| VolumeHeader::decode(&hdr)) {
        Some(h) if h.index == idx && h.volume_size == volume_size => h.seq,
        _ => 0,
    };
    if seq == 0 {
        return (idx, 0, res);
    }
    let mut off = VOLUME_HEADER_LEN;
    let mut fixed = [0u8; RECORD_FIXED_LEN];
    let mut buf = vec![0u8; 1 << 20];
    while off + ALIGN <= volume_size {
        if file.read_exact_at(&mut fixed, off).is_err() {
            break;
        }
        let Some(h) = format::decode_record_fixed(&fixed, seq) else { break };
        if off + h.span > volume_size {
            break;
        }
        let mut full = vec![0u8; h.header_len() as usize];
        if file.read_exact_at(&mut full, off).is_err() || !format::verify_header_crc(&h, &full) {
            break;
        }
        let next = off + h.span;
        if h.body_len == LEN_UNKNOWN {
            res.dropped += 1;
            off = next;
            continue;
        }
        let body_off = off + h.body_rel();
        let mut t = [0u8; TRAILER_LEN];
        let valid = file.read_exact_at(&mut t, body_off + h.body_len).is_ok()
            && match format::decode_trailer(&t, seq, h.body_len, h.header_crc) {
                Some(want) => {
                    let mut crc = 0u32;
                    let mut pos = 0u64;
                    let mut ok = true;
                    while pos < h.body_len {
                        let n = (h.body_len - pos).min(buf.len() as u64) as usize;
                        if file.read_exact_at(&mut buf[..n], body_off + pos).is_err() {
                            ok = false;
                            break;
                        }
                        crc = crc32c::crc32c_append(crc, &buf[..n]);
                        pos += n as u64;
                    }
                    ok && crc == want
                }
                None => false,
            };
        if !valid {
            res.dropped += 1;
            off = next;
            continue;
        }
        let k0 = RECORD_FIXED_LEN;
        let k1 = k0 + h.key_len as usize;
        let mut t16 = [0u8; 16];
        let target = if h.kind != Kind::Object
            && h.body_len == 16
            && file.read_exact_at(&mut t16, body_off).is_ok()
        {
            let mut s = [0u8; 8];
            let mut o = [0u8; 8];
            s.copy_from_slice(&t16[..8]);
            o.copy_from_slice(&t16[8..]);
            Some((u64::from_le_bytes(s), u64::from_le_bytes(o)))
        } else {
            None
        };
        res.records.push(ScannedRecord {
            kind: h.kind,
            key: full[k0..k1].into(),
            meta: Bytes::copy_from_slice(&full[k1..]),
            rec_off: off,
            body_off,
            body_len: h.body_len,
            span: h.span,
            stored_at: h.stored_at,
            target,
        });
        off = next;
    }
    (idx, seq, res)
}

/// Replays one record onto the index being rebuilt, in log order.
pub(super) fn apply_record(index: &mut HashMap<u128, Entry>, v: u32, seq: u64, r: &ScannedRecord) {
    let h = format::key_hash(&r.key);
    match r.kind {
        Kind::Object => {
            index.insert(
                h,
                Entry {
                    key: r.key.clone(),
                    meta: r.meta.clone(),
                    vol: v,
                    seq,
                    rec_off: r.rec_off,
                    body_off: r.body_off,
                    body_len: r.body_len,
                    span: r.span,
                    stored_at: r.stored_at,
                    accessed: AtomicBool::new(false),
                },
            );
        }
        Kind::Meta => {
            if let Some(e) = index.get_mut(&h)
                && r.target == Some((e.seq, e.rec_off))
                && e.key == r.key
            {
                e.meta = r.meta.clone();
            }
        }
        Kind::Tombstone => {
            if let Some(e) = index.get(&h)
                && e.key == r.key
                && r.target.is_none_or(|t| t == (e.seq, e.rec_off))
            {
                index.remove(&h);
            }
        }
        Kind::PurgePrefix => index.retain(|_, e| !e.key.starts_with(&r.key)),
    }
}
