//! The store proper: the [`Store`] handle, opening, removal and metadata updates, and
//! the counters. Each job lives in a submodule:
//!
//! - `index`: the sharded in-memory index of complete and filling objects;
//! - `volumes`: volume files, leases, allocation of the write head, quarantine;
//! - `fill`: writing one object while readers follow it ([`FillWriter`]);
//! - `reclaim`: recycling the oldest volume with a second chance for read objects;
//! - `maint`: the thread that runs reclaim off the workers;
//! - `spill`: bodies of unknown length that outgrow the store, delivered but not kept;
//! - `unstored`: fills that go to a spill file from the start (refused by admission);
//! - `rebuild`: the volume headers read at open and the index load that follows in the
//!   background (checkpoint plus a scan of record headers);
//! - `checkpoint`: the index written at a clean close and periodically;
//! - `handles`: [`Hit`], [`Filling`] and the [`FileRange`]s they lend for sendfile.

mod checkpoint;
mod fill;
mod handles;
mod handover;
mod index;
mod maint;
mod rebuild;
mod reclaim;
mod spill;
mod unstored;
mod volumes;

use std::fs::OpenOptions;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, RwLock};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;

use crate::format::{self, ALIGN, Kind};
use crate::io::Io;
use crate::{StoreConfig, StoreError, StoreStats};

pub use crate::format::{MAX_KEY_LEN, MAX_META_LEN};
pub use fill::{Committed, FillWriter};
pub use handles::{FileRange, FillStatus, Filling, Hit, Lookup};

use index::{Entry, SHARDS, Shard, Slot};
use rebuild::LoadState;
use volumes::{Alloc, Volume, lock_dir, preallocate};

/// Error logs on the write path are rate-limited to one per this many seconds.
const LOG_INTERVAL_SECS: u64 = 10;

/// The store's counters (see [`StoreStats`]).
#[derive(Default)]
struct Counters {
    evictions: AtomicU64,
    second_chance: AtomicU64,
    reclaims: AtomicU64,
    write_errors: AtomicU64,
    read_errors: AtomicU64,
    quarantined: AtomicU64,
    no_space: AtomicU64,
    fill_moves: AtomicU64,
    not_stored: AtomicU64,
    /// Bytes written into volume files, and into spill files.
    bytes_written: AtomicU64,
    spill_written: AtomicU64,
    objects: AtomicU64,
    bytes_used: AtomicU64,
    recovered: AtomicU64,
    dropped: AtomicU64,
    last_write_log: AtomicU64,
    /// Bumped by every change of the index that a checkpoint would record.
    changes: AtomicU64,
    /// `changes` when the last checkpoint was taken.
    checkpointed: AtomicU64,
    /// How long the index load took.
    load_millis: AtomicU64,
    /// When (seconds since open) the next periodic checkpoint is due.
    checkpoint_due: AtomicU64,
}

/// The segment store. Shared by all workers (`Arc<Store>`): the index is sharded, the
/// volumes are plain files read with positional I/O.
pub struct Store {
    /// The store directory.
    path: std::path::PathBuf,
    vols: Vec<Arc<Volume>>,
    volume_size: u64,
    shards: Box<[RwLock<Shard>]>,
    alloc: Mutex<Alloc>,
    io: Io,
    c: Counters,
    started: Instant,
    /// Whether the maintenance thread runs [`Store::maintain`] for this store.
    background: AtomicBool,
    /// The first incarnation written since open: everything older is loaded, not live.
    open_seq: AtomicU64,
    /// Set until the index is loaded; `load_claimed` once a thread took the load on.
    loading: AtomicBool,
    load_claimed: AtomicBool,
    load_state: Mutex<LoadState>,
    load_cv: Condvar,
    checkpointing: AtomicBool,
    /// Set by [`Store::close`] and [`Store::freeze`]: nothing new is written.
    closed: AtomicBool,
    /// The directory's exclusive lock, held while the store lives (given up for a
    /// successor process by [`Store::release_lock`]).
    lock: Mutex<Option<std::fs::File>>,
}

