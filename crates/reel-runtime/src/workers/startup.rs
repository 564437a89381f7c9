//! Starting the runtime: checking the options, binding (or adopting) every listener's
//! sockets on the caller's thread, spawning one worker thread per planned CPU and waiting
//! until each reports that it runs.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, mpsc as std_mpsc};

use tokio::sync::{mpsc, watch};

use super::listeners::{ListenerInfo, check_unique};
use super::thread::{WorkerCfg, worker_thread};
use super::{Runtime, Shared, WorkerHandle};
use crate::app::{WorkerApp, WorkerCtx, WorkerStats};
use crate::error::RuntimeError;
use crate::limits::{Caps, Conns};
use crate::options::{ListenerSpec, RuntimeOptions, Steer};
use crate::sockets::{Inherited, adopt_group, bind_group};
use crate::steer;

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
        let clients = crate::limits::ClientCounts { shared: shared.clone() };
        let ctx = WorkerCtx { index, cpu, n_workers: n, stats: stats.clone(), clients };
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
