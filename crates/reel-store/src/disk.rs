//! One disk of the store: opening it, removal and metadata updates, its counters and its
//! failure (too many I/O errors take it out of service, see [`Disk::fail`]).
//! [`crate::Store`] places keys over the disks. Every import among the submodules points
//! down: the leaves hold the types several jobs share, `state` holds [`Disk`]'s fields
//! over them, and each job adds its methods on top.
//!
//! The leaves:
//!
//! - `entry`: an index entry, where a complete object lives packed into 16 bytes;
//! - `fill_state`: what a fill shares with its readers (places, progress);
//! - `index`: the sharded in-memory index of complete and filling objects (16 bytes an
//!   object: no key, no metadata);
//! - `records`: the byte-bounded cache of hot objects' keys and metadata, read from
//!   their records on disk otherwise;
//! - `volumes`: the volume files, their leases and incarnations, the allocator's queues,
//!   and taking a reclaimed volume's pages out of the page cache;
//! - `dir`: the store directory's lock, clearing and probe;
//! - `purge_rule`, `load_state`, `scrub_state`: a purge rule, what removals record while
//!   the index loads, the scrub's rate and position;
//! - `state`: [`Disk`]'s fields and counters, over the leaves above.
//!
//! The jobs, each adding methods to [`Disk`]:
//!
//! - `shards`: the shard of a hash, the refreshed-metadata side table, slots retired;
//! - `purge`: purges by prefix as rules that lookups apply;
//! - `allocate`: allocation of the write head, recycling drained volumes, quarantine, the
//!   small records;
//! - `fill`: writing one object while readers follow it ([`FillWriter`]), in pieces
//!   that `coalesce` sizes;
//! - `rescue`: a fill that met a write error goes on in memory, not aborted;
//! - `reclaim`: recycling the oldest volume with a second chance for read objects;
//! - `maint`: the thread that runs reclaim off the workers;
//! - `spill`: bodies of unknown length that outgrow the store, delivered but not kept;
//! - `rebuild`: the volume headers read at open and the index load that follows in the
//!   background (checkpoint plus a scan of record headers);
//! - `unstored`: fills that go to a spill file from the start (refused by admission);
//! - `checkpoint`: the index written at a clean close and periodically;
//! - `scrub`: the background pass that verifies stored bodies at a bounded rate;
//! - `handles`: [`Hit`], [`Filling`] and the [`FileRange`]s they lend for sendfile;
//! - `handover`: handing the store over to another process (a binary upgrade).

mod allocate;
mod checkpoint;
mod coalesce;
mod create;
mod dir;
mod entry;
mod fill;
mod fill_state;
#[doc(hidden)]
pub mod fuzzing;
mod handles;
mod handover;
mod index;
mod load_state;
mod maint;
mod purge;
mod purge_rule;
mod rebuild;
mod reclaim;
mod records;
mod rescue;
mod scrub;
mod scrub_state;
mod shards;
mod spill;
mod state;
mod unstored;
mod volumes;

use std::fs::OpenOptions;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, RwLock};
use std::time::Instant;

use bytes::Bytes;

use crate::format::{ALIGN, Kind};
use crate::io::Io;
use crate::{IoMode, StoreError, StoreStats};

pub use crate::format::{MAX_KEY_LEN, MAX_META_LEN};
pub use create::{Creation, may_create};
pub use fill::{Committed, FillWriter};
pub use handles::{FileRange, FillStatus, Filling, Hit, Lookup};
pub use scrub::ScrubProgress;

pub(crate) use state::Disk;

use dir::lock_dir;
use index::{MetaAt, Metas, SHARDS, Shard, Slot, index_hash};
use load_state::LoadState;
use purge_rule::Rule;
use state::Counters;
use volumes::{Alloc, Volume, preallocate};

/// Error logs on the write path are rate-limited to one per this many seconds.
const LOG_INTERVAL_SECS: u64 = 10;

/// How long after an I/O error a disk's hits are probed (`Disk::suspect`).
const SUSPECT_SECS: u64 = 60;

/// How to open one disk.
#[derive(Clone, Debug)]
pub(crate) struct DiskOpen {
    /// Directory holding the volume files.
    pub(crate) path: std::path::PathBuf,
    /// Total bytes of its volume files.
    pub(crate) size: u64,
    /// Bytes per volume file.
    pub(crate) volume_size: u64,
    /// I/O backend.
    pub(crate) io: IoMode,
    /// The disk's position in the store: its I/O threads and maintenance thread.
    pub(crate) lane: usize,
    /// I/O errors that take the disk out of service (0: never).
    pub(crate) error_limit: u64,
    /// A store of one disk: a missing directory is created unless a mount point on its
    /// path is not mounted ([`may_create`]); in a store of several a missing directory is
    /// a missing disk (an unmounted file system).
    pub(crate) create: bool,
    /// Delete what the directory holds first: the disk missed removals and purges while
    /// it was out of service.
    pub(crate) clear: bool,
    /// Bytes per second the scrub verifies; 0 = off.
    pub(crate) scrub_rate: u64,
    /// Bytes of the record cache (keys and metadata of hot objects); 0 = none.
    pub(crate) record_cache: u64,
}

