//! Starting the workers: checking the options, binding (or adopting) every listener's
//! sockets on the caller's thread, spawning one worker thread per planned CPU and waiting
//! until each reports that it runs ([`launch`], for [`start_with`](crate::start_with)).

use std::collections::BTreeMap;
use std::sync::{Arc, mpsc as std_mpsc};
use std::time::Duration;

use tokio::sync::mpsc;

use super::command::WorkerHandle;
use super::listeners::{ListenerInfo, check_unique, proxied_names};
use super::shutdown::{Drain, join};
use super::thread::{WorkerCfg, worker_thread};
use crate::app::{WorkerApp, WorkerCtx, WorkerStats};
use crate::error::RuntimeError;
use crate::limits::{Caps, ClientCounts, Limits};
use crate::options::{ListenerSpec, RuntimeOptions, Steer};
use crate::sockets::{Inherited, adopt_group, bind_group};
use crate::steer;

/// Running workers, all of which reported that they run: what a
/// [`Runtime`](crate::Runtime) is made of.
pub(super) struct Launched {
    pub(super) workers: Vec<WorkerHandle>,
    pub(super) drain: Arc<Drain>,
    pub(super) limits: Arc<Limits>,
    pub(super) listeners: BTreeMap<String, ListenerInfo>,
    pub(super) steer_prog: Option<Vec<steer::Insn>>,
}

/// Checks `opts`, binds or adopts (from `inherited`) every listener's sockets, starts one
/// worker per CPU in `plan_workers` with the app `factory` builds, and waits until each
/// runs. A worker that cannot start stops the ones already started (at once) before the
/// error returns.
pub(super) fn launch<F, A>(
    plan_workers: &[usize],
    listeners: Vec<ListenerSpec>,
    mut inherited: Inherited,
    opts: RuntimeOptions,
    factory: F,
) -> Result<Launched, RuntimeError>
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

    let drain = Arc::new(Drain::new());
    let limits = Arc::new(Limits::new(Caps::new(
        opts.max_connections_per_worker,
        opts.max_connections_per_client,
        opts.max_connections,
        opts.max_answering_refused,
    )));
    let factory = Arc::new(factory);
    let (ready_tx, ready_rx) = std_mpsc::channel::<(usize, Result<i32, String>)>();
    let mut workers: Vec<WorkerHandle> = Vec::with_capacity(n);
    // A worker that cannot start stops the others: the drain, with no time to finish.
    let abandon = |workers: &mut Vec<WorkerHandle>, e: RuntimeError| {
        drain.trigger(Duration::ZERO);
        join(workers);
        Err(e)
    };
    for (index, (initial, &cpu)) in per_worker.into_iter().zip(plan_workers).enumerate() {
        let stats = Arc::new(WorkerStats::default());
        let (cmd_tx, cmd_rx) = mpsc::unbounded_channel();
        let clients = ClientCounts::new(limits.clone());
        let ctx = WorkerCtx { index, cpu, n_workers: n, stats: stats.clone(), clients };
        let cfg = WorkerCfg {
            ctx,
            pin: opts.pin,
            drain: drain.clone(),
            limits: limits.clone(),
            proxied: proxied_names(&listeners),
        };
        let factory = factory.clone();
        let ready = ready_tx.clone();
        let spawned = std::thread::Builder::new()
            .name(format!("reel-w{index}"))
            .spawn(move || worker_thread(cfg, initial, cmd_rx, ready, move |c| factory(c)));
        match spawned {
            Ok(thread) => workers.push(WorkerHandle {
                index,
                cpu,
                tid: 0,
                stats,
                cmd: cmd_tx,
                thread: Some(thread),
            }),
            Err(source) => return abandon(&mut workers, RuntimeError::Spawn { index, source }),
        }
    }
    drop(ready_tx);
    let mut reported = vec![false; n];
    for _ in 0..n {
        // A worker that dies before reporting drops its sender; once all are gone recv fails,
        // and the dead one is a worker that never reported.
        let Ok((index, res)) = ready_rx.recv() else {
            let index = reported.iter().position(|r| !r).unwrap_or(0);
            let message = "worker exited during startup".into();
            return abandon(&mut workers, RuntimeError::Worker { index, message });
        };
        if let Some(r) = reported.get_mut(index) {
            *r = true;
        }
        match res {
            Ok(tid) => workers[index].tid = tid,
            Err(message) => return abandon(&mut workers, RuntimeError::Worker { index, message }),
        }
    }
    Ok(Launched { workers, drain, limits, listeners: infos, steer_prog })
}
