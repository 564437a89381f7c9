//! Pinned worker threads, their per-worker `SO_REUSEPORT` listeners, accept loops, connection
//! limits, live listener changes, the export of listening sockets for a successor process,
//! and graceful shutdown.
//!
//! Each worker owns one OS thread pinned to its planned CPU, a tokio `current_thread` runtime
//! with a `LocalSet`, and its own listening socket per listener, so the kernel spreads
//! connections over the workers and a connection never leaves the worker that accepted it.
//! Sockets are bound on the caller's thread before any worker runs so that configuration
//! errors (address in use, permission) surface from [`start`] and [`Runtime::set_listeners`].

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, mpsc as std_mpsc};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use socket2::SockRef;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, mpsc, watch};
use tokio::task::LocalSet;

use crate::app::{ConnEnd, WorkerApp, WorkerCtx, WorkerStats};
use crate::error::RuntimeError;
use crate::limits::{Caps, Conns, Refusal};
use crate::options::{ListenerSpec, RuntimeOptions, Steer};
use crate::sockets::{Inherited, adopt_group, bind_group};
use crate::steer;

/// Outcome of a shutdown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ShutdownReport {
    /// Connections still open at the deadline and dropped.
    pub dropped_connections: usize,
    /// Worker threads that panicked.
    pub panicked_workers: usize,
}

/// Triggers a graceful shutdown from anywhere (e.g. a signal task); cheap to clone.
#[derive(Debug, Clone)]
pub struct ShutdownHandle {
    shared: Arc<Shared>,
}

impl ShutdownHandle {
    /// Starts draining: workers close their listeners, `drain` flips to `true` for every
    /// connection, and connections still open `deadline` from now are dropped. Only the first
    /// call sets the deadline. Does not wait; see [`Runtime::wait`].
    pub fn shutdown(&self, deadline: Duration) {
        self.shared.trigger(deadline);
    }

    /// Whether a shutdown was triggered.
    pub fn is_draining(&self) -> bool {
        *self.shared.drain.borrow()
    }
}

#[derive(Debug)]
struct Shared {
    drain: watch::Sender<bool>,
    deadline: Mutex<Option<Instant>>,
    caps: Caps,
    conns: Conns,
}

impl Shared {
    fn trigger(&self, after: Duration) {
        if let Ok(mut d) = self.deadline.lock() {
            d.get_or_insert_with(|| Instant::now() + after);
        }
        self.drain.send_replace(true);
    }

    fn deadline(&self) -> Option<Instant> {
        self.deadline.lock().ok().and_then(|d| *d)
    }
}

enum Command {
    Apply {
        add: Vec<(String, std::net::TcpListener)>,
        relisten: Vec<(String, i32)>,
        remove: Vec<String>,
        done: std_mpsc::Sender<Result<(), String>>,
    },
    Export {
        done: std_mpsc::Sender<Result<Vec<(String, std::os::fd::OwnedFd)>, String>>,
    },
}

struct WorkerHandle {
    index: usize,
    cpu: usize,
    tid: i32,
    stats: Arc<WorkerStats>,
    cmd: mpsc::UnboundedSender<Command>,
    thread: Option<std::thread::JoinHandle<usize>>,
}

#[derive(Debug, Clone)]
struct ListenerInfo {
    spec: ListenerSpec,
    addr: SocketAddr,
}

/// The running workers. Dropping it shuts down immediately (zero deadline) and joins.
pub struct Runtime {
    workers: Vec<WorkerHandle>,
    shared: Arc<Shared>,
    listeners: Mutex<BTreeMap<String, ListenerInfo>>,
    steer_prog: Option<Vec<steer::Insn>>,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime").field("workers", &self.worker_tids()).finish_non_exhaustive()
    }
}

