//! Fills: writing one object into the log while readers on any worker follow it.
//!
//! `begin_fill` registers a `Filling` slot for the key and reserves space; each
//! `append` writes a chunk and then publishes the new length in a `tokio::sync::watch`,
//! so readers are woken when the bytes are in the file (page cache). `commit` writes the
//! final header and the commit trailer and swaps the slot for a complete entry; abort
//! (explicit or by drop) restores the object the fill was replacing, if any.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use tokio::sync::watch;

use super::index::{Entry, Slot};
use super::volumes::Volume;
use super::{Store, now_secs};
use crate::StoreError;
use crate::format::{self, Kind, LEN_UNKNOWN, RECORD_FIXED_LEN, TRAILER_LEN, VOLUME_HEADER_LEN};
use crate::{MAX_KEY_LEN, MAX_META_LEN};

/// First reservation of a fill whose length is unknown (at most 1/16 of a volume); it
/// grows in place while the fill is the last allocation of its volume.
const UNKNOWN_INITIAL: u64 = 1 << 20;

/// Where a fill stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum FillState {
    Open,
    Committed,
    Aborted,
}

/// What a fill publishes to its readers after every write.
#[derive(Clone, Copy, Debug)]
pub(super) struct Progress {
    pub(super) written: u64,
    pub(super) state: FillState,
}

/// State of an in-progress fill shared with readers on any thread.
pub(super) struct FillShared {
    pub(super) key: Box<[u8]>,
    pub(super) meta: Bytes,
    pub(super) vol: Arc<Volume>,
    pub(super) seq: u64,
    pub(super) body_off: u64,
    pub(super) stored_at: u64,
    pub(super) expected: Option<u64>,
    pub(super) progress: watch::Sender<Progress>,
    pub(super) purged: AtomicBool,
    /// The complete object this fill replaces; restored if the fill is aborted.
    pub(super) replaced: Mutex<Option<Arc<Entry>>>,
}

/// Writes one object. Dropping it without [`FillWriter::commit`] aborts the fill.
pub struct FillWriter {
    store: Arc<Store>,
    shared: Arc<FillShared>,
    hash: u128,
    kind_header_len: u64,
    rec_off: u64,
    reserved_end: u64,
    written: u64,
    crc: u32,
    header_crc: u32,
    header_on_disk: bool,
    /// Internal copies are not in the index while written.
    internal: bool,
    done: bool,
}

impl Store {
    /// Starts writing `key` with its metadata blob. `expected_len` is the body length
    /// if known (Content-Length). An existing complete object for the key is replaced
    /// (it stops being served now). Fails with [`StoreError::AlreadyFilling`] if a
    /// fill for the key is in progress.
    pub async fn begin_fill(
        self: &Arc<Self>,
        key: &[u8],
        meta: Bytes,
        expected_len: Option<u64>,
    ) -> Result<FillWriter, StoreError> {
        if key.len() > MAX_KEY_LEN || meta.len() > MAX_META_LEN {
            return Err(StoreError::KeyOrMetaTooLong);
        }
        self.maintain().await;
        let h = format::key_hash(key);
        if let Ok(s) = self.shard(h).read()
            && matches!(s.get(&h), Some(Slot::Filling(_)))
        {
            return Err(StoreError::AlreadyFilling);
        }
        let w = self.start_writer(key, meta, expected_len, now_secs(), false)?;
        let mut shard = self.shard(h).write().map_err(|_| StoreError::Aborted)?;
        if matches!(shard.get(&h), Some(Slot::Filling(_))) {
            drop(shard);
            drop(w);
            return Err(StoreError::AlreadyFilling);
        }
        if let Some(Slot::Ready(old)) = shard.insert(h, Slot::Filling(w.shared.clone())) {
            self.uncount(&old);
            *w.shared.replaced.lock().unwrap_or_else(|p| p.into_inner()) = Some(old);
        }
        Ok(w)
    }

    pub(super) fn start_writer(
        self: &Arc<Self>,
        key: &[u8],
        meta: Bytes,
        expected: Option<u64>,
        stored_at: u64,
        internal: bool,
    ) -> Result<FillWriter, StoreError> {
        let header_len = (RECORD_FIXED_LEN + key.len() + meta.len()) as u64;
        let span = match expected {
            Some(n) => format::span_for(Kind::Object, header_len, n),
            None => format::span_for(Kind::Object, header_len, 0)
                .max(UNKNOWN_INITIAL.min(self.volume_size / 16)),
        }
        .min(self.volume_size - VOLUME_HEADER_LEN);
        if let Some(n) = expected
            && format::span_for(Kind::Object, header_len, n) > self.volume_size - VOLUME_HEADER_LEN
        {
            return Err(StoreError::TooLarge(n));
        }
        let (v, seq, off) = {
            let mut a = self.lock_alloc();
            let min_room = if expected.is_none() { self.volume_size / 4 } else { 0 };
            self.allocate(span, min_room, &mut a)?
        };
        let vol = self.vols[v as usize].clone();
        let (tx, _) = watch::channel(Progress { written: 0, state: FillState::Open });
        let shared = Arc::new(FillShared {
            key: key.into(),
            meta,
            vol,
            seq,
            body_off: off + format::body_rel(Kind::Object, header_len),
            stored_at,
            expected,
            progress: tx,
            purged: AtomicBool::new(false),
            replaced: Mutex::new(None),
        });
        Ok(FillWriter {
            store: self.clone(),
            hash: format::key_hash(key),
            shared,
            kind_header_len: header_len,
            rec_off: off,
            reserved_end: off + span,
            written: 0,
            crc: 0,
            header_crc: 0,
            header_on_disk: false,
            internal,
            done: false,
        })
    }
}

