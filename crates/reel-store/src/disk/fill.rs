//! Fills: writing one object into the log while readers on any worker follow it.
//!
//! `begin_fill` registers a `Filling` slot for the key and reserves space; `append`
//! takes a chunk and writes the body in pieces that end on a multiple of
//! `coalesce::WRITE_UNIT` of the file offset (module `coalesce`: large writes build large
//! page-cache folios, which `sendfile` serves for less), and after each write publishes
//! the new length in a `tokio::sync::watch`, so readers are woken when the bytes are in
//! the file (page cache). Bytes below the next boundary wait in the writer until it is
//! reached, the body is complete, or the caller calls [`FillWriter::flush`] (the cache
//! does when its origin pauses). `commit` writes the
//! final header and the commit trailer and swaps the slot for a complete entry; abort
//! (explicit or by drop) restores the object the fill was replacing, if any.
//!
//! A fill of unknown length reserves a first extent and grows it in place while it is
//! the last allocation of the active volume. When it cannot (another allocation follows
//! it, or the volume ends) it moves: a reservation twice as large is taken wherever the
//! allocator has room, the bytes written so far are copied there, and writing goes on.
//! Each place the fill wrote to stays leased and readable until the fill and all its
//! readers are gone, so a reader never loses bytes it was handed; the abandoned record
//! keeps its unknown length on disk and a rebuild drops it.

use std::fs::File;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::sync::watch;

use super::coalesce::{Pending, write_unit};
use super::entry::{Entry, Loc};
use super::fill_state::{FillShared, FillState, Place, Progress};
use super::index::{Slot, index_hash};
use super::records::{Record, Ver};
use super::state::{Disk, now_secs};
use super::volumes::{Lease, Volume};
use crate::StoreError;
use crate::format::{self, Kind, LEN_UNKNOWN, RECORD_FIXED_LEN, TRAILER_LEN, VOLUME_HEADER_LEN};
use crate::{MAX_KEY_LEN, MAX_META_LEN};

/// First reservation of a fill whose length is unknown (at most 1/16 of a volume); it
/// grows in place while the fill is the last allocation of its volume, or moves.
const UNKNOWN_INITIAL: u64 = 1 << 20;
/// Longest a taken byte waits for its write boundary while chunks keep coming: then
/// everything pending is written (a unit fills within this at 64 MB/s and up; slower
/// origins get writes of what came in this time). Readers of a fill that streams slowly
/// thus wait at most this long for bytes the origin sent; when the origin pauses, the
/// cache's [`FillWriter::flush`] writes them sooner.
const MAX_HOLD: Duration = Duration::from_millis(4);
/// Copy size when a fill moves its bytes to a larger reservation.
pub(super) const MOVE_CHUNK: u64 = 1 << 20;

/// What [`FillWriter::commit`] did with a complete body.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Committed {
    /// Stored: lookups find it as a complete [`Hit`](crate::Hit) from now on.
    Stored,
    /// Every reader got the whole body, but it is not kept: it was of unknown length
    /// and outgrew a volume, or found no free volume to move to. Lookups miss again
    /// (or find the object the fill was replacing, as after an abort).
    NotStored,
}

/// Writes one object. Dropping it without [`FillWriter::commit`] aborts the fill.
pub struct FillWriter {
    pub(super) store: Arc<Disk>,
    pub(super) shared: Arc<FillShared>,
    hash: u64,
    kind_header_len: u64,
    /// The current place: its volume (the writer counts in its `writers`), incarnation,
    /// record and body offsets, end of the reservation, and number.
    pub(super) vol: Arc<Volume>,
    seq: u64,
    pub(super) rec_off: u64,
    pub(super) body_off: u64,
    pub(super) reserved_end: u64,
    pub(super) place: u32,
    /// Body bytes in the file (readable); the bytes taken after them wait in `pending`.
    pub(super) written: u64,
    pending: Pending,
    /// When the oldest pending byte was taken (None while nothing is pending).
    pending_since: Option<Instant>,
    crc: u32,
    header_crc: u32,
    pub(super) header_on_disk: bool,
    /// Set once the fill writes to a spill file instead (then it no longer counts in
    /// `vol`'s writers, and `body_off` is 0).
    pub(super) spill: Option<Arc<File>>,
    /// The spill is in memory: the fill went on there after a write into its volume
    /// failed (module `rescue`).
    pub(super) in_memory: bool,
    /// Internal copies are not in the index while written.
    pub(super) internal: bool,
    pub(super) done: bool,
    /// Sealed, and still counted in `vol`'s writers until the entry is indexed.
    sealed_holding: bool,
}

