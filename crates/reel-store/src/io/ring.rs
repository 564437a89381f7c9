//! One worker thread's io_uring ([`Ring`]), created lazily on first use inside a tokio
//! runtime: operations own their buffers in slots until the kernel completes them
//! (a dropped operation leaves its buffer parked), and completions are signalled through
//! an eventfd awaited with [`tokio::io::unix::AsyncFd`]. Its setup flags come from
//! [`Setup`].

use std::cell::{Cell, RefCell};
use std::fs::File;
use std::future::poll_fn;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Poll, Waker};

use bytes::Bytes;
use io_uring::{IoUring, opcode, types};
use rustix::event::EventfdFlags;
use tokio::io::unix::AsyncFd;

/// Submission queue depth of each worker's ring.
const RING_ENTRIES: u32 = 256;

/// Most buffers one gathered write passes to the kernel (below `IOV_MAX`, 1024).
pub(super) const MAX_IOVECS: usize = 256;

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
pub(super) struct Ring {
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
    pub(super) fn current() -> Option<Rc<Ring>> {
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

    pub(super) async fn read_at(
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

    pub(super) async fn write_at(
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

    pub(super) async fn writev_at(
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
pub(super) fn thread_has_ring() -> bool {
    RING.with(|r| r.borrow().is_some())
}
