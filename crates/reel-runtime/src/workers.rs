//! The running workers: the [`Runtime`] handle and what its worker threads share with it.
//!
//! Each worker owns one OS thread pinned to its planned CPU, a tokio `current_thread` runtime
//! with a `LocalSet`, and its own listening socket per listener, so the kernel spreads
//! connections over the workers and a connection never leaves the worker that accepted it.
//! Sockets are bound on the caller's thread before any worker runs so that configuration
//! errors (address in use, permission) surface from [`start`] and [`Runtime::set_listeners`].
//!
//! One module per concern, each with both its [`Runtime`] side and its worker side:
//!
//! * `startup`: [`start`] and [`start_with`] spawn the threads and wait until each runs;
//! * `thread`: one worker's thread from start to drain, its state, and the guard that keeps
//!   each connection counted;
//! * `accept`: the worker's acceptor over all its listeners;
//! * `admission`: the connection limits checked at accept, refused connections, and
//!   changing the limits live;
//! * `park`: a connection's task, and the idle lot's task that parks idle connections and
//!   wakes them (`idle` is the lot itself);
//! * `listeners`: the listener set and changing it live;
//! * `export`: duplicates of the listening sockets for a successor process;
//! * `command`: what the [`Runtime`] asks of a running worker, over its command channel;
//! * `shutdown`: the drain, its deadline, and joining the threads.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use tokio::sync::{mpsc, watch};

use crate::app::WorkerStats;
use crate::limits::{Caps, Conns};
use crate::steer;

mod accept;
mod admission;
mod command;
mod export;
mod idle;
mod listeners;
mod park;
mod shutdown;
mod startup;
mod thread;

pub use shutdown::{ShutdownHandle, ShutdownReport};
pub use startup::{start, start_with};

use command::Command;
use listeners::ListenerInfo;

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

/// What the [`Runtime`] and every worker thread share: the drain signal and its deadline,
/// the connection caps and the process-wide connection counts.
#[derive(Debug)]
pub(crate) struct Shared {
    drain: watch::Sender<bool>,
    deadline: Mutex<Option<Instant>>,
    pub(crate) caps: Caps,
    pub(crate) conns: Conns,
}

/// The [`Runtime`]'s handle on one worker thread.
struct WorkerHandle {
    index: usize,
    cpu: usize,
    tid: i32,
    stats: Arc<WorkerStats>,
    cmd: mpsc::UnboundedSender<Command>,
    thread: Option<std::thread::JoinHandle<usize>>,
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
