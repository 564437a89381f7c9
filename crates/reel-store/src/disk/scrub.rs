//! Scrub: a background pass that reads every stored object back at a bounded rate and
//! checks it against its record (header checksum, and the body's CRC-32C in the commit
//! trailer), so bit rot is found and dropped before a viewer is served it. The open only
//! checks headers and trailers, and hits are sent with sendfile, unchecked.
//!
//! The pass walks the volumes in order and, within a volume, its indexed objects in
//! record order, so the reads are sequential. Bodies are read with plain buffered `pread`s
//! on the calling thread (the maintenance thread, never a worker) in chunks of at most
//! [`CHUNK`] bytes into one reused buffer: no mmap, and no `fadvise(DONTNEED)`, since hits
//! may want the same pages. While it reads, the scrub holds a lease on the volume, as a hit
//! does, so a reclaim cannot reuse it underneath; an object replaced, removed or reclaimed
//! meanwhile is skipped. An object larger than a step's budget is verified over several
//! steps (re-checked at each).
//!
//! A corrupt object is taken out of the index and a tombstone aimed at that very record
//! (incarnation and offset) is appended, as a removal does, so neither the next
//! checkpoint nor the scan at the next open brings it back, and a newer copy of the key
//! is never touched. A read error goes the way of every read error: the volume is
//! quarantined.
//!
//! The rate is a token bucket in bytes per second ([`Disk::set_scrub_rate`]), refilled
//! and spent by [`Disk::scrub_tick`] once per maintenance pass; a full pass wraps around
//! and the next one starts at the following step.

use std::collections::VecDeque;
use std::os::unix::fs::FileExt;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use super::entry::seq24;
use super::index::Slot;
use super::load_state::DueTombstone;
use super::scrub_state::{Partial, Record};
use super::state::Disk;
use super::volumes::{Lease, Volume};
use crate::format::{self, Kind, RECORD_FIXED_LEN, TRAILER_LEN};

/// Largest single read, and the size the reused read buffer grows to.
const CHUNK: u64 = 1 << 20;

/// What one [`Disk::scrub_step`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ScrubProgress {
    /// Bytes read: record headers, bodies and trailers. A step reads at most its budget
    /// plus one record header and one trailer.
    pub bytes: u64,
    /// Objects whose check completed in this step (good or corrupt).
    pub objects: u64,
    /// Of those, the corrupt ones, removed from the index.
    pub corrupt: u64,
    /// Whether this step completed a pass over the whole store.
    pub pass_done: bool,
}

/// How checking one object ended (for now).
enum Outcome {
    /// The budget ran out; go on at the next step.
    Paused,
    /// The index no longer names this record.
    Skipped,
    Good,
    Corrupt(&'static str),
    /// The volume was reclaimed, reused or quarantined: nothing more to check in it.
    VolumeGone,
}

impl Disk {
    /// Sets the scrub rate in bytes per second, live; 0 stops the scrub (where the pass
    /// stands is kept, so it goes on from there when set again).
    pub(crate) fn set_scrub_rate(&self, bytes_per_sec: u64) {
        self.scrub.rate.store(bytes_per_sec, Ordering::Relaxed);
    }

    /// The scrub rate in bytes per second; 0 = off.
    pub(crate) fn scrub_rate(&self) -> u64 {
        self.scrub.rate.load(Ordering::Relaxed)
    }

    /// Run by the maintenance thread once per pass: refills the token bucket at the
    /// scrub rate and runs a [`Disk::scrub_step`] with what it holds.
    pub(super) async fn scrub_tick(self: &Arc<Self>) {
        let rate = self.scrub_rate();
        let idle = self.loading.load(Ordering::SeqCst) || self.closed.load(Ordering::SeqCst);
        let budget = {
            let mut b = self.scrub.bucket.lock().unwrap_or_else(|p| p.into_inner());
            b.refill(if idle { 0 } else { rate }, Instant::now())
        };
        if budget == 0 {
            return;
        }
        let p = self.scrub_step(budget).await;
        self.scrub.bucket.lock().unwrap_or_else(|p| p.into_inner()).spend(p.bytes);
    }

    /// Checks stored objects, reading about `budget` bytes (at most one record header
    /// and one trailer more), from where the last step stopped; a step that completes a
    /// pass stops there. A corrupt object is removed (see the module docs). The maintenance
    /// thread calls it at the configured rate; tools and tests may call it directly.
    ///
    /// The reads are blocking `pread`s on the calling thread: call it where blocking is
    /// fine, never on a worker's event loop. Does nothing (an empty progress) while the
    /// index loads, while the store is frozen or closed, or while another step runs.
    pub(crate) async fn scrub_step(self: &Arc<Self>, budget: u64) -> ScrubProgress {
        if self.loading.load(Ordering::SeqCst) || self.closed.load(Ordering::SeqCst) {
            return ScrubProgress::default();
        }
        let mut removed = Vec::new();
        let p = self.scrub_walk(budget, &mut removed);
        for (key, target) in removed {
            // As `remove` does, but aimed at the corrupt record only.
            if let Err(e) = self.append_small(Kind::Tombstone, &key, &[], Some(target)).await {
                tracing::warn!(key = %String::from_utf8_lossy(&key), error = %e,
                    "tombstone of a corrupt object not written; it may come back at the next start");
            }
        }
        p
    }

