//! The store proper: volumes, the sharded index, allocation, fills, reclaim and the
//! rebuild scan.
//!
//! Index: 64 shards, each a `std::sync::RwLock<HashMap<u128, Slot>>` keyed by the xxh3-128
//! of the key. Lookups take one shard's read lock for a hash probe and an `Arc` clone,
//! so workers on different cores only meet when they hit the same shard, and then only
//! as readers; the hash already is uniformly distributed, so shard choice and the map's
//! hasher just take bits of it. A concurrent map crate would save little over this and
//! add a dependency. Writers (commit, reclaim, purge) take one shard's write lock at a
//! time and never across an await.
//!
//! Allocation is a single `Mutex<Alloc>` (write path only): a head offset in the active
//! volume plus FIFO queues of sealed, free and draining volumes.

use std::collections::{HashMap, VecDeque};
use std::fs::{File, OpenOptions};
use std::hash::{BuildHasherDefault, Hasher};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use tokio::sync::watch;

use crate::format::{
    self, ALIGN, Kind, LEN_UNKNOWN, RECORD_FIXED_LEN, TRAILER_LEN, VOLUME_HEADER_LEN, VolumeHeader,
};
use crate::io::{self, Io};
use crate::{StoreConfig, StoreError, StoreStats};

pub use crate::format::{MAX_KEY_LEN, MAX_META_LEN};

const SHARDS: usize = 64;
/// First reservation of a fill whose length is unknown (at most 1/16 of a volume); it
/// grows in place while the fill is the last allocation of its volume.
const UNKNOWN_INITIAL: u64 = 1 << 20;
/// Error logs on the write path are rate-limited to one per this many seconds.
const LOG_INTERVAL_SECS: u64 = 10;

// === Index ===

/// A hasher for keys that already are 128-bit hashes.
#[derive(Default)]
struct PassHasher(u64);

impl Hasher for PassHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }
    fn write_u128(&mut self, i: u128) {
        self.0 = i as u64;
    }
}

type Shard = HashMap<u128, Slot, BuildHasherDefault<PassHasher>>;

enum Slot {
    Ready(Arc<Entry>),
    Filling(Arc<FillShared>),
}

