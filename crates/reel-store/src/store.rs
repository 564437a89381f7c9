//! The store: the set of disks objects are kept on, and the calls that span them.
//!
//! Each key lives on one disk, chosen by weighted rendezvous hashing over the disks in
//! service (`placement`). Each disk has its own volumes, index, I/O threads and
//! maintenance thread (`crate::disk`), so a slow disk does not hold up another.
//!
//! A disk is in service, or out of it:
//! - missing or unusable at start (no directory, wrong permissions, a failed probe
//!   write): logged, and left out; the start fails only when no disk is left;
//! - failed: its I/O errors reached `disk_error_limit`. Lookups skip it at once, its
//!   index is dropped, its keys are fetched again and stored on the disk that scores
//!   next;
//! - taken out by the operator ([`Store::set_online`]).
//!
//! A disk comes back by [`Store::set_online`] or at a restart, empty: it missed the
//! removals and purges made while it was out (`membership` records which disks were in
//! service). Removals and purges go to every disk in service, so a copy left on the
//! next disk by an earlier failure never outlives a purge.

mod membership;
mod placement;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};

use arc_swap::{ArcSwapOption, Guard};
use bytes::Bytes;

use crate::disk::{Disk, DiskOpen};
use crate::{FillWriter, Lookup, ScrubProgress, StoreConfig, StoreError, StoreStats, format};

/// A slot's disk, loaded for one call.
type DiskGuard = Guard<Option<Arc<Disk>>>;

/// Whether a disk is in service.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DiskState {
    /// In service.
    Online,
    /// Out of service: missing at start, failed, or taken out by the operator.
    Offline,
}

impl DiskState {
    /// `"online"` or `"offline"`.
    pub fn as_str(self) -> &'static str {
        match self {
            DiskState::Online => "online",
            DiskState::Offline => "offline",
        }
    }
}

/// One disk as [`Store::disks`] reports it.
#[derive(Clone, Debug)]
pub struct DiskInfo {
    /// The configured directory.
    pub path: PathBuf,
    /// The configured size in bytes.
    pub size: u64,
    /// In service or not.
    pub state: DiskState,
    /// Why it is out of service.
    pub reason: Option<String>,
    /// I/O errors counted since it was opened.
    pub errors: u64,
    /// Its counters (zero when it could not be opened).
    pub stats: StoreStats,
}

/// One configured disk.
pub(crate) struct Slot {
    path: PathBuf,
    size: u64,
    seed: u64,
    /// The open disk; `None` if it could not be opened. A failed disk stays here (for
    /// its counters) until it is brought back.
    disk: ArcSwapOption<Disk>,
    /// Why it could not be opened.
    missing: Mutex<Option<String>>,
}

impl Slot {
    pub(crate) fn in_service(&self) -> Option<Arc<Disk>> {
        self.disk.load_full().filter(|d| !d.is_failed())
    }
}

/// The segment store: one or more disks. Shared by all workers (`Arc<Store>`).
pub struct Store {
    pub(crate) slots: Box<[Slot]>,
    /// All disks have the same size: placement skips the logarithm.
    equal: bool,
    cfg: StoreConfig,
    /// Set by [`Store::freeze`] (and [`Store::open_frozen`]) until [`Store::thaw`].
    frozen: AtomicBool,
    /// The membership epoch last written.
    epoch: Mutex<u64>,
    /// The scrub rate per disk (a disk brought back takes it).
    scrub: std::sync::atomic::AtomicU64,
    /// Counters of disks that were replaced by a reopened one, so totals never go back.
    retired: Mutex<StoreStats>,
    me: Weak<Store>,
}

impl Store {
    /// Opens every disk of `cfg` (creating and preallocating volumes as needed). Returns
    /// as soon as the volume headers are read; each disk's index loads in the
    /// background and lookups of keys not loaded yet miss ([`Store::wait_loaded`]).
    /// A disk that cannot be opened is logged and left out of service; this fails only
    /// if none can be opened, on a configuration error, or if another process holds a
    /// disk.
    pub fn open(cfg: StoreConfig) -> Result<Arc<Store>, StoreError> {
        Store::open_inner(cfg, false)
    }

    /// [`Store::open`] for a process that takes the store over from another one still
    /// running (a binary upgrade): frozen from the start ([`Store::freeze`]), so nothing,
    /// not even a reclaim after the index loads, is written until [`Store::thaw`].
    pub fn open_frozen(cfg: StoreConfig) -> Result<Arc<Store>, StoreError> {
        Store::open_inner(cfg, true)
    }

