//! Persistent log-structured segment store read through the page cache.
//!
//! The store owns the bytes of cached objects on one or more disks and an in-memory
//! index over them; what an object *means* (status, headers, freshness) is an opaque metadata blob
//! that the cache layer encodes and the store keeps and returns.
//!
//! - [`Store`]: opened once per process ([`Store::open`]) and shared by all worker
//!   threads (`Arc<Store>`, Send + Sync). Keys are placed over its disks by weighted
//!   rendezvous hashing; a disk with too many I/O errors leaves service and the node
//!   keeps serving from the others (module `store`). Each disk is a `disk::Disk`.
//! - [`Store::lookup`] returns a [`Lookup`]: a complete [`Hit`] or a [`Filling`] handle
//!   for an object still being written. Both hold a lease on their volume, so the bytes
//!   behind [`FileRange`] (for sendfile) are never overwritten while the handle lives.
//! - [`Store::begin_fill`] returns a [`FillWriter`] that streams an origin response in;
//!   [`Store::begin_unstored_fill`] one whose body readers follow but that is not kept.
//! - [`Admission`] (module [`admission`]): the doorkeeper of `second-hit` admission, which
//!   tells the cache whether a fetched object is worth storing.
//!
//! Layout: preallocated volume files, objects appended log-structured with 4 KiB
//! aligned bodies, whole volumes reclaimed FIFO with a second chance for objects read
//! since they were written (`docs/store-format.md`, `docs/store.md`).
//!
//! Reclaim runs on the store's maintenance thread, never inside a fill; so does the
//! scrub, which reads stored bodies back at a bounded rate ([`StoreConfig::scrub_rate`])
//! and removes any whose checksum no longer matches ([`Store::scrub_step`]).
//!
//! I/O: io_uring per worker thread, or an I/O thread pool (module `io`). The async
//! methods return `!Send` futures (they use the calling thread's ring): run them on the
//! worker's current_thread runtime / LocalSet.

#![deny(unsafe_code)]
#![deny(unsafe_op_in_unsafe_fn)]

pub mod admission;
mod disk;
mod format;
#[doc(hidden)]
pub use disk::fuzzing;
// The io_uring submission, the eventfd's registration with tokio and `cachestat(2)`.
#[allow(unsafe_code)]
mod io;
#[cfg(feature = "measure")]
pub mod measure;
mod store;

use std::path::PathBuf;

/// Re-exported: bodies and metadata blobs are passed as `Bytes`.
pub use bytes::Bytes;

pub use admission::{Admission, AdmissionPolicy, AdmissionStats};
pub use disk::{
    Committed, Creation, FileRange, FillStatus, FillWriter, Filling, Hit, Lookup, MAX_KEY_LEN,
    MAX_META_LEN, ScrubProgress, may_create,
};
pub use store::{DiskInfo, DiskState, Store};

/// How the store does file I/O.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum IoMode {
    /// io_uring if the kernel allows it, otherwise the I/O thread pool.
    #[default]
    Auto,
    /// io_uring; [`Store::open`] fails if it is unavailable.
    Uring,
    /// A small pool of I/O threads doing pread/pwrite off the workers.
    Threads,
}

/// Store configuration. `REEL_STORE_IO=threads` in the environment overrides `io`.
#[derive(Clone, Debug)]
pub struct StoreConfig {
    /// The disks, in order (a disk's position is its lane: its I/O and maintenance
    /// threads). At least one.
    pub disks: Vec<DiskConfig>,
    /// Bytes per volume file, a multiple of 4096, at least 1 MiB. Also the upper bound
    /// of one object (minus its header). Typical: 256 MiB to 1 GiB.
    pub volume_size: u64,
    /// I/O backend.
    pub io: IoMode,
    /// I/O errors on one disk that take it out of service; 0 = never.
    pub disk_error_limit: u64,
    /// Bytes per second the background scrub reads back and verifies against the
    /// stored checksums, on each disk; 0 = off. Changed live with
    /// [`Store::set_scrub_rate`].
    pub scrub_rate: u64,
    /// Bytes of memory for the keys and metadata of hot objects, shared out over the
    /// disks; a hit on any other object reads them from its record on disk (usually
    /// from the page cache). 0 = none.
    pub record_cache: u64,
}

/// The default [`StoreConfig::record_cache`]: 64 MiB.
pub const DEFAULT_RECORD_CACHE: u64 = 64 << 20;

impl StoreConfig {
    /// A store of one disk at `path` (created if missing, [`may_create`]) that never leaves service,
    /// without a scrub.
    pub fn single(path: impl Into<PathBuf>, size: u64, volume_size: u64, io: IoMode) -> Self {
        StoreConfig {
            disks: vec![DiskConfig { path: path.into(), size }],
            volume_size,
            io,
            disk_error_limit: 0,
            scrub_rate: 0,
            record_cache: DEFAULT_RECORD_CACHE,
        }
    }
}

/// One disk of the store.
#[derive(Clone, Debug)]
pub struct DiskConfig {
    /// Directory holding the disk's volume files. In a store of one disk it is created
    /// if missing, unless a mount point of `/etc/fstab` on its path is not mounted
    /// ([`may_create`]); with several, a missing directory is a missing disk (point it
    /// inside the mount, so that an unmounted disk is missing rather than filled on the
    /// root file system).
    pub path: PathBuf,
    /// Total bytes of its volume files; never exceeded. `size / volume_size` volumes
    /// are created (at least 2). Keys are spread over the disks in proportion.
    pub size: u64,
}

