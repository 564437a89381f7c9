//! The order in which one connection's responses take the connection: whole responses
//! in request order, by RFC 9218 priority when the client gives one.
//!
//! A player needs whole segments in the order it asked for them; sharing a connection
//! evenly across its streams (what the `h2` crate does with the DATA frames it holds)
//! finishes every segment late. So each connection keeps a [`SendOrder`]: one entry per
//! open stream, ordered by RFC 9218 urgency (the `priority` request field's `u`, 0 first,
//! default 3; section 4.1) and then by stream id, i.e. request order. A stream hands body
//! bytes to `h2` (capacity requests and DATA) only once it has its [`Place::turn`]:
//!
//! * the first entry that is **ready** (has body bytes to send) goes; every entry behind
//!   it waits, so two ready responses leave one after the other, not interleaved;
//! * an entry that has nothing to send, whose handler is still working (an origin miss),
//!   whose body stream has no chunk yet, or which waits for its own flow-control window,
//!   is **idle** ([`Place::idle`]) and holds back nobody: a slow miss never blocks the
//!   hits behind it;
//! * an earlier entry that becomes ready again takes over at the next frame of the one
//!   sending; what that one had already handed to `h2` (at most its stream buffer) is
//!   still sent, interleaved;
//! * incremental responses (`i`, section 4.2) of the same urgency share the connection
//!   round robin (`h2` interleaves their frames); a non-incremental one among them still
//!   waits for those ahead of it.
//!
//! A response's place is kept until its body is handed over and nearly all of it written
//! (see the caller), so the next one starts as the previous one ends. Response heads are
//! not ordered: each leaves as soon as its handler answers. PRIORITY_UPDATE frames
//! (section 7) are not read (`h2` drops unknown frame types); the request field decides.
//!
//! The state belongs to the connection's worker: `Rc`/`RefCell`, no locks; a turn that is
//! free costs one borrow and a scan of the entries ahead, and allocates nothing.

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

/// A stream's RFC 9218 priority parameters (section 4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Priority {
    /// Urgency, 0 (first) to 7; 3 by default (section 4.1).
    pub(crate) urgency: u8,
    /// Whether the response may be sent interleaved with others (section 4.2).
    pub(crate) incremental: bool,
}

impl Default for Priority {
    fn default() -> Self {
        Priority { urgency: 3, incremental: false }
    }
}

impl Priority {
    /// The parameters of a request's `priority` fields (a Structured Fields Dictionary,
    /// RFC 8941 section 3.2; several fields are one list). Parameters that are unknown or
    /// out of range are ignored (RFC 9218 section 4); so is a field that does not parse.
    pub(crate) fn of_request(headers: &http::HeaderMap) -> Priority {
        let mut p = Priority::default();
        for value in headers.get_all("priority") {
            for member in value.as_bytes().split(|b| *b == b',') {
                // Parameters on a member (`u=1;x`) do not concern us.
                let member = member.split(|b| *b == b';').next().unwrap_or_default();
                let member = member.trim_ascii();
                let (key, val) = match member.iter().position(|b| *b == b'=') {
                    Some(eq) => (&member[..eq], Some(&member[eq + 1..])),
                    None => (member, None),
                };
                match (key, val) {
                    (b"u", Some([d @ b'0'..=b'7'])) => p.urgency = d - b'0',
                    (b"i", None | Some(b"?1")) => p.incremental = true,
                    (b"i", Some(b"?0")) => p.incremental = false,
                    _ => {}
                }
            }
        }
        p
    }

    /// Whether a ready response with priority `self` holds back one with `later` that
    /// comes after it in the queue.
    fn blocks(self, later: Priority) -> bool {
        !(self.incremental && later.incremental && self.urgency == later.urgency)
    }
}

/// One connection's queue of responses (see the module doc).
#[derive(Default)]
pub(crate) struct SendOrder {
    /// Sorted by (urgency, stream id).
    queue: RefCell<Vec<Entry>>,
}

struct Entry {
    id: u32,
    pri: Priority,
    /// Has body bytes to hand to `h2`.
    ready: bool,
    /// The task waiting for its turn.
    waker: Option<Waker>,
}

/// A stream's place in its connection's [`SendOrder`]; leaving it (drop) lets the
/// responses behind go.
pub(crate) struct Place {
    order: Rc<SendOrder>,
    id: u32,
    pri: Priority,
}

/// Waits for a [`Place`]'s turn ([`Place::turn`]).
pub(crate) struct Turn<'a>(&'a Place);

impl SendOrder {
    /// Queues stream `id` (idle until it asks for its turn).
    pub(crate) fn join(self: &Rc<Self>, id: u32, pri: Priority) -> Place {
        let mut q = self.queue.borrow_mut();
        let at = q.partition_point(|e| (e.pri.urgency, e.id) < (pri.urgency, id));
        q.insert(at, Entry { id, pri, ready: false, waker: None });
        Place { order: self.clone(), id, pri }
    }

    /// Wakes every waiting entry that may go now.
    fn wake_eligible(q: &mut [Entry]) {
        // The ready entries seen so far, as far as they matter to later ones: the first's
        // priority, and whether all of them share with an incremental entry of that urgency.
        let mut ahead: Option<(Priority, bool)> = None;
        for e in q.iter_mut().filter(|e| e.ready) {
            let go = match ahead {
                None => true,
                Some((first, shared)) => shared && !first.blocks(e.pri),
            };
            if go && let Some(w) = e.waker.take() {
                w.wake();
            }
            ahead = Some(match ahead {
                None => (e.pri, e.pri.incremental),
                Some((first, shared)) => (first, shared && !first.blocks(e.pri)),
            });
        }
    }
}

