//! Read-ahead for sliced objects: when a viewer's response reads slice k sequentially (to
//! its end, and at least half of it: `span::reads_most_of`), the next `[[site]] read_ahead`
//! slices that are neither stored nor being fetched are fetched in the background, so a
//! sequential viewer finds them stored when it gets there. A small range at a slice's end
//! (one byte on its last byte) starts none: it costs the origin its own slice, never
//! `read_ahead` more.
//!
//! Each read-ahead fetch is the ordinary miss step (`Sliced::fetch_slice`, through
//! `Fetcher::fetch_and_store`) led by a background task that holds the slice's in-flight
//! entry, so a viewer arriving meanwhile joins it like any other fetch. Bounds: at most
//! `read_ahead` fetches in flight per client connection and `[cache] read_ahead_per_worker`
//! per worker ([`ReadAhead`]); a fetch counts until its slice is stored or has failed.
//! Read-ahead is only started as a response's body walk enters a slice, and the walk waits
//! for the client to take the bytes before it goes on, so it stops when the viewer stops
//! reading.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::atomic::Ordering::Relaxed;

use super::Sliced;
use crate::path::fetch::Fetched;
use crate::path::inflight::State;
use crate::path::piecewise::Head;

/// One worker's read-ahead fetches in flight, in all and per client connection.
#[derive(Default)]
pub(in crate::path) struct ReadAhead {
    in_flight: Cell<usize>,
    per_conn: RefCell<HashMap<SocketAddr, usize>>,
}

impl ReadAhead {
    /// Takes a slot for one more fetch of `conn`, unless the connection has `per_conn` or
    /// the worker `per_worker` in flight.
    pub(in crate::path) fn try_acquire(
        &self,
        conn: SocketAddr,
        per_conn: usize,
        per_worker: usize,
    ) -> bool {
        if self.in_flight.get() >= per_worker {
            return false;
        }
        let mut m = self.per_conn.borrow_mut();
        let n = m.entry(conn).or_default();
        if *n >= per_conn {
            if *n == 0 {
                m.remove(&conn);
            }
            return false;
        }
        *n += 1;
        self.in_flight.set(self.in_flight.get() + 1);
        true
    }

    /// Gives back a slot of `conn` (entries of connections with nothing in flight go).
    pub(in crate::path) fn release(&self, conn: SocketAddr) {
        self.in_flight.set(self.in_flight.get().saturating_sub(1));
        let mut m = self.per_conn.borrow_mut();
        if let Some(n) = m.get_mut(&conn) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                m.remove(&conn);
            }
        }
    }

    /// Fetches in flight on this worker.
    #[cfg(test)]
    fn in_flight(&self) -> usize {
        self.in_flight.get()
    }
}

/// Starts read-ahead of the slices after `k` of `head`'s version, for the viewer `s`
/// serves.
pub(super) fn schedule(s: &Rc<Sliced>, head: &Head, k: u64) {
    let depth = u64::from(s.job.site.slicing.read_ahead);
    let shared = &s.job.worker.fetch.shared;
    let per_worker = s.job.worker.fetch.settings.read_ahead_per_worker;
    if depth == 0 || per_worker == 0 || head.total == 0 {
        return;
    }
    let last = super::span::index(head.total - 1, s.size);
    let peer = s.job.peer;
    for j in k.saturating_add(1)..=k.saturating_add(depth).min(last) {
        if s.has_slice(head, j) {
            continue;
        }
        let Some(mut lead) = shared.inflight.try_lead(&s.lock_key(j)) else { continue };
        if s.has_slice(head, j) {
            // Stored between the two looks.
            lead.publish(State::Done);
            continue;
        }
        if !s.read_ahead.try_acquire(peer, depth as usize, per_worker) {
            lead.publish(State::Done);
            shared.slices.read_ahead_skipped.fetch_add(1, Relaxed);
            return;
        }
        shared.slices.read_ahead_fetches.fetch_add(1, Relaxed);
        let (s, head) = (s.clone(), head.clone());
        tokio::task::spawn_local(async move {
            let (fetched, _) = s.fetch_slice(j, Some(&head), (false, false), lead, true).await;
            if let Fetched::Filling(mut f) = fetched {
                // Counted until the slice is stored: the bound is on origin transfers.
                let _ = f.wait_for(u64::MAX).await;
            }
            s.read_ahead.release(peer);
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_bounded_per_connection_and_per_worker() {
        let ra = ReadAhead::default();
        let (a, b, c): (SocketAddr, SocketAddr, SocketAddr) = (
            "10.0.0.1:1".parse().unwrap(),
            "10.0.0.1:2".parse().unwrap(),
            "10.0.0.2:1".parse().unwrap(),
        );
        assert!(ra.try_acquire(a, 2, 3) && ra.try_acquire(a, 2, 3));
        assert!(!ra.try_acquire(a, 2, 3), "the connection has its two");
        assert!(ra.try_acquire(b, 2, 3));
        assert!(!ra.try_acquire(c, 2, 3), "the worker has its three");
        ra.release(a);
        assert!(ra.try_acquire(c, 2, 3));
        for conn in [a, b, c] {
            ra.release(conn);
        }
        assert_eq!(ra.in_flight(), 0);
        assert!(ra.per_conn.borrow().is_empty(), "idle connections leave no entry");
        assert!(!ra.try_acquire(a, 0, 3), "depth 0: none");
        assert!(ra.per_conn.borrow().is_empty());
    }
}