impl FillWriter {
    /// Body bytes written so far.
    pub fn written(&self) -> u64 {
        self.written
    }

    /// Appends the next chunk of the body. Readers are woken once it is in the file.
    /// On error the fill is aborted.
    pub async fn append(&mut self, data: Bytes) -> Result<(), StoreError> {
        match self.append_inner(data).await {
            Ok(()) => Ok(()),
            Err(e) => {
                self.abort();
                Err(e)
            }
        }
    }

    /// Completes the object: writes the final header and the commit marker, then makes
    /// it visible to lookups as a complete [`Hit`].
    pub async fn commit(mut self) -> Result<(), StoreError> {
        let entry = match self.finish().await {
            Ok(e) => e,
            Err(e) => {
                self.abort();
                return Err(e);
            }
        };
        let store = self.store.clone();
        let mut shard = store.shard(self.hash).write().map_err(|_| StoreError::Aborted)?;
        let ours =
            matches!(shard.get(&self.hash), Some(Slot::Filling(f)) if Arc::ptr_eq(f, &self.shared));
        if !ours || self.shared.purged.load(Ordering::SeqCst) {
            drop(shard);
            self.shared.progress.send_modify(|p| p.state = FillState::Aborted);
            return Err(StoreError::Aborted);
        }
        store.c.objects.fetch_add(1, Ordering::Relaxed);
        store.c.bytes_used.fetch_add(entry.span, Ordering::Relaxed);
        shard.insert(self.hash, Slot::Ready(entry));
        drop(shard);
        self.shared.vol.objects.lock().unwrap_or_else(|p| p.into_inner()).push(self.hash);
        if self.shared.vol.quarantined.load(Ordering::SeqCst) {
            // Quarantined since `finish`: if the quarantine took the volume's object
            // list before our push, it missed this entry; drop it here instead.
            store.drop_volume_entries(&self.shared.vol, self.shared.seq);
            self.shared.progress.send_modify(|p| p.state = FillState::Aborted);
            return Err(StoreError::Gone);
        }
        self.shared.progress.send_modify(|p| p.state = FillState::Committed);
        Ok(())
    }

    /// Discards the object: readers get [`StoreError::Aborted`], the key is a miss
    /// again. Also done on drop without commit.
    pub fn abort(&mut self) {
        if self.done {
            return;
        }
        self.done = true;
        self.shared.progress.send_modify(|p| p.state = FillState::Aborted);
        if !self.internal
            && let Ok(mut s) = self.store.shard(self.hash).write()
            && matches!(s.get(&self.hash), Some(Slot::Filling(f)) if Arc::ptr_eq(f, &self.shared))
        {
            let old = self.shared.replaced.lock().unwrap_or_else(|p| p.into_inner()).take();
            match old {
                Some(old) => {
                    self.store.c.objects.fetch_add(1, Ordering::Relaxed);
                    self.store.c.bytes_used.fetch_add(old.span, Ordering::Relaxed);
                    s.insert(self.hash, Slot::Ready(old));
                }
                None => {
                    s.remove(&self.hash);
                }
            }
        }
        let mut a = self.store.lock_alloc();
        // Nothing of ours reached the disk: give the space back. Once a header is
        // written the space stays a hole until its volume is reclaimed, so a scan
        // never lands inside another record.
        if !self.header_on_disk
            && a.active == Some(self.shared.vol.idx)
            && a.head == self.reserved_end
        {
            a.head = self.rec_off;
        }
        self.shared.vol.writers.fetch_sub(1, Ordering::SeqCst);
    }

    async fn write_header(&mut self, body_len: u64, span: u64) -> Result<(), StoreError> {
        let (hdr, crc) = format::encode_record_header(
            Kind::Object,
            self.shared.seq,
            &self.shared.key,
            &self.shared.meta,
            body_len,
            span,
            self.shared.stored_at,
        );
        self.header_crc = crc;
        self.store.write_pending_headers().await;
        self.write(Bytes::from(hdr), self.rec_off).await?;
        self.header_on_disk = true;
        Ok(())
    }