    fn open_inner(cfg: StoreConfig, frozen: bool) -> Result<Arc<Store>, StoreError> {
        if cfg.disks.is_empty() {
            return Err(StoreError::Config("the store has no disk".into()));
        }
        for (i, d) in cfg.disks.iter().enumerate() {
            if cfg.disks[..i].iter().any(|o| o.path == d.path) {
                return Err(StoreError::Config(format!(
                    "disk {} is listed twice",
                    d.path.display()
                )));
            }
        }
        let known = membership::newest(cfg.disks.iter().map(|d| d.path.as_path()));
        let single = cfg.disks.len() == 1;
        let mut slots = Vec::new();
        let mut first_err = None;
        for (lane, d) in cfg.disks.iter().enumerate() {
            let clear = known.as_ref().is_some_and(|m| !m.disks.contains(&d.path));
            let open = DiskOpen {
                path: d.path.clone(),
                size: d.size,
                volume_size: cfg.volume_size,
                io: cfg.io,
                lane,
                error_limit: cfg.disk_error_limit,
                create: single,
                clear,
                scrub_rate: cfg.scrub_rate,
                record_cache: cfg.record_cache / cfg.disks.len() as u64,
            };
            if clear && d.path.is_dir() {
                tracing::warn!(disk = %d.path.display(),
                    "store disk was out of service: it starts empty");
            }
            let r = if frozen { Disk::open_frozen(open) } else { Disk::open(open) };
            let slot = Slot {
                path: d.path.clone(),
                size: d.size,
                seed: placement::seed(&d.path),
                disk: ArcSwapOption::empty(),
                missing: Mutex::new(None),
            };
            match r {
                Ok(disk) => slot.disk.store(Some(disk)),
                Err(e @ (StoreError::Config(_) | StoreError::Locked { .. })) => return Err(e),
                Err(e) => {
                    tracing::error!(disk = %d.path.display(), error = %e,
                        "store disk left out of service");
                    *slot.missing.lock().unwrap_or_else(|p| p.into_inner()) = Some(e.to_string());
                    first_err.get_or_insert(e);
                }
            }
            slots.push(slot);
        }
        if slots.iter().all(|s| s.disk.load().is_none()) {
            return Err(first_err.unwrap_or(StoreError::Config("the store has no disk".into())));
        }
        let equal = cfg.disks.iter().all(|d| d.size == cfg.disks[0].size);
        let epoch = known.map_or(0, |m| m.epoch);
        let scrub_rate = cfg.scrub_rate;
        let store = Arc::new_cyclic(|me| Store {
            slots: slots.into(),
            equal,
            cfg,
            frozen: AtomicBool::new(frozen),
            epoch: Mutex::new(epoch),
            scrub: std::sync::atomic::AtomicU64::new(scrub_rate),
            retired: Mutex::new(StoreStats::default()),
            me: me.clone(),
        });
        for s in store.slots.iter() {
            if let Some(d) = s.disk.load_full() {
                store.watch(&d);
            }
        }
        if !frozen {
            store.record_membership();
        }
        Ok(store)
    }

    /// Has `disk` tell the store when it failed.
    fn watch(&self, disk: &Disk) {
        let me = self.me.clone();
        disk.on_fail(Box::new(move || {
            if let Some(s) = me.upgrade() {
                s.record_membership();
            }
        }));
    }

    /// Writes the set of disks in service, at the next epoch, into each of them.
    fn record_membership(&self) {
        if self.frozen.load(Ordering::SeqCst) {
            return;
        }
        let mut epoch = self.epoch.lock().unwrap_or_else(|p| p.into_inner());
        let up: Vec<&Path> = self
            .slots
            .iter()
            .filter(|s| s.in_service().is_some())
            .map(|s| s.path.as_path())
            .collect();
        *epoch += 1;
        for dir in &up {
            if let Err(e) = membership::write(dir, *epoch, &up) {
                tracing::warn!(disk = %dir.display(), error = %e,
                    "cannot record the store's disks in service");
            }
        }
    }

    /// The disk `h` lives on, among those in service. One pass without allocating:
    /// only the best guard so far is held.
    fn place(&self, h: u128) -> Option<DiskGuard> {
        if let [only] = &*self.slots {
            let g = only.disk.load();
            return g.as_ref().is_some_and(|d| !d.is_failed()).then_some(g);
        }
        let mut best: Option<(DiskGuard, f64, u64)> = None;
        for s in self.slots.iter() {
            let g = s.disk.load();
            if g.as_ref().is_none_or(|d| d.is_failed()) {
                continue;
            }
            let d = placement::draw(h, s.seed);
            let score = if self.equal { 0.0 } else { placement::weighted(d, s.size as f64) };
            let better = match &best {
                None => true,
                Some((_, bs, bd)) => {
                    if self.equal {
                        d > *bd
                    } else {
                        score > *bs
                    }
                }
            };
            if better {
                best = Some((g, score, d));
            }
        }
        best.map(|(g, _, _)| g)
    }

