//! What one disk holds: the fields of [`Disk`] and its counters ([`Counters`]). Built by
//! `Disk::open` (`disk.rs`); the methods live in the modules that own each job (`shards`,
//! `allocate`, `fill`, `purge`, `rebuild`, `maint`, ...), which import it from here.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize};
use std::sync::{Arc, Condvar, Mutex, RwLock};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use super::index::{Metas, Shard};
use super::load_state::LoadState;
use super::purge_rule::Rule;
use super::records::Records;
use super::scrub_state::Scrub;
use super::volumes::{Alloc, Volume};
use crate::io::Io;

/// The store's counters (see [`StoreStats`](crate::StoreStats)).
#[derive(Default)]
pub(super) struct Counters {
    pub(super) evictions: AtomicU64,
    pub(super) second_chance: AtomicU64,
    pub(super) reclaims: AtomicU64,
    pub(super) write_errors: AtomicU64,
    pub(super) read_errors: AtomicU64,
    pub(super) quarantined: AtomicU64,
    pub(super) no_space: AtomicU64,
    pub(super) fill_moves: AtomicU64,
    pub(super) not_stored: AtomicU64,
    pub(super) rescued: AtomicU64,
    /// Bytes written into volume files, and into spill files.
    pub(super) bytes_written: AtomicU64,
    pub(super) spill_written: AtomicU64,
    pub(super) objects: AtomicU64,
    pub(super) bytes_used: AtomicU64,
    pub(super) recovered: AtomicU64,
    pub(super) dropped: AtomicU64,
    pub(super) last_write_log: AtomicU64,
    /// Bumped by every change of the index that a checkpoint would record.
    pub(super) changes: AtomicU64,
    /// `changes` when the last checkpoint was taken.
    pub(super) checkpointed: AtomicU64,
    /// How long the index load took.
    pub(super) load_millis: AtomicU64,
    /// When (seconds since open) the next periodic checkpoint is due.
    pub(super) checkpoint_due: AtomicU64,
    /// Hits that read their record from disk.
    pub(super) record_reads: AtomicU64,
}

/// One disk of the store. Shared by all workers (`Arc<Disk>`): the index is sharded,
/// the volumes are plain files read with positional I/O.
pub(crate) struct Disk {
    /// The store directory.
    pub(super) path: std::path::PathBuf,
    pub(super) vols: Vec<Arc<Volume>>,
    pub(super) volume_size: u64,
    pub(super) shards: Box<[RwLock<Shard>]>,
    /// Where refreshed objects' newest metadata is, beside each shard.
    pub(super) metas: Box<[Metas]>,
    /// Keys and metadata of hot objects.
    pub(super) records: Records,
    /// Purges by prefix in force, and how many (read without the lock).
    pub(super) purges: RwLock<Vec<Rule>>,
    pub(super) purge_n: AtomicUsize,
    pub(super) alloc: Mutex<Alloc>,
    pub(super) io: Io,
    pub(super) c: Counters,
    pub(super) started: Instant,
    /// Whether the maintenance thread runs [`Disk::maintain`] for this store.
    pub(super) background: AtomicBool,
    /// The first incarnation written since open: everything older is loaded, not live.
    pub(super) open_seq: AtomicU64,
    /// Set until the index is loaded; `load_claimed` once a thread took the load on.
    pub(super) loading: AtomicBool,
    pub(super) load_claimed: AtomicBool,
    pub(super) load_state: Mutex<LoadState>,
    pub(super) load_cv: Condvar,
    pub(super) checkpointing: AtomicBool,
    /// Set by [`Disk::close`] and [`Disk::freeze`]: nothing new is written.
    pub(super) closed: AtomicBool,
    /// The directory's exclusive lock, held while the store lives (given up for a
    /// successor process by [`Disk::release_lock`]).
    pub(super) lock: Mutex<Option<std::fs::File>>,
    /// I/O errors (reads and writes) since open, and how many take the disk out.
    pub(super) errors: AtomicU64,
    pub(super) error_limit: u64,
    /// When the last I/O error was counted: seconds since `started`, plus 1 (0: never).
    pub(super) last_error: AtomicU64,
    /// The disk's position in the store (its maintenance thread and I/O threads).
    pub(super) lane: usize,
    /// Out of service ([`Disk::fail`]): lookups skip it, nothing is written.
    pub(super) failed: AtomicBool,
    /// Why it failed.
    pub(super) fail_reason: Mutex<Option<String>>,
    /// Whether the maintenance thread has dropped the failed disk's index.
    pub(super) index_dropped: AtomicBool,
    /// Called on the maintenance thread once the failed disk's index is dropped.
    pub(super) on_fail: std::sync::OnceLock<Box<dyn Fn() + Send + Sync>>,
    /// The background scrub's rate, position and counters.
    pub(super) scrub: Scrub,
}

/// Seconds since the Unix epoch (0 if the clock is before it).
pub(super) fn now_secs() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}
