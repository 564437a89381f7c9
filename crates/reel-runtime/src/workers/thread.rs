//! One worker's thread, from start to drain: pinning it, building its tokio runtime and its
//! app, registering its first listeners and its idle lot, running its tasks (the app's
//! background work, the acceptor, the command loop, the idle lot's task) and, once draining,
//! waiting for its connections up to the deadline. Also the state those tasks share
//! ([`Local`]) and the guard that keeps each connection counted ([`ConnGuard`]).

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::{Arc, mpsc as std_mpsc};

use tokio::net::TcpListener;
use tokio::sync::{Notify, mpsc, watch};
use tokio::task::LocalSet;

use super::Shared;
use super::accept::accept_loop;
use super::command::{Command, command_loop};
use super::idle::Lot;
use super::listeners::add_listener;
use super::park::{lot_loop, open_lot};
use crate::app::{WorkerApp, WorkerCtx, WorkerStats};

/// What a worker thread is started with.
pub(super) struct WorkerCfg {
    pub(super) ctx: WorkerCtx,
    pub(super) pin: bool,
    pub(super) shared: Arc<Shared>,
}

/// Per-worker state shared by its local tasks.
pub(super) struct Local {
    pub(super) stats: Arc<WorkerStats>,
    pub(super) open: Cell<usize>,
    /// The caps and the process-wide counts.
    pub(super) shared: Arc<Shared>,
    /// Woken whenever a connection closes.
    pub(super) closed: Notify,
    /// Woken whenever a listener is added, so the acceptor polls it.
    pub(super) listeners_changed: Notify,
    pub(super) drain: watch::Receiver<bool>,
    /// This worker's listening sockets. Removing one closes it at once.
    pub(super) listeners: RefCell<Vec<(Rc<str>, TcpListener)>>,
    /// Where the next accept poll starts, so a busy listener cannot starve the others.
    pub(super) next: Cell<usize>,
    /// Idle connections kept without a task (`None` once the worker drained).
    pub(super) lot: RefCell<Option<Lot<ConnGuard>>>,
    /// Woken when a parked connection's deadline is the lot's earliest.
    pub(super) lot_changed: Notify,
    /// Listener names by id (a connection's guard keeps the id: no room in its task for
    /// the name). Only grows; names are few.
    pub(super) names: RefCell<Vec<Rc<str>>>,
}

impl Local {
    /// The id of listener name `name`.
    pub(super) fn name_id(&self, name: &Rc<str>) -> u32 {
        let mut names = self.names.borrow_mut();
        if let Some(i) = names.iter().position(|n| n == name) {
            return i as u32;
        }
        names.push(name.clone());
        (names.len() - 1) as u32
    }

    /// The listener name of id `id`.
    pub(super) fn name(&self, id: u32) -> Rc<str> {
        self.names.borrow().get(id as usize).cloned().unwrap_or_else(|| Rc::from(""))
    }
}

/// Decrements the open counts when a connection task ends or is dropped at the deadline.
pub(super) struct ConnGuard {
    pub(super) local: Rc<Local>,
    pub(super) client: std::net::IpAddr,
    /// The listener's name id ([`Local::name_id`]).
    pub(super) listener: u32,
}

impl Drop for ConnGuard {
    fn drop(&mut self) {
        let l = &self.local;
        l.open.set(l.open.get().saturating_sub(1));
        l.stats.open.fetch_sub(1, Ordering::Relaxed);
        l.shared.conns.release(self.client);
        l.closed.notify_waiters();
    }
}

