//! Positional file I/O off the event loop: one io_uring per worker thread, or a small
//! pool of I/O threads when io_uring is unavailable or `REEL_STORE_IO=threads`.
//!
//! The ring is created lazily per thread (thread-local) on first use inside a tokio
//! runtime. Completions are signalled through an eventfd registered with the ring and
//! awaited with [`tokio::io::unix::AsyncFd`], so a cold read suspends only the task that
//! issued it. Buffers move into the operation and come back with the result; if the
//! future is dropped early the buffer stays parked in the ring until the kernel is done
//! with it.
//!
//! We use the `io-uring` crate directly rather than tokio-uring: tokio-uring owns the
//! whole runtime (its own `start()`), while reel's workers run a plain tokio
//! current_thread runtime that also drives sockets; a bare ring plus an eventfd slots
//! into that runtime without changing it.

use std::cell::{Cell, RefCell};
use std::fs::File;
use std::future::poll_fn;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::FileExt;
use std::rc::Rc;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::task::{Poll, Waker};

use bytes::Bytes;
use io_uring::{IoUring, opcode, types};
use rustix::event::EventfdFlags;
use tokio::io::unix::AsyncFd;

use crate::IoMode;

/// Number of I/O threads in the fallback pool.
const POOL_THREADS: usize = 4;
/// Submission queue depth of each worker's ring.
const RING_ENTRIES: u32 = 256;

/// Resolved I/O backend of a store, shared by all workers.
pub(crate) struct Io {
    uring: bool,
    pool: &'static Pool,
}

impl Io {
    /// Resolves `mode` (the `REEL_STORE_IO` environment variable wins) and logs the choice.
    /// `lane`: the disk's position in the store; each disk has its own I/O threads, so
    /// a slow disk does not hold up another's reads.
    pub(crate) fn new(mode: IoMode, lane: usize) -> io::Result<Io> {
        let env = std::env::var("REEL_STORE_IO").ok();
        let mode = match env.as_deref() {
            Some("threads") => IoMode::Threads,
            Some("uring") => IoMode::Uring,
            _ => mode,
        };
        let uring = match mode {
            IoMode::Threads => false,
            IoMode::Uring => {
                IoUring::new(8)?;
                true
            }
            IoMode::Auto => match IoUring::new(8) {
                Ok(_) => true,
                Err(e) => {
                    tracing::warn!(error = %e, "io_uring unavailable, using I/O thread pool");
                    false
                }
            },
        };
        tracing::info!(backend = if uring { "io_uring" } else { "threads" }, "store I/O backend");
        Ok(Io { uring, pool: pool(lane)? })
    }

