//! Graceful shutdown: the drain signal and its deadline ([`Drain`]), shared by the
//! [`Runtime`](crate::Runtime) and every worker; a [`ShutdownHandle`] starts the drain from
//! anywhere, the first trigger sets the deadline, and [`join`] collects the worker threads
//! into a [`ShutdownReport`].

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::watch;

use super::command::WorkerHandle;

/// Outcome of a shutdown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ShutdownReport {
    /// Connections still open at the deadline and dropped.
    pub dropped_connections: usize,
    /// Worker threads that panicked.
    pub panicked_workers: usize,
}

/// The drain signal every connection watches, and when connections still open are dropped.
#[derive(Debug)]
pub(super) struct Drain {
    signal: watch::Sender<bool>,
    deadline: Mutex<Option<Instant>>,
}

impl Drain {
    /// Not draining yet.
    pub(super) fn new() -> Drain {
        Drain { signal: watch::channel(false).0, deadline: Mutex::new(None) }
    }

    /// Starts the drain; the first call sets the deadline, `after` from now.
    pub(super) fn trigger(&self, after: Duration) {
        if let Ok(mut d) = self.deadline.lock() {
            d.get_or_insert_with(|| Instant::now() + after);
        }
        self.signal.send_replace(true);
    }

    /// Whether the drain started.
    pub(super) fn is_draining(&self) -> bool {
        *self.signal.borrow()
    }

    /// A receiver that turns `true` when the drain starts.
    pub(super) fn subscribe(&self) -> watch::Receiver<bool> {
        self.signal.subscribe()
    }

    /// When connections still open are dropped, once a shutdown was triggered.
    pub(super) fn deadline(&self) -> Option<Instant> {
        self.deadline.lock().ok().and_then(|d| *d)
    }
}

/// Triggers a graceful shutdown from anywhere (e.g. a signal task); cheap to clone.
#[derive(Debug, Clone)]
pub struct ShutdownHandle {
    drain: Arc<Drain>,
}

impl ShutdownHandle {
    /// A handle on `drain`.
    pub(super) fn new(drain: Arc<Drain>) -> ShutdownHandle {
        ShutdownHandle { drain }
    }

    /// Starts draining: workers close their listeners, `drain` flips to `true` for every
    /// connection, and connections still open `deadline` from now are dropped. Only the first
    /// call sets the deadline. Does not wait; see [`Runtime::wait`](crate::Runtime::wait).
    pub fn shutdown(&self, deadline: Duration) {
        self.drain.trigger(deadline);
    }

    /// Whether a shutdown was triggered.
    pub fn is_draining(&self) -> bool {
        self.drain.is_draining()
    }
}

/// Waits for every worker thread not joined yet to exit, and reports what they dropped.
pub(super) fn join(workers: &mut [WorkerHandle]) -> ShutdownReport {
    let mut report = ShutdownReport::default();
    for w in workers {
        if let Some(t) = w.thread.take() {
            match t.join() {
                Ok(dropped) => report.dropped_connections += dropped,
                Err(_) => report.panicked_workers += 1,
            }
        }
    }
    report
}
