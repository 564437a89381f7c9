//! Allocation: the write head in the active volume, the FIFO queues of sealed, free and
//! draining volumes, recycling a drained volume ([`Disk::recycle`], which first takes its
//! pages out of the page cache, see `volumes::forget_pages`), quarantine, and the small
//! (metadata, tombstone, purge) records. Allocation is a single `Mutex<Alloc>` (write
//! path only): hits never take it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, MutexGuard};

use bytes::Bytes;

use super::maint;
use super::state::{Disk, now_secs};
use super::volumes::{Alloc, Volume, forget_pages};
use crate::StoreError;
use crate::format::{self, Kind, RECORD_FIXED_LEN, VOLUME_HEADER_LEN, VolumeHeader};

impl Disk {
    pub(super) fn lock_alloc(&self) -> MutexGuard<'_, Alloc> {
        self.alloc.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Takes the draining volumes whose leases are gone off the draining list; the caller
    /// hands each to [`Disk::recycle`], which puts it in the free queue. Not while the
    /// store is frozen: recycling writes to the volume file.
    pub(super) fn take_drained(&self, a: &mut Alloc) -> Vec<u32> {
        let mut out = Vec::new();
        if self.closed.load(Ordering::SeqCst) {
            return out;
        }
        let mut i = 0;
        while i < a.draining.len() {
            let v = a.draining[i];
            if self.vols[v as usize].leases.load(Ordering::SeqCst) == 0 {
                a.draining.swap_remove(i);
                out.push(v);
            } else {
                i += 1;
            }
        }
        out
    }

    /// Makes a reclaimed volume (incarnation 0, no lease left) free for reuse: first its
    /// pages leave the page cache ([`forget_pages`]), so that bytes of it that a socket
    /// still holds (queued by `sendfile`, which returns before they are sent, let alone
    /// read by the peer) keep their contents when the volume is written again. A volume
    /// whose pages cannot be dropped is quarantined, never rewritten in place.
    pub(super) fn recycle(&self, v: u32) {
        let vol = &self.vols[v as usize];
        match self.forget_volume_pages(vol) {
            Ok(()) => self.lock_alloc().free.push_back(v),
            Err(e) => {
                tracing::warn!(volume = v, error = %e,
                    "store: the pages of a reclaimed volume could not be dropped; volume taken out of service");
                self.write_error(&e);
                self.quarantine(vol);
            }
        }
    }

    /// [`forget_pages`] of everything after the volume's header. A file system that can
    /// neither zero a range nor punch a hole (`EOPNOTSUPP`) is warned about once and the
    /// volume reused as it is: there, bytes queued on a socket when their volume is
    /// rewritten can change (`docs/store.md`, "Leases and reclaim safety").
    fn forget_volume_pages(&self, vol: &Volume) -> std::io::Result<()> {
        match forget_pages(&vol.file, VOLUME_HEADER_LEN, self.volume_size) {
            Err(e) if e.kind() == std::io::ErrorKind::Unsupported => {
                static WARNED: AtomicBool = AtomicBool::new(false);
                if !WARNED.swap(true, Ordering::Relaxed) {
                    tracing::warn!(volume = vol.idx, error = %e,
                        "store: the file system cannot drop a volume's pages (no FALLOC_FL_ZERO_RANGE \
                         or FALLOC_FL_PUNCH_HOLE); reused volumes are written in place");
                }
                Ok(())
            }
            r => r,
        }
    }