impl Disk {
    /// Starts writing `key` with its metadata blob. `expected_len` is the body length
    /// if known (Content-Length). An existing complete object for the key is replaced
    /// (it stops being served now). Fails with [`StoreError::AlreadyFilling`] if a
    /// fill for the key is in progress. Never waits for a reclaim: without a free
    /// volume it fails with [`StoreError::NoSpace`].
    pub(crate) async fn begin_fill(
        self: &Arc<Self>,
        key: &[u8],
        meta: Bytes,
        expected_len: Option<u64>,
    ) -> Result<FillWriter, StoreError> {
        if key.len() > MAX_KEY_LEN || meta.len() > MAX_META_LEN {
            return Err(StoreError::KeyOrMetaTooLong);
        }
        let h = index_hash(key);
        // The slot is replaced under the same lock as the space is allocated: a record
        // allocated before this one (earlier in the log) that copies the old object
        // (second chance) then sees the change before it is sealed (`copy_entry`).
        let mut shard = self.shard(h).write().map_err(|_| StoreError::Aborted)?;
        if matches!(shard.get(&h), Some(Slot::Filling(_))) {
            return Err(StoreError::AlreadyFilling);
        }
        let w = self.start_writer(key, meta, expected_len, now_secs(), false)?;
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
        let Some(lease) = Lease::acquire(&vol, seq) else {
            vol.writers.fetch_sub(1, Ordering::SeqCst);
            return Err(StoreError::Gone);
        };
        let body_off = off + format::body_rel(Kind::Object, header_len);
        let (tx, _) = watch::channel(Progress { written: 0, state: FillState::Open, place: 0 });
        let shared = Arc::new(FillShared {
            key: key.into(),
            meta,
            first: Place::new(Some(lease), vol.file.clone(), body_off),
            stored_at,
            expected,
            progress: tx,
            purged: AtomicBool::new(false),
            replaced: Mutex::new(None),
        });
        Ok(FillWriter {
            store: self.clone(),
            hash: index_hash(key),
            shared,
            kind_header_len: header_len,
            vol,
            seq,
            rec_off: off,
            body_off,
            reserved_end: off + span,
            place: 0,
            written: 0,
            pending: Pending::default(),
            pending_since: None,
            crc: 0,
            header_crc: 0,
            header_on_disk: false,
            spill: None,
            in_memory: false,
            internal,
            done: false,
            sealed_holding: false,
        })
    }
}

impl FillWriter {
    /// A writer whose body goes to the spill file `file` from its first byte (module
    /// `unstored`): it reserves nothing in a volume, and its commit is
    /// [`Committed::NotStored`]. `vol` is never written or counted in: a writer on a spill
    /// file does not hold its volume.
    pub(super) fn unstored(
        store: &Arc<Disk>,
        key: &[u8],
        meta: Bytes,
        expected: Option<u64>,
        file: Arc<File>,
    ) -> FillWriter {
        let (tx, _) = watch::channel(Progress { written: 0, state: FillState::Open, place: 0 });
        let shared = Arc::new(FillShared {
            key: key.into(),
            meta,
            first: Place::new(None, file.clone(), 0),
            stored_at: now_secs(),
            expected,
            progress: tx,
            purged: AtomicBool::new(false),
            replaced: Mutex::new(None),
        });
        FillWriter {
            store: store.clone(),
            shared,
            hash: index_hash(key),
            kind_header_len: 0,
            vol: store.vols[0].clone(),
            seq: 0,
            rec_off: 0,
            body_off: 0,
            reserved_end: 0,
            place: 0,
            written: 0,
            pending: Pending::default(),
            pending_since: None,
            crc: 0,
            header_crc: 0,
            header_on_disk: false,
            spill: Some(file),
            in_memory: false,
            internal: false,
            done: false,
            sealed_holding: false,
        }
    }