impl Place {
    fn index(&self, q: &[Entry]) -> Option<usize> {
        q.binary_search_by_key(&(self.pri.urgency, self.id), |e| (e.pri.urgency, e.id)).ok()
    }

    /// Marks this response ready and waits until it may hand body bytes to the connection:
    /// no ready entry ahead of it holds it back.
    pub(crate) fn turn(&self) -> Turn<'_> {
        Turn(self)
    }

    /// Whether no ready entry ahead holds this one back (without waiting or marking it).
    pub(crate) fn is_turn(&self) -> bool {
        let q = self.order.queue.borrow();
        let Some(me) = self.index(&q) else { return true };
        !q[..me].iter().any(|e| e.ready && e.pri.blocks(self.pri))
    }

    /// Nothing to send for now (waiting for the body or for flow control): the responses
    /// behind may go. Cheap when already idle.
    pub(crate) fn idle(&self) {
        let mut q = self.order.queue.borrow_mut();
        let Some(me) = self.index(&q) else { return };
        if !q[me].ready {
            return;
        }
        q[me].ready = false;
        q[me].waker = None;
        SendOrder::wake_eligible(&mut q);
    }
}

impl Future for Turn<'_> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let place = self.0;
        let mut q = place.order.queue.borrow_mut();
        let Some(me) = place.index(&q) else { return Poll::Ready(()) };
        q[me].ready = true;
        let held = q[..me].iter().any(|e| e.ready && e.pri.blocks(place.pri));
        if !held {
            q[me].waker = None;
            return Poll::Ready(());
        }
        match &mut q[me].waker {
            Some(w) if w.will_wake(cx.waker()) => {}
            w => *w = Some(cx.waker().clone()),
        }
        Poll::Pending
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        let mut q = self.order.queue.borrow_mut();
        let Some(me) = self.index(&q) else { return };
        let was_ready = q.remove(me).ready;
        if was_ready {
            SendOrder::wake_eligible(&mut q);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::task::Wake;

    struct Count(AtomicUsize);
    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn pri(field: &str) -> Priority {
        let mut h = http::HeaderMap::new();
        h.append("priority", http::HeaderValue::from_str(field).unwrap());
        Priority::of_request(&h)
    }

    /// Polls `place`'s turn once: true when it may go.
    fn go(place: &Place, waker: &Waker) -> bool {
        let mut t = place.turn();
        Pin::new(&mut t).poll(&mut Context::from_waker(waker)).is_ready()
    }

    #[test]
    fn priority_fields_parse_as_rfc_9218_says() {
        let d = Priority::default();
        assert_eq!(pri(""), d);
        assert_eq!(pri("u=0"), Priority { urgency: 0, incremental: false });
        assert_eq!(pri("u=5, i"), Priority { urgency: 5, incremental: true });
        assert_eq!(pri("i=?1,u=1"), Priority { urgency: 1, incremental: true });
        assert_eq!(pri("u=2, i=?0"), Priority { urgency: 2, incremental: false });
        // Out of range, not an integer, unknown keys, member parameters: ignored.
        assert_eq!(pri("u=8"), d);
        assert_eq!(pri("u=-1, x=3"), d);
        assert_eq!(pri("u=12"), d);
        assert_eq!(pri("u=1;foo=2"), Priority { urgency: 1, incremental: false });
        assert_eq!(pri("garbage\"=;,,"), d);
    }

    #[test]
    fn ready_responses_go_one_at_a_time_in_order_and_idle_ones_hold_back_nobody() {
        let order = Rc::new(SendOrder::default());
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(count.clone());
        let (a, b, c) = (
            order.join(1, Priority::default()),
            order.join(3, Priority::default()),
            order.join(5, Priority::default()),
        );
        // 1 is still working (idle): 3 goes, 5 waits behind it.
        assert!(go(&b, &waker));
        assert!(!go(&c, &waker));
        // 1 becomes ready: it goes, and 3 waits at its next frame.
        assert!(go(&a, &waker));
        assert!(!go(&b, &waker));
        // 1 waits for its window: 3 is woken and goes, 5 still waits.
        let woken = count.0.load(Ordering::SeqCst);
        a.idle();
        assert_eq!(count.0.load(Ordering::SeqCst), woken + 1);
        assert!(go(&b, &waker));
        assert!(!go(&c, &waker));
        // 3 is done: 5 goes.
        drop(b);
        assert!(go(&c, &waker));
        drop((a, c));
        assert!(order.queue.borrow().is_empty());
    }

    #[test]
    fn urgency_comes_first_and_incremental_responses_share() {
        let order = Rc::new(SendOrder::default());
        let waker = Waker::from(Arc::new(Count(AtomicUsize::new(0))));
        let a = order.join(1, Priority::default());
        let b = order.join(3, pri("u=3, i"));
        let c = order.join(5, pri("u=3, i"));
        let d = order.join(7, pri("u=0"));
        assert!(go(&a, &waker));
        // A more urgent later request goes first.
        assert!(go(&d, &waker));
        assert!(!go(&a, &waker));
        drop(d);
        assert!(go(&a, &waker));
        drop(a);
        // Two incremental ones of the same urgency share the connection.
        assert!(go(&b, &waker));
        assert!(go(&c, &waker));
        let e = order.join(9, Priority::default());
        assert!(!go(&e, &waker), "a non-incremental one waits for those ahead");
        drop((b, c));
        assert!(go(&e, &waker));
    }
}