    /// Reserves `span` bytes; returns (volume, incarnation, offset).
    /// `min_room`: switch to a fresh volume unless this much is left (lets a fill of
    /// unknown length grow in place).
    pub(super) fn allocate(
        &self,
        span: u64,
        min_room: u64,
        a: &mut Alloc,
    ) -> Result<(u32, u64, u64), StoreError> {
        if self.closed.load(Ordering::SeqCst) {
            return Err(StoreError::Closed);
        }
        if span > self.volume_size - VOLUME_HEADER_LEN {
            return Err(StoreError::TooLarge(span));
        }
        loop {
            if let Some(v) = a.active {
                let vol = &self.vols[v as usize];
                if !vol.quarantined.load(Ordering::SeqCst)
                    && a.head + span.max(min_room) <= self.volume_size
                {
                    let off = a.head;
                    a.head += span;
                    vol.writers.fetch_add(1, Ordering::SeqCst);
                    return Ok((v, vol.seq.load(Ordering::SeqCst), off));
                }
            }
            let Some(n) = a.free.pop_front().or_else(|| self.take_oldest_while_loading(a)) else {
                self.c.no_space.fetch_add(1, Ordering::Relaxed);
                maint::kick(self.lane);
                return Err(StoreError::NoSpace);
            };
            if a.free.is_empty() {
                // The last free volume becomes active: reclaim the oldest one now, on
                // the maintenance thread, so the next volume is ready when needed.
                maint::kick(self.lane);
            }
            if let Some(old) = a.active.take()
                && !self.vols[old as usize].quarantined.load(Ordering::SeqCst)
            {
                a.sealed.push_back(old);
            }
            let seq = a.next_seq;
            a.next_seq += 1;
            self.vols[n as usize].seq.store(seq, Ordering::SeqCst);
            self.vols[n as usize].reclaiming.store(false, Ordering::SeqCst);
            a.active = Some(n);
            a.head = VOLUME_HEADER_LEN;
            a.pending_headers.push((n, seq));
        }
    }

    /// While the index loads, reclaim cannot run (it would race the load): a fill that
    /// finds no free volume takes the oldest volume written before the open instead, whole
    /// and without second chances. Its objects are not loaded. `None` once the load is
    /// merging or done (then the maintenance thread reclaims as usual).
    fn take_oldest_while_loading(&self, a: &mut Alloc) -> Option<u32> {
        if !self.loading.load(Ordering::SeqCst) {
            return None;
        }
        // Held while the volume changes incarnation, so the merge (which holds it
        // throughout) sees either the old incarnation and nothing taken, or the new one.
        let g = self.load_state.try_lock().ok()?;
        let &v = a.sealed.front()?;
        let vol = &self.vols[v as usize];
        let seq = vol.seq.load(Ordering::SeqCst);
        if !g.active
            || seq >= self.open_seq.load(Ordering::SeqCst)
            || vol.writers.load(Ordering::SeqCst) > 0
            || vol.leases.load(Ordering::SeqCst) > 0
        {
            return None;
        }
        // Its pages may still be queued on sockets (a hand-over's predecessor served it).
        if self.forget_volume_pages(vol).is_err() {
            return None;
        }
        a.sealed.pop_front();
        vol.seq.store(0, Ordering::SeqCst);
        drop(g);
        self.c.reclaims.fetch_add(1, Ordering::Relaxed);
        self.c.changes.fetch_add(1, Ordering::Relaxed);
        tracing::info!(volume = v, "store full while its index loads: oldest volume reused");
        Some(v)
    }

    /// Writes the headers of volumes that started a new incarnation. A header that
    /// cannot be written quarantines its volume.
    pub(super) async fn write_pending_headers(&self) {
        let pending = std::mem::take(&mut self.lock_alloc().pending_headers);
        for (v, seq) in pending {
            let vol = &self.vols[v as usize];
            let hdr = VolumeHeader { index: v, volume_size: self.volume_size, seq }.encode();
            let n = hdr.len() as u64;
            match self.io.write_all_at(&vol.file, Bytes::from(hdr), 0).await {
                Ok(()) => _ = self.c.bytes_written.fetch_add(n, Ordering::Relaxed),
                Err(e) => {
                    self.write_error(&e);
                    self.quarantine(vol);
                }
            }
        }
    }