impl DiskOpen {
    /// One disk at `path` on lane 0 that never fails and is created when missing.
    #[cfg(test)]
    pub(crate) fn new(path: &Path, size: u64, volume_size: u64, io: IoMode) -> DiskOpen {
        DiskOpen {
            path: path.to_owned(),
            size,
            volume_size,
            io,
            lane: 0,
            error_limit: 0,
            create: true,
            clear: false,
            scrub_rate: 0,
            record_cache: 1 << 20,
        }
    }
}

impl Disk {
    /// Opens (creating and preallocating if needed) the store. Returns as soon as the
    /// volume headers are read; the index loads in the background (from the checkpoint
    /// of the last clean close where it is valid, otherwise by scanning record headers),
    /// and lookups miss until it is loaded ([`Disk::wait_loaded`], `index_loading` in
    /// [`StoreStats`]). Fills and removals work at once.
    pub(crate) fn open(cfg: DiskOpen) -> Result<Arc<Disk>, StoreError> {
        Disk::open_inner(cfg, true, true, false)
    }

    /// [`Disk::open`] for a process that takes the store over from another one still
    /// running (a binary upgrade): frozen from the start ([`Disk::freeze`]), so nothing,
    /// not even a reclaim after the index loads, is written until [`Disk::thaw`].
    pub(crate) fn open_frozen(cfg: DiskOpen) -> Result<Arc<Disk>, StoreError> {
        Disk::open_inner(cfg, true, true, true)
    }

    /// [`Disk::open`]; `background: false` leaves maintenance to explicit
    /// [`Disk::maintain`] calls and loads the index before returning, unless `load` is
    /// false too (tests that must see when a reclaim or the load runs).
    #[cfg(test)]
    fn open_with(cfg: DiskOpen, background: bool, load: bool) -> Result<Arc<Disk>, StoreError> {
        Disk::open_inner(cfg, background, load, false)
    }

    fn open_inner(
        cfg: DiskOpen,
        background: bool,
        load: bool,
        frozen: bool,
    ) -> Result<Arc<Disk>, StoreError> {
        let vs = cfg.volume_size;
        if vs < (1 << 20) || !vs.is_multiple_of(ALIGN) {
            return Err(StoreError::Config(format!(
                "volume_size must be a multiple of 4096 and at least 1 MiB, got {vs}"
            )));
        }
        let n = cfg.size / vs;
        if n < 2 {
            return Err(StoreError::Config(format!(
                "size {} holds fewer than 2 volumes of {vs} bytes",
                cfg.size
            )));
        }
        if n > entry::MAX_VOLUMES {
            return Err(StoreError::Config(format!(
                "{n} volumes on one disk, at most {} (raise volume_size)",
                entry::MAX_VOLUMES
            )));
        }
        if vs > entry::MAX_BODY {
            return Err(StoreError::Config(format!("volume_size {vs} above 1 TiB")));
        }
        let open_err = |path: &Path, source| StoreError::Open { path: path.to_owned(), source };
        if !cfg.path.is_dir() {
            match may_create(&cfg.path, cfg.create) {
                Creation::Allowed(_) => {
                    std::fs::create_dir_all(&cfg.path).map_err(|e| open_err(&cfg.path, e))?;
                }
                Creation::Refused(why) => {
                    let why = format!("no such directory, and not created: {why}");
                    let e = std::io::Error::new(std::io::ErrorKind::NotFound, why);
                    return Err(open_err(&cfg.path, e));
                }
            }
        }
        let lock = lock_dir(&cfg.path)?;
        if cfg.clear {
            dir::clear_dir(&cfg.path).map_err(|e| open_err(&cfg.path, e))?;
        }
        dir::probe(&cfg.path).map_err(|e| open_err(&cfg.path, e))?;
        let io = Io::new(cfg.io, cfg.lane).map_err(|e| open_err(&cfg.path, e))?;
        let mut vols = Vec::new();
        for i in 0..n as u32 {
            let p = cfg.path.join(format!("vol-{i:05}.dat"));
            let f = OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(&p)
                .map_err(|e| open_err(&p, e))?;
            preallocate(&f, vs).map_err(|e| open_err(&p, e))?;
            vols.push(Arc::new(Volume::new(i, f)));
        }
        let store = Disk {
            path: cfg.path.clone(),
            vols,
            volume_size: vs,
            shards: (0..SHARDS).map(|_| RwLock::new(Shard::default())).collect(),
            metas: (0..SHARDS).map(|_| Metas::default()).collect(),
            records: records::Records::new(cfg.record_cache),
            purges: RwLock::new(Vec::new()),
            purge_n: AtomicUsize::new(0),
            alloc: Mutex::new(Alloc::default()),
            io,
            c: Counters::default(),
            started: Instant::now(),
            background: AtomicBool::new(background),
            open_seq: AtomicU64::new(1),
            loading: AtomicBool::new(true),
            load_claimed: AtomicBool::new(false),
            load_state: Mutex::new(LoadState { active: true, ..LoadState::default() }),
            load_cv: Condvar::new(),
            checkpointing: AtomicBool::new(false),
            closed: AtomicBool::new(frozen),
            lock: Mutex::new(Some(lock)),
            errors: AtomicU64::new(0),
            error_limit: cfg.error_limit,
            last_error: AtomicU64::new(0),
            lane: cfg.lane,
            failed: AtomicBool::new(false),
            fail_reason: Mutex::new(None),
            index_dropped: AtomicBool::new(false),
            on_fail: std::sync::OnceLock::new(),
            scrub: scrub_state::Scrub::new(cfg.scrub_rate),
        };
        store.read_volume_headers().map_err(|e| open_err(&cfg.path, e))?;
        let store = Arc::new(store);
        if !maint::register(&store, cfg.lane) {
            return Err(open_err(&cfg.path, std::io::Error::other("no maintenance thread")));
        }
        if background {
            maint::kick(cfg.lane);
        } else {
            // Not for the maintenance thread: loaded here, or by the caller.
            store.load_claimed.store(true, Ordering::SeqCst);
            if load {
                store.load_index();
            }
        }
        Ok(store)
    }

