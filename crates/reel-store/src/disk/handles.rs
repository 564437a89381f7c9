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

use super::entry::Loc;
use super::fill_state::{FillShared, FillState, Progress};
use super::index::{MetaAt, Slot, index_hash};
use super::records::{Record, Ver};
use super::state::Disk;
use super::volumes::{Lease, Volume};
use crate::format::{ALIGN, Kind, RECORD_FIXED_LEN, RecordHeader};
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
    pub(super) loc: Loc,
    pub(super) rec: Arc<Record>,
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
    file: &'a Arc<File>,
}

impl FileRange<'_> {
    /// The file, shared: what holds it stays able to lend its descriptor without the
    /// handle's borrow (the handle's lease still guards the bytes).
    pub fn shared_file(&self) -> Arc<File> {
        self.file.clone()
    }
}

impl Disk {
    /// Whether `key` is stored or being filled. Unlike [`Disk::lookup`] it takes no
    /// lease, reads nothing and does not count as a read (no second chance at reclaim):
    /// a complete object is matched by its key's hash alone, so a key whose hash
    /// collides with a stored one's (one in 2^64) is reported stored.
    pub(crate) fn contains(&self, key: &[u8]) -> bool {
        let h = index_hash(key);
        let Ok(shard) = self.shard(h).read() else { return false };
        match shard.get(&h) {
            Some(Slot::Ready(e)) => {
                let l = e.loc();
                drop(shard);
                !self.is_purged(key, &l)
            }
            Some(Slot::Filling(f)) => &*f.key == key,
            None => false,
        }
    }

    /// Looks up `key`. `None` is a miss. A complete object's record comes from the
    /// record cache, or is read from disk (and its key compared).
    #[cfg(test)]
    pub(crate) async fn lookup(self: &Arc<Self>, key: &[u8]) -> Option<Lookup> {
        self.lookup_inner(key, format::key_hash(key), true).await
    }

    /// [`Disk::lookup`] of a key whose xxh3-128 `kh` the caller has.
    pub(crate) async fn lookup_hashed(self: &Arc<Self>, key: &[u8], kh: u128) -> Option<Lookup> {
        self.lookup_inner(key, kh, true).await
    }

    /// On a disk with a recent I/O error ([`Disk::suspect`]), before a hit is answered:
    /// whether its first body byte still reads. Once a head with `Content-Length` is sent
    /// a read error can only cut the response; found here it quarantines the volume and
    /// the hit is a miss, fetched again. One `RWF_NOWAIT` read of the page cache: a byte
    /// not resident is not waited for (the hit is answered).
    fn probe(&self, loc: &Loc, lease: &Lease) -> bool {
        if loc.body_len == 0 {
            return true;
        }
        let mut b = [0u8; 1];
        let iov = &mut [std::io::IoSliceMut::new(&mut b)];
        let nowait = rustix::io::ReadWriteFlags::NOWAIT;
        match rustix::io::preadv2(&*lease.0.file, iov, loc.body_off, nowait) {
            Err(e) if e == rustix::io::Errno::IO => {
                self.read_error(&lease.0, &e.into());
                false
            }
            _ => true,
        }
    }

    /// [`Disk::lookup`] that does not count as a read (no second chance at reclaim).
    pub(super) async fn lookup_quiet(self: &Arc<Self>, key: &[u8]) -> Option<Lookup> {
        self.lookup_inner(key, format::key_hash(key), false).await
    }