    /// The synchronous part of a step: reads and checks, and takes corrupt objects out of
    /// the index; their keys and records go to `removed` for the tombstones.
    fn scrub_walk(&self, budget: u64, removed: &mut Vec<DueTombstone>) -> ScrubProgress {
        let mut p = ScrubProgress::default();
        let Ok(mut guard) = self.scrub.cursor.try_lock() else { return p };
        let c = &mut *guard;
        let volumes = self.vols.len() as u32;
        while p.bytes < budget {
            let Some(mut obj) = c.cur.take() else {
                if let Some((rec_off, hash)) = c.todo.pop_front() {
                    c.cur =
                        Some(Partial { rec_off, hash, record: None, key: None, done: 0, crc: 0 });
                    continue;
                }
                if c.next_vol >= volumes {
                    c.next_vol = 0;
                    c.vol = None;
                    p.pass_done = true;
                    self.scrub.passes.fetch_add(1, Ordering::Relaxed);
                    break;
                }
                let v = c.next_vol;
                c.next_vol += 1;
                c.vol = self.scrub_list(v, &mut c.todo).map(|seq| (v, seq));
                continue;
            };
            let Some((v, seq)) = c.vol else { continue };
            let outcome = self.scrub_object(v, seq, &mut obj, &mut c.buf, budget, &mut p.bytes);
            match outcome {
                Outcome::Paused => {
                    c.cur = Some(obj);
                    break;
                }
                Outcome::Skipped => {}
                Outcome::Good => p.objects += 1,
                Outcome::Corrupt(what) => {
                    p.objects += 1;
                    // Not counted if it left the index meanwhile (replaced, removed).
                    if self.scrub_remove(v, seq, &obj, what) {
                        p.corrupt += 1;
                        // A record whose header does not check out is dropped by the
                        // scan at the next start anyway; one whose body does not needs
                        // a tombstone, named by the key its header holds.
                        if let Some(key) = obj.key.take() {
                            removed.push((key, (seq, obj.rec_off)));
                        }
                    }
                }
                Outcome::VolumeGone => c.todo.clear(),
            }
        }
        self.scrub.bytes.fetch_add(p.bytes, Ordering::Relaxed);
        self.scrub.objects.fetch_add(p.objects, Ordering::Relaxed);
        self.scrub.corrupt.fetch_add(p.corrupt, Ordering::Relaxed);
        p
    }

    /// Lists the indexed objects of volume `v` in record order into `todo`; returns its
    /// incarnation, or `None` if it holds nothing to check (free or quarantined).
    fn scrub_list(&self, v: u32, todo: &mut VecDeque<(u64, u64)>) -> Option<u64> {
        todo.clear();
        let vol = &self.vols[v as usize];
        let seq = vol.seq.load(Ordering::SeqCst);
        if seq == 0 || vol.quarantined.load(Ordering::SeqCst) {
            return None;
        }
        let hashes = vol.objects.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let mut list: Vec<(u64, u64)> = hashes
            .into_iter()
            .filter_map(|h| match self.shard(h).read().ok()?.get(&h)? {
                Slot::Ready(e) if e.vol() == v && e.loc().seq24 == seq24(seq) => {
                    Some((e.loc().rec_off, h))
                }
                _ => None,
            })
            .collect();
        list.sort_unstable();
        list.dedup();
        todo.extend(list);
        Some(seq)
    }

    /// Whether the index still names the object at `rec_off` of volume `v`'s incarnation
    /// `seq` for `hash`; its body offset and length if it does.
    fn scrub_current(&self, v: u32, seq: u64, obj: &Partial) -> Option<(u64, u64)> {
        match self.shard(obj.hash).read().ok()?.get(&obj.hash)? {
            Slot::Ready(e) if e.loc().is(v, seq, obj.rec_off) => {
                Some((e.loc().body_off, e.loc().body_len))
            }
            _ => None,
        }
    }

