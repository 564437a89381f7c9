//! The places of one host's `max_connections`, shared by every worker: an HTTP/1.1
//! connection carrying a request holds one ([`Place`]) until it returns to the pool or
//! closes.
//!
//! Places are handed out fairly between the requests' origins ([`Requester`]):
//! * the node's own traffic (background refresh, prefetch, read-ahead) has a room of its
//!   own, an eighth of the places, that viewers' requests cannot take, and goes before any
//!   waiting viewer;
//! * a client address may take a free place while it holds less than a fair share of the
//!   viewers' places (their number over the addresses holding or waiting, plus one for
//!   the next to come), or while more than an eighth of them stays free after; beyond
//!   that it waits, so one address with many slow misses leaves room for the others;
//! * waiting requests are served round-robin across addresses (first come within one
//!   address), a request at most `wait`, then it gives up.
//!
//! With fewer than 8 places there is no room apart and no reserve: first come.

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::oneshot;

/// Whom an origin request is made for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Requester {
    /// A viewer's request (a miss, a revalidation, a pass-through), by client address.
    Viewer(IpAddr),
    /// The node's own: a background refresh, an LL-HLS prefetch, a slice read-ahead.
    Node,
}

/// One host's places.
#[derive(Debug)]
pub(crate) struct Places {
    total: usize,
    /// Places only the node's own requests may take.
    node_room: usize,
    /// Viewers' places an address beyond its fair share leaves free for the others.
    reserve: usize,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    viewers: usize,
    node: usize,
    /// Places held by each client address (addresses holding none are absent).
    held: HashMap<IpAddr, usize>,
    node_waiting: VecDeque<oneshot::Sender<()>>,
    /// Waiting viewers' requests by address, the addresses in round-robin order.
    waiting: VecDeque<(IpAddr, VecDeque<oneshot::Sender<()>>)>,
}

/// A place held: given back when dropped.
#[derive(Debug)]
pub(crate) struct Place {
    places: Arc<Places>,
    who: Requester,
}

impl Drop for Place {
    fn drop(&mut self) {
        self.places.release(self.who);
    }
}