    async fn lookup_inner(self: &Arc<Self>, key: &[u8], kh: u128, touch: bool) -> Option<Lookup> {
        let h = kh as u64;
        let slot = {
            let shard = self.shard(h).read().ok()?;
            match shard.get(&h)? {
                Slot::Ready(e) => {
                    if touch {
                        e.touch();
                    }
                    Ok((e.loc(), e.refreshed()))
                }
                Slot::Filling(f) if &*f.key == key => Err(f.clone()),
                _ => return None,
            }
        };
        match slot {
            Ok((loc, refreshed)) => {
                let lease = Lease::acquire24(&self.vols[loc.vol as usize], loc.seq24)?;
                if self.is_purged(key, &loc) {
                    self.drop_purged(h, &loc);
                    return None;
                }
                let meta_at = if refreshed { self.meta_at(h, &loc) } else { None };
                let rec = self.record(kh, key, &loc, &lease, meta_at).await?;
                if self.suspect() && !self.probe(&loc, &lease) {
                    return None;
                }
                Some(Lookup::Hit(Hit { loc, rec, lease, store: self.clone() }))
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

    /// The record of the object at `loc` (leased) for `key` (of xxh3-128 `kh`): from the
    /// record cache, or read from disk. `None` if the record is another key's (a hash
    /// collision) or does not check out, or cannot be read (the volume is then
    /// quarantined). A record read from disk has its key compared; a cached one, whose
    /// key was compared when it was read or written, its full 128-bit hash (so the hit
    /// touches neither the key's bytes nor a second allocation).
    async fn record(
        &self,
        kh: u128,
        key: &[u8],
        loc: &Loc,
        lease: &Lease,
        meta_at: Option<MetaAt>,
    ) -> Option<Arc<Record>> {
        let h = kh as u64;
        let ver = Ver::new(*loc, meta_at);
        if let Some(r) = self.records.get(h, &ver) {
            return (r.kh == kh).then_some(r);
        }
        let seq = lease.0.seq.load(Ordering::SeqCst);
        self.c.record_reads.fetch_add(1, Ordering::Relaxed);
        // Boxed: the reads' state would otherwise make every lookup's future as large
        // as this rare path's.
        let load = Box::pin(self.load_record(h, loc, &lease.0, seq, meta_at));
        let rec = Arc::new(load.await?);
        if &*rec.key != key {
            return None;
        }
        self.records.insert(h, rec.clone());
        Some(rec)
    }

    /// Reads the record of the object of hash `h` at `loc` in `vol` (incarnation `seq`,
    /// held by the caller), with its newest metadata from `meta_at`. `None` if it does
    /// not check out or cannot be read (the volume is then quarantined).
    pub(super) async fn load_record(
        &self,
        h: u64,
        loc: &Loc,
        vol: &Volume,
        seq: u64,
        meta_at: Option<MetaAt>,
    ) -> Option<Record> {
        let first = (loc.body_off - loc.rec_off) as usize;
        let (hdr, buf) = match self.read_header(vol, seq, loc.rec_off, first).await {
            Ok(Some(x)) => x,
            Ok(None) => return None,
            Err(e) => {
                self.read_error(vol, &e);
                return None;
            }
        };
        if hdr.kind != Kind::Object || hdr.body_len != loc.body_len || hdr.key_hash as u64 != h {
            return None;
        }
        let key = key_of(&hdr, &buf);
        let mut meta = Bytes::copy_from_slice(meta_of(&hdr, &buf));
        if let Some(m) = meta_at {
            // No lease: a metadata record whose volume was reused no longer checks out
            // (its incarnation is in the header).
            let mvol = self.vols.get(m.vol as usize)?;
            match self.read_header(mvol, m.seq, m.rec_off, ALIGN as usize).await {
                Ok(Some((mh, mb))) if mh.kind == Kind::Meta && key_of(&mh, &mb) == key => {
                    meta = Bytes::copy_from_slice(meta_of(&mh, &mb));
                }
                Ok(_) => return None,
                Err(e) => {
                    self.read_error(mvol, &e);
                    return None;
                }
            }
        }
        Some(Record {
            ver: Ver::new(*loc, meta_at),
            kh: hdr.key_hash,
            key: key.into(),
            meta,
            stored_at: hdr.stored_at,
        })
    }

    /// Reads and checks the record header at `off` of `vol`'s incarnation `seq`, reading
    /// `first` bytes at once (its header pages, when known). `None` if no valid header is
    /// there.
    pub(super) async fn read_header(
        &self,
        vol: &Volume,
        seq: u64,
        off: u64,
        first: usize,
    ) -> std::io::Result<Option<(RecordHeader, Vec<u8>)>> {
        if vol.quarantined.load(Ordering::SeqCst) {
            return Ok(None);
        }
        let mut buf = self.io.read_exact_at(&vol.file, first.max(RECORD_FIXED_LEN), off).await?;
        let Some(h) = format::decode_record_fixed(&buf, seq) else { return Ok(None) };
        let n = h.header_len() as usize;
        if n > buf.len() {
            let more = self.io.read_exact_at(&vol.file, n - buf.len(), off + buf.len() as u64);
            buf.extend_from_slice(&more.await?);
        }
        Ok(format::verify_header_crc(&h, &buf).then_some((h, buf)))
    }
}

/// The key in a checked record header.
pub(super) fn key_of<'a>(h: &RecordHeader, full: &'a [u8]) -> &'a [u8] {
    &full[RECORD_FIXED_LEN..RECORD_FIXED_LEN + h.key_len as usize]
}

/// The metadata blob in a checked record header.
pub(super) fn meta_of<'a>(h: &RecordHeader, full: &'a [u8]) -> &'a [u8] {
    let k1 = RECORD_FIXED_LEN + h.key_len as usize;
    &full[k1..k1 + h.meta_len as usize]
}

impl Hit {
    /// The key as stored (verified equal to the looked-up key).
    pub fn key(&self) -> &[u8] {
        &self.rec.key
    }

    /// The opaque metadata blob stored with the object.
    pub fn meta(&self) -> &Bytes {
        &self.rec.meta
    }

    /// Body length in bytes.
    pub fn body_len(&self) -> u64 {
        self.loc.body_len
    }

    /// When the object was stored (Unix seconds).
    pub fn stored_at(&self) -> u64 {
        self.rec.stored_at
    }

    /// The file range holding body bytes `offset..offset + len`, for sendfile.
    pub fn file_range(&self, offset: u64, len: u64) -> Result<FileRange<'_>, StoreError> {
        range(&self.lease.0.file, self.loc.body_off, self.loc.body_len, offset, len)
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
        read_body(&self.store, &self.lease.0, self.loc.body_off + offset, len).await
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
    file: &Arc<File>,
    body_off: u64,
    avail: u64,
    offset: u64,
    len: u64,
) -> Result<FileRange<'_>, StoreError> {
    match offset.checked_add(len) {
        Some(end) if end <= avail => {
            Ok(FileRange { fd: file.as_fd(), offset: body_off + offset, len, file })
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
