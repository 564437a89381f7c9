//! Volumes: the preallocated volume files ([`Volume`]), their leases and incarnations,
//! the allocator's state ([`Alloc`]: the write head in the active volume, the FIFO
//! queues of sealed, free and draining volumes), preallocation, and taking a reclaimed
//! volume's pages out of the page cache ([`forget_pages`]). What allocates, recycles and
//! quarantines is `allocate`.

use std::collections::VecDeque;
use std::fs::File;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// One preallocated volume file. Shared by all workers.
pub(super) struct Volume {
    pub(super) idx: u32,
    pub(super) file: Arc<File>,
    /// Current incarnation; 0 while free. Entries remember the incarnation they were
    /// written in, so a reused volume never serves stale entries.
    pub(super) seq: AtomicU64,
    pub(super) leases: AtomicU64,
    pub(super) writers: AtomicU32,
    pub(super) quarantined: AtomicBool,
    /// Set while the volume is being reclaimed (see `Disk::update_meta`).
    pub(super) reclaiming: AtomicBool,
    /// Hashes of objects committed into this incarnation (for reclaim).
    pub(super) objects: Mutex<Vec<u64>>,
}

impl Volume {
    pub(super) fn new(idx: u32, file: File) -> Volume {
        Volume {
            idx,
            file: Arc::new(file),
            seq: AtomicU64::new(0),
            leases: AtomicU64::new(0),
            writers: AtomicU32::new(0),
            quarantined: AtomicBool::new(false),
            reclaiming: AtomicBool::new(false),
            objects: Mutex::new(Vec::new()),
        }
    }
}

/// The write side's view of the volumes.
#[derive(Default)]
pub(super) struct Alloc {
    pub(super) active: Option<u32>,
    pub(super) head: u64,
    pub(super) sealed: VecDeque<u32>,
    pub(super) free: VecDeque<u32>,
    pub(super) draining: Vec<u32>,
    pub(super) next_seq: u64,
    pub(super) reclaim_running: bool,
    /// Volume headers to write (new incarnations) before more data goes in.
    pub(super) pending_headers: Vec<(u32, u64)>,
}

/// A lease on a volume: while it lives the volume is not reused.
pub(super) struct Lease(pub(super) Arc<Volume>);

impl Lease {
    pub(super) fn acquire(vol: &Arc<Volume>, seq: u64) -> Option<Lease> {
        vol.leases.fetch_add(1, Ordering::SeqCst);
        let l = Lease(vol.clone());
        if vol.seq.load(Ordering::SeqCst) != seq || vol.quarantined.load(Ordering::SeqCst) {
            return None;
        }
        Some(l)
    }
}

impl Lease {
    /// [`Lease::acquire`] for an index entry, which keeps the low 24 bits of the
    /// incarnation.
    pub(super) fn acquire24(vol: &Arc<Volume>, seq24: u32) -> Option<Lease> {
        vol.leases.fetch_add(1, Ordering::SeqCst);
        let l = Lease(vol.clone());
        let seq = vol.seq.load(Ordering::SeqCst);
        if seq == 0 || super::entry::seq24(seq) != seq24 || vol.quarantined.load(Ordering::SeqCst) {
            return None;
        }
        Some(l)
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.0.leases.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Gives a volume file its full size up front, so a write never fails for lack of
/// blocks (and never extends the file).
pub(super) fn preallocate(f: &File, size: u64) -> std::io::Result<()> {
    let cur = f.metadata()?.len();
    if cur > size {
        return Err(std::io::Error::other(format!(
            "volume file is {cur} bytes, larger than volume_size {size}"
        )));
    }
    match rustix::fs::fallocate(f, rustix::fs::FallocateFlags::empty(), 0, size) {
        Ok(()) => {}
        Err(rustix::io::Errno::OPNOTSUPP) => f.set_len(size)?,
        Err(e) => return Err(e.into()),
    }
    Ok(())
}

/// Takes the pages of `from..to` of a volume file out of the page cache and leaves the
/// range allocated (reading zeros), before the volume is written again.
///
/// A range handed to `sendfile` is not copied: the socket keeps references to the
/// page-cache pages and reads them when it sends (over loopback, when the peer reads),
/// after the call returned and the reader's lease ended. Writing a reused volume into
/// the same pages would change bytes already "sent". Removing the pages from the file
/// (as truncation does) leaves those references to the old pages, and the new writes get
/// new ones. `FALLOC_FL_ZERO_RANGE` does both in one call on ext4 and XFS; elsewhere
/// (tmpfs) a punched hole, allocated again. Where neither is supported the error's kind
/// is [`std::io::ErrorKind::Unsupported`].
pub(super) fn forget_pages(f: &File, from: u64, to: u64) -> std::io::Result<()> {
    use rustix::fs::{FallocateFlags as F, fallocate};
    use rustix::io::Errno;
    if to <= from {
        return Ok(());
    }
    let len = to - from;
    match fallocate(f, F::ZERO_RANGE | F::KEEP_SIZE, from, len) {
        Ok(()) => return Ok(()),
        Err(Errno::OPNOTSUPP | Errno::INVAL) => {}
        Err(e) => return Err(e.into()),
    }
    match fallocate(f, F::PUNCH_HOLE | F::KEEP_SIZE, from, len) {
        Ok(()) => {}
        Err(Errno::OPNOTSUPP) => {
            return Err(std::io::Error::new(
                std::io::ErrorKind::Unsupported,
                "neither FALLOC_FL_ZERO_RANGE nor FALLOC_FL_PUNCH_HOLE is supported",
            ));
        }
        Err(e) => return Err(e.into()),
    }
    // Allocated again, so that a write never fails for lack of blocks (`preallocate`).
    match fallocate(f, F::KEEP_SIZE, from, len) {
        Ok(()) | Err(Errno::OPNOTSUPP) => Ok(()),
        Err(e) => Err(e.into()),
    }
}
