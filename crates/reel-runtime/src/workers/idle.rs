//! The idle lot: one worker's keep-alive connections that went idle between requests,
//! kept without a task each.
//!
//! A connection's task and its reactor registration cost about 1 KiB while it only waits
//! for the next request; a busy edge holds tens of thousands of such viewers between
//! segments. A parked connection is a slot here instead (the socket, its guard and its
//! idle deadline: 56 bytes, plus 24 in the deadline queue) and an entry in the lot's own
//! epoll instance, which is itself one registration in the worker's reactor. The peer's
//! address is asked of the kernel again when the connection leaves (the guard keeps the
//! listener's id). When the socket becomes readable (a request, or the peer's close) it
//! leaves the lot and gets a task again; at its idle deadline, or when the worker drains,
//! it is closed.
//!
//! Not thread-safe: one lot per worker, used from the worker's thread only.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io;
use std::os::fd::{AsFd, BorrowedFd};
use std::time::{Duration, Instant};

use mio::net::TcpStream;
use mio::{Events, Interest, Poll, Token};

/// Most readiness events taken from the lot's epoll per call.
const EVENTS: usize = 256;

/// One parked connection.
struct Slot<G> {
    stream: TcpStream,
    guard: G,
    idle_until: Instant,
}

/// Bytes one parked connection takes in the slot array.
#[cfg(test)]
pub(super) fn slot_size<G>() -> usize {
    // mio keeps a registration check in each socket in debug builds only.
    let debug = if cfg!(debug_assertions) { 8 } else { 0 };
    std::mem::size_of::<Option<Slot<G>>>() - debug
}

/// A connection leaving the lot because it became readable.
pub(super) struct Woken<G> {
    pub(super) stream: std::net::TcpStream,
    pub(super) guard: G,
}

/// The parked connections of one worker. `G` is what keeps the connection counted (the
/// worker's connection guard); it drops with the slot when the connection closes.
pub(super) struct Lot<G> {
    poll: Poll,
    events: Events,
    slots: Vec<Option<Slot<G>>>,
    free: Vec<u32>,
    /// Idle deadlines, earliest first; an entry whose slot has moved on is skipped.
    deadlines: BinaryHeap<Reverse<(Instant, u32)>>,
    parked: usize,
}

impl<G> Lot<G> {
    pub(super) fn new() -> io::Result<Lot<G>> {
        Ok(Lot {
            poll: Poll::new()?,
            events: Events::with_capacity(EVENTS),
            slots: Vec::new(),
            free: Vec::new(),
            deadlines: BinaryHeap::new(),
            parked: 0,
        })
    }

    /// The lot's epoll descriptor: readable while a parked socket is.
    pub(super) fn fd(&self) -> BorrowedFd<'_> {
        self.poll.registry().as_fd()
    }

    /// Parked connections.
    pub(super) fn len(&self) -> usize {
        self.parked
    }

    /// The earliest idle deadline.
    pub(super) fn next_deadline(&self) -> Option<Instant> {
        self.deadlines.peek().map(|Reverse((t, _))| *t)
    }

    /// Parks a connection until it is readable or `idle_until`. Returns whether its
    /// deadline is now the earliest (the caller wakes the lot's timer). On error the
    /// connection is handed back, to be closed.
    pub(super) fn park(
        &mut self,
        stream: std::net::TcpStream,
        guard: G,
        idle_until: Instant,
    ) -> Result<bool, (io::Error, G)> {
        let mut stream = TcpStream::from_std(stream);
        let idx = match self.free.pop() {
            Some(i) => i,
            None => match u32::try_from(self.slots.len()) {
                Ok(i) => {
                    self.slots.push(None);
                    i
                }
                Err(_) => return Err((io::Error::other("idle lot full"), guard)),
            },
        };
        let token = Token(idx as usize);
        if let Err(e) = self.poll.registry().register(&mut stream, token, Interest::READABLE) {
            self.free.push(idx);
            return Err((e, guard));
        }
        let earliest = self.next_deadline().is_none_or(|t| idle_until < t);
        self.slots[idx as usize] = Some(Slot { stream, guard, idle_until });
        self.deadlines.push(Reverse((idle_until, idx)));
        self.parked += 1;
        Ok(earliest)
    }

    /// Takes out the connections that became readable, into `out`. Returns whether the
    /// lot's epoll may hold more (it returned a full batch).
    pub(super) fn take_ready(&mut self, out: &mut Vec<Woken<G>>) -> io::Result<bool> {
        let Lot { poll, events, slots, free, parked, .. } = self;
        poll.poll(events, Some(Duration::ZERO))?;
        let mut n = 0;
        for e in events.iter() {
            n += 1;
            if let Some(w) = take_slot(slots, free, parked, poll.registry(), e.token().0) {
                out.push(w);
            }
        }
        Ok(n >= EVENTS)
    }

    /// Closes the connections whose idle deadline is at or before `now`; how many.
    pub(super) fn expire(&mut self, now: Instant) -> usize {
        let mut closed = 0;
        while let Some(&Reverse((t, idx))) = self.deadlines.peek() {
            if t > now {
                break;
            }
            self.deadlines.pop();
            let current = self.slots.get(idx as usize).and_then(Option::as_ref);
            if current.is_some_and(|s| s.idle_until == t) {
                // Dropping the socket closes it (and takes it out of the lot's epoll).
                drop(self.remove(idx as usize));
                closed += 1;
            }
        }
        closed
    }

    /// Empties the lot: the readable connections into `ready` (a request may be on its
    /// way in), every other one closed.
    pub(super) fn drain(&mut self, ready: &mut Vec<Woken<G>>) {
        while let Ok(true) = self.take_ready(ready) {}
        self.slots.clear();
        self.free.clear();
        self.deadlines.clear();
        self.parked = 0;
    }

    fn remove(&mut self, idx: usize) -> Option<Woken<G>> {
        take_slot(&mut self.slots, &mut self.free, &mut self.parked, self.poll.registry(), idx)
    }
}

/// Takes slot `idx` out of the lot and its socket out of the lot's epoll.
fn take_slot<G>(
    slots: &mut [Option<Slot<G>>],
    free: &mut Vec<u32>,
    parked: &mut usize,
    registry: &mio::Registry,
    idx: usize,
) -> Option<Woken<G>> {
    let mut s = slots.get_mut(idx)?.take()?;
    free.push(idx as u32);
    *parked -= 1;
    // A failed deregistration leaves a stale entry that the close of the socket, at the
    // latest, removes.
    let _ = registry.deregister(&mut s.stream);
    Some(Woken { stream: std::net::TcpStream::from(s.stream), guard: s.guard })
}

#[cfg(test)]
mod tests;