fn thread_tid() -> i32 {
    // "/proc/thread-self" -> "<pid>/task/<tid>"; avoids an unsafe gettid call.
    std::fs::read_link("/proc/thread-self")
        .ok()
        .and_then(|p| p.file_name()?.to_str()?.parse().ok())
        .unwrap_or(0)
}

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
    mut inherited: Inherited,
    opts: RuntimeOptions,
    factory: F,
) -> Result<Runtime, RuntimeError>
where
    F: Fn(&WorkerCtx) -> A + Send + Sync + 'static,
    A: WorkerApp,
{
    let n = plan_workers.len();
    if n == 0 {
        return Err(RuntimeError::NoWorkers);
    }
    if opts.max_connections_per_worker == 0 {
        return Err(RuntimeError::InvalidOptions(
            "max_connections_per_worker must be at least 1".into(),
        ));
    }
    check_unique(&listeners)?;
    let steer_prog = match opts.steer {
        Steer::Hash => None,
        Steer::Cpu => Some(
            steer::cpu_program(&steer::cpu_table(plan_workers, &opts.irq_cpus), n)
                .ok_or(RuntimeError::SteerTable)?,
        ),
    };

    let mut per_worker: Vec<Vec<(String, std::net::TcpListener)>> =
        (0..n).map(|_| Vec::new()).collect();
    let mut infos = BTreeMap::new();
    for spec in &listeners {
        let (socks, addr) = match inherited.remove(&spec.name) {
            Some(socks) => adopt_group(spec, socks, n)?,
            None => bind_group(spec, n, steer_prog.as_deref(), &[])?,
        };
        for (w, socks) in socks.into_iter().enumerate() {
            per_worker[w].extend(socks.into_iter().map(|s| (spec.name.clone(), s)));
        }
        infos.insert(spec.name.clone(), ListenerInfo { spec: spec.clone(), addr });
    }
    for (name, socks) in inherited {
        tracing::warn!(listener = %name, sockets = socks.len(), "closing inherited sockets no listener uses");
    }

    let (drain, _) = watch::channel(false);
    let caps = Caps::default();
    caps.per_worker.store(opts.max_connections_per_worker, Ordering::Relaxed);
    caps.per_client.store(opts.max_connections_per_client, Ordering::Relaxed);
    caps.total.store(opts.max_connections, Ordering::Relaxed);
    caps.answering.store(opts.max_answering_refused, Ordering::Relaxed);
    let shared = Arc::new(Shared { drain, deadline: Mutex::new(None), caps, conns: Conns::new() });
    let factory = Arc::new(factory);
    let (ready_tx, ready_rx) = std_mpsc::channel::<(usize, Result<i32, String>)>();
    let mut rt = Runtime {
        workers: Vec::with_capacity(n),
        shared: shared.clone(),
        listeners: Mutex::new(infos),
        steer_prog,
    };
    for (index, (initial, &cpu)) in per_worker.into_iter().zip(plan_workers).enumerate() {
        let stats = Arc::new(WorkerStats::default());
        let (cmd_tx, cmd_rx) = mpsc::unbounded_channel();
        let ctx = WorkerCtx { index, cpu, n_workers: n, stats: stats.clone() };
        let cfg = WorkerCfg { ctx, pin: opts.pin, shared: shared.clone() };
        let factory = factory.clone();
        let ready = ready_tx.clone();
        let spawned = std::thread::Builder::new()
            .name(format!("reel-w{index}"))
            .spawn(move || worker_thread(cfg, initial, cmd_rx, ready, move |c| factory(c)));
        match spawned {
            Ok(thread) => rt.workers.push(WorkerHandle {
                index,
                cpu,
                tid: 0,
                stats,
                cmd: cmd_tx,
                thread: Some(thread),
            }),
            Err(source) => return Err(RuntimeError::Spawn { index, source }),
        }
    }
    drop(ready_tx);
    let mut reported = vec![false; n];
    for _ in 0..n {
        // A worker that dies before reporting drops its sender; once all are gone recv fails,
        // and the dead one is a worker that never reported.
        let Ok((index, res)) = ready_rx.recv() else {
            let index = reported.iter().position(|r| !r).unwrap_or(0);
            return Err(RuntimeError::Worker {
                index,
                message: "worker exited during startup".into(),
            });
        };
        if let Some(r) = reported.get_mut(index) {
            *r = true;
        }
        match res {
            Ok(tid) => rt.workers[index].tid = tid,
            Err(message) => return Err(RuntimeError::Worker { index, message }),
        }
    }
    Ok(rt)
}