    /// Removes `key` (complete or filling). Persistent: a tombstone is appended when
    /// something was removed, nothing is written otherwise. A complete object is matched
    /// by its key's hash (its key is on disk): a key whose hash collides with `key`'s
    /// leaves the index too, and comes back at a restart (the tombstone names `key`).
    /// While the index is still loading, a key not indexed yet may be on disk: the load
    /// leaves it out, a tombstone follows once the load has found it there (nothing is
    /// written if it did not), and this returns true.
    pub(crate) async fn remove(self: &Arc<Self>, key: &[u8]) -> Result<bool, StoreError> {
        // Before the index changes: a removal whose tombstone cannot be written would
        // come back at the next start.
        self.check_writable()?;
        let h = index_hash(key);
        let take = || -> Result<Option<Slot>, StoreError> {
            let mut shard = self.shard(h).write().map_err(|_| StoreError::Aborted)?;
            let matches = match shard.get(&h) {
                Some(Slot::Ready(_)) => true,
                Some(Slot::Filling(f)) => &*f.key == key,
                None => false,
            };
            Ok(if matches { shard.remove(&h) } else { None })
        };
        // While the index loads, the key may be on disk but not indexed yet: the load
        // must not bring it back.
        let (removed, loading) = {
            let mut g = self.load_state.lock().unwrap_or_else(|p| p.into_inner());
            let removed = take()?;
            if g.active {
                g.keys.insert(h);
                if removed.is_none() {
                    g.unmatched.insert(h, key.into());
                }
            }
            (removed, g.active)
        };
        let Some(slot) = removed else { return Ok(loading) };
        self.retire_slot(h, slot);
        self.c.changes.fetch_add(1, Ordering::Relaxed);
        self.append_small(Kind::Tombstone, key, &[], None).await?;
        Ok(true)
    }

    /// Removes every key starting with `prefix` (purge). Persistent: one purge record
    /// is appended. The purge holds at once whatever the index's size: it is a rule that
    /// every lookup applies (module `purge`). Returns how many objects left the index at
    /// once: fills in flight, and stored objects whose records are in memory (recently
    /// stored or hit); the others leave when a lookup finds them purged, or with their
    /// volume.
    pub(crate) async fn remove_prefix(self: &Arc<Self>, prefix: &[u8]) -> Result<u64, StoreError> {
        self.check_writable()?;
        self.c.changes.fetch_add(1, Ordering::Relaxed);
        let point = self.head_point();
        self.add_rule(Rule { prefix: prefix.into(), seq: point.0, off: point.1 });
        let mut n = self.purge_fills(prefix);
        // The objects whose records are in memory leave the index now; the others when a
        // lookup finds them purged, or with their volume.
        for (h, ver) in self.records.matching(prefix) {
            n += u64::from(self.drop_purged(h, &ver.loc));
        }
        let (_, seq, off) = self.append_small(Kind::PurgePrefix, prefix, &[], None).await?;
        self.move_rule(prefix, point, (seq, off));
        Ok(n)
    }

