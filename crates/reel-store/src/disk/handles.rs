//! Read handles: [`Hit`] (a complete object) and [`Filling`] (an object still being
//! written), what [`Disk::lookup`] hands out, and the file ranges they lend for
//! sendfile. Each handle holds a lease on its volume, so the bytes behind a
//! [`FileRange`] are not overwritten while the handle lives.

use std::fs::File;
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::Arc;
use std::sync::atomic::Ordering;

use bytes::Bytes;
use tokio::sync::watch;

use super::Disk;
use super::fill::{FillShared, FillState, Progress};
use super::index::{Entry, Slot};
use super::volumes::{Lease, Volume};
use crate::io;
use crate::{StoreError, format};

/// Result of [`Disk::lookup`].
pub enum Lookup {
    /// A complete object.
    Hit(Hit),
    /// An object still being written by a [`FillWriter`].
    Filling(Filling),
}

/// A complete object. Holds a lease: the volume is not reused while the handle lives.
pub struct Hit {
    pub(super) entry: Arc<Entry>,
    pub(super) lease: Lease,
    pub(super) store: Arc<Disk>,
}

/// An object being filled; readable up to what has been written so far. The fill's
/// shared state holds a lease on every place it wrote to, so ranges stay valid while
/// the handle lives, even after the fill moved.
pub struct Filling {
    pub(super) shared: Arc<FillShared>,
    pub(super) rx: watch::Receiver<Progress>,
    pub(super) store: Arc<Disk>,
}

/// Progress of a fill as seen by a reader.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FillStatus {
    /// Body bytes written and readable from the file (page cache).
    pub available: u64,
    /// The final body length, once the fill committed.
    pub final_len: Option<u64>,
}

/// A byte range of a volume file (or of a fill's spill file), for sendfile. Valid while
/// the handle it came from (and its lease) lives.
#[derive(Clone, Copy, Debug)]
pub struct FileRange<'a> {
    /// The volume file.
    pub fd: BorrowedFd<'a>,
    /// Absolute offset in the file.
    pub offset: u64,
    /// Length in bytes.
    pub len: u64,
}

impl Disk {
    /// Whether `key` is stored or being filled. Unlike [`Disk::lookup`] it takes no
    /// lease and does not count as a read (no second chance at reclaim).
    pub(crate) fn contains(&self, key: &[u8]) -> bool {
        let h = format::key_hash(key);
        let Ok(shard) = self.shard(h).read() else { return false };
        match shard.get(&h) {
            Some(Slot::Ready(e)) => &*e.key == key,
            Some(Slot::Filling(f)) => &*f.key == key,
            None => false,
        }
    }

    /// Looks up `key`. `None` is a miss.
    pub(crate) fn lookup(self: &Arc<Self>, key: &[u8]) -> Option<Lookup> {
        let h = format::key_hash(key);
        let slot = {
            let shard = self.shard(h).read().ok()?;
            match shard.get(&h)? {
                Slot::Ready(e) if &*e.key == key => Ok(e.clone()),
                Slot::Filling(f) if &*f.key == key => Err(f.clone()),
                _ => return None,
            }
        };
        match slot {
            Ok(entry) => {
                let lease = Lease::acquire(&self.vols[entry.vol as usize], entry.seq)?;
                if !entry.accessed.load(Ordering::Relaxed) {
                    entry.accessed.store(true, Ordering::Relaxed);
                }
                Some(Lookup::Hit(Hit { entry, lease, store: self.clone() }))
            }
            Err(shared) => {
                let rx = shared.progress.subscribe();
                let place = shared.place(rx.borrow().place);
                if place.vol().is_some_and(|v| v.quarantined.load(Ordering::SeqCst)) {
                    return None;
                }
                Some(Lookup::Filling(Filling { shared, rx, store: self.clone() }))
            }
        }
    }
}

impl Hit {
    /// The key as stored (verified equal to the looked-up key).
    pub fn key(&self) -> &[u8] {
        &self.entry.key
    }

    /// The opaque metadata blob stored with the object.
    pub fn meta(&self) -> &Bytes {
        &self.entry.meta
    }

    /// Body length in bytes.
    pub fn body_len(&self) -> u64 {
        self.entry.body_len
    }

    /// When the object was stored (Unix seconds).
    pub fn stored_at(&self) -> u64 {
        self.entry.stored_at
    }