fn check_unique(listeners: &[ListenerSpec]) -> Result<(), RuntimeError> {
    let mut names = std::collections::BTreeSet::new();
    for l in listeners {
        if !names.insert(l.name.as_str()) {
            return Err(RuntimeError::DuplicateListener(l.name.clone()));
        }
    }
    Ok(())
}

impl Runtime {
    /// Number of workers.
    pub fn n_workers(&self) -> usize {
        self.workers.len()
    }

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

    /// `(worker index, planned cpu, kernel thread id)` of every worker.
    pub fn worker_tids(&self) -> Vec<(usize, usize, i32)> {
        self.workers.iter().map(|w| (w.index, w.cpu, w.tid)).collect()
    }

    /// Every worker's counters, in worker order.
    pub fn stats(&self) -> Vec<Arc<WorkerStats>> {
        self.workers.iter().map(|w| w.stats.clone()).collect()
    }

    /// A receiver that turns `true` when shutdown starts (the same value connections get).
    pub fn drain_receiver(&self) -> watch::Receiver<bool> {
        self.shared.drain.subscribe()
    }

    /// A handle that can trigger shutdown from another thread or task.
    pub fn shutdown_handle(&self) -> ShutdownHandle {
        ShutdownHandle { shared: self.shared.clone() }
    }

    /// Replaces the listener set: binds new listeners on every worker, changes the backlog of
    /// kept ones in place, and closes removed ones (their established connections continue;
    /// connections still in a removed socket's accept queue are reset by the kernel).
    /// All-or-nothing for binding: if any new socket fails to bind, nothing changes.
    /// Blocks until every worker applied the change.
    ///
    /// A listener is matched by name; an address change binds the new address before closing
    /// the old one. Under [`Steer::Cpu`] a name change that keeps the same address joins the
    /// old reuseport group before the old sockets leave, which reorders the group until restart.
    pub fn set_listeners(&self, specs: Vec<ListenerSpec>) -> Result<(), RuntimeError> {
        check_unique(&specs)?;
        if *self.shared.drain.borrow() {
            return Err(RuntimeError::ShuttingDown);
        }
        let mut current = self.listeners.lock().map_err(|_| RuntimeError::ShuttingDown)?;
        let n = self.workers.len();
        let mut add_infos = Vec::new();
        let mut per_worker: Vec<Vec<(String, std::net::TcpListener)>> =
            (0..n).map(|_| Vec::new()).collect();
        let mut relisten = Vec::new();
        let mut remove = Vec::new();
        for spec in &specs {
            match current.get(&spec.name) {
                Some(cur) if cur.spec == *spec => {}
                Some(cur) if cur.spec.addr == spec.addr => {
                    relisten.push((spec.name.clone(), spec.backlog));
                }
                _ => {
                    // Binding errors return here, before any worker was told anything.
                    let own: Vec<SocketAddr> = current.values().map(|i| i.addr).collect();
                    let (socks, addr) = bind_group(spec, n, self.steer_prog.as_deref(), &own)?;
                    for (w, socks) in socks.into_iter().enumerate() {
                        per_worker[w].extend(socks.into_iter().map(|s| (spec.name.clone(), s)));
                    }
                    add_infos.push(ListenerInfo { spec: spec.clone(), addr });
                    if current.contains_key(&spec.name) {
                        remove.push(spec.name.clone());
                    }
                }
            }
        }
        for name in current.keys() {
            if !specs.iter().any(|s| &s.name == name) {
                remove.push(name.clone());
            }
        }
        let mut waits = Vec::with_capacity(n);
        for (w, add) in self.workers.iter().zip(per_worker) {
            let (done, rx) = std_mpsc::channel();
            w.cmd
                .send(Command::Apply {
                    add,
                    relisten: relisten.clone(),
                    remove: remove.clone(),
                    done,
                })
                .map_err(|_| RuntimeError::WorkerGone(w.index))?;
            waits.push((w.index, rx));
        }
        let mut first_err = None;
        for (index, rx) in waits {
            let r = match rx.recv() {
                Ok(Ok(())) => Ok(()),
                Ok(Err(message)) => Err(RuntimeError::Worker { index, message }),
                Err(_) => Err(RuntimeError::WorkerGone(index)),
            };
            if let Err(e) = r {
                first_err.get_or_insert(e);
            }
        }
        for name in &remove {
            current.remove(name);
        }
        for info in add_infos {
            current.insert(info.spec.name.clone(), info);
        }
        for (name, backlog) in relisten {
            if let Some(i) = current.get_mut(&name) {
                i.spec.backlog = backlog;
            }
        }
        first_err.map_or(Ok(()), Err)
    }