    /// Checks (the rest of) one object, adding what it reads to `read` while that is
    /// below `budget` (a header or trailer read may take it a little past), holding a
    /// lease on its volume throughout.
    fn scrub_object(
        &self,
        v: u32,
        seq: u64,
        obj: &mut Partial,
        buf: &mut Vec<u8>,
        budget: u64,
        read: &mut u64,
    ) -> Outcome {
        let vol = &self.vols[v as usize];
        let Some(_lease) = Lease::acquire(vol, seq) else { return Outcome::VolumeGone };
        // Under the lease: if the index names the record now, its bytes stay put.
        let Some((body_off, body_len)) = self.scrub_current(v, seq, obj) else {
            return Outcome::Skipped;
        };
        let rec = match obj.record {
            Some(r) => r,
            None => match self.scrub_header(vol, seq, obj, (body_off, body_len), buf, read) {
                Ok(Some((r, key))) => {
                    obj.record = Some(r);
                    obj.key = Some(key);
                    r
                }
                Ok(None) => return Outcome::Corrupt("record header"),
                Err(e) => {
                    self.read_error(vol, &e);
                    return Outcome::VolumeGone;
                }
            },
        };
        while obj.done < rec.body_len {
            let left = budget.saturating_sub(*read);
            if left == 0 {
                return Outcome::Paused;
            }
            let n = (rec.body_len - obj.done).min(CHUNK).min(left) as usize;
            if buf.len() < n {
                buf.resize(n, 0);
            }
            if let Err(e) = vol.file.read_exact_at(&mut buf[..n], rec.body_off + obj.done) {
                self.read_error(vol, &e);
                return Outcome::VolumeGone;
            }
            obj.crc = crc32c::crc32c_append(obj.crc, &buf[..n]);
            obj.done += n as u64;
            *read += n as u64;
        }
        if *read >= budget {
            return Outcome::Paused;
        }
        let mut t = [0u8; TRAILER_LEN];
        if let Err(e) = vol.file.read_exact_at(&mut t, rec.body_off + rec.body_len) {
            self.read_error(vol, &e);
            return Outcome::VolumeGone;
        }
        *read += TRAILER_LEN as u64;
        match format::decode_trailer(&t, seq, rec.body_len, rec.header_crc) {
            Some(crc) if crc == obj.crc => Outcome::Good,
            Some(_) => Outcome::Corrupt("body checksum"),
            None => Outcome::Corrupt("commit trailer"),
        }
    }

    /// Reads the object's record header and checks it, and that it agrees with what the
    /// index says (`body_off`, `body_len`, the key's hash); returns it with the key it
    /// holds, `Ok(None)` if it does not check out.
    fn scrub_header(
        &self,
        vol: &Volume,
        seq: u64,
        obj: &Partial,
        (body_off, body_len): (u64, u64),
        buf: &mut Vec<u8>,
        read: &mut u64,
    ) -> std::io::Result<Option<(Record, Box<[u8]>)>> {
        let rec_off = obj.rec_off;
        let mut fixed = [0u8; RECORD_FIXED_LEN];
        vol.file.read_exact_at(&mut fixed, rec_off)?;
        *read += RECORD_FIXED_LEN as u64;
        let Some(h) = format::decode_record_fixed(&fixed, seq) else {
            return Ok(None);
        };
        if h.kind != Kind::Object
            || h.body_len != body_len
            || h.key_hash as u64 != obj.hash
            || rec_off + h.body_rel() != body_off
        {
            return Ok(None);
        }
        let n = h.header_len() as usize;
        if buf.len() < n {
            buf.resize(n, 0);
        }
        buf[..RECORD_FIXED_LEN].copy_from_slice(&fixed);
        vol.file.read_exact_at(&mut buf[RECORD_FIXED_LEN..n], rec_off + RECORD_FIXED_LEN as u64)?;
        *read += (n - RECORD_FIXED_LEN) as u64;
        let full = &buf[..n];
        if !format::verify_header_crc(&h, full) {
            return Ok(None);
        }
        let key = full[RECORD_FIXED_LEN..RECORD_FIXED_LEN + h.key_len as usize].into();
        Ok(Some((Record { body_off, body_len, header_crc: h.header_crc }, key)))
    }

    /// Takes a corrupt object out of the index if it still names it.
    fn scrub_remove(&self, v: u32, seq: u64, obj: &Partial, what: &str) -> bool {
        let (slot, bytes) = {
            let Ok(mut s) = self.shard(obj.hash).write() else { return false };
            let bytes = match s.get(&obj.hash) {
                Some(Slot::Ready(e)) if e.loc().is(v, seq, obj.rec_off) => e.loc().body_len,
                _ => return false,
            };
            let Some(slot) = s.remove(&obj.hash) else { return false };
            (slot, bytes)
        };
        self.retire_slot(obj.hash, slot);
        self.c.changes.fetch_add(1, Ordering::Relaxed);
        let key = obj.key.as_deref().map(String::from_utf8_lossy);
        tracing::warn!(
            key = key.as_deref().unwrap_or("(header unreadable)"),
            volume = v,
            offset = obj.rec_off,
            bytes,
            what,
            "store scrub: object corrupt on disk, removed"
        );
        true
    }
}