impl Store {
    /// Opens (creating and preallocating if needed) the store. Returns as soon as the
    /// volume headers are read; the index loads in the background (from the checkpoint
    /// of the last clean close where it is valid, otherwise by scanning record headers),
    /// and lookups miss until it is loaded ([`Store::wait_loaded`], `index_loading` in
    /// [`StoreStats`]). Fills and removals work at once.
    pub fn open(cfg: StoreConfig) -> Result<Arc<Store>, StoreError> {
        Store::open_inner(cfg, true, true, false)
    }

    /// [`Store::open`] for a process that takes the store over from another one still
    /// running (a binary upgrade): frozen from the start ([`Store::freeze`]), so nothing,
    /// not even a reclaim after the index loads, is written until [`Store::thaw`].
    pub fn open_frozen(cfg: StoreConfig) -> Result<Arc<Store>, StoreError> {
        Store::open_inner(cfg, true, true, true)
    }

    /// [`Store::open`]; `background: false` leaves maintenance to explicit
    /// [`Store::maintain`] calls and loads the index before returning, unless `load` is
    /// false too (tests that must see when a reclaim or the load runs).
    #[cfg(test)]
    fn open_with(cfg: StoreConfig, background: bool, load: bool) -> Result<Arc<Store>, StoreError> {
        Store::open_inner(cfg, background, load, false)
    }

