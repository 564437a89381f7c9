//! The running workers: [`start`] and [`start_with`], and the [`Runtime`] handle with
//! everything it does to them.
//!
//! Each worker owns one OS thread pinned to its planned CPU, a tokio `current_thread` runtime
//! with a `LocalSet`, and its own listening socket per listener, so the kernel spreads
//! connections over the workers and a connection never leaves the worker that accepted it.
//! Sockets are bound on the caller's thread before any worker runs so that configuration
//! errors (address in use, permission) surface from [`start`] and [`Runtime::set_listeners`].
//!
//! This module holds the [`Runtime`]'s methods; each does its work through one of the parts
//! below, which are given what they need and never reach back up here:
//!
//! * `startup`: checking the options, binding the sockets, spawning the threads and waiting
//!   until each runs;
//! * `thread`: one worker's thread from start to drain, and its command loop;
//! * `local`: the state a worker's tasks share, and the guard that keeps each connection
//!   counted;
//! * `accept`: the worker's acceptor over all its listeners;
//! * `conn_limits`: the connection limits checked at accept, and refused connections;
//! * `proxied`: the accept path of a PROXY protocol listener (the header, then the client's
//!   count);
//! * `park`: a connection's task, and the idle lot's task that parks idle connections and
//!   wakes them (`idle` is the lot itself);
//! * `listeners`: the listener set and changing it live, on both sides;
//! * `export`: duplicates of the listening sockets for a successor process;
//! * `command`: the runtime's handle on a worker thread and what it asks of it over its
//!   command channel;
//! * `shutdown`: the drain, its deadline, and joining the threads.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::os::fd::OwnedFd;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;

use crate::app::{WorkerApp, WorkerCtx, WorkerStats};
use crate::error::RuntimeError;
use crate::limits::Limits;
use crate::options::{ListenerSpec, RuntimeOptions};
use crate::sockets::Inherited;
use crate::steer;

mod accept;
mod command;
mod conn_limits;
mod export;
mod idle;
mod listeners;
mod local;
mod park;
mod proxied;
mod shutdown;
mod startup;
mod thread;

pub use shutdown::{ShutdownHandle, ShutdownReport};

use command::WorkerHandle;
use listeners::ListenerInfo;
use shutdown::Drain;

/// Starts one worker per CPU in `plan_workers` (worker `i` pinned to `plan_workers[i]`), binds
/// every listener on every worker and returns once all workers run. `factory` builds the
/// per-worker [`WorkerApp`] on the worker's own thread.
pub fn start<F, A>(
    plan_workers: &[usize],
    listeners: Vec<ListenerSpec>,
    opts: RuntimeOptions,
    factory: F,
) -> Result<Runtime, RuntimeError>
where
    F: Fn(&WorkerCtx) -> A + Send + Sync + 'static,
    A: WorkerApp,
{
    start_with(plan_workers, listeners, Inherited::new(), opts, factory)
}

/// [`start`] with listening sockets the process inherited (from systemd's socket
/// activation or from the process it replaces), by listener name: a listener found in
/// `inherited` takes those sockets (spread over the workers, see [`Inherited`]) instead of
/// binding, so connections waiting in their queues are served, not reset. The steering
/// program is not attached to inherited sockets (the group keeps the one it has).
/// Inherited sockets no listener names are closed.
pub fn start_with<F, A>(
    plan_workers: &[usize],
    listeners: Vec<ListenerSpec>,
    inherited: Inherited,
    opts: RuntimeOptions,
    factory: F,
) -> Result<Runtime, RuntimeError>
where
    F: Fn(&WorkerCtx) -> A + Send + Sync + 'static,
    A: WorkerApp,
{
    let l = startup::launch(plan_workers, listeners, inherited, opts, factory)?;
    Ok(Runtime {
        workers: l.workers,
        drain: l.drain,
        limits: l.limits,
        listeners: Mutex::new(l.listeners),
        steer_prog: l.steer_prog,
    })
}

/// The running workers. Dropping it shuts down immediately (zero deadline) and joins.
pub struct Runtime {
    workers: Vec<WorkerHandle>,
    /// The drain signal and deadline every worker watches.
    drain: Arc<Drain>,
    /// The connection caps and the process-wide counts every worker checks.
    limits: Arc<Limits>,
    listeners: Mutex<BTreeMap<String, ListenerInfo>>,
    steer_prog: Option<Vec<steer::Insn>>,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime").field("workers", &self.worker_tids()).finish_non_exhaustive()
    }
}

impl Runtime {
    /// Number of workers.
    pub fn n_workers(&self) -> usize {
        self.workers.len()
    }

    /// `(worker index, planned cpu, kernel thread id)` of every worker.
    pub fn worker_tids(&self) -> Vec<(usize, usize, i32)> {
        self.workers.iter().map(|w| (w.index, w.cpu, w.tid)).collect()
    }