    fn placed(&self, key: &[u8]) -> Option<Arc<Disk>> {
        self.place(format::key_hash(key)).and_then(|g| g.as_ref().cloned())
    }

    /// The disks in service.
    fn in_service(&self) -> impl Iterator<Item = Arc<Disk>> + '_ {
        self.slots.iter().filter_map(Slot::in_service)
    }

    /// The directory of the disk in service that `key` is placed on (whether or not it
    /// is stored there); `None` when no disk is in service.
    pub fn disk_of(&self, key: &[u8]) -> Option<PathBuf> {
        let h = format::key_hash(key);
        let d = self.place(h)?;
        let d = d.as_ref()?;
        self.slots
            .iter()
            .find(|s| s.disk.load().as_ref().is_some_and(|x| Arc::ptr_eq(x, d)))
            .map(|s| s.path.clone())
    }

    /// Looks up `key` on its disk. `None` is a miss. Asynchronous because the record a
    /// hit needs may have to be read from its disk; a future that finds everything in
    /// memory completes at its first poll.
    pub async fn lookup(&self, key: &[u8]) -> Option<Lookup> {
        let h = format::key_hash(key);
        let g = self.place(h)?;
        g.as_ref()?.lookup_hashed(key, h).await
    }

    /// Whether `key` is stored or being filled (no lease, not counted as a read).
    pub fn contains(&self, key: &[u8]) -> bool {
        self.place(format::key_hash(key))
            .is_some_and(|g| g.as_ref().is_some_and(|d| d.contains(key)))
    }

    /// Starts writing `key` on its disk (see [`FillWriter`]). An existing complete
    /// object for the key is replaced. Fails with [`StoreError::AlreadyFilling`] if a
    /// fill for the key is in progress, [`StoreError::NoSpace`] without a free volume,
    /// [`StoreError::NoDisk`] when no disk is in service.
    pub async fn begin_fill(
        &self,
        key: &[u8],
        meta: Bytes,
        expected_len: Option<u64>,
    ) -> Result<FillWriter, StoreError> {
        let disk = self.placed(key).ok_or(StoreError::NoDisk)?;
        disk.begin_fill(key, meta, expected_len).await
    }

    /// As [`Store::begin_fill`], but the body is never stored: it goes to a spill file on
    /// the key's disk that readers follow, and [`FillWriter::commit`] returns
    /// [`Committed::NotStored`](crate::Committed::NotStored) (an object refused by
    /// admission).
    pub async fn begin_unstored_fill(
        &self,
        key: &[u8],
        meta: Bytes,
        expected_len: Option<u64>,
    ) -> Result<FillWriter, StoreError> {
        let disk = self.placed(key).ok_or(StoreError::NoDisk)?;
        disk.begin_unstored_fill(key, meta, expected_len).await
    }

    /// Removes `key` (complete or filling) from every disk in service; true if it was
    /// somewhere (see the disk's removal for a key removed while an index loads).
    pub async fn remove(&self, key: &[u8]) -> Result<bool, StoreError> {
        let mut removed = false;
        let mut err = None;
        for d in self.in_service().collect::<Vec<_>>() {
            match d.remove(key).await {
                Ok(r) => removed |= r,
                Err(e) => {
                    err.get_or_insert(e);
                }
            }
        }
        match err {
            Some(e) if !removed => Err(e),
            _ => Ok(removed),
        }
    }

    /// Removes every key starting with `prefix` from every disk in service (purge).
    /// Returns the number of keys removed.
    pub async fn remove_prefix(&self, prefix: &[u8]) -> Result<u64, StoreError> {
        let mut n = 0;
        let mut err = None;
        for d in self.in_service().collect::<Vec<_>>() {
            match d.remove_prefix(prefix).await {
                Ok(k) => n += k,
                Err(e) => {
                    err.get_or_insert(e);
                }
            }
        }
        match err {
            Some(e) => Err(e),
            None => Ok(n),
        }
    }

    /// Replaces the metadata blob of the complete object `key` (e.g. after a 304);
    /// false if the key is not stored.
    pub async fn update_meta(&self, key: &[u8], meta: Bytes) -> Result<bool, StoreError> {
        match self.placed(key) {
            Some(d) => d.update_meta(key, meta).await,
            None => Ok(false),
        }
    }

    /// Takes the disk at `path` (as configured) out of service, or brings it back.
    /// Back means reopened empty after a probe write, since it missed the removals and
    /// purges made while it was out. Returns whether anything changed.
    pub fn set_online(&self, path: &Path, online: bool) -> Result<bool, StoreError> {
        let slot = self.slots.iter().find(|s| s.path == path).ok_or_else(|| {
            StoreError::Config(format!("no disk {} in the store", path.display()))
        })?;
        if !online {
            let Some(d) = slot.in_service() else { return Ok(false) };
            d.fail("taken out of service by the operator".into());
            return Ok(true);
        }
        if slot.in_service().is_some() {
            return Ok(false);
        }
        if self.frozen.load(Ordering::SeqCst) {
            return Err(StoreError::Closed);
        }
        let old = slot.disk.load_full();
        if let Some(old) = &old {
            old.unlock();
        }
        let lane = self.slots.iter().position(|s| std::ptr::eq(s, slot)).unwrap_or(0);
        let open = DiskOpen {
            path: slot.path.clone(),
            size: slot.size,
            volume_size: self.cfg.volume_size,
            io: self.cfg.io,
            lane,
            error_limit: self.cfg.disk_error_limit,
            create: self.slots.len() == 1,
            clear: true,
            scrub_rate: self.scrub_rate(),
            record_cache: self.cfg.record_cache / self.slots.len() as u64,
        };
        let disk = Disk::open(open).inspect_err(|e| {
            *slot.missing.lock().unwrap_or_else(|p| p.into_inner()) = Some(e.to_string());
        })?;
        self.watch(&disk);
        if let Some(old) = old {
            add_counters(&mut self.retired.lock().unwrap_or_else(|p| p.into_inner()), &old.stats());
        }
        slot.disk.store(Some(disk));
        *slot.missing.lock().unwrap_or_else(|p| p.into_inner()) = None;
        tracing::info!(disk = %path.display(), "store disk back in service, empty");
        self.record_membership();
        Ok(true)
    }

    /// Bytes per volume file, the same on every disk (the largest object, less its header).
    pub fn volume_size(&self) -> u64 {
        self.cfg.volume_size
    }

    /// Every configured disk, in configuration order.
    pub fn disks(&self) -> Vec<DiskInfo> {
        self.slots
            .iter()
            .map(|s| {
                let d = s.disk.load_full();
                let (state, reason) = match &d {
                    Some(d) if !d.is_failed() => (DiskState::Online, None),
                    Some(d) => (DiskState::Offline, d.fail_reason()),
                    None => (
                        DiskState::Offline,
                        s.missing.lock().unwrap_or_else(|p| p.into_inner()).clone(),
                    ),
                };
                DiskInfo {
                    path: s.path.clone(),
                    size: s.size,
                    state,
                    reason,
                    errors: d.as_ref().map_or(0, |d| d.errors()),
                    stats: d.map(|d| d.stats()).unwrap_or_default(),
                }
            })
            .collect()
    }

    /// Counters summed over the disks (gauges over the disks in service).
    pub fn stats(&self) -> StoreStats {
        let mut t = *self.retired.lock().unwrap_or_else(|p| p.into_inner());
        for s in self.slots.iter() {
            let Some(d) = s.disk.load_full() else { continue };
            let st = d.stats();
            add_counters(&mut t, &st);
            if d.is_failed() {
                continue;
            }
            t.objects += st.objects;
            t.bytes_used += st.bytes_used;
            t.capacity += st.capacity;
            t.volumes += st.volumes;
            t.quarantined_volumes += st.quarantined_volumes;
            t.record_cache_bytes += st.record_cache_bytes;
            t.uring |= st.uring;
            t.index_loading |= st.index_loading;
            t.index_load_millis = t.index_load_millis.max(st.index_load_millis);
        }
        t
    }

    /// Blocks until the index of every disk in service is loaded.
    pub fn wait_loaded(&self) {
        for d in self.in_service() {
            d.wait_loaded();
        }
    }

    /// Writes a checkpoint of every disk's index now (blocking file I/O). Returns the
    /// number of entries written.
    pub fn checkpoint(&self) -> Result<u64, StoreError> {
        let mut n = 0;
        for d in self.in_service() {
            n += d.checkpoint()?;
        }
        Ok(n)
    }

    /// Closes every disk for writing and writes the checkpoints the next open loads.
    pub fn close(&self) -> Result<u64, StoreError> {
        self.frozen.store(true, Ordering::SeqCst);
        let mut n = 0;
        let mut err = None;
        for d in self.in_service() {
            match d.close() {
                Ok(k) => n += k,
                Err(e) => {
                    err.get_or_insert(e);
                }
            }
        }
        err.map_or(Ok(n), Err)
    }

    /// Stops this process writing the store (a hand-over): see the disk's freeze.
    pub fn freeze(&self) {
        self.frozen.store(true, Ordering::SeqCst);
        for d in self.in_service() {
            d.freeze();
        }
    }

    /// Lets this process write the store again.
    pub fn thaw(&self) {
        self.frozen.store(false, Ordering::SeqCst);
        for d in self.in_service() {
            d.thaw();
        }
        self.record_membership();
    }

    /// Whether the store takes no writes ([`Store::freeze`] or [`Store::close`]).
    pub fn is_frozen(&self) -> bool {
        self.frozen.load(Ordering::SeqCst)
    }

    /// Writes under way on every disk (fills, small records, reclaims, checkpoints).
    pub fn writes_in_progress(&self) -> u64 {
        self.slots.iter().filter_map(|s| s.disk.load_full()).map(|d| d.writes_in_progress()).sum()
    }

    /// Checkpoints the frozen disks and gives up their directory locks (a hand-over).
    pub fn release_lock(&self) -> Result<(), StoreError> {
        if !self.is_frozen() {
            return Err(StoreError::Config("release_lock needs a frozen store".into()));
        }
        for s in self.slots.iter() {
            match s.disk.load_full() {
                Some(d) if d.is_failed() => d.unlock(),
                Some(d) => d.release_lock()?,
                None => {}
            }
        }
        Ok(())
    }

    /// Takes the directory locks back after [`Store::release_lock`].
    pub fn relock(&self) -> Result<(), StoreError> {
        for d in self.in_service() {
            d.relock()?;
        }
        Ok(())
    }

    /// Whether this store holds the lock of every disk in service.
    pub fn has_lock(&self) -> bool {
        let mut any = false;
        for d in self.in_service() {
            if !d.has_lock() {
                return false;
            }
            any = true;
        }
        any
    }

    /// Sets the scrub's rate (bytes per second on each disk; 0 = off), live.
    pub fn set_scrub_rate(&self, bytes_per_sec: u64) {
        self.scrub.store(bytes_per_sec, Ordering::Relaxed);
        for s in self.slots.iter() {
            if let Some(d) = s.disk.load_full() {
                d.set_scrub_rate(bytes_per_sec);
            }
        }
    }

    /// The scrub's rate per disk, bytes per second.
    pub fn scrub_rate(&self) -> u64 {
        self.scrub.load(Ordering::Relaxed)
    }

    /// Runs one scrub step of at most `budget` bytes on every disk in service, now (the
    /// maintenance threads run steps on their own at the configured rate). Blocking
    /// reads: never call it on a worker. `pass_done` once every disk finished a pass in
    /// this step.
    pub async fn scrub_step(&self, budget: u64) -> ScrubProgress {
        let mut t = ScrubProgress { pass_done: true, ..ScrubProgress::default() };
        for d in self.in_service().collect::<Vec<_>>() {
            let p = d.scrub_step(budget).await;
            t.bytes += p.bytes;
            t.objects += p.objects;
            t.corrupt += p.corrupt;
            t.pass_done &= p.pass_done;
        }
        t
    }

    /// Runs one maintenance pass (reclaim) on every disk in service; for stores whose
    /// maintenance is not left to the background (tests).
    pub async fn maintain(&self) {
        for d in self.in_service().collect::<Vec<_>>() {
            d.maintain().await;
        }
    }
}

/// Adds the counters (not the gauges) of `s` to `t`.
fn add_counters(t: &mut StoreStats, s: &StoreStats) {
    t.evictions += s.evictions;
    t.second_chance += s.second_chance;
    t.reclaims += s.reclaims;
    t.write_errors += s.write_errors;
    t.read_errors += s.read_errors;
    t.no_space += s.no_space;
    t.fill_moves += s.fill_moves;
    t.not_stored += s.not_stored;
    t.rescued_fills += s.rescued_fills;
    t.bytes_written += s.bytes_written;
    t.spill_bytes_written += s.spill_bytes_written;
    t.recovered += s.recovered;
    t.dropped_on_rebuild += s.dropped_on_rebuild;
    t.scrub_bytes += s.scrub_bytes;
    t.scrub_objects += s.scrub_objects;
    t.scrub_corrupt += s.scrub_corrupt;
    t.scrub_passes += s.scrub_passes;
    t.record_reads += s.record_reads;
}
