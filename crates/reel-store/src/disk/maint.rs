//! The maintenance thread: loads the index after open, runs [`Disk::maintain`]
//! (volume reclaim, drained volumes back to the free queue) off the workers, so a
//! client's miss never waits behind a reclaim, starts the periodic index
//! checkpoint (written on an I/O pool thread) and runs the scrub's steps (module
//! `scrub`).
//!
//! One thread per disk lane (the disk's position in the store) serves every open disk of
//! that lane, so a slow disk's reclaim does not hold up another disk's. Like the I/O
//! pools, these threads never exit: an exiting thread makes glibc
//! `madvise(MADV_DONTNEED)` its stack. Each sleeps on a condvar and wakes when a disk
//! takes its last free volume or runs out of space (a kick), and once per [`TICK`] for
//! volumes whose leases have drained meanwhile. It keeps only weak references, so a
//! dropped disk is simply skipped. It drives its own current_thread runtime, hence its
//! own io_uring. It also empties the index of a disk that failed.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Condvar, Mutex, Weak};
use std::time::Duration;

use super::state::Disk;

/// Longest sleep between two maintenance passes.
const TICK: Duration = Duration::from_secs(1);
/// A changed index is checkpointed at most this often (and at a clean close).
pub(super) const CHECKPOINT_EVERY: u64 = 300;

struct Maint {
    state: Mutex<State>,
    cv: Condvar,
}

#[derive(Default)]
struct State {
    stores: Vec<Weak<Disk>>,
    kicked: bool,
}

/// The maintenance threads, one per lane, started on first use and leaked.
static MAINT: Mutex<Vec<&'static Maint>> = Mutex::new(Vec::new());

fn maint(lane: usize) -> Option<&'static Maint> {
    let mut all = MAINT.lock().unwrap_or_else(|p| p.into_inner());
    while all.len() <= lane {
        let m: &'static Maint =
            Box::leak(Box::new(Maint { state: Mutex::default(), cv: Condvar::new() }));
        let name = format!("reel-store-maint-{}", all.len());
        if let Err(e) = std::thread::Builder::new().name(name).spawn(move || m.run()) {
            tracing::error!(error = %e, "cannot start a store maintenance thread");
            return None;
        }
        all.push(m);
    }
    Some(all[lane])
}

/// Hands `store` to its lane's maintenance thread (started on first use); false if the
/// thread could not be started.
pub(super) fn register(store: &Arc<Disk>, lane: usize) -> bool {
    let Some(m) = maint(lane) else { return false };
    let mut st = m.state.lock().unwrap_or_else(|p| p.into_inner());
    st.stores.retain(|w| w.strong_count() > 0);
    st.stores.push(Arc::downgrade(store));
    true
}

/// Wakes lane `lane`'s maintenance thread now.
pub(super) fn kick(lane: usize) {
    let m = MAINT.lock().unwrap_or_else(|p| p.into_inner()).get(lane).copied();
    if let Some(m) = m {
        m.state.lock().unwrap_or_else(|p| p.into_inner()).kicked = true;
        m.cv.notify_one();
    }
}

impl Maint {
    fn run(&self) {
        let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
            Ok(rt) => rt,
            Err(e) => {
                tracing::error!(error = %e, "store maintenance thread has no runtime");
                return;
            }
        };
        loop {
            let stores = {
                let st = self.state.lock().unwrap_or_else(|p| p.into_inner());
                let (mut st, _) = self
                    .cv
                    .wait_timeout_while(st, TICK, |s| !s.kicked)
                    .unwrap_or_else(|p| p.into_inner());
                st.kicked = false;
                st.stores.retain(|w| w.strong_count() > 0);
                st.stores.clone()
            };
            for store in stores.iter().filter_map(Weak::upgrade) {
                if store.is_failed() {
                    store.drop_failed_index();
                    continue;
                }
                if store.loading.load(Ordering::SeqCst)
                    && !store.load_claimed.swap(true, Ordering::SeqCst)
                {
                    store.load_index();
                }
                if store.background.load(Ordering::Relaxed) {
                    rt.block_on(store.maintain());
                    store.checkpoint_if_due();
                    rt.block_on(store.scrub_tick());
                }
            }
        }
    }
}

impl Disk {
    /// Starts a checkpoint on an I/O pool thread when one is due: the index changed
    /// since the last one and [`CHECKPOINT_EVERY`] passed (or a load had to scan).
    fn checkpoint_if_due(self: &Arc<Self>) {
        let now = self.started.elapsed().as_secs();
        if self.loading.load(Ordering::SeqCst)
            || now < self.c.checkpoint_due.load(Ordering::Relaxed)
            || self.c.changes.load(Ordering::SeqCst) == self.c.checkpointed.load(Ordering::SeqCst)
        {
            return;
        }
        self.c.checkpoint_due.store(now + CHECKPOINT_EVERY, Ordering::Relaxed);
        let store = Arc::downgrade(self);
        self.io.pool().spawn(move || {
            if let Some(s) = store.upgrade()
                && let Err(e) = s.checkpoint()
            {
                tracing::warn!(error = %e, "store index checkpoint failed");
            }
        });
    }
}
