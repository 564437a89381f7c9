//! Graceful shutdown: a [`ShutdownHandle`] starts the drain from anywhere, the first trigger
//! sets the deadline, and [`Runtime::shutdown`] or [`Runtime::wait`] join the worker threads
//! into a [`ShutdownReport`]. Dropping the [`Runtime`] shuts down at once.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;

use super::{Runtime, Shared};

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

impl Shared {
    /// Starts the drain; the first call sets the deadline, `after` from now.
    fn trigger(&self, after: Duration) {
        if let Ok(mut d) = self.deadline.lock() {
            d.get_or_insert_with(|| Instant::now() + after);
        }
        self.drain.send_replace(true);
    }

    /// When connections still open are dropped, once a shutdown was triggered.
    pub(super) fn deadline(&self) -> Option<Instant> {
        self.deadline.lock().ok().and_then(|d| *d)
    }
}

impl Runtime {
    /// A receiver that turns `true` when shutdown starts (the same value connections get).
    pub fn drain_receiver(&self) -> watch::Receiver<bool> {
        self.shared.drain.subscribe()
    }

    /// A handle that can trigger shutdown from another thread or task.
    pub fn shutdown_handle(&self) -> ShutdownHandle {
        ShutdownHandle { shared: self.shared.clone() }
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
