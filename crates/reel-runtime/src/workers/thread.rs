//! One worker's thread, from start to drain: pinning it, building its tokio runtime and its
//! app, registering its first listeners and its idle lot, running its tasks (the app's
//! background work, the acceptor, the command loop that carries out the runtime's
//! commands, the idle lot's task) and, once draining, waiting for its connections up to the
//! deadline. The state those tasks share is `local`.

use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::{Arc, mpsc as std_mpsc};

use tokio::sync::mpsc;
use tokio::task::LocalSet;

use super::accept::accept_loop;
use super::command::Command;
use super::local::Local;
use super::park::{lot_loop, open_lot};
use super::shutdown::Drain;
use super::{export, listeners};
use crate::app::{WorkerApp, WorkerCtx};
use crate::limits::Limits;

/// What a worker thread is started with.
pub(super) struct WorkerCfg {
    pub(super) ctx: WorkerCtx,
    pub(super) pin: bool,
    /// The drain signal and deadline of the runtime.
    pub(super) drain: Arc<Drain>,
    /// The connection caps and the process-wide counts.
    pub(super) limits: Arc<Limits>,
    /// The listeners that take a PROXY protocol header first.
    pub(super) proxied: Vec<String>,
}

/// The worker's command task: applies each command of the [`Runtime`](crate::Runtime) in
/// turn and answers it.
async fn command_loop(state: Rc<Local>, mut rx: mpsc::UnboundedReceiver<Command>) {
    while let Some(cmd) = rx.recv().await {
        match cmd {
            Command::Apply { add, relisten, remove, proxied, done } => {
                let _ = done.send(listeners::apply(&state, add, relisten, remove, &proxied));
            }
            Command::Export { done } => {
                let _ = done.send(export::duplicates(&state));
            }
        }
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
    let state =
        Rc::new(Local::new(cfg.ctx.stats.clone(), cfg.limits.clone(), cfg.drain.subscribe()));
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
    listeners::set_proxied(&state, &cfg.proxied);
    // Registering with the reactor needs the runtime context.
    let setup = {
        let _guard = rt.enter();
        initial
            .into_iter()
            .try_for_each(|(name, l)| listeners::add_listener(&state, name, l))
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

    let shutdown = cfg.drain.clone();
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
        match shutdown.deadline() {
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
