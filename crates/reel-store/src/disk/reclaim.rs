//! Reclaim: making room by recycling the oldest sealed volume, whole-volume FIFO with a
//! second chance for objects read since they were written.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use bytes::Bytes;

use super::entry::{Loc, seq24};
use super::index::{Shard, Slot};
use super::state::Disk;
use super::volumes::Volume;
use crate::StoreError;
use crate::format::{self, VOLUME_HEADER_LEN, VolumeHeader};

impl Disk {
    /// Runs due maintenance on the calling task: tombstones the index load found due
    /// are written, volumes whose leases drained go back to the free queue, and the
    /// oldest sealed volume is reclaimed when no volume is free. (A new volume's header is written by the first record that goes into it,
    /// so a failure is that writer's to see.) The store's maintenance thread calls it when the last
    /// free volume is taken and once a second, so no fill waits for it; calling it
    /// directly forces a pass (tools, tests). Returns at once if another task is
    /// reclaiming.
    pub(crate) async fn maintain(self: &Arc<Self>) {
        // Not while the index loads: the load would put back entries of a reclaimed
        // volume.
        if self.loading.load(Ordering::SeqCst) {
            return;
        }
        self.write_load_tombstones().await;
        let drained = self.take_drained(&mut self.lock_alloc());
        for v in drained {
            self.recycle(v);
        }
        let victim = {
            let mut a = self.lock_alloc();
            // Under the lock `freeze` takes: no reclaim starts once it returned.
            if a.reclaim_running || !a.free.is_empty() || self.closed.load(Ordering::SeqCst) {
                None
            } else {
                match a.sealed.front() {
                    Some(&v) if self.vols[v as usize].writers.load(Ordering::SeqCst) == 0 => {
                        a.sealed.pop_front();
                        a.reclaim_running = true;
                        Some(v)
                    }
                    _ => None,
                }
            }
        };
        if let Some(v) = victim {
            self.reclaim(v).await;
            let mut a = self.lock_alloc();
            a.reclaim_running = false;
        }
    }

    /// Reclaims volume `v` (already taken off the sealed queue): objects read since
    /// they were written are re-appended (up to half a volume), the rest dropped; the
    /// volume is invalidated on disk and becomes free once no lease holds it.
    async fn reclaim(self: &Arc<Self>, v: u32) {
        let vol = self.vols[v as usize].clone();
        vol.reclaiming.store(true, Ordering::SeqCst);
        let seq = vol.seq.load(Ordering::SeqCst);
        let hashes: Vec<u64> = vol.objects.lock().map(|o| o.clone()).unwrap_or_default();
        let mut budget = (self.volume_size - VOLUME_HEADER_LEN) / 2;
        let mut keep = Vec::new();
        for h in hashes {
            let (loc, refreshed) =
                match self.shard(h).read().ok().as_deref().and_then(|s| s.get(&h)) {
                    Some(Slot::Ready(e)) if e.vol() == v && e.loc().seq24 == seq24(seq) => {
                        if !e.accessed() || e.span() > budget {
                            continue;
                        }
                        (e.loc(), e.refreshed())
                    }
                    _ => continue,
                };
            budget -= loc.span();
            keep.push((h, loc, refreshed));
        }
        for (h, loc, refreshed) in keep {
            if self.copy_entry(&vol, seq, h, loc, refreshed).await.is_ok() {
                self.c.second_chance.fetch_add(1, Ordering::Relaxed);
            }
        }
        let dropped = self.drop_volume_entries(&vol, seq);
        self.c.changes.fetch_add(1, Ordering::Relaxed);
        self.c.evictions.fetch_add(dropped, Ordering::Relaxed);
        self.c.reclaims.fetch_add(1, Ordering::Relaxed);
        vol.seq.store(0, Ordering::SeqCst);
        self.retire_rules();
        let hdr = VolumeHeader { index: v, volume_size: self.volume_size, seq: 0 }.encode();
        let n = hdr.len() as u64;
        if let Err(e) = self.io.write_all_at(&vol.file, Bytes::from(hdr), 0).await {
            self.write_error(&e);
            self.quarantine(&vol);
            return;
        }
        self.c.bytes_written.fetch_add(n, Ordering::Relaxed);
        // No lease can be taken from here on (incarnation 0): once the count is zero the
        // volume is recycled, else the maintenance pass that finds it drained does it.
        if vol.leases.load(Ordering::SeqCst) == 0 {
            self.recycle(v);
        } else {
            self.lock_alloc().draining.push(v);
        }
    }