    fn open_inner(
        cfg: StoreConfig,
        background: bool,
        load: bool,
        frozen: bool,
    ) -> Result<Arc<Store>, StoreError> {
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
        if n > u64::from(u32::MAX) {
            return Err(StoreError::Config("too many volumes".into()));
        }
        let open_err = |path: &Path, source| StoreError::Open { path: path.to_owned(), source };
        std::fs::create_dir_all(&cfg.path).map_err(|e| open_err(&cfg.path, e))?;
        let lock = lock_dir(&cfg.path)?;
        let io = Io::new(cfg.io).map_err(|e| open_err(&cfg.path, e))?;
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
        let store = Store {
            path: cfg.path.clone(),
            vols,
            volume_size: vs,
            shards: (0..SHARDS).map(|_| RwLock::new(Shard::default())).collect(),
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
        };
        store.read_volume_headers().map_err(|e| open_err(&cfg.path, e))?;
        let store = Arc::new(store);
        if !maint::register(&store) {
            return Err(open_err(&cfg.path, std::io::Error::other("no maintenance thread")));
        }
        if background {
            maint::kick();
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
    /// something was removed, nothing is written otherwise. While the index is still
    /// loading, a key not indexed yet may be on disk: the load leaves it out, a
    /// tombstone follows once the load has found it there (nothing is written if it did
    /// not), and this returns true.
    pub async fn remove(self: &Arc<Self>, key: &[u8]) -> Result<bool, StoreError> {
        // Before the index changes: a removal whose tombstone cannot be written would
        // come back at the next start.
        self.check_writable()?;
        let h = format::key_hash(key);
        let take = || -> Result<Option<Slot>, StoreError> {
            let mut shard = self.shard(h).write().map_err(|_| StoreError::Aborted)?;
            let matches = match shard.get(&h) {
                Some(Slot::Ready(e)) => &*e.key == key,
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
        self.retire_slot(slot);
        self.c.changes.fetch_add(1, Ordering::Relaxed);
        self.append_small(Kind::Tombstone, key, &[], None).await?;
        Ok(true)
    }

    /// Removes every key starting with `prefix` (purge). Persistent: one purge record
    /// is appended. Returns the number of keys removed.
    pub async fn remove_prefix(self: &Arc<Self>, prefix: &[u8]) -> Result<u64, StoreError> {
        self.check_writable()?;
        {
            let mut g = self.load_state.lock().unwrap_or_else(|p| p.into_inner());
            if g.active {
                g.prefixes.push(prefix.into());
            }
        }
        self.c.changes.fetch_add(1, Ordering::Relaxed);
        let mut n = 0;
        for shard in self.shards.iter() {
            let taken: Vec<Slot> = {
                let Ok(mut s) = shard.write() else { continue };
                let hs: Vec<u128> = s
                    .iter()
                    .filter(|(_, v)| match v {
                        Slot::Ready(e) => e.key.starts_with(prefix),
                        Slot::Filling(f) => f.key.starts_with(prefix),
                    })
                    .map(|(h, _)| *h)
                    .collect();
                hs.iter().filter_map(|h| s.remove(h)).collect()
            };
            n += taken.len() as u64;
            for slot in taken {
                self.retire_slot(slot);
            }
        }
        self.append_small(Kind::PurgePrefix, prefix, &[], None).await?;
        Ok(n)
    }

    /// Replaces the metadata blob of the complete object `key` (e.g. after a 304).
    /// Appends a small metadata record aimed at that exact object; returns false if the
    /// key is not stored (or changed meanwhile, or its volume is being reclaimed).
    pub async fn update_meta(
        self: &Arc<Self>,
        key: &[u8],
        meta: Bytes,
    ) -> Result<bool, StoreError> {
        if meta.len() > MAX_META_LEN {
            return Err(StoreError::KeyOrMetaTooLong);
        }
        self.check_writable()?;
        let h = format::key_hash(key);
        let Some(old) = self.ready_entry(h, key) else { return Ok(false) };
        self.append_small(Kind::Meta, key, &meta, Some((old.seq, old.rec_off))).await?;
        let new = Arc::new(Entry {
            key: old.key.clone(),
            meta,
            vol: old.vol,
            seq: old.seq,
            rec_off: old.rec_off,
            body_off: old.body_off,
            body_len: old.body_len,
            span: old.span,
            stored_at: old.stored_at,
            accessed: AtomicBool::new(old.accessed.load(Ordering::Relaxed)),
        });
        let mut shard = self.shard(h).write().map_err(|_| StoreError::Aborted)?;
        match shard.get_mut(&h) {
            // Not while the object's volume is being reclaimed: a second-chance copy
            // taken before this update would come after the update record in the log
            // and bring the old metadata back on restart. The object stays as it was.
            Some(Slot::Ready(e))
                if Arc::ptr_eq(e, &old)
                    && !self.vols[old.vol as usize].reclaiming.load(Ordering::SeqCst) =>
            {
                *e = new;
                self.c.changes.fetch_add(1, Ordering::Relaxed);
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    /// Current counters.
    pub fn stats(&self) -> StoreStats {
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
            bytes_written: c.bytes_written.load(Ordering::Relaxed),
            spill_bytes_written: c.spill_written.load(Ordering::Relaxed),
            recovered: c.recovered.load(Ordering::Relaxed),
            dropped_on_rebuild: c.dropped.load(Ordering::Relaxed),
            uring: self.io.is_uring(),
            index_loading: self.loading.load(Ordering::SeqCst),
            index_load_millis: c.load_millis.load(Ordering::Relaxed),
        }
    }

    fn write_error(&self, e: &std::io::Error) {
        self.c.write_errors.fetch_add(1, Ordering::Relaxed);
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
        tracing::error!(volume = vol.idx, error = %e, "store read failed; quarantining volume");
        self.quarantine(vol);
    }
}

impl Drop for Store {
    /// A clean close writes the checkpoint the next open loads (unless
    /// [`Store::close`] did).
    fn drop(&mut self) {
        if self.closed.load(Ordering::SeqCst) {
            return;
        }
        if let Err(e) = self.checkpoint_with(true) {
            tracing::warn!(error = %e, "store index checkpoint not written at close");
        }
    }
}

fn now_secs() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

#[cfg(test)]
mod tests;
