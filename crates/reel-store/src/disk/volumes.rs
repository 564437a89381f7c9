//! Volumes and allocation: the preallocated volume files, their leases and incarnations,
//! the write head in the active volume, the FIFO queues of sealed, free and draining
//! volumes, quarantine, and the small (metadata, tombstone, purge) records.
//!
//! Allocation is a single `Mutex<Alloc>` (write path only): a head offset in the active
//! volume plus the queues. Hits never take it.

use std::collections::VecDeque;
use std::fs::File;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use bytes::Bytes;

use super::{Disk, maint, now_secs};
use crate::StoreError;
use crate::format::{self, Kind, RECORD_FIXED_LEN, VOLUME_HEADER_LEN, VolumeHeader};

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
        if seq == 0 || super::index::seq24(seq) != seq24 || vol.quarantined.load(Ordering::SeqCst) {
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

impl Disk {
    pub(super) fn lock_alloc(&self) -> MutexGuard<'_, Alloc> {
        self.alloc.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Moves draining volumes whose leases are gone to the free queue.
    pub(super) fn promote_drained(&self, a: &mut Alloc) {
        let mut i = 0;
        while i < a.draining.len() {
            let v = a.draining[i];
            if self.vols[v as usize].leases.load(Ordering::SeqCst) == 0 {
                a.draining.swap_remove(i);
                a.free.push_back(v);
            } else {
                i += 1;
            }
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
            self.promote_drained(a);
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

/// How long [`lock_dir`] waits for another holder (in this process: a store being
/// dropped while its last maintenance pass ends) before giving up.
const LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// Takes the exclusive lock of a store directory (`flock` on `DIR/lock`, which then
/// holds our PID): two stores must never write the same volumes, not from two
/// processes and not from one that reopens the store while an old handle lives on.
/// The lock goes with the returned file, also when the process dies.
pub(super) fn lock_dir(dir: &std::path::Path) -> Result<File, StoreError> {
    use std::io::Read;
    use std::os::unix::fs::FileExt;
    let path = dir.join("lock");
    let open_err = |source| StoreError::Open { path: path.clone(), source };
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(open_err)?;
    let deadline = std::time::Instant::now() + LOCK_WAIT;
    loop {
        match rustix::fs::flock(&f, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => break,
            Err(rustix::io::Errno::WOULDBLOCK) => {}
            Err(e) => return Err(open_err(e.into())),
        }
        if std::time::Instant::now() >= deadline {
            let mut pid = String::new();
            let _ = f.read_to_string(&mut pid);
            return Err(StoreError::Locked { path: dir.to_owned(), pid: pid.trim().to_owned() });
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    // Fixed width, written in place: truncating the file would wait for the journal.
    let pid = format!("{:<19}\n", std::process::id());
    f.write_all_at(pid.as_bytes(), 0).map_err(open_err)?;
    Ok(f)
}

/// Deletes the volume files and the checkpoint of a disk directory (a disk that comes
/// back after it was out of service starts empty). Other files are left alone.
pub(super) fn clear_dir(dir: &std::path::Path) -> std::io::Result<u64> {
    let mut n = 0;
    for e in std::fs::read_dir(dir)? {
        let e = e?;
        let name = e.file_name();
        let name = name.to_string_lossy();
        let ours = (name.starts_with("vol-") && name.ends_with(".dat"))
            || name.starts_with(super::checkpoint::FILE)
            || (name.starts_with("spill-") && name.ends_with(".tmp"));
        if ours {
            std::fs::remove_file(e.path())?;
            n += 1;
        }
    }
    Ok(n)
}

/// Checks that the directory takes a write that reads back the same and survives a
/// sync: a disk that fails this is not put in service.
pub(super) fn probe(dir: &std::path::Path) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt;
    let path = dir.join("probe.tmp");
    let data: Vec<u8> = (0..4096u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8).collect();
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&path)?;
    let r = (|| {
        f.write_all_at(&data, 0)?;
        f.sync_data()?;
        let mut back = vec![0u8; data.len()];
        f.read_exact_at(&mut back, 0)?;
        if back != data {
            return Err(std::io::Error::other("probe write read back different bytes"));
        }
        Ok(())
    })();
    let removed = std::fs::remove_file(&path);
    r.and(removed)
}