    /// Every worker's counters, in worker order.
    pub fn stats(&self) -> Vec<Arc<WorkerStats>> {
        self.workers.iter().map(|w| w.stats.clone()).collect()
    }
}

/// Connection limits.
impl Runtime {
    /// Changes the connection cap of every worker; takes effect at the next accept.
    /// Connections above a lowered cap stay open.
    pub fn set_max_connections_per_worker(&self, cap: usize) -> Result<(), RuntimeError> {
        use std::sync::atomic::Ordering::Relaxed;
        let c = &self.limits.caps;
        self.set_connection_limits(
            cap,
            c.per_client.load(Relaxed),
            c.total.load(Relaxed),
            c.answering.load(Relaxed),
        )
    }

    /// Changes every connection limit (see [`RuntimeOptions`]: per worker, per client
    /// address, for the process, refused connections answered at once); takes effect at
    /// the next accept. Connections above a lowered limit stay open.
    pub fn set_connection_limits(
        &self,
        per_worker: usize,
        per_client: usize,
        total: usize,
        answering: usize,
    ) -> Result<(), RuntimeError> {
        if per_worker == 0 {
            return Err(RuntimeError::InvalidOptions(
                "max_connections_per_worker must be at least 1".into(),
            ));
        }
        if self.drain.is_draining() {
            return Err(RuntimeError::ShuttingDown);
        }
        self.limits.caps.set(per_worker, per_client, total, answering);
        Ok(())
    }

    /// Open client connections of the whole process.
    pub fn open_connections(&self) -> usize {
        self.limits.conns.total()
    }
}

/// Listeners.
impl Runtime {
    /// The address listener `name` is bound to (every worker's socket shares it; with port 0
    /// in the spec, the port the kernel chose); `None` if there is no such listener.
    pub fn local_addr(&self, name: &str) -> Option<SocketAddr> {
        let l = self.listeners.lock().ok()?;
        Some(l.get(name)?.addr)
    }

    /// The specs of the current listeners, by name.
    pub fn listeners(&self) -> Vec<ListenerSpec> {
        self.listeners
            .lock()
            .map(|l| l.values().map(|i| i.spec.clone()).collect())
            .unwrap_or_default()
    }

    /// Replaces the listener set: binds new listeners on every worker, changes the backlog of
    /// kept ones in place, and closes removed ones (their established connections continue;
    /// connections still in a removed socket's accept queue are reset by the kernel).
    /// All-or-nothing for binding: if any new socket fails to bind, nothing changes.
    /// Blocks until every worker applied the change.
    ///
    /// A listener is matched by name; an address change binds the new address before closing
    /// the old one. Under [`Steer::Cpu`](crate::Steer::Cpu) a name change that keeps the same
    /// address joins the old reuseport group before the old sockets leave, which reorders the
    /// group until restart.
    pub fn set_listeners(&self, specs: Vec<ListenerSpec>) -> Result<(), RuntimeError> {
        listeners::check_unique(&specs)?;
        if self.drain.is_draining() {
            return Err(RuntimeError::ShuttingDown);
        }
        let mut current = self.listeners.lock().map_err(|_| RuntimeError::ShuttingDown)?;
        listeners::change(&mut current, &self.workers, self.steer_prog.as_deref(), specs)
    }

    /// Duplicates of every worker's listening sockets, by listener name, in worker order:
    /// what a successor process needs to take over the listeners (the sockets stay open
    /// here too). Blocks until every worker answered.
    pub fn export_listeners(&self) -> Result<Vec<(String, OwnedFd)>, RuntimeError> {
        if self.drain.is_draining() {
            return Err(RuntimeError::ShuttingDown);
        }
        export::collect(&self.workers)
    }
}

/// Shutdown.
impl Runtime {
    /// A receiver that turns `true` when shutdown starts (the same value connections get).
    pub fn drain_receiver(&self) -> watch::Receiver<bool> {
        self.drain.subscribe()
    }

    /// A handle that can trigger shutdown from another thread or task.
    pub fn shutdown_handle(&self) -> ShutdownHandle {
        ShutdownHandle::new(self.drain.clone())
    }

    /// Triggers shutdown (see [`ShutdownHandle::shutdown`]) and waits for it.
    pub fn shutdown(mut self, deadline: Duration) -> ShutdownReport {
        self.drain.trigger(deadline);
        shutdown::join(&mut self.workers)
    }

    /// Waits until the runtime was shut down through a [`ShutdownHandle`] and all workers exited.
    pub fn wait(mut self) -> ShutdownReport {
        shutdown::join(&mut self.workers)
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        self.drain.trigger(Duration::ZERO);
        shutdown::join(&mut self.workers);
    }
}