/// Where a complete object lives. Shared between the index and hit handles.
struct Entry {
    key: Box<[u8]>,
    meta: Bytes,
    vol: u32,
    seq: u64,
    rec_off: u64,
    body_off: u64,
    body_len: u64,
    span: u64,
    stored_at: u64,
    /// Read since written: earns a second chance at reclaim.
    accessed: AtomicBool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum FillState {
    Open,
    Committed,
    Aborted,
}

#[derive(Clone, Copy, Debug)]
struct Progress {
    written: u64,
    state: FillState,
}

/// State of an in-progress fill shared with readers on any thread.
struct FillShared {
    key: Box<[u8]>,
    meta: Bytes,
    vol: Arc<Volume>,
    seq: u64,
    body_off: u64,
    stored_at: u64,
    expected: Option<u64>,
    progress: watch::Sender<Progress>,
    purged: AtomicBool,
    /// The complete object this fill replaces; restored if the fill is aborted.
    replaced: Mutex<Option<Arc<Entry>>>,
}

// === Volumes ===

/// One preallocated volume file. Shared by all workers.
struct Volume {
    idx: u32,
    file: Arc<File>,
    /// Current incarnation; 0 while free. Entries remember the incarnation they were
    /// written in, so a reused volume never serves stale entries.
    seq: AtomicU64,
    leases: AtomicU64,
    writers: AtomicU32,
    quarantined: AtomicBool,
    /// Hashes of objects committed into this incarnation (for reclaim).
    objects: Mutex<Vec<u128>>,
}

#[derive(Default)]
struct Alloc {
    active: Option<u32>,
    head: u64,
    sealed: VecDeque<u32>,
    free: VecDeque<u32>,
    draining: Vec<u32>,
    next_seq: u64,
    reclaim_running: bool,
    /// Volume headers to write (new incarnations) before more data goes in.
    pending_headers: Vec<(u32, u64)>,
}

/// A lease on a volume: while it lives the volume is not reused.
struct Lease(Arc<Volume>);

impl Lease {
    fn acquire(vol: &Arc<Volume>, seq: u64) -> Option<Lease> {
        vol.leases.fetch_add(1, Ordering::SeqCst);
        let l = Lease(vol.clone());
        if vol.seq.load(Ordering::SeqCst) != seq || vol.quarantined.load(Ordering::SeqCst) {
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

#[derive(Default)]
struct Counters {
    evictions: AtomicU64,
    second_chance: AtomicU64,
    reclaims: AtomicU64,
    write_errors: AtomicU64,
    read_errors: AtomicU64,
    quarantined: AtomicU64,
    no_space: AtomicU64,
    objects: AtomicU64,
    bytes_used: AtomicU64,
    recovered: AtomicU64,
    dropped: AtomicU64,
    last_write_log: AtomicU64,
}

// === Public types ===

/// The segment store. Shared by all workers (`Arc<Store>`): the index is sharded, the
/// volumes are plain files read with positional I/O.
pub struct Store {
    vols: Vec<Arc<Volume>>,
    volume_size: u64,
    shards: Box<[RwLock<Shard>]>,
    alloc: Mutex<Alloc>,
    io: Io,
    c: Counters,
    started: Instant,
    /// Set while this process must not write the store (see [`Store::freeze`]).
    frozen: AtomicBool,
}

/// Result of [`Store::lookup`].
pub enum Lookup {
    /// A complete object.
    Hit(Hit),
    /// An object still being written by a [`FillWriter`].
    Filling(Filling),
}

/// A complete object. Holds a lease: the volume is not reused while the handle lives.
pub struct Hit {
    entry: Arc<Entry>,
    lease: Lease,
    store: Arc<Store>,
}

/// An object being filled; readable up to what has been written so far.
pub struct Filling {
    shared: Arc<FillShared>,
    rx: watch::Receiver<Progress>,
    lease: Lease,
    store: Arc<Store>,
}

/// Progress of a fill as seen by a reader.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FillStatus {
    /// Body bytes written and readable from the file (page cache).
    pub available: u64,
    /// The final body length, once the fill committed.
    pub final_len: Option<u64>,
}

/// A byte range of a volume file, for sendfile. Valid while the handle it came from
/// (and its lease) lives.
#[derive(Clone, Copy, Debug)]
pub struct FileRange<'a> {
    /// The volume file.
    pub fd: BorrowedFd<'a>,
    /// Absolute offset in the file.
    pub offset: u64,
    /// Length in bytes.
    pub len: u64,
}

/// Writes one object. Dropping it without [`FillWriter::commit`] aborts the fill.
pub struct FillWriter {
    store: Arc<Store>,
    shared: Arc<FillShared>,
    hash: u128,
    kind_header_len: u64,
    rec_off: u64,
    reserved_end: u64,
    written: u64,
    crc: u32,
    header_crc: u32,
    header_on_disk: bool,
    /// Internal copies are not in the index while written.
    internal: bool,
    done: bool,
}

// === impl Store ===

impl Store {
    /// Opens (creating and preallocating if needed) the store and rebuilds the index by
    /// scanning the volumes. Blocking; call at start-up before serving.
    pub fn open(cfg: StoreConfig) -> Result<Arc<Store>, StoreError> {
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
            vols.push(Arc::new(Volume {
                idx: i,
                file: Arc::new(f),
                seq: AtomicU64::new(0),
                leases: AtomicU64::new(0),
                writers: AtomicU32::new(0),
                quarantined: AtomicBool::new(false),
                objects: Mutex::new(Vec::new()),
            }));
        }
        let store = Store {
            vols,
            volume_size: vs,
            shards: (0..SHARDS).map(|_| RwLock::new(Shard::default())).collect(),
            alloc: Mutex::new(Alloc::default()),
            io,
            c: Counters::default(),
            started: Instant::now(),
            frozen: AtomicBool::new(false),
        };
        store.rebuild().map_err(|e| open_err(&cfg.path, e))?;
        Ok(Arc::new(store))
    }

    /// Whether `key` is stored or being filled. Unlike [`Store::lookup`] it takes no
    /// lease and does not count as a read (no second chance at reclaim).
    pub fn contains(&self, key: &[u8]) -> bool {
        let h = format::key_hash(key);
        let Ok(shard) = self.shard(h).read() else { return false };
        match shard.get(&h) {
            Some(Slot::Ready(e)) => &*e.key == key,
            Some(Slot::Filling(f)) => &*f.key == key,
            None => false,
        }
    }