    /// Body bytes taken so far (written, or waiting for the next write).
    pub fn written(&self) -> u64 {
        self.written + self.pending.len()
    }

    /// Body bytes taken but not yet written (readers do not see them yet).
    pub fn pending(&self) -> u64 {
        self.pending.len()
    }

    /// Appends the next chunk of the body. Readers are woken once it is in the file:
    /// at once if it completes the announced length or reaches a write boundary, else
    /// at the next such append, [`FillWriter::flush`] or commit. On error the fill is
    /// aborted.
    pub async fn append(&mut self, data: Bytes) -> Result<(), StoreError> {
        match self.append_inner(data).await {
            Ok(()) => Ok(()),
            Err(e) => {
                self.abort();
                Err(e)
            }
        }
    }

    /// Writes the bytes taken so far and wakes the readers. On error the fill is
    /// aborted.
    pub async fn flush(&mut self) -> Result<(), StoreError> {
        if self.done || self.shared.purged.load(Ordering::SeqCst) {
            self.abort();
            return Err(StoreError::Aborted);
        }
        match self.flush_pending().await {
            Ok(()) => Ok(()),
            Err(e) => {
                self.abort();
                Err(e)
            }
        }
    }

    /// Completes the object: writes the final header and the commit marker, then makes
    /// it visible to lookups as a complete [`Hit`](crate::Hit). A body that could not be
    /// kept was still delivered whole to its readers: [`Committed::NotStored`].
    pub async fn commit(mut self) -> Result<Committed, StoreError> {
        if !self.done
            && !self.shared.purged.load(Ordering::SeqCst)
            && let Err(e) = self.flush_pending().await
        {
            self.abort();
            return Err(e);
        }
        // Also when the flush went on in memory.
        if self.spill.is_some() {
            return self.commit_spilled();
        }
        let entry = match self.finish().await {
            Ok(e) => e,
            Err(e) if self.rescue(&e).await => return self.commit_spilled(),
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
        store.c.bytes_used.fetch_add(entry.span(), Ordering::Relaxed);
        store.c.changes.fetch_add(1, Ordering::Relaxed);
        // The object replaced, if any, goes with where its newest metadata is (under
        // the shard's lock: a refresh of the new object may follow at once).
        if self.shared.replaced.lock().unwrap_or_else(|p| p.into_inner()).take().is_some() {
            store.forget_meta(self.hash);
            store.records.remove(self.hash);
        }
        let loc = entry.loc();
        shard.insert(self.hash, Slot::Ready(entry));
        drop(shard);
        // Likely to be hit soon (a live stream's newest segment): its first hit reads
        // nothing.
        let rec = Record {
            ver: Ver::new(loc, None),
            kh: format::key_hash(&self.shared.key),
            key: self.shared.key.clone(),
            meta: self.shared.meta.clone(),
            stored_at: self.shared.stored_at,
        };
        store.records.insert(self.hash, Arc::new(rec));
        self.vol.objects.lock().unwrap_or_else(|p| p.into_inner()).push(self.hash);
        if self.vol.quarantined.load(Ordering::SeqCst) {
            // Quarantined since `finish`: if the quarantine took the volume's object
            // list before our push, it missed this entry; drop it here instead.
            store.drop_volume_entries(&self.vol, self.seq);
            self.shared.progress.send_modify(|p| p.state = FillState::Aborted);
            return Err(StoreError::Gone);
        }
        // Only now may reclaim take the volume: its object list names this entry.
        self.release_volume();
        self.shared.progress.send_modify(|p| p.state = FillState::Committed);
        Ok(Committed::Stored)
    }

    /// Discards the object: readers get [`StoreError::Aborted`], the key is a miss
    /// again. Also done on drop without commit.
    pub fn abort(&mut self) {
        if self.done {
            self.release_volume();
            return;
        }
        self.done = true;
        self.shared.progress.send_modify(|p| p.state = FillState::Aborted);
        self.unpublish();
        if self.spill.is_some() {
            return;
        }
        let mut a = self.store.lock_alloc();
        // Nothing of ours reached the disk: give the space back. Once a header is
        // written the space stays a hole until its volume is reclaimed, so a scan
        // never lands inside another record.
        if !self.header_on_disk && a.active == Some(self.vol.idx) && a.head == self.reserved_end {
            a.head = self.rec_off;
        }
        self.vol.writers.fetch_sub(1, Ordering::SeqCst);
    }

    /// Takes the fill out of the index, putting back the object it was replacing.
    pub(super) fn unpublish(&self) {
        if !self.internal
            && let Ok(mut s) = self.store.shard(self.hash).write()
            && matches!(s.get(&self.hash), Some(Slot::Filling(f)) if Arc::ptr_eq(f, &self.shared))
        {
            let old = self.shared.replaced.lock().unwrap_or_else(|p| p.into_inner()).take();
            match old {
                Some(old) => {
                    self.store.c.objects.fetch_add(1, Ordering::Relaxed);
                    self.store.c.bytes_used.fetch_add(old.span(), Ordering::Relaxed);
                    s.insert(self.hash, Slot::Ready(old));
                }
                None => {
                    s.remove(&self.hash);
                }
            }
        }
    }

    async fn write_header(&mut self, body_len: u64, span: u64) -> Result<(), StoreError> {
        let (hdr, crc) = format::encode_record_header(
            Kind::Object,
            self.seq,
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

    pub(super) async fn write(&self, data: Bytes, off: u64) -> Result<(), StoreError> {
        let n = data.len() as u64;
        if let Some(f) = &self.spill {
            self.store.io.write_all_at(f, data, off).await.map_err(|e| {
                self.store.write_error(&e);
                StoreError::Io(e)
            })?;
            self.store.c.spill_written.fetch_add(n, Ordering::Relaxed);
            return Ok(());
        }
        // A quarantined volume (its header could not be written, or a read failed) is
        // out of service: nothing in it is served, and without its header a restart
        // would not find the record either; nor is anything on a failed disk. Fail the
        // write instead of admitting the object.
        if self.vol.quarantined.load(Ordering::SeqCst) || self.store.is_failed() {
            return Err(StoreError::Gone);
        }
        self.store.io.write_all_at(&self.vol.file, data, off).await.map_err(|e| {
            self.store.write_error(&e);
            StoreError::Io(e)
        })?;
        self.store.c.bytes_written.fetch_add(n, Ordering::Relaxed);
        Ok(())
    }

    async fn write_vectored(&self, bufs: Vec<Bytes>, off: u64) -> Result<(), StoreError> {
        let file = match &self.spill {
            Some(f) => f,
            None if self.vol.quarantined.load(Ordering::SeqCst) || self.store.is_failed() => {
                return Err(StoreError::Gone);
            }
            None => &self.vol.file,
        };
        let n: u64 = bufs.iter().map(|b| b.len() as u64).sum();
        self.store.io.write_all_vectored_at(file, bufs, off).await.map_err(|e| {
            self.store.write_error(&e);
            StoreError::Io(e)
        })?;
        let c = if self.spill.is_some() {
            &self.store.c.spill_written
        } else {
            &self.store.c.bytes_written
        };
        c.fetch_add(n, Ordering::Relaxed);
        Ok(())
    }

    async fn append_inner(&mut self, data: Bytes) -> Result<(), StoreError> {
        if self.done || self.shared.purged.load(Ordering::SeqCst) {
            return Err(StoreError::Aborted);
        }
        let n = data.len() as u64;
        let total = self.written + self.pending.len() + n;
        if let Some(exp) = self.shared.expected
            && total > exp
        {
            return Err(StoreError::LengthMismatch { expected: exp, got: total });
        }
        if self.spill.is_some() {
            self.check_spill_room(total)?;
        } else {
            if !self.header_on_disk {
                let body_len = self.shared.expected.unwrap_or(LEN_UNKNOWN);
                if let Err(e) = self.write_header(body_len, self.reserved_end - self.rec_off).await
                    && !self.rescue(&e).await
                {
                    return Err(e);
                }
            }
            if self.spill.is_some() {
                // Went on in memory.
                self.check_spill_room(total)?;
            } else if self.body_off + total + TRAILER_LEN as u64 > self.reserved_end {
                if self.shared.expected.is_some() {
                    return Err(StoreError::TooLarge(total));
                }
                // Growing keeps the pending bytes pending; a move copies what is in the
                // file and the pending bytes follow it there.
                if let Err(e) = self.make_room(total).await
                    && !self.rescue(&e).await
                {
                    return Err(e);
                }
            }
        }
        if self.spill.is_some() {
            // Delivered, never served from the store later: written as it comes (after
            // what was pending when the fill spilled out).
            self.flush_pending().await?;
            return self.write_body(vec![data]).await;
        }
        self.pending.push(data);
        let since = *self.pending_since.get_or_insert_with(Instant::now);
        let bufs = if self.shared.expected == Some(total) || since.elapsed() >= MAX_HOLD {
            Some(self.pending.take_all())
        } else {
            self.pending.take_units(self.body_off + self.written, write_unit())
        };
        match bufs {
            Some(bufs) => self.write_body(bufs).await,
            // An empty body's only append: readers learn it is (still) empty.
            None if total == 0 => self.write_body(Vec::new()).await,
            None => Ok(()),
        }
    }

    /// Writes whatever is pending (before a commit, a move, or on the caller's flush).
    pub(super) async fn flush_pending(&mut self) -> Result<(), StoreError> {
        if self.pending.len() == 0 {
            return Ok(());
        }
        let bufs = self.pending.take_all();
        self.write_body(bufs).await
    }

    /// Writes `bufs` as the next body bytes in one gathered write, then publishes the
    /// new length to the readers.
    async fn write_body(&mut self, bufs: Vec<Bytes>) -> Result<(), StoreError> {
        let n: u64 = bufs.iter().map(|b| b.len() as u64).sum();
        for b in &bufs {
            self.crc = crc32c::crc32c_append(self.crc, b);
        }
        // Kept for a fill that goes on in memory if the write into its volume fails
        // (`rescue`): references, and one small vector per gathered write.
        let again = (self.spill.is_none() && !self.internal && n > 0).then(|| bufs.clone());
        let r = match bufs.len() {
            0 => Ok(()),
            1 => {
                self.write(
                    bufs.into_iter().next().unwrap_or_default(),
                    self.body_off + self.written,
                )
                .await
            }
            _ => self.write_vectored(bufs, self.body_off + self.written).await,
        };
        if let Err(e) = r {
            match again {
                Some(bufs) if self.rescue(&e).await => {
                    self.write_vectored(bufs, self.written).await?
                }
                _ => return Err(e),
            }
        }
        self.written += n;
        // What stays pending came with the latest chunk.
        self.pending_since = (self.pending.len() > 0).then(Instant::now);
        let (total, place) = (self.written, self.place);
        self.shared.progress.send_modify(|p| {
            p.written = total;
            p.place = place;
        });
        Ok(())
    }

    /// Makes room for a body of `total` bytes (unknown length only): grows the
    /// reservation in place, or moves the fill to a larger one, or, when no volume can
    /// hold it or none is free, to a spill file (delivered, not stored).
    async fn make_room(&mut self, total: u64) -> Result<(), StoreError> {
        let vs = self.store.volume_size;
        let body_rel = self.body_off - self.rec_off;
        let need_span = format::align_up(body_rel + total + TRAILER_LEN as u64);
        let cur = self.reserved_end - self.rec_off;
        let want = need_span.max(cur * 2);
        let grown = {
            let mut a = self.store.lock_alloc();
            let end = (self.rec_off + want).min(vs);
            if a.active == Some(self.vol.idx)
                && a.head == self.reserved_end
                && self.rec_off + need_span <= end
            {
                a.head = end;
                self.reserved_end = end;
                true
            } else {
                false
            }
        };
        if grown {
            // The header must name the larger span before any byte lands beyond the
            // old one.
            return self.write_header(LEN_UNKNOWN, self.reserved_end - self.rec_off).await;
        }
        let max = vs - VOLUME_HEADER_LEN;
        if need_span > max {
            return self.spill_out(total).await;
        }
        match self.move_to(want.min(max)).await {
            Err(StoreError::NoSpace) => self.spill_out(total).await,
            r => r,
        }
    }

    /// Moves the fill to a fresh reservation of `span` bytes: header, then a copy of the
    /// bytes written so far; readers switch over with the next published progress.
    async fn move_to(&mut self, span: u64) -> Result<(), StoreError> {
        let store = self.store.clone();
        let (v, seq, off) = {
            let mut a = store.lock_alloc();
            store.allocate(span, 0, &mut a)?
        };
        let vol = store.vols[v as usize].clone();
        let Some(lease) = Lease::acquire(&vol, seq) else {
            vol.writers.fetch_sub(1, Ordering::SeqCst);
            return Err(StoreError::Gone);
        };
        let body_off = off + (self.body_off - self.rec_off);
        // From here on the new place is ours (abort releases it); the old one is only
        // read from, and counts as written into until the copy is done.
        let old_vol = std::mem::replace(&mut self.vol, vol);
        let old_body = self.body_off;
        (self.seq, self.rec_off, self.body_off, self.reserved_end) =
            (seq, off, body_off, off + span);
        self.header_on_disk = false;
        let copied = match self.write_header(LEN_UNKNOWN, span).await {
            Ok(()) => self.copy_body(&old_vol, old_body).await,
            Err(e) => Err(e),
        };
        old_vol.writers.fetch_sub(1, Ordering::SeqCst);
        copied?;
        let file = self.vol.file.clone();
        self.shared.push_place(Place::new(Some(lease), file, body_off));
        self.place += 1;
        store.c.fill_moves.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Copies the body written so far from `old` (at `old_body`) to the current place.
    pub(super) async fn copy_body(&self, old: &Volume, old_body: u64) -> Result<(), StoreError> {
        let mut pos = 0;
        while pos < self.written {
            let n = (self.written - pos).min(MOVE_CHUNK);
            let buf = match self.store.io.read_exact_at(&old.file, n as usize, old_body + pos).await
            {
                Ok(b) => b,
                Err(e) => {
                    self.store.read_error(old, &e);
                    return Err(StoreError::Io(e));
                }
            };
            self.write(Bytes::from(buf), self.body_off + pos).await?;
            pos += n;
        }
        Ok(())
    }

    /// Writes the final header and then the commit trailer: the record is valid on disk.
    pub(super) async fn finish(&mut self) -> Result<Entry, StoreError> {
        self.final_header().await?;
        self.seal().await
    }

    /// Checks the length and writes the final header; returns the record's span. Until
    /// [`FillWriter::seal`] writes the trailer, the record is not valid on disk.
    pub(super) async fn final_header(&mut self) -> Result<u64, StoreError> {
        if self.done || self.shared.purged.load(Ordering::SeqCst) {
            return Err(StoreError::Aborted);
        }
        self.flush_pending().await?;
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
                a.active == Some(self.vol.idx) && a.head == self.reserved_end
            };
            if tail {
                span = final_span;
            }
            self.write_header(self.written, span).await?;
            if tail {
                let shrunk = {
                    let mut a = self.store.lock_alloc();
                    if a.active == Some(self.vol.idx) && a.head == self.reserved_end {
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
        Ok(span)
    }

    /// Writes the commit trailer, which makes the record valid on disk. The writer still
    /// counts in its volume's writers, so no reclaim starts on the volume before the
    /// caller has put the entry in the index and the volume's object list (a reclaim in
    /// between would miss the entry and leave it in the index, pointing at a reused
    /// volume); [`FillWriter::release_volume`] (or the drop) ends that.
    pub(super) async fn seal(&mut self) -> Result<Entry, StoreError> {
        let t = format::encode_trailer(self.seq, self.written, self.crc, self.header_crc);
        self.write(Bytes::copy_from_slice(&t), self.body_off + self.written).await?;
        if self.vol.quarantined.load(Ordering::SeqCst) {
            return Err(StoreError::Gone);
        }
        self.done = true;
        self.sealed_holding = true;
        // The index computes the span from the lengths: a record that kept a larger
        // reservation (`final_header`) counts only what it needs in `bytes_used`.
        Ok(Entry::new(Loc::new(self.vol.idx, self.seq, self.rec_off, self.body_off, self.written)))
    }
}

impl FillWriter {
    /// Stops counting in the volume's writers after [`FillWriter::seal`]; once only.
    pub(super) fn release_volume(&mut self) {
        if std::mem::take(&mut self.sealed_holding) {
            self.vol.writers.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

impl Drop for FillWriter {
    fn drop(&mut self) {
        self.abort();
    }
}