impl Places {
    pub(crate) fn new(total: usize) -> Arc<Places> {
        let total = total.max(1);
        let node_room = if total >= 8 { total / 8 } else { 0 };
        let reserve = if total >= 8 { (total - node_room) / 8 } else { 0 };
        Arc::new(Places { total, node_room, reserve, state: Mutex::default() })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // The state is consistent between statements: a panic elsewhere cannot break it.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A place for `who`, waiting at most `wait` (see the module doc); `None` when none
    /// came.
    pub(crate) async fn take(self: &Arc<Self>, who: Requester, wait: Duration) -> Option<Place> {
        let mut rx = {
            let mut s = self.lock();
            let queued = match who {
                Requester::Node => !s.node_waiting.is_empty(),
                Requester::Viewer(_) => !s.waiting.is_empty(),
            };
            if !queued && self.may_take(&s, who) {
                s.count(who, 1);
                return Some(Place { places: self.clone(), who });
            }
            let (tx, rx) = oneshot::channel();
            match who {
                Requester::Node => s.node_waiting.push_back(tx),
                Requester::Viewer(ip) => match s.waiting.iter_mut().find(|(a, _)| *a == ip) {
                    Some((_, q)) => q.push_back(tx),
                    None => s.waiting.push_back((ip, VecDeque::from([tx]))),
                },
            }
            // An address under its share may go past those waiting.
            self.dispatch(&mut s);
            rx
        };
        match tokio::time::timeout(wait, &mut rx).await {
            Ok(Ok(())) => Some(Place { places: self.clone(), who }),
            Ok(Err(_)) => None,
            Err(_) => {
                // A place granted just as the wait ran out is counted: give it back.
                rx.close();
                if rx.try_recv().is_ok() {
                    drop(Place { places: self.clone(), who });
                }
                None
            }
        }
    }

    /// Whether `who` may take a free place now.
    fn may_take(&self, s: &State, who: Requester) -> bool {
        let used = s.viewers + s.node;
        if used >= self.total {
            return false;
        }
        let Requester::Viewer(ip) = who else { return true };
        let room = self.total - self.node_room;
        if s.viewers >= room {
            return false;
        }
        let free = (room - s.viewers).min(self.total - used);
        let held = s.held.get(&ip).copied().unwrap_or(0);
        held < self.fair_share(s, ip) || free > self.reserve
    }

    /// The viewers' places over the addresses holding or waiting (`ip` among them) and
    /// one more, the next address to come.
    fn fair_share(&self, s: &State, ip: IpAddr) -> usize {
        let waiting_only = s.waiting.iter().filter(|(a, _)| !s.held.contains_key(a)).count();
        let mut addresses = s.held.len() + waiting_only;
        if !s.held.contains_key(&ip) && !s.waiting.iter().any(|(a, _)| *a == ip) {
            addresses += 1;
        }
        ((self.total - self.node_room) / (addresses + 1)).max(1)
    }

    /// Hands free places to the waiting requests: the node's first, then the viewers'
    /// round-robin across addresses, skipping those beyond their share.
    fn dispatch(&self, s: &mut State) {
        while s.viewers + s.node < self.total {
            let Some(tx) = s.node_waiting.pop_front() else { break };
            if tx.send(()).is_ok() {
                s.count(Requester::Node, 1);
            }
        }
        loop {
            let mut granted = false;
            for _ in 0..s.waiting.len() {
                let Some((ip, mut q)) = s.waiting.pop_front() else { break };
                q.retain(|tx| !tx.is_closed());
                if q.is_empty() {
                    continue;
                }
                if self.may_take(s, Requester::Viewer(ip)) {
                    while let Some(tx) = q.pop_front() {
                        if tx.send(()).is_ok() {
                            s.count(Requester::Viewer(ip), 1);
                            granted = true;
                            break;
                        }
                    }
                }
                if !q.is_empty() {
                    s.waiting.push_back((ip, q));
                }
            }
            if !granted {
                break;
            }
        }
    }

    fn release(&self, who: Requester) {
        let mut s = self.lock();
        s.count(who, -1);
        self.dispatch(&mut s);
    }

    /// Places held by the node's requests and by viewers'.
    #[cfg(test)]
    fn held(&self) -> (usize, usize) {
        let s = self.lock();
        (s.node, s.viewers)
    }
}

impl State {
    fn count(&mut self, who: Requester, by: isize) {
        match who {
            Requester::Node => self.node = self.node.saturating_add_signed(by),
            Requester::Viewer(ip) => {
                self.viewers = self.viewers.saturating_add_signed(by);
                let n = self.held.entry(ip).or_insert(0);
                *n = n.saturating_add_signed(by);
                if *n == 0 {
                    self.held.remove(&ip);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: Requester = Requester::Viewer(IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 0, 1)));
    const B: Requester = Requester::Viewer(IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 0, 2)));
    const C: Requester = Requester::Viewer(IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 0, 3)));
    const NO_WAIT: Duration = Duration::from_millis(1);

    fn rt() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
    }

    #[test]
    fn one_address_leaves_room_for_others_and_for_the_node() {
        rt().block_on(async {
            // 16 places: 2 for the node alone, 14 for viewers, 1 kept free of an address
            // beyond its share.
            let p = Places::new(16);
            let mut a = Vec::new();
            while let Some(x) = p.take(A, NO_WAIT).await {
                a.push(x);
            }
            assert_eq!(a.len(), 13, "one address takes all but the reserve");
            let b = p.take(B, NO_WAIT).await.expect("another address gets a place at once");
            assert!(p.take(C, NO_WAIT).await.is_none(), "the viewers' places are all out");
            let n1 = p.take(Requester::Node, NO_WAIT).await.expect("the node's room");
            let n2 = p.take(Requester::Node, NO_WAIT).await.expect("the node's room");
            assert!(p.take(Requester::Node, NO_WAIT).await.is_none(), "every place is out");
            assert_eq!(p.held(), (2, 14));
            drop((b, n1, n2));
            assert_eq!(p.held(), (0, 13));
        });
    }

    #[test]
    fn waiting_addresses_are_served_round_robin_and_under_their_share_first() {
        rt().block_on(async {
            let p = Places::new(16);
            let mut a = Vec::new();
            while let Some(x) = p.take(A, NO_WAIT).await {
                a.push(x);
            }
            let _b = p.take(B, NO_WAIT).await.unwrap();
            let long = Duration::from_secs(30);
            // A waits first, then B twice, then C: freed places go to C and B, under
            // their shares, before A.
            let (pa, pb, pc) = (p.clone(), p.clone(), p.clone());
            let wa = tokio::spawn(async move { pa.take(A, long).await });
            tokio::task::yield_now().await;
            let wb = tokio::spawn(async move { pb.take(B, long).await });
            tokio::task::yield_now().await;
            let wc = tokio::spawn(async move { pc.take(C, long).await });
            tokio::task::yield_now().await;
            a.pop();
            a.pop();
            let (b, c) = (wb.await.unwrap(), wc.await.unwrap());
            assert!(b.is_some() && c.is_some(), "B and C, under their shares, go first");
            assert!(!wa.is_finished(), "the address beyond its share waits: {:?}", p.held());
            // A takes a place again once more than the reserve is free.
            a.pop();
            a.pop();
            assert!(wa.await.unwrap().is_some(), "then A");
        });
    }

    #[test]
    fn a_wait_that_runs_out_gives_up_and_frees_nothing() {
        rt().block_on(async {
            let p = Places::new(2);
            let x = p.take(A, NO_WAIT).await.unwrap();
            let y = p.take(A, NO_WAIT).await.unwrap();
            assert!(p.take(B, Duration::from_millis(20)).await.is_none());
            drop(x);
            assert_eq!(p.held(), (0, 1));
            drop(y);
            assert_eq!(p.held(), (0, 0));
        });
    }
}