/// The body of worker thread `cfg.ctx.index`: serves on `initial` (its sockets of every
/// listener) until the drain, and returns how many connections it dropped at the deadline.
/// It reports once on `ready`: its thread id, or why it could not start.
pub(super) fn worker_thread<A: WorkerApp>(
    cfg: WorkerCfg,
    initial: Vec<(String, std::net::TcpListener)>,
    cmd_rx: mpsc::UnboundedReceiver<Command>,
    ready: std_mpsc::Sender<(usize, Result<i32, String>)>,
    factory: impl FnOnce(&WorkerCtx) -> A,
) -> usize {
    let index = cfg.ctx.index;
    if cfg.pin {
        let pinned = core_affinity::set_for_current(core_affinity::CoreId { id: cfg.ctx.cpu });
        cfg.ctx.stats.pinned.store(pinned, Ordering::Relaxed);
        if !pinned {
            tracing::warn!(
                worker = index,
                cpu = cfg.ctx.cpu,
                "could not pin worker thread; running unpinned"
            );
        }
    }
    let rt = match tokio::runtime::Builder::new_current_thread().enable_io().enable_time().build() {
        Ok(rt) => rt,
        Err(e) => {
            let _ = ready.send((index, Err(format!("building tokio runtime: {e}"))));
            return 0;
        }
    };
    let local = LocalSet::new();
    let state = Rc::new(Local {
        stats: cfg.ctx.stats.clone(),
        open: Cell::new(0),
        shared: cfg.shared.clone(),
        closed: Notify::new(),
        listeners_changed: Notify::new(),
        drain: cfg.shared.drain.subscribe(),
        listeners: RefCell::new(Vec::new()),
        next: Cell::new(0),
        lot: RefCell::new(None),
        lot_changed: Notify::new(),
        names: RefCell::new(Vec::new()),
    });
    // A factory that panics is reported as this worker's startup failure, with its message.
    let app = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| factory(&cfg.ctx))) {
        Ok(app) => Rc::new(app),
        Err(payload) => {
            let why = payload
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a non-string payload".into());
            let _ = ready.send((index, Err(format!("panicked during startup: {why}"))));
            return 0;
        }
    };
    // Registering with the reactor needs the runtime context.
    let setup = {
        let _guard = rt.enter();
        initial
            .into_iter()
            .try_for_each(|(name, l)| add_listener(&state, name, l))
            .and_then(|()| open_lot(&state))
    };
    let lot_fd = match setup {
        Ok(fd) => fd,
        Err(e) => {
            let _ = ready.send((index, Err(e)));
            return 0;
        }
    };
    let _ = ready.send((index, Ok(thread_tid())));
    drop(ready);

    let shared = cfg.shared.clone();
    let ctx = cfg.ctx.clone();
    let dropped = local.block_on(&rt, async {
        let run_app = app.clone();
        let drain = state.drain.clone();
        let run_task = tokio::task::spawn_local(async move { run_app.run(ctx, drain).await });
        let cmd_task = tokio::task::spawn_local(command_loop(state.clone(), cmd_rx));
        let acceptor = tokio::task::spawn_local(accept_loop(state.clone(), app.clone()));
        let lot_task = tokio::task::spawn_local(lot_loop(state.clone(), app.clone(), lot_fd));

        let mut drain = state.drain.clone();
        // An error means the sender is gone, which only happens with the Runtime: shut down too.
        let _ = drain.wait_for(|d| *d).await;
        cmd_task.abort();
        acceptor.abort();
        let _ = cmd_task.await;
        let _ = acceptor.await;
        // The lot hands out its readable connections and closes the rest.
        let _ = lot_task.await;
        state.listeners.borrow_mut().clear();
        // The app's own work ends too: connections it serves outside the accept loops
        // (QUIC) close under the same drain and deadline.
        let all_closed = async {
            while state.open.get() > 0 {
                state.closed.notified().await;
            }
            let _ = run_task.await;
        };
        match shared.deadline() {
            Some(d) => {
                let _ = tokio::time::timeout_at(d.into(), all_closed).await;
            }
            None => all_closed.await,
        }
        state.open.get()
    });
    // Dropping the LocalSet drops connections that outlived the deadline.
    drop(local);
    // Parked guards hold the worker's state: none may outlive the worker.
    drop(state.lot.borrow_mut().take());
    if dropped > 0 {
        tracing::warn!(
            worker = index,
            dropped,
            "shutdown deadline passed; dropped open connections"
        );
    }
    dropped
}

/// The kernel thread id of the calling thread.
fn thread_tid() -> i32 {
    rustix::thread::gettid().as_raw_pid()
}

#[cfg(test)]
mod tests {
    /// Every connection's task carries a guard: the listener's name id fits in the space
    /// the client address leaves, so parking costs the task nothing.
    #[test]
    fn a_connection_guard_is_32_bytes() {
        assert_eq!(std::mem::size_of::<Option<super::ConnGuard>>(), 32);
    }

    /// A parked connection's slot in the lot, as the lot's module doc says.
    #[test]
    fn a_parked_slot_is_56_bytes() {
        assert_eq!(super::super::idle::slot_size::<super::ConnGuard>(), 56);
    }
}