    /// The disk's I/O thread pool (also runs its scans and checkpoints).
    pub(crate) fn pool(&self) -> &'static Pool {
        self.pool
    }

    /// Whether this store uses io_uring (per worker thread) for reads and writes.
    pub(crate) fn is_uring(&self) -> bool {
        self.uring
    }

    /// Reads up to `buf.len()` bytes at `off`; returns the count and the buffer.
    pub(crate) async fn read_at(
        &self,
        file: &Arc<File>,
        buf: Vec<u8>,
        off: u64,
    ) -> (io::Result<usize>, Vec<u8>) {
        if self.uring
            && let Some(ring) = Ring::current()
        {
            return ring.read_at(file.clone(), buf, off).await;
        }
        let file = file.clone();
        self.pool
            .run(move || {
                let mut buf = buf;
                let r = file.read_at(&mut buf, off);
                (r, buf)
            })
            .await
            .unwrap_or_else(|| (Err(pool_gone()), Vec::new()))
    }

    /// Writes `buf` at `off` (possibly partially); returns the count and the buffer.
    pub(crate) async fn write_at(
        &self,
        file: &Arc<File>,
        buf: Bytes,
        off: u64,
    ) -> (io::Result<usize>, Bytes) {
        if self.uring
            && let Some(ring) = Ring::current()
        {
            return ring.write_at(file.clone(), buf, off).await;
        }
        let file = file.clone();
        self.pool
            .run(move || {
                let r = file.write_at(&buf, off);
                (r, buf)
            })
            .await
            .unwrap_or_else(|| (Err(pool_gone()), Bytes::new()))
    }

    /// Writes `bufs` back to back at `off` in one call (`pwritev`, or an io_uring
    /// `WRITEV`), possibly partially; returns the count and the buffers. At most
    /// [`MAX_IOVECS`] buffers are written per call.
    pub(crate) async fn writev_at(
        &self,
        file: &Arc<File>,
        bufs: Vec<Bytes>,
        off: u64,
    ) -> (io::Result<usize>, Vec<Bytes>) {
        if self.uring
            && let Some(ring) = Ring::current()
        {
            return ring.writev_at(file.clone(), bufs, off).await;
        }
        let file = file.clone();
        self.pool
            .run(move || {
                let slices: Vec<io::IoSlice<'_>> =
                    bufs.iter().take(MAX_IOVECS).map(|b| io::IoSlice::new(b)).collect();
                let r = rustix::io::pwritev(&file, &slices, off).map_err(io::Error::from);
                drop(slices);
                (r, bufs)
            })
            .await
            .unwrap_or_else(|| (Err(pool_gone()), Vec::new()))
    }

    /// Writes all of `bufs`, back to back, at `off`: one gathered write per try,
    /// retrying short writes from where the kernel stopped.
    pub(crate) async fn write_all_vectored_at(
        &self,
        file: &Arc<File>,
        mut bufs: Vec<Bytes>,
        mut off: u64,
    ) -> io::Result<()> {
        bufs.retain(|b| !b.is_empty());
        while !bufs.is_empty() {
            let (r, b) = self.writev_at(file, bufs, off).await;
            bufs = b;
            match r {
                Ok(0) => return Err(io::Error::new(io::ErrorKind::WriteZero, "write returned 0")),
                Ok(n) => {
                    advance(&mut bufs, n)?;
                    off += n as u64;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Reads exactly `len` bytes at `off`. Short reads are retried; end of file before
    /// `len` bytes is reported as `UnexpectedEof`, never returned as data.
    pub(crate) async fn read_exact_at(
        &self,
        file: &Arc<File>,
        len: usize,
        off: u64,
    ) -> io::Result<Vec<u8>> {
        let mut out = vec![0u8; len];
        let done = nowait_read(file.as_fd(), &mut out, off);
        let mut done = done;
        while done < len {
            let chunk = vec![0u8; len - done];
            let (r, chunk) = self.read_at(file, chunk, off + done as u64).await;
            match r {
                Ok(0) => return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "short read")),
                Ok(n) => {
                    out[done..done + n].copy_from_slice(&chunk[..n]);
                    done += n;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(out)
    }

    /// Writes all of `buf` at `off`, retrying short writes.
    pub(crate) async fn write_all_at(
        &self,
        file: &Arc<File>,
        mut buf: Bytes,
        mut off: u64,
    ) -> io::Result<()> {
        while !buf.is_empty() {
            let (r, b) = self.write_at(file, buf, off).await;
            buf = b;
            match r {
                Ok(0) => return Err(io::Error::new(io::ErrorKind::WriteZero, "write returned 0")),
                Ok(n) if n <= buf.len() => {
                    let _ = buf.split_to(n);
                    off += n as u64;
                }
                Ok(_) => return Err(io::Error::other("write returned more than requested")),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

/// Most buffers one gathered write passes to the kernel (below `IOV_MAX`, 1024).
pub(crate) const MAX_IOVECS: usize = 256;

/// Drops the first `n` bytes of `bufs` (bytes the kernel wrote).
fn advance(bufs: &mut Vec<Bytes>, mut n: usize) -> io::Result<()> {
    let mut whole = 0;
    for b in bufs.iter_mut() {
        if n == 0 {
            break;
        }
        if n >= b.len() {
            n -= b.len();
            whole += 1;
        } else {
            let _ = b.split_to(n);
            n = 0;
        }
    }
    bufs.drain(..whole);
    if n > 0 {
        return Err(io::Error::other("write returned more than requested"));
    }
    Ok(())
}

fn pool_gone() -> io::Error {
    io::Error::other("store I/O thread pool is gone")
}

/// Copies what is already in the page cache at `off` into `buf` without blocking
/// (preadv2 with RWF_NOWAIT). Returns the number of leading bytes copied: it stops at
/// the first page not resident (EAGAIN), at end of file, or at any other error.
pub(crate) fn nowait_read(fd: BorrowedFd<'_>, buf: &mut [u8], off: u64) -> usize {
    let mut done = 0usize;
    while done < buf.len() {
        let iov = &mut [io::IoSliceMut::new(&mut buf[done..])];
        match rustix::io::preadv2(fd, iov, off + done as u64, rustix::io::ReadWriteFlags::NOWAIT) {
            Ok(0) | Err(_) => break,
            Ok(n) => done += n,
        }
    }
    done
}

/// Whether `len` bytes at `off` are all resident in the page cache, so that sendfile
/// will not wait for the disk. Nothing is read or copied: `cachestat(2)` (Linux 6.5)
/// counts the cached pages of the range. Where the kernel lacks it (`ENOSYS`, or a
/// seccomp filter that refuses it), a few pages (first, last and some in between) are
/// probed with 1-byte `RWF_NOWAIT` reads instead: a sample, so a page missing between
/// two probes is only found by sendfile itself.
pub(crate) fn is_resident(fd: BorrowedFd<'_>, off: u64, len: u64) -> bool {
    if len == 0 {
        return true;
    }
    match cachestat_pages(fd, off, len) {
        Some(cached) => cached >= pages_of(off, len),
        None => probe_pages(fd, off, len),
    }
}

/// Pages the kernel would count for `len > 0` bytes at `off`.
fn pages_of(off: u64, len: u64) -> u64 {
    let ps = page_size();
    (off + len - 1) / ps - off / ps + 1
}

fn page_size() -> u64 {
    static PAGE: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *PAGE.get_or_init(|| {
        // `sysconf(_SC_PAGESIZE)`, -1 (as usize) if the system does not say.
        let ps = rustix::param::page_size();
        i64::try_from(ps).ok().filter(|&p| p > 0).map_or(4096, |p| p as u64)
    })
}

/// `cachestat(2)` is missing (learned from the first `ENOSYS` or `EPERM`).
static NO_CACHESTAT: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// The number of cached pages of the range, by `cachestat(2)`; `None` where the
/// syscall is unavailable (or refuses this file: hugetlbfs).
fn cachestat_pages(fd: BorrowedFd<'_>, off: u64, len: u64) -> Option<u64> {
    use std::sync::atomic::Ordering;
    /// `struct cachestat_range` of `<linux/mman.h>`.
    #[repr(C)]
    struct Range {
        off: u64,
        len: u64,
    }
    /// `struct cachestat` of `<linux/mman.h>`.
    #[repr(C)]
    #[derive(Default)]
    struct Stat {
        nr_cache: u64,
        nr_dirty: u64,
        nr_writeback: u64,
        nr_evicted: u64,
        nr_recently_evicted: u64,
    }
    // The syscall number is 451 on both architectures we build for (and most others);
    // elsewhere the probe below is used.
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    const SYS_CACHESTAT: libc::c_long = 451;
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    return None;
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    {
        if NO_CACHESTAT.load(Ordering::Relaxed) {
            return None;
        }
        let range = Range { off, len };
        let mut st = Stat::default();
        // SAFETY: `range` and `st` are live, properly aligned `repr(C)` structs laid out
        // as the kernel's `cachestat_range` and `cachestat`; the kernel only reads the
        // first and writes the second for the duration of the call. Flags must be 0.
        let r = unsafe {
            libc::syscall(
                SYS_CACHESTAT,
                fd.as_raw_fd() as libc::c_uint,
                &range as *const Range,
                &mut st as *mut Stat,
                0 as libc::c_uint,
            )
        };
        if r == 0 {
            return Some(st.nr_cache);
        }
        let e = io::Error::last_os_error().raw_os_error();
        if matches!(e, Some(libc::ENOSYS | libc::EPERM)) {
            NO_CACHESTAT.store(true, Ordering::Relaxed);
        }
        None
    }
}

/// Most pages [`probe_pages`] reads one byte of.
const PROBES: u64 = 8;

/// The fallback of [`is_resident`]: a 1-byte `RWF_NOWAIT` read of the first and last
/// page of the range and of evenly spaced pages in between (at most [`PROBES`]).
fn probe_pages(fd: BorrowedFd<'_>, off: u64, len: u64) -> bool {
    if len == 0 {
        return true;
    }
    let ps = page_size();
    let (first, last) = (off / ps, (off + len - 1) / ps);
    let n = (last - first + 1).min(PROBES);
    (0..n).all(|i| {
        let page = if n == 1 { first } else { first + (last - first) * i / (n - 1) };
        let at = (page * ps).max(off);
        let mut b = [0u8; 1];
        nowait_read(fd, &mut b, at) == 1
    })
}

// === impl Pool ===

type Job = Box<dyn FnOnce() + Send>;

/// The I/O thread pools, one per disk lane, started on first use.
static POOLS: Mutex<Vec<&'static Pool>> = Mutex::new(Vec::new());

/// The I/O thread pool of disk lane `lane`, started on first use. Its threads live as
/// long as the process (a pool is leaked, never dropped): a thread that exits makes
/// glibc madvise(DONTNEED) its stack, and the store promises no madvise calls. A disk
/// that is reopened (brought back into service) takes its lane's pool again.
pub(crate) fn pool(lane: usize) -> io::Result<&'static Pool> {
    let mut pools = POOLS.lock().unwrap_or_else(|p| p.into_inner());
    while pools.len() <= lane {
        match Pool::new(POOL_THREADS) {
            Ok(p) => pools.push(Box::leak(Box::new(p))),
            Err(e) => {
                tracing::error!(error = %e, "cannot start store I/O threads");
                return Err(io::Error::other("store I/O threads unavailable"));
            }
        }
    }
    Ok(pools[lane])
}

/// Fallback I/O threads: blocking pread/pwrite off the workers, results back through
/// oneshot channels. Also runs the start-up scan.
pub(crate) struct Pool {
    tx: Mutex<mpsc::Sender<Job>>,
}

impl Pool {
    fn new(n: usize) -> io::Result<Pool> {
        let (tx, rx) = mpsc::channel::<Job>();
        let rx = Arc::new(Mutex::new(rx));
        for i in 0..n {
            let rx = rx.clone();
            std::thread::Builder::new().name(format!("reel-store-io-{i}")).spawn(move || {
                loop {
                    let job = match rx.lock() {
                        Ok(rx) => rx.recv(),
                        Err(_) => return,
                    };
                    match job {
                        Ok(job) => job(),
                        Err(_) => return,
                    }
                }
            })?;
        }
        Ok(Pool { tx: Mutex::new(tx) })
    }

    /// Runs `f` on a pool thread without waiting for it.
    pub(crate) fn spawn(&self, f: impl FnOnce() + Send + 'static) -> bool {
        self.tx.lock().ok().is_some_and(|tx| tx.send(Box::new(f)).is_ok())
    }

    async fn run<T: Send + 'static>(&self, f: impl FnOnce() -> T + Send + 'static) -> Option<T> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let job: Job = Box::new(move || {
            let _ = tx.send(f());
        });
        self.tx.lock().ok()?.send(job).ok()?;
        rx.await.ok()
    }
}

// === impl Ring ===

/// What an in-flight operation keeps alive until the kernel completes it.
#[expect(dead_code, reason = "the Arc<File> is held only to keep the descriptor open")]
enum Keep {
    Read(Vec<u8>, Arc<File>),
    Write(Bytes, Arc<File>),
    /// The buffers and the iovec array that points into them.
    Writev(Vec<Bytes>, Vec<libc::iovec>, Arc<File>),
}

enum Slot {
    Free,
    Pending(Keep, Option<Waker>),
    Done(i32, Keep),
    Abandoned(Keep),
}

/// Ring setup flags (`io_uring_setup(2)`). The default is `COOP_TASKRUN` alone: measured
/// with the `cold_reads` example (256 KiB cold reads, 8 in flight, six rounds each), it
/// removed the rescheduling IPIs a completion sent to the worker (0.055 per read to 0) and
/// took CPU per read from 107 to 94 µs (medians); `SINGLE_ISSUER` and `DEFER_TASKRUN` added
/// nothing measurable (97 and 105 µs), and function-call IPIs stayed at 0.09-0.10 per read
/// with every setup (benches/README.md, item 3). `REEL_STORE_URING_SETUP` (a comma list of
/// `coop`, `single`, `defer`; `none` for none) overrides it, for measuring.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Setup {
    /// `IORING_SETUP_COOP_TASKRUN`: a completion does not interrupt the running task.
    coop: bool,
    /// `IORING_SETUP_SINGLE_ISSUER`: one task submits.
    single: bool,
    /// `IORING_SETUP_DEFER_TASKRUN` (with `SINGLE_ISSUER` and `TASKRUN_FLAG`): completions
    /// are posted only when this thread asks (`reap`).
    defer: bool,
}

impl Setup {
    fn from_env() -> Setup {
        static SETUP: std::sync::OnceLock<Setup> = std::sync::OnceLock::new();
        *SETUP.get_or_init(|| match std::env::var("REEL_STORE_URING_SETUP") {
            Ok(v) => {
                let has = |w: &str| v.split(',').any(|t| t.trim() == w);
                Setup {
                    coop: has("coop"),
                    single: has("single") || has("defer"),
                    defer: has("defer"),
                }
            }
            Err(_) => Setup::DEFAULT,
        })
    }

    const DEFAULT: Setup = Setup { coop: true, single: false, defer: false };
    const NONE: Setup = Setup { coop: false, single: false, defer: false };

    fn build(self) -> io::Result<IoUring> {
        let mut b = IoUring::builder();
        if self.coop {
            b.setup_coop_taskrun();
        }
        if self.single {
            b.setup_single_issuer();
        }
        if self.defer {
            b.setup_defer_taskrun().setup_taskrun_flag();
        }
        b.build(RING_ENTRIES)
    }
}

/// One worker thread's ring. Per-thread state, so `Rc`/`RefCell`.
struct Ring {
    uring: RefCell<IoUring>,
    /// Completions wait for [`Ring::reap`] to ask for them (`IORING_SETUP_DEFER_TASKRUN`).
    deferred: bool,
    slots: RefCell<Vec<Slot>>,
    free: RefCell<Vec<usize>>,
    efd: AsyncFd<OwnedFd>,
    /// The runtime whose reactor the eventfd is registered with.
    rt: tokio::runtime::Id,
}

thread_local! {
    static RING: RefCell<Option<Rc<Ring>>> = const { RefCell::new(None) };
    static RING_BROKEN: Cell<bool> = const { Cell::new(false) };
}

impl Ring {
    /// This thread's ring, created on first use. `None` (use the pool) outside a tokio
    /// runtime or if the ring cannot be set up on this thread (e.g. RLIMIT_MEMLOCK).
    fn current() -> Option<Rc<Ring>> {
        if RING_BROKEN.with(|b| b.get()) {
            return None;
        }
        let rt = tokio::runtime::Handle::try_current().ok()?.id();
        if let Some(r) = RING.with(|r| r.borrow().clone())
            && r.rt == rt
        {
            return Some(r);
        }
        // First use on this thread, or a new runtime on it (tests): a fresh ring
        // registered with the current reactor.
        match Ring::new(rt) {
            Ok(r) => {
                let r = Rc::new(r);
                RING.with(|s| *s.borrow_mut() = Some(r.clone()));
                Some(r)
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot set up io_uring on this thread, using I/O threads");
                RING_BROKEN.with(|b| b.set(true));
                None
            }
        }
    }

    fn new(rt: tokio::runtime::Id) -> io::Result<Ring> {
        let setup = Setup::from_env();
        // A kernel that lacks a flag refuses the setup: then a plain ring.
        let (uring, deferred) = match setup.build() {
            Ok(u) => (u, setup.defer),
            Err(_) if setup != Setup::NONE => (IoUring::new(RING_ENTRIES)?, false),
            Err(e) => return Err(e),
        };
        let efd = rustix::event::eventfd(0, EventfdFlags::NONBLOCK | EventfdFlags::CLOEXEC)?;
        uring.submitter().register_eventfd(efd.as_raw_fd())?;
        // SAFETY: the AsyncFd takes ownership of the OwnedFd, which keeps the eventfd
        // open and always reports the same descriptor for the AsyncFd's whole life.
        let efd = unsafe { AsyncFd::register_with_interest(efd, tokio::io::Interest::READABLE) }?;
        Ok(Ring {
            uring: RefCell::new(uring),
            deferred,
            slots: RefCell::default(),
            free: RefCell::default(),
            efd,
            rt,
        })
    }

    async fn read_at(
        self: Rc<Self>,
        file: Arc<File>,
        mut buf: Vec<u8>,
        off: u64,
    ) -> (io::Result<usize>, Vec<u8>) {
        let len = buf.len().min(u32::MAX as usize) as u32;
        let sqe = opcode::Read::new(types::Fd(file.as_raw_fd()), buf.as_mut_ptr(), len)
            .offset(off)
            .build();
        match self.run(sqe, Keep::Read(buf, file)).await {
            (r, Some(Keep::Read(b, _))) => (r, b),
            (r, _) => (r.and(Err(io::Error::other("ring lost buffer"))), Vec::new()),
        }
    }

    async fn write_at(
        self: Rc<Self>,
        file: Arc<File>,
        buf: Bytes,
        off: u64,
    ) -> (io::Result<usize>, Bytes) {
        let len = buf.len().min(u32::MAX as usize) as u32;
        let sqe =
            opcode::Write::new(types::Fd(file.as_raw_fd()), buf.as_ptr(), len).offset(off).build();
        match self.run(sqe, Keep::Write(buf, file)).await {
            (r, Some(Keep::Write(b, _))) => (r, b),
            (r, _) => (r.and(Err(io::Error::other("ring lost buffer"))), Bytes::new()),
        }
    }

    async fn writev_at(
        self: Rc<Self>,
        file: Arc<File>,
        bufs: Vec<Bytes>,
        off: u64,
    ) -> (io::Result<usize>, Vec<Bytes>) {
        let iov: Vec<libc::iovec> = bufs
            .iter()
            .take(MAX_IOVECS)
            .map(|b| libc::iovec { iov_base: b.as_ptr() as *mut libc::c_void, iov_len: b.len() })
            .collect();
        let sqe = opcode::Writev::new(types::Fd(file.as_raw_fd()), iov.as_ptr(), iov.len() as u32)
            .offset(off)
            .build();
        match self.run(sqe, Keep::Writev(bufs, iov, file)).await {
            (r, Some(Keep::Writev(b, _, _))) => (r, b),
            (r, _) => (r.and(Err(io::Error::other("ring lost buffer"))), Vec::new()),
        }
    }

    /// Submits `sqe` whose buffers live in `keep` and waits for its completion.
    async fn run(
        self: Rc<Self>,
        sqe: io_uring::squeue::Entry,
        keep: Keep,
    ) -> (io::Result<usize>, Option<Keep>) {
        let idx = {
            let mut slots = self.slots.borrow_mut();
            match self.free.borrow_mut().pop() {
                Some(i) => {
                    slots[i] = Slot::Pending(keep, None);
                    i
                }
                None => {
                    slots.push(Slot::Pending(keep, None));
                    slots.len() - 1
                }
            }
        };
        let sqe = sqe.user_data(idx as u64);
        if let Err(e) = self.push(&sqe) {
            let keep = match std::mem::replace(&mut self.slots.borrow_mut()[idx], Slot::Free) {
                Slot::Pending(k, _) => Some(k),
                _ => None,
            };
            self.free.borrow_mut().push(idx);
            return (Err(e), keep);
        }
        let mut guard = OpGuard { ring: &self, idx, armed: true };
        loop {
            if let Some((res, keep)) = guard.take() {
                let r = if res < 0 {
                    Err(io::Error::from_raw_os_error(-res))
                } else {
                    Ok(res as usize)
                };
                return (r, Some(keep));
            }
            // Register our waker so a reap by another task on this thread wakes us.
            poll_fn(|cx| {
                if let Slot::Pending(_, w) = &mut self.slots.borrow_mut()[idx] {
                    *w = Some(cx.waker().clone());
                }
                Poll::Ready(())
            })
            .await;
            tokio::select! {
                biased;
                r = self.efd.readable() => match r {
                    Ok(mut g) => {
                        g.clear_ready();
                        let mut cnt = [0u8; 8];
                        let _ = rustix::io::read(self.efd.get_ref(), &mut cnt);
                        self.reap();
                    }
                    Err(e) => {
                        // The runtime that owns the eventfd registration is gone;
                        // drop the ring from this thread so the next use makes a new one.
                        RING.with(|s| *s.borrow_mut() = None);
                        guard.armed = true;
                        return (Err(e), None);
                    }
                },
                _ = Woken { ring: &self, idx } => {}
            }
        }
    }

    fn push(&self, sqe: &io_uring::squeue::Entry) -> io::Result<()> {
        let mut uring = self.uring.borrow_mut();
        loop {
            // SAFETY: the buffers referenced by `sqe` are owned by the slot named by
            // its user_data and stay alive (parked as `Abandoned` if the caller goes
            // away) until its completion is reaped.
            let pushed = unsafe { uring.submission().push(sqe).is_ok() };
            if pushed {
                break;
            }
            uring.submit()?;
        }
        uring.submit()?;
        Ok(())
    }

    fn reap(&self) {
        let mut uring = self.uring.borrow_mut();
        if self.deferred {
            // The kernel posts deferred completions when asked: `submit` enters with
            // GETEVENTS while IORING_SQ_TASKRUN says some are pending.
            let _ = uring.submit();
        }
        let mut slots = self.slots.borrow_mut();
        for cqe in uring.completion() {
            let idx = cqe.user_data() as usize;
            let Some(slot) = slots.get_mut(idx) else { continue };
            match std::mem::replace(slot, Slot::Free) {
                Slot::Pending(keep, waker) => {
                    *slot = Slot::Done(cqe.result(), keep);
                    if let Some(w) = waker {
                        w.wake();
                    }
                }
                Slot::Abandoned(_) => self.free.borrow_mut().push(idx),
                other => *slot = other,
            }
        }
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        // Operations may still be in flight; the kernel could write into their buffers
        // after we free them, so leak those buffers instead.
        for slot in self.slots.get_mut().drain(..) {
            match slot {
                Slot::Pending(k, _) | Slot::Abandoned(k) => std::mem::forget(k),
                Slot::Done(..) | Slot::Free => {}
            }
        }
    }
}

/// Parks the slot's buffers if the operation future is dropped before completion.
struct OpGuard<'a> {
    ring: &'a Ring,
    idx: usize,
    armed: bool,
}

impl OpGuard<'_> {
    fn take(&mut self) -> Option<(i32, Keep)> {
        let mut slots = self.ring.slots.borrow_mut();
        if !matches!(slots[self.idx], Slot::Done(..)) {
            return None;
        }
        match std::mem::replace(&mut slots[self.idx], Slot::Free) {
            Slot::Done(r, k) => {
                self.armed = false;
                self.ring.free.borrow_mut().push(self.idx);
                Some((r, k))
            }
            _ => None,
        }
    }
}

impl Drop for OpGuard<'_> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let mut slots = self.ring.slots.borrow_mut();
        match std::mem::replace(&mut slots[self.idx], Slot::Free) {
            Slot::Pending(k, _) => slots[self.idx] = Slot::Abandoned(k),
            Slot::Done(..) => self.ring.free.borrow_mut().push(self.idx),
            other => slots[self.idx] = other,
        }
    }
}

/// Resolves once the slot is no longer pending (another task reaped it for us).
struct Woken<'a> {
    ring: &'a Ring,
    idx: usize,
}

impl std::future::Future for Woken<'_> {
    type Output = ();
    fn poll(self: std::pin::Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> Poll<()> {
        match &mut self.ring.slots.borrow_mut()[self.idx] {
            Slot::Pending(_, w) => {
                *w = Some(cx.waker().clone());
                Poll::Pending
            }
            _ => Poll::Ready(()),
        }
    }
}

/// Whether this thread currently drives an io_uring.
#[cfg(test)]
pub(crate) fn thread_has_ring() -> bool {
    RING.with(|r| r.borrow().is_some())
}

#[cfg(test)]
mod tests;
