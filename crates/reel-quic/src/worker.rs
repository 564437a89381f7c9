//! One worker's QUIC endpoint: admission, handshakes, and the connections handed to the
//! application.
//!
//! Each new connection (an `Incoming`: a client's first Initial) is decided before any
//! handshake work ([`Admission::decide`]): refused when the worker holds its connection
//! limit, asked to prove its address with a Retry when the mode says so, then refused if
//! its client address holds its share (counted by the application, across workers and
//! protocols), accepted otherwise. A handshake that does not finish within the
//! handshake timeout is dropped. On drain the endpoint stops taking new connections
//! (their Initials are dropped unanswered, so that a process taking over the socket in an
//! upgrade answers the client's next one) and waits for the application to close the
//! ones it has.

use std::cell::Cell;
use std::future::Future;
use std::io;
use std::net::IpAddr;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use quinn::{Endpoint, TokioRuntime};
use tokio::sync::watch;

use crate::config::{Keys, QuicConfig, QuicSettings, RetryMode, endpoint_config};

/// Counters of one worker's endpoint, readable from any thread.
#[derive(Debug, Default)]
pub struct QuicCounters {
    /// Handshakes completed.
    pub handshakes: AtomicU64,
    /// Handshakes that failed or timed out.
    pub handshake_failures: AtomicU64,
    /// Retry packets sent (address validation).
    pub retries: AtomicU64,
    /// New connections refused at the worker's limit.
    pub refused_worker: AtomicU64,
    /// New connections refused at the client address's limit.
    pub refused_client: AtomicU64,
    /// Connections open now.
    pub open: AtomicU64,
}

/// What becomes of a new connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// Handshake.
    Accept,
    /// Ask the client to prove its address first.
    Retry,
    /// Refused: the worker holds its limit.
    RefuseWorker,
}

impl Admission {
    /// Decides on a new connection, before its client's share is counted (after a
    /// Retry, its address is proven). `open`: connections of the worker (handshaking ones
    /// included); `handshaking`: those still in their handshake; `validated`: the Initial
    /// carried a valid Retry token.
    pub fn decide(s: &QuicSettings, open: usize, handshaking: usize, validated: bool) -> Admission {
        if open >= s.max_per_worker {
            return Admission::RefuseWorker;
        }
        let retry = match s.retry {
            RetryMode::Always => true,
            RetryMode::Auto => handshaking >= s.retry_above,
            RetryMode::Never => false,
        };
        if retry && !validated { Admission::Retry } else { Admission::Accept }
    }
}

/// The worker's connection counts.
#[derive(Default)]
struct Tally {
    open: Cell<usize>,
    handshaking: Cell<usize>,
}

/// Holds a connection's place in the tally, and its client's, until it is gone.
struct Place<S> {
    tally: Rc<Tally>,
    _client: S,
    counters: Arc<QuicCounters>,
}

impl<S> Place<S> {
    fn new(tally: &Rc<Tally>, client: S, counters: &Arc<QuicCounters>) -> Place<S> {
        tally.open.set(tally.open.get() + 1);
        counters.open.fetch_add(1, Ordering::Relaxed);
        Place { tally: tally.clone(), _client: client, counters: counters.clone() }
    }
}

