//! The maintenance thread: loads the index after open, runs [`Store::maintain`]
//! (volume reclaim, drained volumes back to the free queue) off the workers, so a
//! client's miss never waits behind a reclaim, starts the periodic index
//! checkpoint (written on an I/O pool thread) and runs the scrub's steps (module
//! `scrub`).
//!
//! One thread per process serves every open store (like the I/O pool, it never exits: an
//! exiting thread makes glibc `madvise(MADV_DONTNEED)` its stack). It sleeps on a condvar
//! and wakes when a store takes its last free volume or runs out of space (a kick), and
//! once per [`TICK`] for volumes whose leases have drained meanwhile. It keeps only weak
//! references, so a dropped store is simply skipped. It drives its own current_thread
//! runtime, hence its own io_uring.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Condvar, Mutex, OnceLock, Weak};
use std::time::Duration;

use super::Store;

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
    stores: Vec<Weak<Store>>,
    kicked: bool,
}

static MAINT: OnceLock<Option<Maint>> = OnceLock::new();

fn maint() -> Option<&'static Maint> {
    MAINT
        .get_or_init(|| {
            let spawned = std::thread::Builder::new().name("reel-store-maint".into()).spawn(|| {
                if let Some(m) = maint() {
                    m.run();
                }
            });
            match spawned {
                Ok(_) => Some(Maint { state: Mutex::default(), cv: Condvar::new() }),
                Err(e) => {
                    tracing::error!(error = %e, "cannot start the store maintenance thread");
                    None
                }
            }
        })
        .as_ref()
}

/// Hands `store` to the maintenance thread (started on first use); false if the thread
/// could not be started.
pub(super) fn register(store: &Arc<Store>) -> bool {
    let Some(m) = maint() else { return false };
    let mut st = m.state.lock().unwrap_or_else(|p| p.into_inner());
    st.stores.retain(|w| w.strong_count() > 0);
    st.stores.push(Arc::downgrade(store));
    true
}

/// Wakes the maintenance thread now.
pub(super) fn kick() {
    if let Some(m) = MAINT.get().and_then(Option::as_ref) {
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

impl Store {
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
        if let Ok(pool) = crate::io::pool() {
            pool.spawn(move || {
                if let Some(s) = store.upgrade()
                    && let Err(e) = s.checkpoint()
                {
                    tracing::warn!(error = %e, "store index checkpoint failed");
                }
            });
        }
    }
}