    /// The file range holding body bytes `offset..offset + len`, for sendfile.
    pub fn file_range(&self, offset: u64, len: u64) -> Result<FileRange<'_>, StoreError> {
        range(&self.lease.0.file, self.entry.body_off, self.entry.body_len, offset, len)
    }

    /// Whether body bytes `offset..offset + len` are in the page cache (then sendfile
    /// will not block on disk). Counted with cachestat(2), nothing is read.
    pub fn is_resident(&self, offset: u64, len: u64) -> bool {
        self.file_range(offset, len).is_ok_and(|r| io::is_resident(r.fd, r.offset, r.len))
    }

    /// Reads body bytes `offset..offset + len`: straight from the page cache when
    /// resident, otherwise through the worker's ring (or the I/O threads). A read error
    /// quarantines the volume.
    pub async fn read(&self, offset: u64, len: u64) -> Result<Bytes, StoreError> {
        self.file_range(offset, len)?;
        read_body(&self.store, &self.lease.0, self.entry.body_off + offset, len).await
    }
}

impl Clone for Filling {
    /// Another reader of the same fill.
    fn clone(&self) -> Filling {
        Filling { shared: self.shared.clone(), rx: self.rx.clone(), store: self.store.clone() }
    }
}

impl Filling {
    /// Whether the fill was begun with [`Store::begin_unstored_fill`]: delivered to its
    /// readers, then not stored, so a lookup after its commit misses.
    pub fn is_unstored(&self) -> bool {
        self.shared.place(0).vol().is_none()
    }

    /// The key being filled.
    pub fn key(&self) -> &[u8] {
        &self.shared.key
    }

    /// The metadata blob given to [`Disk::begin_fill`].
    pub fn meta(&self) -> &Bytes {
        &self.shared.meta
    }

    /// The announced body length, if the origin sent one.
    pub fn expected_len(&self) -> Option<u64> {
        self.shared.expected
    }

    /// When the fill started (Unix seconds).
    pub fn stored_at(&self) -> u64 {
        self.shared.stored_at
    }

    /// Progress right now; an error if the fill was aborted.
    pub fn status(&self) -> Result<FillStatus, StoreError> {
        status_of(*self.rx.borrow())
    }

    /// Waits until at least `len` body bytes are readable, or the fill completed
    /// (possibly with fewer bytes: check `final_len`), or aborted (error). Woken by the
    /// writer, no polling.
    pub async fn wait_for(&mut self, len: u64) -> Result<FillStatus, StoreError> {
        loop {
            let p = *self.rx.borrow_and_update();
            let st = status_of(p)?;
            if st.final_len.is_some() || st.available >= len {
                return Ok(st);
            }
            if self.rx.changed().await.is_err() {
                return Err(StoreError::Aborted);
            }
        }
    }

    /// The file range of body bytes already written, for sendfile.
    pub fn file_range(&self, offset: u64, len: u64) -> Result<FileRange<'_>, StoreError> {
        let p = *self.rx.borrow();
        let avail = status_of(p)?.available;
        let place = self.shared.place(p.place);
        range(&place.file, place.body_off, avail, offset, len)
    }

    /// Whether the given written range is in the page cache.
    pub fn is_resident(&self, offset: u64, len: u64) -> bool {
        self.file_range(offset, len).is_ok_and(|r| io::is_resident(r.fd, r.offset, r.len))
    }

    /// Reads already-written body bytes.
    pub async fn read(&self, offset: u64, len: u64) -> Result<Bytes, StoreError> {
        let p = *self.rx.borrow();
        let avail = status_of(p)?.available;
        let place = self.shared.place(p.place);
        range(&place.file, place.body_off, avail, offset, len)?;
        match place.vol() {
            Some(vol) => read_body(&self.store, vol, place.body_off + offset, len).await,
            None => {
                let len = usize::try_from(len).map_err(|_| StoreError::Range)?;
                let b =
                    self.store.io.read_exact_at(&place.file, len, place.body_off + offset).await?;
                Ok(Bytes::from(b))
            }
        }
    }
}

fn status_of(p: Progress) -> Result<FillStatus, StoreError> {
    match p.state {
        FillState::Aborted => Err(StoreError::Aborted),
        FillState::Committed => Ok(FillStatus { available: p.written, final_len: Some(p.written) }),
        FillState::Open => Ok(FillStatus { available: p.written, final_len: None }),
    }
}

fn range(
    file: &File,
    body_off: u64,
    avail: u64,
    offset: u64,
    len: u64,
) -> Result<FileRange<'_>, StoreError> {
    match offset.checked_add(len) {
        Some(end) if end <= avail => {
            Ok(FileRange { fd: file.as_fd(), offset: body_off + offset, len })
        }
        _ => Err(StoreError::Range),
    }
}

async fn read_body(store: &Disk, vol: &Volume, off: u64, len: u64) -> Result<Bytes, StoreError> {
    if vol.quarantined.load(Ordering::SeqCst) {
        return Err(StoreError::Gone);
    }
    let len = usize::try_from(len).map_err(|_| StoreError::Range)?;
    match store.io.read_exact_at(&vol.file, len, off).await {
        Ok(v) => Ok(Bytes::from(v)),
        Err(e) => {
            store.read_error(vol, &e);
            Err(StoreError::Io(e))
        }
    }
}
