//! What one worker's local tasks share ([`Local`]: its counters, its listening sockets, its
//! idle lot, the process's connection limits) and the guard that keeps each of its
//! connections counted ([`ConnGuard`]).

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use tokio::net::TcpListener;
use tokio::sync::{Notify, watch};

use super::idle::Lot;
use crate::app::WorkerStats;
use crate::limits::Limits;

/// Per-worker state shared by its local tasks.
pub(super) struct Local {
    pub(super) stats: Arc<WorkerStats>,
    pub(super) open: Cell<usize>,
    /// The caps and the process-wide counts.
    pub(super) limits: Arc<Limits>,
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
    /// The names of this worker's listeners that take a PROXY protocol header first.
    /// Empty unless one does: then the acceptor's check is one branch.
    pub(super) proxied: RefCell<Vec<Rc<str>>>,
    /// Listener names by id (a connection's guard keeps the id: no room in its task for
    /// the name). Only grows; names are few.
    pub(super) names: RefCell<Vec<Rc<str>>>,
}

impl Local {
    /// The state of a worker with counters `stats`, before it has a listener or a lot.
    pub(super) fn new(
        stats: Arc<WorkerStats>,
        limits: Arc<Limits>,
        drain: watch::Receiver<bool>,
    ) -> Local {
        Local {
            stats,
            open: Cell::new(0),
            limits,
            closed: Notify::new(),
            listeners_changed: Notify::new(),
            drain,
            listeners: RefCell::new(Vec::new()),
            next: Cell::new(0),
            lot: RefCell::new(None),
            lot_changed: Notify::new(),
            names: RefCell::new(Vec::new()),
            proxied: RefCell::new(Vec::new()),
        }
    }

    /// The id of listener name `name`.
    pub(super) fn name_id(&self, name: &Rc<str>) -> u32 {
        let mut names = self.names.borrow_mut();
        if let Some(i) = names.iter().position(|n| n == name) {
            return i as u32;
        }
        names.push(name.clone());
        (names.len() - 1) as u32
    }

    /// Whether listener `name` takes a PROXY protocol header first.
    pub(super) fn is_proxied(&self, name: &str) -> bool {
        let p = self.proxied.borrow();
        !p.is_empty() && p.iter().any(|n| **n == *name)
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
    /// The client's port, when its address came from a PROXY header (`proxied`): a parked
    /// connection is given back to the app with the address the header named.
    pub(super) port: u16,
    /// The client address came from a PROXY header, not from the socket.
    pub(super) proxied: bool,
    /// The listener's name id ([`Local::name_id`]).
    pub(super) listener: u32,
}

impl Drop for ConnGuard {
    fn drop(&mut self) {
        let l = &self.local;
        l.open.set(l.open.get().saturating_sub(1));
        l.stats.open.fetch_sub(1, Ordering::Relaxed);
        l.limits.conns.leave(self.client);
        l.closed.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    /// Every connection's task carries a guard: the listener's name id, and the port and
    /// flag of a client named by a PROXY header, fit in the space the client address
    /// leaves, so parking costs the task nothing.
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