    /// Replaces the metadata blob of the complete object `key` (e.g. after a 304).
    /// Appends a small metadata record aimed at that exact object and points the index
    /// at it; returns false if the key is not stored (or changed meanwhile, or its volume
    /// is being reclaimed).
    pub(crate) async fn update_meta(
        self: &Arc<Self>,
        key: &[u8],
        meta: Bytes,
    ) -> Result<bool, StoreError> {
        if meta.len() > MAX_META_LEN {
            return Err(StoreError::KeyOrMetaTooLong);
        }
        self.check_writable()?;
        let h = index_hash(key);
        // The object, with its record: its key is compared, its store time kept.
        let Some(handles::Lookup::Hit(hit)) = self.lookup_quiet(key).await else {
            return Ok(false);
        };
        let old = hit.loc;
        let seq = hit.lease.0.seq.load(Ordering::SeqCst);
        let (v, mseq, moff) =
            self.append_small(Kind::Meta, key, &meta, Some((seq, old.rec_off))).await?;
        let at =
            MetaAt { obj: (old.vol, old.seq24, old.rec_off), vol: v, seq: mseq, rec_off: moff };
        let shard = self.shard(h).write().map_err(|_| StoreError::Aborted)?;
        match shard.get(&h) {
            // Not while the object's volume is being reclaimed: a second-chance copy
            // taken before this update would come after the update record in the log
            // and bring the old metadata back on restart. The object stays as it was.
            Some(Slot::Ready(e))
                if e.loc() == old
                    && !self.vols[old.vol as usize].reclaiming.load(Ordering::SeqCst) =>
            {
                e.set_refreshed();
                self.set_meta_at(h, at);
                let rec = records::Record {
                    ver: records::Ver::new(old, Some(at)),
                    kh: hit.rec.kh,
                    key: key.into(),
                    meta,
                    stored_at: hit.stored_at(),
                };
                self.records.insert(h, Arc::new(rec));
                self.c.changes.fetch_add(1, Ordering::Relaxed);
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    /// Current counters.
    pub(crate) fn stats(&self) -> StoreStats {
        let c = &self.c;
        StoreStats {
            objects: c.objects.load(Ordering::Relaxed),
            bytes_used: c.bytes_used.load(Ordering::Relaxed),
            capacity: self.vols.len() as u64 * self.volume_size,
            volumes: self.vols.len() as u64,
            evictions: c.evictions.load(Ordering::Relaxed),
            second_chance: c.second_chance.load(Ordering::Relaxed),
            reclaims: c.reclaims.load(Ordering::Relaxed),
            write_errors: c.write_errors.load(Ordering::Relaxed),
            read_errors: c.read_errors.load(Ordering::Relaxed),
            quarantined_volumes: c.quarantined.load(Ordering::Relaxed),
            no_space: c.no_space.load(Ordering::Relaxed),
            fill_moves: c.fill_moves.load(Ordering::Relaxed),
            not_stored: c.not_stored.load(Ordering::Relaxed),
            rescued_fills: c.rescued.load(Ordering::Relaxed),
            bytes_written: c.bytes_written.load(Ordering::Relaxed),
            spill_bytes_written: c.spill_written.load(Ordering::Relaxed),
            recovered: c.recovered.load(Ordering::Relaxed),
            dropped_on_rebuild: c.dropped.load(Ordering::Relaxed),
            uring: self.io.is_uring(),
            index_loading: self.loading.load(Ordering::SeqCst),
            index_load_millis: c.load_millis.load(Ordering::Relaxed),
            record_cache_bytes: self.records.bytes(),
            record_reads: c.record_reads.load(Ordering::Relaxed),
            ..self.scrub.stats()
        }
    }

    fn write_error(&self, e: &std::io::Error) {
        self.c.write_errors.fetch_add(1, Ordering::Relaxed);
        self.count_error(e);
        let now = self.started.elapsed().as_secs() + LOG_INTERVAL_SECS;
        let last = self.c.last_write_log.load(Ordering::Relaxed);
        if now >= last + LOG_INTERVAL_SECS
            && self
                .c
                .last_write_log
                .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            tracing::error!(error = %e, total = self.c.write_errors.load(Ordering::Relaxed),
                "store write failed; object not admitted");
        }
    }

    fn read_error(&self, vol: &Volume, e: &std::io::Error) {
        self.c.read_errors.fetch_add(1, Ordering::Relaxed);
        tracing::error!(disk = %self.path.display(), volume = vol.idx, error = %e,
            "store read failed; quarantining volume");
        self.quarantine(vol);
        self.count_error(e);
    }

    /// Counts an I/O error against the disk's limit; the one that reaches it fails the
    /// disk.
    fn count_error(&self, e: &std::io::Error) {
        self.last_error.store(self.started.elapsed().as_secs() + 1, Ordering::Relaxed);
        let n = self.errors.fetch_add(1, Ordering::Relaxed) + 1;
        if self.error_limit > 0 && n >= self.error_limit {
            self.fail(format!(
                "{n} I/O errors (disk_error_limit {}), the last: {e}",
                self.error_limit
            ));
        }
    }

    /// Takes the disk out of service: lookups skip it at once ([`Disk::is_failed`]),
    /// nothing more is written, and the maintenance thread drops its index (its objects
    /// are then fetched from the origin and stored on the other disks). Handles already
    /// out keep their leases: what they read from a failing disk may fail.
    pub(crate) fn fail(&self, reason: String) {
        {
            // Under the allocation lock, as a freeze: an allocation that saw the disk
            // writable has counted itself before this returns.
            let _a = self.lock_alloc();
            self.closed.store(true, Ordering::SeqCst);
        }
        if self.failed.swap(true, Ordering::SeqCst) {
            return;
        }
        tracing::error!(disk = %self.path.display(), %reason, "store disk taken out of service");
        *self.fail_reason.lock().unwrap_or_else(|p| p.into_inner()) = Some(reason);
        maint::kick(self.lane);
    }

    /// Whether the disk is out of service.
    pub(crate) fn is_failed(&self) -> bool {
        self.failed.load(Ordering::Relaxed)
    }

    /// Why the disk is out of service.
    pub(crate) fn fail_reason(&self) -> Option<String> {
        self.fail_reason.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Whether the disk counted an I/O error within the last [`SUSPECT_SECS`]: then its
    /// hits are probed before they are answered (`Disk::probe`).
    pub(crate) fn suspect(&self) -> bool {
        let last = self.last_error.load(Ordering::Relaxed);
        last != 0 && self.started.elapsed().as_secs() + 1 < last + SUSPECT_SECS
    }

    /// I/O errors counted since open.
    pub(crate) fn errors(&self) -> u64 {
        self.errors.load(Ordering::Relaxed)
    }

    /// Sets what the maintenance thread calls once this disk, failed, has dropped its
    /// index (the store records which disks are in service).
    pub(crate) fn on_fail(&self, f: Box<dyn Fn() + Send + Sync>) {
        let _ = self.on_fail.set(f);
    }

    /// On the maintenance thread: empties a failed disk's index, once.
    fn drop_failed_index(&self) {
        if !self.is_failed() || self.index_dropped.swap(true, Ordering::SeqCst) {
            return;
        }
        let mut n = 0u64;
        for shard in self.shards.iter() {
            let slots: Vec<(u64, Slot)> = {
                let mut s = shard.write().unwrap_or_else(|p| p.into_inner());
                s.drain().collect()
            };
            n += slots.len() as u64;
            for (h, slot) in slots {
                match slot {
                    // Not aborted: its readers may have sent a head with the length.
                    // Its writer finds the disk failed and goes on in memory, unstored
                    // (module `rescue`).
                    Slot::Filling(_) => self.records.remove(h),
                    slot => self.retire_slot(h, slot),
                }
            }
        }
        for v in &self.vols {
            v.objects.lock().unwrap_or_else(|p| p.into_inner()).clear();
        }
        tracing::warn!(disk = %self.path.display(), objects = n,
            "failed store disk: its objects left the index");
        if let Some(f) = self.on_fail.get() {
            f();
        }
    }

    /// Gives up the directory lock without a checkpoint (a failed disk being replaced).
    pub(crate) fn unlock(&self) {
        self.lock.lock().unwrap_or_else(|p| p.into_inner()).take();
    }
}

impl Drop for Disk {
    /// A clean close writes the checkpoint the next open loads (unless
    /// [`Disk::close`] did).
    fn drop(&mut self) {
        if self.closed.load(Ordering::SeqCst) {
            return;
        }
        if let Err(e) = self.checkpoint_with(true) {
            tracing::warn!(error = %e, "store index checkpoint not written at close");
        }
    }
}

#[cfg(test)]
mod tests;