    /// Looks up `key`. `None` is a miss.
    pub fn lookup(self: &Arc<Self>, key: &[u8]) -> Option<Lookup> {
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
                let lease = Lease::acquire(&shared.vol, shared.seq)?;
                let rx = shared.progress.subscribe();
                Some(Lookup::Filling(Filling { shared, rx, lease, store: self.clone() }))
            }
        }
    }

    /// Starts writing `key` with its metadata blob. `expected_len` is the body length
    /// if known (Content-Length). An existing complete object for the key is replaced
    /// (it stops being served now). Fails with [`StoreError::AlreadyFilling`] if a
    /// fill for the key is in progress.
    pub async fn begin_fill(
        self: &Arc<Self>,
        key: &[u8],
        meta: Bytes,
        expected_len: Option<u64>,
    ) -> Result<FillWriter, StoreError> {
        if key.len() > MAX_KEY_LEN || meta.len() > MAX_META_LEN {
            return Err(StoreError::KeyOrMetaTooLong);
        }
        self.check_writable()?;
        self.maintain().await;
        let h = format::key_hash(key);
        if let Ok(s) = self.shard(h).read()
            && matches!(s.get(&h), Some(Slot::Filling(_)))
        {
            return Err(StoreError::AlreadyFilling);
        }
        let w = self.start_writer(key, meta, expected_len, now_secs(), false)?;
        let mut shard = self.shard(h).write().map_err(|_| StoreError::Aborted)?;
        if matches!(shard.get(&h), Some(Slot::Filling(_))) {
            drop(shard);
            drop(w);
            return Err(StoreError::AlreadyFilling);
        }
        if let Some(Slot::Ready(old)) = shard.insert(h, Slot::Filling(w.shared.clone())) {
            self.uncount(&old);
            *w.shared.replaced.lock().unwrap_or_else(|p| p.into_inner()) = Some(old);
        }
        Ok(w)
    }

    /// Removes `key` (complete or filling). Persistent: a tombstone is appended.
    pub async fn remove(self: &Arc<Self>, key: &[u8]) -> Result<bool, StoreError> {
        // Before the index changes: a removal whose tombstone cannot be written would
        // come back at the next start.
        self.check_writable()?;
        let h = format::key_hash(key);
        let removed = {
            let mut shard = self.shard(h).write().map_err(|_| StoreError::Aborted)?;
            let matches = match shard.get(&h) {
                Some(Slot::Ready(e)) => &*e.key == key,
                Some(Slot::Filling(f)) => &*f.key == key,
                None => false,
            };
            if matches { shard.remove(&h) } else { None }
        };
        let Some(slot) = removed else { return Ok(false) };
        self.retire_slot(slot);
        self.maintain().await;
        self.append_small(Kind::Tombstone, key, &[], None).await?;
        Ok(true)
    }

    /// Removes every key starting with `prefix` (purge). Persistent: one purge record
    /// is appended. Returns the number of keys removed.
    pub async fn remove_prefix(self: &Arc<Self>, prefix: &[u8]) -> Result<u64, StoreError> {
        self.check_writable()?;
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
        self.maintain().await;
        self.append_small(Kind::PurgePrefix, prefix, &[], None).await?;
        Ok(n)
    }

    /// Replaces the metadata blob of the complete object `key` (e.g. after a 304).
    /// Appends a small metadata record aimed at that exact object; returns false if the
    /// key is not stored (or changed meanwhile).
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
            Some(Slot::Ready(e)) if Arc::ptr_eq(e, &old) => {
                *e = new;
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
            recovered: c.recovered.load(Ordering::Relaxed),
            dropped_on_rebuild: c.dropped.load(Ordering::Relaxed),
            uring: self.io.is_uring(),
        }
    }

    /// Runs pending background work (volume headers, a due reclaim) on the calling
    /// worker. [`Store::begin_fill`] calls it; idle workers may call it too.
    pub async fn maintain(self: &Arc<Self>) {
        if self.is_frozen() {
            return;
        }
        self.write_pending_headers().await;
        let victim = {
            let mut a = self.lock_alloc();
            self.promote_drained(&mut a);
            if a.reclaim_running || !a.free.is_empty() {
                None
            } else {
                match a.sealed.front() {
                    Some(&v) if self.vols[v as usize].writers.load(Ordering::SeqCst) == 0 => {
                        a.sealed.pop_front();
                        a.reclaim_running = true;
                        Some(v)
                    }
                    _ => None,
                }
            }
        };
        if let Some(v) = victim {
            self.reclaim(v).await;
            let mut a = self.lock_alloc();
            a.reclaim_running = false;
        }
    }

    // --- internals ---

    fn shard(&self, h: u128) -> &RwLock<Shard> {
        &self.shards[((h >> 64) as usize) % SHARDS]
    }

    fn lock_alloc(&self) -> MutexGuard<'_, Alloc> {
        self.alloc.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn ready_entry(&self, h: u128, key: &[u8]) -> Option<Arc<Entry>> {
        match self.shard(h).read().ok()?.get(&h)? {
            Slot::Ready(e) if &*e.key == key => Some(e.clone()),
            _ => None,
        }
    }

    fn uncount(&self, e: &Entry) {
        self.c.objects.fetch_sub(1, Ordering::Relaxed);
        self.c.bytes_used.fetch_sub(e.span, Ordering::Relaxed);
    }

    fn retire_slot(&self, slot: Slot) {
        match slot {
            Slot::Ready(e) => self.uncount(&e),
            Slot::Filling(f) => {
                f.purged.store(true, Ordering::SeqCst);
                f.progress.send_modify(|p| p.state = FillState::Aborted);
            }
        }
    }

    fn promote_drained(&self, a: &mut Alloc) {
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
    fn allocate(
        &self,
        span: u64,
        min_room: u64,
        a: &mut Alloc,
    ) -> Result<(u32, u64, u64), StoreError> {
        if span > self.volume_size - VOLUME_HEADER_LEN {
            return Err(StoreError::TooLarge(span));
        }
        // Checked under the allocation lock `freeze` takes: once it returned, no write
        // starts, so `writes_in_progress` only goes down.
        self.check_writable()?;
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
            let Some(n) = a.free.pop_front() else {
                self.c.no_space.fetch_add(1, Ordering::Relaxed);
                return Err(StoreError::NoSpace);
            };
            if let Some(old) = a.active.take()
                && !self.vols[old as usize].quarantined.load(Ordering::SeqCst)
            {
                a.sealed.push_back(old);
            }
            let seq = a.next_seq;
            a.next_seq += 1;
            self.vols[n as usize].seq.store(seq, Ordering::SeqCst);
            a.active = Some(n);
            a.head = VOLUME_HEADER_LEN;
            a.pending_headers.push((n, seq));
        }
    }

    async fn write_pending_headers(&self) {
        let pending = std::mem::take(&mut self.lock_alloc().pending_headers);
        for (v, seq) in pending {
            let vol = &self.vols[v as usize];
            let hdr = VolumeHeader { index: v, volume_size: self.volume_size, seq }.encode();
            if let Err(e) = self.io.write_all_at(&vol.file, Bytes::from(hdr), 0).await {
                self.write_error(&e);
                self.quarantine(vol);
            }
        }
    }

    fn start_writer(
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
        let (tx, _) = watch::channel(Progress { written: 0, state: FillState::Open });
        let shared = Arc::new(FillShared {
            key: key.into(),
            meta,
            vol,
            seq,
            body_off: off + format::body_rel(Kind::Object, header_len),
            stored_at,
            expected,
            progress: tx,
            purged: AtomicBool::new(false),
            replaced: Mutex::new(None),
        });
        Ok(FillWriter {
            store: self.clone(),
            hash: format::key_hash(key),
            shared,
            kind_header_len: header_len,
            rec_off: off,
            reserved_end: off + span,
            written: 0,
            crc: 0,
            header_crc: 0,
            header_on_disk: false,
            internal,
            done: false,
        })
    }

    /// Appends a metadata, tombstone or purge record.
    async fn append_small(
        &self,
        kind: Kind,
        key: &[u8],
        meta: &[u8],
        target: Option<(u64, u64)>,
    ) -> Result<(), StoreError> {
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
        let (v, seq, off) = loop {
            let (v, seq, off) = {
                let mut a = self.lock_alloc();
                self.allocate(span, 0, &mut a)?
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
        let r = self.io.write_all_at(&vol.file, Bytes::from(rec), off).await;
        vol.writers.fetch_sub(1, Ordering::SeqCst);
        r.map_err(|e| {
            self.write_error(&e);
            StoreError::Io(e)
        })
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

    /// Takes a volume out of service and drops its objects from the index.
    fn quarantine(&self, vol: &Volume) {
        if vol.quarantined.swap(true, Ordering::SeqCst) {
            return;
        }
        self.c.quarantined.fetch_add(1, Ordering::Relaxed);
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
    }

    fn drop_volume_entries(&self, vol: &Volume, seq: u64) -> u64 {
        let hashes = std::mem::take(&mut *vol.objects.lock().unwrap_or_else(|p| p.into_inner()));
        let mut n = 0;
        for h in hashes {
            let Ok(mut s) = self.shard(h).write() else { continue };
            if let Some(Slot::Ready(e)) = s.get(&h)
                && e.vol == vol.idx
                && e.seq == seq
                && let Some(Slot::Ready(e)) = s.remove(&h)
            {
                self.uncount(&e);
                n += 1;
            }
        }
        n
    }

    /// Reclaims volume `v` (already taken off the sealed queue): objects read since
    /// they were written are re-appended (up to half a volume), the rest dropped; the
    /// volume is invalidated on disk and becomes free once no lease holds it.
    async fn reclaim(self: &Arc<Self>, v: u32) {
        let vol = self.vols[v as usize].clone();
        let seq = vol.seq.load(Ordering::SeqCst);
        let hashes: Vec<u128> = vol.objects.lock().map(|o| o.clone()).unwrap_or_default();
        let mut budget = (self.volume_size - VOLUME_HEADER_LEN) / 2;
        let mut keep = Vec::new();
        for h in hashes {
            let e = match self.shard(h).read().ok().as_deref().and_then(|s| s.get(&h)) {
                Some(Slot::Ready(e)) if e.vol == v && e.seq == seq => e.clone(),
                _ => continue,
            };
            if e.accessed.load(Ordering::Relaxed) && e.span <= budget {
                budget -= e.span;
                keep.push(e);
            }
        }
        for e in keep {
            if self.copy_entry(&vol, &e).await.is_ok() {
                self.c.second_chance.fetch_add(1, Ordering::Relaxed);
            }
        }
        let dropped = self.drop_volume_entries(&vol, seq);
        self.c.evictions.fetch_add(dropped, Ordering::Relaxed);
        self.c.reclaims.fetch_add(1, Ordering::Relaxed);
        vol.seq.store(0, Ordering::SeqCst);
        let hdr = VolumeHeader { index: v, volume_size: self.volume_size, seq: 0 }.encode();
        if let Err(e) = self.io.write_all_at(&vol.file, Bytes::from(hdr), 0).await {
            self.write_error(&e);
            self.quarantine(&vol);
            return;
        }
        let mut a = self.lock_alloc();
        if vol.leases.load(Ordering::SeqCst) == 0 {
            a.free.push_back(v);
        } else {
            a.draining.push(v);
        }
    }

    /// Re-appends one object (second chance) and repoints the index if it still names
    /// the old copy.
    async fn copy_entry(
        self: &Arc<Self>,
        vol: &Arc<Volume>,
        e: &Arc<Entry>,
    ) -> Result<(), StoreError> {
        let body = match self.io.read_exact_at(&vol.file, e.body_len as usize, e.body_off).await {
            Ok(b) => b,
            Err(err) => {
                self.read_error(vol, &err);
                return Err(err.into());
            }
        };
        let mut w =
            self.start_writer(&e.key, e.meta.clone(), Some(e.body_len), e.stored_at, true)?;
        w.append(Bytes::from(body)).await?;
        let new = w.finish().await?;
        let h = format::key_hash(&e.key);
        let replaced = {
            let mut s = self.shard(h).write().map_err(|_| StoreError::Aborted)?;
            match s.get_mut(&h) {
                Some(Slot::Ready(cur)) if Arc::ptr_eq(cur, e) => {
                    self.c.bytes_used.fetch_add(new.span, Ordering::Relaxed);
                    self.c.bytes_used.fetch_sub(e.span, Ordering::Relaxed);
                    *cur = new.clone();
                    true
                }
                _ => false,
            }
        };
        if replaced {
            self.vols[new.vol as usize].objects.lock().unwrap_or_else(|p| p.into_inner()).push(h);
            Ok(())
        } else {
            // The key changed while we copied: neutralise the copy on disk so a
            // rebuild does not resurrect it.
            self.append_small(Kind::Tombstone, &e.key, &[], Some((new.seq, new.rec_off))).await?;
            Err(StoreError::Aborted)
        }
    }

    // --- rebuild ---

    fn rebuild(&self) -> std::io::Result<()> {
        // Scan volumes in parallel on the I/O pool (its threads never exit).
        let (tx, rx) = std::sync::mpsc::channel();
        let vs = self.volume_size;
        let pool = io::pool().ok();
        for vol in &self.vols {
            let (file, idx, tx) = (vol.file.clone(), vol.idx, tx.clone());
            let job = move || {
                let _ = tx.send(scan_volume(&file, idx, vs));
            };
            match pool {
                Some(p) if p.spawn(job.clone()) => {}
                _ => job(),
            }
        }
        drop(tx);
        let mut results: Vec<(u32, u64, ScanResult)> = rx.iter().collect();
        if results.len() != self.vols.len() {
            return Err(std::io::Error::other("volume scan did not complete"));
        }
        results.sort_by_key(|r| r.1);
        let mut index: HashMap<u128, Entry> = HashMap::new();
        let mut a = self.lock_alloc();
        let mut dropped = 0;
        for (v, seq, scan) in &results {
            dropped += scan.dropped;
            if *seq == 0 {
                a.free.push_back(*v);
                continue;
            }
            self.vols[*v as usize].seq.store(*seq, Ordering::SeqCst);
            a.next_seq = a.next_seq.max(seq + 1);
            a.sealed.push_back(*v);
            for r in &scan.records {
                apply_record(&mut index, *v, *seq, r);
            }
        }
        a.next_seq = a.next_seq.max(1);
        let mut objects = 0;
        let mut bytes = 0;
        for (h, e) in index {
            objects += 1;
            bytes += e.span;
            self.vols[e.vol as usize].objects.lock().unwrap_or_else(|p| p.into_inner()).push(h);
            if let Ok(mut s) = self.shard(h).write() {
                s.insert(h, Slot::Ready(Arc::new(e)));
            }
        }
        self.c.objects.store(objects, Ordering::Relaxed);
        self.c.bytes_used.store(bytes, Ordering::Relaxed);
        self.c.recovered.store(objects, Ordering::Relaxed);
        self.c.dropped.store(dropped, Ordering::Relaxed);
        // Keep a free volume so the first fill never waits for a reclaim: drop the
        // oldest volume outright (no second chance at start-up).
        if a.free.is_empty()
            && let Some(v) = a.sealed.pop_front()
        {
            let vol = &self.vols[v as usize];
            let seq = vol.seq.load(Ordering::SeqCst);
            drop(a);
            let n = self.drop_volume_entries(vol, seq);
            self.c.evictions.fetch_add(n, Ordering::Relaxed);
            vol.seq.store(0, Ordering::SeqCst);
            let hdr = VolumeHeader { index: v, volume_size: self.volume_size, seq: 0 }.encode();
            vol.file.write_all_at(&hdr, 0)?;
            self.lock_alloc().free.push_back(v);
        }
        tracing::info!(objects, dropped, "store index rebuilt");
        Ok(())
    }
}

fn now_secs() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

fn preallocate(f: &File, size: u64) -> std::io::Result<()> {
    let cur = f.metadata()?.len();
    if cur > size {
        return Err(std::io::Error::other(format!(
            "volume file is {cur} bytes, larger than volume_size {size}"
        )));
    }
    // SAFETY: fallocate on a descriptor we own; no memory is passed.
    let r = unsafe { libc::fallocate(f.as_raw_fd(), 0, 0, size as libc::off_t) };
    if r != 0 {
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EOPNOTSUPP) {
            return Err(e);
        }
        f.set_len(size)?;
    }
    Ok(())
}

// === Rebuild scan ===

struct ScannedRecord {
    kind: Kind,
    key: Box<[u8]>,
    meta: Bytes,
    rec_off: u64,
    body_off: u64,
    body_len: u64,
    span: u64,
    stored_at: u64,
    target: Option<(u64, u64)>,
}

#[derive(Default)]
struct ScanResult {
    records: Vec<ScannedRecord>,
    dropped: u64,
}

/// Scans one volume. Returns (volume, incarnation, records); incarnation 0 = empty.
fn scan_volume(file: &File, idx: u32, volume_size: u64) -> (u32, u64, ScanResult) {
    let mut res = ScanResult::default();
    let mut hdr = vec![0u8; VOLUME_HEADER_LEN as usize];
    let seq = match file.read_exact_at(&mut hdr, 0).ok().and_then(|_| VolumeHeader::decode(&hdr)) {
        Some(h) if h.index == idx && h.volume_size == volume_size => h.seq,
        _ => 0,
    };
    if seq == 0 {
        return (idx, 0, res);
    }
    let mut off = VOLUME_HEADER_LEN;
    let mut fixed = [0u8; RECORD_FIXED_LEN];
    let mut buf = vec![0u8; 1 << 20];
    while off + ALIGN <= volume_size {
        if file.read_exact_at(&mut fixed, off).is_err() {
            break;
        }
        let Some(h) = format::decode_record_fixed(&fixed, seq) else { break };
        if off + h.span > volume_size {
            break;
        }
        let mut full = vec![0u8; h.header_len() as usize];
        if file.read_exact_at(&mut full, off).is_err() || !format::verify_header_crc(&h, &full) {
            break;
        }
        let next = off + h.span;
        if h.body_len == LEN_UNKNOWN {
            res.dropped += 1;
            off = next;
            continue;
        }
        let body_off = off + h.body_rel();
        let mut t = [0u8; TRAILER_LEN];
        let valid = file.read_exact_at(&mut t, body_off + h.body_len).is_ok()
            && match format::decode_trailer(&t, seq, h.body_len, h.header_crc) {
                Some(want) => {
                    let mut crc = 0u32;
                    let mut pos = 0u64;
                    let mut ok = true;
                    while pos < h.body_len {
                        let n = (h.body_len - pos).min(buf.len() as u64) as usize;
                        if file.read_exact_at(&mut buf[..n], body_off + pos).is_err() {
                            ok = false;
                            break;
                        }
                        crc = crc32c::crc32c_append(crc, &buf[..n]);
                        pos += n as u64;
                    }
                    ok && crc == want
                }
                None => false,
            };
        if !valid {
            res.dropped += 1;
            off = next;
            continue;
        }
        let k0 = RECORD_FIXED_LEN;
        let k1 = k0 + h.key_len as usize;
        let mut t16 = [0u8; 16];
        let target = if h.kind != Kind::Object
            && h.body_len == 16
            && file.read_exact_at(&mut t16, body_off).is_ok()
        {
            let mut s = [0u8; 8];
            let mut o = [0u8; 8];
            s.copy_from_slice(&t16[..8]);
            o.copy_from_slice(&t16[8..]);
            Some((u64::from_le_bytes(s), u64::from_le_bytes(o)))
        } else {
            None
        };
        res.records.push(ScannedRecord {
            kind: h.kind,
            key: full[k0..k1].into(),
            meta: Bytes::copy_from_slice(&full[k1..]),
            rec_off: off,
            body_off,
            body_len: h.body_len,
            span: h.span,
            stored_at: h.stored_at,
            target,
        });
        off = next;
    }
    (idx, seq, res)
}

/// Replays one record onto the index being rebuilt, in log order.
fn apply_record(index: &mut HashMap<u128, Entry>, v: u32, seq: u64, r: &ScannedRecord) {
    let h = format::key_hash(&r.key);
    match r.kind {
        Kind::Object => {
            index.insert(
                h,
                Entry {
                    key: r.key.clone(),
                    meta: r.meta.clone(),
                    vol: v,
                    seq,
                    rec_off: r.rec_off,
                    body_off: r.body_off,
                    body_len: r.body_len,
                    span: r.span,
                    stored_at: r.stored_at,
                    accessed: AtomicBool::new(false),
                },
            );
        }
        Kind::Meta => {
            if let Some(e) = index.get_mut(&h)
                && r.target == Some((e.seq, e.rec_off))
                && e.key == r.key
            {
                e.meta = r.meta.clone();
            }
        }
        Kind::Tombstone => {
            if let Some(e) = index.get(&h)
                && e.key == r.key
                && r.target.is_none_or(|t| t == (e.seq, e.rec_off))
            {
                index.remove(&h);
            }
        }
        Kind::PurgePrefix => index.retain(|_, e| !e.key.starts_with(&r.key)),
    }
}

// === impl Hit ===

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
        range(&self.lease.0, self.entry.body_off, self.entry.body_len, offset, len)
    }

    /// Whether body bytes `offset..offset + len` are in the page cache (then sendfile
    /// will not block on disk). Probed with preadv2(RWF_NOWAIT).
    pub fn is_resident(&self, offset: u64, len: u64) -> bool {
        self.file_range(offset, len)
            .is_ok_and(|r| io::is_resident(r.fd.as_raw_fd(), r.offset, r.len))
    }

    /// Reads body bytes `offset..offset + len`: straight from the page cache when
    /// resident, otherwise through the worker's ring (or the I/O threads). A read error
    /// quarantines the volume.
    pub async fn read(&self, offset: u64, len: u64) -> Result<Bytes, StoreError> {
        self.file_range(offset, len)?;
        read_body(&self.store, &self.lease.0, self.entry.body_off + offset, len).await
    }
}

