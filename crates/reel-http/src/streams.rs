//! What the multiplexed protocols (HTTP/2, HTTP/3) keep per connection about its streams,
//! shared between the connection loop and the stream tasks: open streams and since when
//! none is, requests answered, and client resets counted per second (the rapid-reset
//! defence, CVE-2023-44487).

use std::cell::Cell;
use std::rc::Rc;
use std::time::{Duration, Instant};

use tokio::sync::Notify;

/// Stream bookkeeping of one connection (see the module docs).
pub(crate) struct Streams {
    active: Cell<usize>,
    idle_since: Cell<Instant>,
    /// Woken when a stream ends.
    pub(crate) changed: Notify,
    /// Woken when the client is over its reset allowance.
    pub(crate) abuse: Notify,
    pub(crate) requests: Cell<u64>,
    window: Cell<Instant>,
    resets: Cell<u32>,
    max_resets: u32,
}

impl Streams {
    /// No stream yet; at most `max_resets_per_second` client resets a second.
    pub(crate) fn new(max_resets_per_second: u32) -> Streams {
        let now = Instant::now();
        Streams {
            active: Cell::new(0),
            idle_since: Cell::new(now),
            changed: Notify::new(),
            abuse: Notify::new(),
            requests: Cell::new(0),
            window: Cell::new(now),
            resets: Cell::new(0),
            max_resets: max_resets_per_second,
        }
    }

    /// Streams open now.
    pub(crate) fn active(&self) -> usize {
        self.active.get()
    }

    /// When the last stream ended (or the connection began).
    pub(crate) fn idle_since(&self) -> Instant {
        self.idle_since.get()
    }

    /// Notes one stream the client reset or stopped; past the allowance of the current
    /// one-second window, wakes [`Streams::abuse`].
    pub(crate) fn note_reset(&self) {
        let now = Instant::now();
        if now.duration_since(self.window.get()) >= Duration::from_secs(1) {
            self.window.set(now);
            self.resets.set(0);
        }
        self.resets.set(self.resets.get() + 1);
        if self.resets.get() > self.max_resets {
            self.abuse.notify_one();
        }
    }
}

impl AsRef<Streams> for Streams {
    fn as_ref(&self) -> &Streams {
        self
    }
}

/// Counts a stream as open however its task ends (held by the task).
pub(crate) struct ActiveGuard<S: AsRef<Streams>>(Rc<S>);

impl<S: AsRef<Streams>> ActiveGuard<S> {
    pub(crate) fn new(s: &Rc<S>) -> ActiveGuard<S> {
        let st = (**s).as_ref();
        st.active.set(st.active.get() + 1);
        ActiveGuard(s.clone())
    }
}

impl<S: AsRef<Streams>> Drop for ActiveGuard<S> {
    fn drop(&mut self) {
        let s = (*self.0).as_ref();
        s.active.set(s.active.get().saturating_sub(1));
        if s.active.get() == 0 {
            s.idle_since.set(Instant::now());
        }
        s.changed.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resets_past_the_allowance_wake_abuse_and_streams_are_counted() {
        let s = Rc::new(Streams::new(2));
        s.note_reset();
        s.note_reset();
        assert!(s.abuse.notified().now_or_never_is_pending());
        s.note_reset();
        assert!(!s.abuse.notified().now_or_never_is_pending());
        let before = s.idle_since();
        let g = ActiveGuard::new(&s);
        assert_eq!(s.active(), 1);
        drop(g);
        assert_eq!(s.active(), 0);
        assert!(s.idle_since() >= before);
    }

    trait Pending {
        fn now_or_never_is_pending(self) -> bool;
    }

    impl<F: std::future::Future> Pending for F {
        fn now_or_never_is_pending(self) -> bool {
            let waker = std::task::Waker::noop();
            let mut cx = std::task::Context::from_waker(waker);
            std::pin::pin!(self).poll(&mut cx).is_pending()
        }
    }
}