/// Errors of the store.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The store directory or a volume file cannot be opened or created.
    #[error("cannot open store at {path}: {source}")]
    Open {
        /// The path that failed.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// Another store (another process, PID `pid` when known) has the directory open.
    #[error("store at {path} is in use by another process (pid {pid})")]
    Locked {
        /// The store directory.
        path: PathBuf,
        /// The holder's PID as written in the lock file.
        pid: String,
    },
    /// The store was closed ([`Store::close`]); nothing new is written.
    #[error("store is closed")]
    Closed,
    /// No disk of the store is in service.
    #[error("no store disk is in service")]
    NoDisk,
    /// The configuration is unusable.
    #[error("invalid store configuration: {0}")]
    Config(String),
    /// Another fill for this key is in progress; coalesce onto it via [`Store::lookup`].
    #[error("key is already being filled")]
    AlreadyFilling,
    /// The object does not fit: larger than a volume.
    #[error("object too large for the store ({0} bytes)")]
    TooLarge(u64),
    /// No volume is free right now (reclaim pending or volumes leased); not admitted.
    #[error("no free space in the store")]
    NoSpace,
    /// The key or the metadata blob exceeds its limit.
    #[error("key or metadata too long")]
    KeyOrMetaTooLong,
    /// The body written differs from the announced length.
    #[error("body length mismatch: expected {expected}, got {got}")]
    LengthMismatch {
        /// Announced length.
        expected: u64,
        /// Bytes written (so far).
        got: u64,
    },
    /// The fill was aborted (by its writer, a purge, or an error).
    #[error("fill aborted")]
    Aborted,
    /// The requested range is outside the object (or not yet written).
    #[error("range out of bounds")]
    Range,
    /// The object's volume was quarantined or reclaimed; treat as a miss. From a fill
    /// or a metadata/tombstone/purge write: the volume it was writing into was
    /// quarantined (e.g. its header could not be written), nothing was admitted.
    #[error("object no longer available")]
    Gone,
    /// An I/O error from the disk. Read errors quarantine the volume; write errors
    /// refuse the object.
    #[error("store I/O error: {0}")]
    Io(#[from] std::io::Error),
}

/// Counters and gauges of a store.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StoreStats {
    /// Complete objects in the index.
    pub objects: u64,
    /// Disk bytes (spans including headers and padding) of the indexed objects.
    pub bytes_used: u64,
    /// Total bytes of the volume files (= volumes × volume_size ≤ `size`).
    pub capacity: u64,
    /// Number of volume files.
    pub volumes: u64,
    /// Objects dropped by volume reclaim.
    pub evictions: u64,
    /// Objects re-appended by the second-chance policy.
    pub second_chance: u64,
    /// Volumes reclaimed.
    pub reclaims: u64,
    /// Failed writes (object not admitted).
    pub write_errors: u64,
    /// Failed reads.
    pub read_errors: u64,
    /// Volumes taken out of service after read errors.
    pub quarantined_volumes: u64,
    /// Fills refused for lack of a free volume.
    pub no_space: u64,
    /// Fills of unknown length that could not grow in place and moved to a larger
    /// reservation (copying what they had written).
    pub fill_moves: u64,
    /// Fills delivered whole to their readers but not stored: of unknown length and larger
    /// than a volume, or with no free volume to move to, or begun unstored
    /// ([`Store::begin_unstored_fill`]): see [`Committed::NotStored`].
    pub not_stored: u64,
    /// Fills whose write into their volume failed and that went on in memory, delivered
    /// whole to their readers and not stored (counted in `not_stored` too).
    pub rescued_fills: u64,
    /// Bytes written into the volume files (object records and their headers, second-chance
    /// copies, moves, metadata, tombstone and volume header records; not the checkpoint).
    pub bytes_written: u64,
    /// Bytes written into spill files (bodies delivered but not stored). Unnamed files
    /// that usually vanish before the kernel writes them back.
    pub spill_bytes_written: u64,
    /// Objects recovered by the index load at open.
    pub recovered: u64,
    /// Records dropped by the scan at open (bad header checksum or no valid commit
    /// trailer).
    pub dropped_on_rebuild: u64,
    /// Whether io_uring is the I/O backend.
    pub uring: bool,
    /// Whether the index is still loading after open (lookups of keys not loaded yet
    /// miss).
    pub index_loading: bool,
    /// How long the last index load took, in milliseconds.
    pub index_load_millis: u64,
    /// Bytes the scrub read back (record headers, bodies, trailers).
    pub scrub_bytes: u64,
    /// Objects the scrub verified (good or corrupt).
    pub scrub_objects: u64,
    /// Objects the scrub found corrupt and removed.
    pub scrub_corrupt: u64,
    /// Scrub passes completed over the whole store.
    pub scrub_passes: u64,
    /// Bytes the record cache holds (keys and metadata of hot objects).
    pub record_cache_bytes: u64,
    /// Hits that read their record (key and metadata) from disk: not in the record cache.
    pub record_reads: u64,
}