// === impl Filling ===

impl Filling {
    /// The key being filled.
    pub fn key(&self) -> &[u8] {
        &self.shared.key
    }

    /// The metadata blob given to [`Store::begin_fill`].
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
        let avail = self.status()?.available;
        range(&self.lease.0, self.shared.body_off, avail, offset, len)
    }

    /// Whether the given written range is in the page cache.
    pub fn is_resident(&self, offset: u64, len: u64) -> bool {
        self.file_range(offset, len)
            .is_ok_and(|r| io::is_resident(r.fd.as_raw_fd(), r.offset, r.len))
    }

    /// Reads already-written body bytes.
    pub async fn read(&self, offset: u64, len: u64) -> Result<Bytes, StoreError> {
        self.file_range(offset, len)?;
        read_body(&self.store, &self.lease.0, self.shared.body_off + offset, len).await
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
    vol: &Volume,
    body_off: u64,
    avail: u64,
    offset: u64,
    len: u64,
) -> Result<FileRange<'_>, StoreError> {
    match offset.checked_add(len) {
        Some(end) if end <= avail => {
            Ok(FileRange { fd: vol.file.as_fd(), offset: body_off + offset, len })
        }
        _ => Err(StoreError::Range),
    }
}

async fn read_body(store: &Store, vol: &Volume, off: u64, len: u64) -> Result<Bytes, StoreError> {
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

// === impl FillWriter ===

impl FillWriter {
    /// Body bytes written so far.
    pub fn written(&self) -> u64 {
        self.written
    }

    /// Appends the next chunk of the body. Readers are woken once it is in the file.
    /// On error the fill is aborted.
    pub async fn append(&mut self, data: Bytes) -> Result<(), StoreError> {
        match self.append_inner(data).await {
            Ok(()) => Ok(()),
            Err(e) => {
                self.abort();
                Err(e)
            }
        }
    }

    /// Completes the object: writes the final header and the commit marker, then makes
    /// it visible to lookups as a complete [`Hit`].
    pub async fn commit(mut self) -> Result<(), StoreError> {
        let entry = match self.finish().await {
            Ok(e) => e,
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
        store.c.bytes_used.fetch_add(entry.span, Ordering::Relaxed);
        shard.insert(self.hash, Slot::Ready(entry));
        drop(shard);
        self.shared.vol.objects.lock().unwrap_or_else(|p| p.into_inner()).push(self.hash);
        if self.shared.vol.quarantined.load(Ordering::SeqCst) {
            // Quarantined since `finish`: if the quarantine took the volume's object
            // list before our push, it missed this entry; drop it here instead.
            store.drop_volume_entries(&self.shared.vol, self.shared.seq);
            self.shared.progress.send_modify(|p| p.state = FillState::Aborted);
            return Err(StoreError::Gone);
        }
        self.shared.progress.send_modify(|p| p.state = FillState::Committed);
        Ok(())
    }

    /// Discards the object: readers get [`StoreError::Aborted`], the key is a miss
    /// again. Also done on drop without commit.
    pub fn abort(&mut self) {
        if self.done {
            return;
        }
        self.done = true;
        self.shared.progress.send_modify(|p| p.state = FillState::Aborted);
        if !self.internal
            && let Ok(mut s) = self.store.shard(self.hash).write()
            && matches!(s.get(&self.hash), Some(Slot::Filling(f)) if Arc::ptr_eq(f, &self.shared))
        {
            let old = self.shared.replaced.lock().unwrap_or_else(|p| p.into_inner()).take();
            match old {
                Some(old) => {
                    self.store.c.objects.fetch_add(1, Ordering::Relaxed);
                    self.store.c.bytes_used.fetch_add(old.span, Ordering::Relaxed);
                    s.insert(self.hash, Slot::Ready(old));
                }
                None => {
                    s.remove(&self.hash);
                }
            }
        }
        let mut a = self.store.lock_alloc();
        // Nothing of ours reached the disk: give the space back. Once a header is
        // written the space stays a hole until its volume is reclaimed, so a scan
        // never lands inside another record.
        if !self.header_on_disk
            && a.active == Some(self.shared.vol.idx)
            && a.head == self.reserved_end
        {
            a.head = self.rec_off;
        }
        self.shared.vol.writers.fetch_sub(1, Ordering::SeqCst);
    }

    async fn write_header(&mut self, body_len: u64, span: u64) -> Result<(), StoreError> {
        let (hdr, crc) = format::encode_record_header(
            Kind::Object,
            self.shared.seq,
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

    async fn write(&self, data: Bytes, off: u64) -> Result<(), StoreError> {
        // A quarantined volume (its header could not be written, or a read failed) is
        // out of service: nothing in it is served, and without its header a restart
        // would not find the record either. Fail the fill instead of admitting it.
        if self.shared.vol.quarantined.load(Ordering::SeqCst) {
            return Err(StoreError::Gone);
        }
        self.store.io.write_all_at(&self.shared.vol.file, data, off).await.map_err(|e| {
            self.store.write_error(&e);
            StoreError::Io(e)
        })
    }

    async fn append_inner(&mut self, data: Bytes) -> Result<(), StoreError> {
        if self.done || self.shared.purged.load(Ordering::SeqCst) {
            return Err(StoreError::Aborted);
        }
        let n = data.len() as u64;
        let total = self.written + n;
        if let Some(exp) = self.shared.expected
            && total > exp
        {
            return Err(StoreError::LengthMismatch { expected: exp, got: total });
        }
        if !self.header_on_disk {
            let body_len = self.shared.expected.unwrap_or(LEN_UNKNOWN);
            self.write_header(body_len, self.reserved_end - self.rec_off).await?;
        }
        let need = self.shared.body_off + total + TRAILER_LEN as u64;
        if need > self.reserved_end {
            self.grow(need).await?;
        }
        self.write(data.clone(), self.shared.body_off + self.written).await?;
        self.crc = crc32c::crc32c_append(self.crc, &data);
        self.written = total;
        self.shared.progress.send_modify(|p| p.written = total);
        Ok(())
    }

    /// Extends the reservation of a fill of unknown length in place; only possible
    /// while it is the last allocation of the active volume.
    async fn grow(&mut self, need: u64) -> Result<(), StoreError> {
        let vs = self.store.volume_size;
        {
            let mut a = self.store.lock_alloc();
            let cur = self.reserved_end - self.rec_off;
            let want = format::align_up((need - self.rec_off).max(cur * 2));
            let new_end = (self.rec_off + want).min(vs);
            if need > vs
                || self.shared.expected.is_some()
                || a.active != Some(self.shared.vol.idx)
                || a.head != self.reserved_end
            {
                return Err(StoreError::TooLarge(need - self.shared.body_off));
            }
            a.head = new_end;
            self.reserved_end = new_end;
        }
        // The header must name the larger span before any byte lands beyond the old one.
        self.write_header(LEN_UNKNOWN, self.reserved_end - self.rec_off).await
    }

    async fn finish(&mut self) -> Result<Arc<Entry>, StoreError> {
        if self.done || self.shared.purged.load(Ordering::SeqCst) {
            return Err(StoreError::Aborted);
        }
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
                a.active == Some(self.shared.vol.idx) && a.head == self.reserved_end
            };
            if tail {
                span = final_span;
            }
            self.write_header(self.written, span).await?;
            if tail {
                let shrunk = {
                    let mut a = self.store.lock_alloc();
                    if a.active == Some(self.shared.vol.idx) && a.head == self.reserved_end {
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
        let t = format::encode_trailer(self.shared.seq, self.written, self.crc, self.header_crc);
        self.write(Bytes::copy_from_slice(&t), self.shared.body_off + self.written).await?;
        if self.shared.vol.quarantined.load(Ordering::SeqCst) {
            return Err(StoreError::Gone);
        }
        self.done = true;
        self.shared.vol.writers.fetch_sub(1, Ordering::SeqCst);
        Ok(Arc::new(Entry {
            key: self.shared.key.clone(),
            meta: self.shared.meta.clone(),
            vol: self.shared.vol.idx,
            seq: self.shared.seq,
            rec_off: self.rec_off,
            body_off: self.shared.body_off,
            body_len: self.written,
            span,
            stored_at: self.shared.stored_at,
            accessed: AtomicBool::new(false),
        }))
    }
}

impl Drop for FillWriter {
    fn drop(&mut self) {
        self.abort();
    }
}

mod handover;
#[cfg(test)]
mod tests;