    async fn write(&self, data: Bytes, off: u64) -> Result<(), StoreError> {
        // A quarantined volume (its header could not be written, or a read failed) is
        // out of service: nothing in it is served, and without its header a restart
        // would not find the record either. Fail the fill instead of admitting it.
        if self.shared.vol.quarantined.load(Ordering::SeqCst) {
            return Err(StoreError::Gone);
        }
        self.store.io.write_all_at(&self.shared.vol.file, data, off).await.map_err(|e| {
            self.store.write_error(&e);
            StoreError::Io(e)
        })
    }

    async fn append_inner(&mut self, data: Bytes) -> Result<(), StoreError> {
        if self.done || self.shared.purged.load(Ordering::SeqCst) {
            return Err(StoreError::Aborted);
        }
        let n = data.len() as u64;
        let total = self.written + n;
        if let Some(exp) = self.shared.expected
            && total > exp
        {
            return Err(StoreError::LengthMismatch { expected: exp, got: total });
        }
        if !self.header_on_disk {
            let body_len = self.shared.expected.unwrap_or(LEN_UNKNOWN);
            self.write_header(body_len, self.reserved_end - self.rec_off).await?;
        }
        let need = self.shared.body_off + total + TRAILER_LEN as u64;
        if need > self.reserved_end {
            self.grow(need).await?;
        }
        self.write(data.clone(), self.shared.body_off + self.written).await?;
        self.crc = crc32c::crc32c_append(self.crc, &data);
        self.written = total;
        self.shared.progress.send_modify(|p| p.written = total);
        Ok(())
    }

    /// Extends the reservation of a fill of unknown length in place; only possible
    /// while it is the last allocation of the active volume.
    async fn grow(&mut self, need: u64) -> Result<(), StoreError> {
        let vs = self.store.volume_size;
        {
            let mut a = self.store.lock_alloc();
            let cur = self.reserved_end - self.rec_off;
            let want = format::align_up((need - self.rec_off).max(cur * 2));
            let new_end = (self.rec_off + want).min(vs);
            if need > vs
                || self.shared.expected.is_some()
                || a.active != Some(self.shared.vol.idx)
                || a.head != self.reserved_end
            {
                return Err(StoreError::TooLarge(need - self.shared.body_off));
            }
            a.head = new_end;
            self.reserved_end = new_end;
        }
        // The header must name the larger span before any byte lands beyond the old one.
        self.write_header(LEN_UNKNOWN, self.reserved_end - self.rec_off).await
    }

    pub(super) async fn finish(&mut self) -> Result<Arc<Entry>, StoreError> {
        if self.done || self.shared.purged.load(Ordering::SeqCst) {
            return Err(StoreError::Aborted);
        }
        if let Some(exp) = self.shared.expected
            && exp != self.written
        {
            return Err(StoreError::LengthMismatch { expected: exp, got: self.written });
        }
        let mut span = self.reserved_end - self.rec_off;
        if self.shared.expected.is_none() || !self.header_on_disk {
            let final_span = format::span_for(Kind::Object, self.kind_header_len, self.written);
            let tail = {
                let a = self.store.lock_alloc();
                a.active == Some(self.shared.vol.idx) && a.head == self.reserved_end
            };
            if tail {
                span = final_span;
            }
            self.write_header(self.written, span).await?;
            if tail {
                let shrunk = {
                    let mut a = self.store.lock_alloc();
                    if a.active == Some(self.shared.vol.idx) && a.head == self.reserved_end {
                        a.head = self.rec_off + final_span;
                        self.reserved_end = a.head;
                        true
                    } else {
                        false
                    }
                };
                if !shrunk {
                    // Someone allocated after us meanwhile: keep the whole reservation
                    // so the scan steps over it to the next record.
                    span = self.reserved_end - self.rec_off;
                    self.write_header(self.written, span).await?;
                }
            }
        }
        let t = format::encode_trailer(self.shared.seq, self.written, self.crc, self.header_crc);
        self.write(Bytes::copy_from_slice(&t), self.shared.body_off + self.written).await?;
        if self.shared.vol.quarantined.load(Ordering::SeqCst) {
            return Err(StoreError::Gone);
        }
        self.done = true;
        self.shared.vol.writers.fetch_sub(1, Ordering::SeqCst);
        Ok(Arc::new(Entry {
            key: self.shared.key.clone(),
            meta: self.shared.meta.clone(),
            vol: self.shared.vol.idx,
            seq: self.shared.seq,
            rec_off: self.rec_off,
            body_off: self.shared.body_off,
            body_len: self.written,
            span,
            stored_at: self.shared.stored_at,
            accessed: AtomicBool::new(false),
        }))
    }
}

impl Drop for FillWriter {
    fn drop(&mut self) {
        self.abort();
    }
}