impl<S> Drop for Place<S> {
    fn drop(&mut self) {
        let t = &self.tally;
        t.open.set(t.open.get().saturating_sub(1));
        self.counters.open.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Marks a handshake in progress.
struct Handshaking(Rc<Tally>);

impl Handshaking {
    fn new(t: &Rc<Tally>) -> Handshaking {
        t.handshaking.set(t.handshaking.get() + 1);
        Handshaking(t.clone())
    }
}

impl Drop for Handshaking {
    fn drop(&mut self) {
        self.0.handshaking.set(self.0.handshaking.get().saturating_sub(1));
    }
}

/// Serves QUIC on `socket` (this worker's member of the listener's reuseport group) as
/// worker `worker`, until `drain` turns true and every connection has closed. Each
/// established connection is handed to `on_conn` as a local task; the endpoint's and the
/// connections' drivers run on the calling thread's runtime (a `current_thread` one).
/// A new value in `config` (a reload's certificates or settings) applies to new
/// connections. `client_place` gives a new connection from an address a place in the
/// application's per-client count, held (and given back when dropped) while it is open,
/// or `None` to refuse it.
#[allow(clippy::too_many_arguments)] // each is one of the endpoint's distinct inputs
pub async fn serve_worker<F, Fut, C, S>(
    socket: std::net::UdpSocket,
    worker: u8,
    mut config: watch::Receiver<QuicConfig>,
    keys: Keys,
    counters: Arc<QuicCounters>,
    client_place: C,
    mut drain: watch::Receiver<bool>,
    on_conn: F,
) -> io::Result<()>
where
    F: Fn(quinn::Connection) -> Fut + 'static,
    Fut: Future<Output = ()> + 'static,
    C: Fn(IpAddr) -> Option<S>,
    S: 'static,
{
    let first = config.borrow_and_update().server.clone();
    let endpoint =
        Endpoint::new(endpoint_config(worker, &keys), Some(first), socket, Arc::new(TokioRuntime))?;
    let tally = Rc::new(Tally::default());
    let on_conn = Rc::new(on_conn);
    let mut config_live = true;
    loop {
        if *drain.borrow_and_update() {
            break;
        }
        let incoming = tokio::select! {
            i = endpoint.accept() => match i {
                Some(i) => i,
                None => break,
            },
            changed = drain.changed() => {
                if changed.is_err() {
                    break;
                }
                continue;
            }
            changed = config.changed(), if config_live => {
                match changed {
                    Ok(()) => {
                        let server = config.borrow_and_update().server.clone();
                        endpoint.set_server_config(Some(server));
                    }
                    Err(_) => config_live = false,
                }
                continue;
            }
        };
        let ip = incoming.remote_address().ip();
        let settings = config.borrow().settings.clone();
        let verdict = Admission::decide(
            &settings,
            tally.open.get(),
            tally.handshaking.get(),
            incoming.remote_address_validated(),
        );
        match verdict {
            Admission::RefuseWorker => {
                counters.refused_worker.fetch_add(1, Ordering::Relaxed);
                incoming.refuse();
                continue;
            }
            Admission::Retry if incoming.may_retry() => {
                counters.retries.fetch_add(1, Ordering::Relaxed);
                if let Err(e) = incoming.retry() {
                    e.into_incoming().ignore();
                }
                continue;
            }
            Admission::Retry | Admission::Accept => {}
        }
        let Some(client) = client_place(ip) else {
            counters.refused_client.fetch_add(1, Ordering::Relaxed);
            incoming.refuse();
            continue;
        };
        let connecting = match incoming.accept() {
            Ok(c) => c,
            Err(e) => {
                tracing::debug!(error = %e, "QUIC connection not accepted");
                counters.handshake_failures.fetch_add(1, Ordering::Relaxed);
                continue;
            }
        };
        let place = Place::new(&tally, client, &counters);
        let handshaking = Handshaking::new(&tally);
        let (on_conn, counters, limit) =
            (on_conn.clone(), counters.clone(), settings.handshake_timeout);
        tokio::task::spawn_local(async move {
            let _place = place;
            let conn = match tokio::time::timeout(limit, connecting).await {
                Ok(Ok(c)) => c,
                Ok(Err(e)) => {
                    tracing::debug!(error = %e, "QUIC handshake failed");
                    counters.handshake_failures.fetch_add(1, Ordering::Relaxed);
                    return;
                }
                Err(_) => {
                    counters.handshake_failures.fetch_add(1, Ordering::Relaxed);
                    return;
                }
            };
            drop(handshaking);
            counters.handshakes.fetch_add(1, Ordering::Relaxed);
            on_conn(conn).await;
        });
    }
    // Those open finish (the application sees the same drain) and the endpoint waits for
    // their closes to go out. New connections meanwhile are not answered: their Initials
    // are dropped, and the client's next one reaches whoever reads the socket then (the
    // next process of an upgrade), or finds it closed.
    let idle = endpoint.wait_idle();
    tokio::pin!(idle);
    loop {
        tokio::select! {
            () = &mut idle => break,
            i = endpoint.accept() => match i {
                Some(i) => i.ignore(),
                None => break,
            },
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admission_limits_then_retry() {
        let mut s = QuicSettings { max_per_worker: 10, ..Default::default() };
        assert_eq!(Admission::decide(&s, 10, 0, true), Admission::RefuseWorker);
        assert_eq!(Admission::decide(&s, 3, 0, false), Admission::Accept);
        s.retry_above = 4;
        assert_eq!(Admission::decide(&s, 5, 4, false), Admission::Retry);
        assert_eq!(Admission::decide(&s, 5, 4, true), Admission::Accept);
        s.retry = RetryMode::Always;
        assert_eq!(Admission::decide(&s, 0, 0, false), Admission::Retry);
        assert_eq!(Admission::decide(&s, 10, 0, false), Admission::RefuseWorker);
        s.retry = RetryMode::Never;
        assert_eq!(Admission::decide(&s, 5, 50, false), Admission::Accept);
    }
}