    /// Appends a metadata, tombstone or purge record; returns where (volume,
    /// incarnation, offset).
    pub(super) async fn append_small(
        self: &Arc<Self>,
        kind: Kind,
        key: &[u8],
        meta: &[u8],
        target: Option<(u64, u64)>,
    ) -> Result<(u32, u64, u64), StoreError> {
        let body: Vec<u8> = match target {
            Some((s, o)) => [s.to_le_bytes(), o.to_le_bytes()].concat(),
            None => Vec::new(),
        };
        let header_len = (RECORD_FIXED_LEN + key.len() + meta.len()) as u64;
        let span = format::span_for(kind, header_len, body.len() as u64);
        // A record in a volume whose header could not be written would be lost on
        // restart (a lost tombstone resurrects a removed object): each failed header
        // quarantines its volume, so retry in the next one, at most once per volume.
        let mut tries = 0;
        let mut reclaimed = false;
        let (v, seq, off) = loop {
            let alloc = {
                let mut a = self.lock_alloc();
                self.allocate(span, 0, &mut a)
            };
            let (v, seq, off) = match alloc {
                Ok(r) => r,
                Err(StoreError::NoSpace) if !reclaimed => {
                    // A removal or metadata update must not be lost for want of a free
                    // volume: make room here (rare: only when reclaim is behind). Boxed:
                    // maintenance itself writes tombstones.
                    reclaimed = true;
                    Box::pin(self.maintain()).await;
                    continue;
                }
                Err(e) => return Err(e),
            };
            self.write_pending_headers().await;
            let vol = &self.vols[v as usize];
            if !vol.quarantined.load(Ordering::SeqCst) {
                break (v, seq, off);
            }
            vol.writers.fetch_sub(1, Ordering::SeqCst);
            tries += 1;
            if tries >= self.vols.len() {
                return Err(StoreError::Gone);
            }
        };
        let vol = self.vols[v as usize].clone();
        let (mut rec, hcrc) =
            format::encode_record_header(kind, seq, key, meta, body.len() as u64, span, now_secs());
        let bcrc = crc32c::crc32c(&body);
        rec.extend_from_slice(&body);
        rec.extend_from_slice(&format::encode_trailer(seq, body.len() as u64, bcrc, hcrc));
        let n = rec.len() as u64;
        let r = self.io.write_all_at(&vol.file, Bytes::from(rec), off).await;
        vol.writers.fetch_sub(1, Ordering::SeqCst);
        if r.is_ok() {
            self.c.bytes_written.fetch_add(n, Ordering::Relaxed);
        }
        r.map(|()| (v, seq, off)).map_err(|e| {
            self.write_error(&e);
            StoreError::Io(e)
        })
    }

    /// Takes a volume out of service and drops its objects from the index.
    pub(super) fn quarantine(&self, vol: &Volume) {
        if vol.quarantined.swap(true, Ordering::SeqCst) {
            return;
        }
        self.c.quarantined.fetch_add(1, Ordering::Relaxed);
        self.c.changes.fetch_add(1, Ordering::Relaxed);
        {
            let mut a = self.lock_alloc();
            a.sealed.retain(|&v| v != vol.idx);
            a.free.retain(|&v| v != vol.idx);
            a.draining.retain(|&v| v != vol.idx);
            if a.active == Some(vol.idx) {
                a.active = None;
            }
        }
        let seq = vol.seq.load(Ordering::SeqCst);
        self.drop_volume_entries(vol, seq);
        // A disk with no volume left can store nothing: with a limit set it leaves
        // service now, before its errors reach the limit (every write would be refused
        // without an error to count).
        if self.error_limit > 0 && self.vols.iter().all(|v| v.quarantined.load(Ordering::SeqCst)) {
            self.fail(format!(
                "{} I/O errors left no volume in service (disk_error_limit {})",
                self.errors(),
                self.error_limit
            ));
        }
    }
}