    /// Changes the connection cap of every worker; takes effect at the next accept.
    /// Connections above a lowered cap stay open.
    pub fn set_max_connections_per_worker(&self, cap: usize) -> Result<(), RuntimeError> {
        let c = &self.shared.caps;
        self.set_connection_limits(
            cap,
            c.per_client.load(Ordering::Relaxed),
            c.total.load(Ordering::Relaxed),
            c.answering.load(Ordering::Relaxed),
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
        if *self.shared.drain.borrow() {
            return Err(RuntimeError::ShuttingDown);
        }
        let c = &self.shared.caps;
        c.per_worker.store(per_worker, Ordering::Relaxed);
        c.per_client.store(per_client, Ordering::Relaxed);
        c.total.store(total, Ordering::Relaxed);
        c.answering.store(answering, Ordering::Relaxed);
        Ok(())
    }

    /// Open client connections of the whole process.
    pub fn open_connections(&self) -> usize {
        self.shared.conns.total()
    }

    /// Duplicates of every worker's listening sockets, by listener name, in worker order:
    /// what a successor process needs to take over the listeners (the sockets stay open
    /// here too). Blocks until every worker answered.
    pub fn export_listeners(&self) -> Result<Vec<(String, std::os::fd::OwnedFd)>, RuntimeError> {
        if *self.shared.drain.borrow() {
            return Err(RuntimeError::ShuttingDown);
        }
        let mut waits = Vec::with_capacity(self.workers.len());
        for w in &self.workers {
            let (done, rx) = std_mpsc::channel();
            w.cmd.send(Command::Export { done }).map_err(|_| RuntimeError::WorkerGone(w.index))?;
            waits.push((w.index, rx));
        }
        let mut out = Vec::new();
        for (index, rx) in waits {
            match rx.recv() {
                Ok(Ok(v)) => out.extend(v),
                Ok(Err(message)) => return Err(RuntimeError::Worker { index, message }),
                Err(_) => return Err(RuntimeError::WorkerGone(index)),
            }
        }
        Ok(out)
    }

    /// Triggers shutdown (see [`ShutdownHandle::shutdown`]) and waits for it.
    pub fn shutdown(mut self, deadline: Duration) -> ShutdownReport {
        self.shared.trigger(deadline);
        self.join()
    }

    /// Waits until the runtime was shut down through a [`ShutdownHandle`] and all workers exited.
    pub fn wait(mut self) -> ShutdownReport {
        self.join()
    }

    fn join(&mut self) -> ShutdownReport {
        let mut report = ShutdownReport::default();
        for w in &mut self.workers {
            if let Some(t) = w.thread.take() {
                match t.join() {
                    Ok(dropped) => report.dropped_connections += dropped,
                    Err(_) => report.panicked_workers += 1,
                }
            }
        }
        report
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        self.shared.trigger(Duration::ZERO);
        self.join();
    }
}

mod idle;
mod thread;
use thread::{WorkerCfg, worker_thread};