    /// Re-appends one object (second chance) and repoints the index if it still names
    /// the old copy. A body that no longer matches its checksum is not copied (it goes
    /// with the volume).
    ///
    /// The copy's trailer is written only while the index still names the original: a
    /// copy of an object that was replaced or removed meanwhile (by a record that may
    /// lie earlier in the log) is left without trailer, so a rebuild never brings the
    /// old object back, and no tombstone (which could fail for want of space) is needed.
    async fn copy_entry(
        self: &Arc<Self>,
        vol: &Arc<Volume>,
        seq: u64,
        h: u64,
        e: Loc,
        refreshed: bool,
    ) -> Result<(), StoreError> {
        // Its key and newest metadata, from its records on disk.
        let meta_at = if refreshed { self.meta_at(h, &e) } else { None };
        let rec = self.load_record(h, &e, vol, seq, meta_at).await.ok_or(StoreError::Gone)?;
        if self.purged_at(&rec.key, seq, e.rec_off) {
            return Err(StoreError::Gone);
        }
        // With its trailer, which follows it: a body damaged on disk would otherwise be
        // re-appended under a fresh checksum, and the scrub could never catch it again.
        let n = e.body_len as usize + format::TRAILER_LEN;
        let mut body = match self.io.read_exact_at(&vol.file, n, e.body_off).await {
            Ok(b) => b,
            Err(err) => {
                self.read_error(vol, &err);
                return Err(err.into());
            }
        };
        let trailer = body.split_off(e.body_len as usize);
        if format::trailer_body_crc(&trailer, seq, e.body_len) != Some(crc32c::crc32c(&body)) {
            tracing::warn!(key = %String::from_utf8_lossy(&rec.key), volume = vol.idx,
                offset = e.rec_off, "store reclaim: object corrupt on disk, not kept");
            return Err(StoreError::Gone);
        }
        let mut w = self.start_writer(&rec.key, rec.meta, Some(e.body_len), rec.stored_at, true)?;
        w.append(Bytes::from(body)).await?;
        w.final_header().await?;
        let current = |s: &Shard| matches!(s.get(&h), Some(Slot::Ready(cur)) if cur.loc() == e);
        if !self.shard(h).read().is_ok_and(|s| current(&s)) {
            return Err(StoreError::Aborted);
        }
        // Anything that replaces or removes the key from now on is allocated after the
        // copy, so it also comes after it in the log.
        let new = w.seal().await?;
        let replaced = {
            let mut s = self.shard(h).write().map_err(|_| StoreError::Aborted)?;
            // A purge since the check above covers the copy too (it was allocated
            // before the purge's record): the object goes with the volume.
            let ok = current(&s) && !self.purged_at(&rec.key, seq, e.rec_off);
            if ok {
                self.c.bytes_used.fetch_add(new.span(), Ordering::Relaxed);
                self.c.bytes_used.fetch_sub(e.span(), Ordering::Relaxed);
                if refreshed {
                    // The copy's own header holds the newest metadata.
                    self.forget_meta(h);
                }
                self.records.remove(h);
                s.insert(h, Slot::Ready(new));
            }
            ok
        };
        if !replaced {
            return Err(StoreError::Aborted);
        }
        self.vols[w.vol.idx as usize].objects.lock().unwrap_or_else(|p| p.into_inner()).push(h);
        w.release_volume();
        Ok(())
    }
}
