//! One worker's QUIC endpoint: admission, handshakes, and the connections handed to the
//! application.
//!
//! Each new connection (an `Incoming`: a client's first Initial) is decided before any
//! handshake work ([`Admission::decide`]): refused when the worker holds its connection
//! limit, asked to prove its address with a Retry when the mode says so (in `auto`: when
//! the worker has many handshakes in flight, or the address a few), then accepted.
//!
//! A client's place in its address's count (the application's, across workers and
//! protocols) is taken only once the address is proven: at once for an Initial with a
//! valid Retry token (refused, cheaply, when the address holds its share), at the end of
//! the handshake otherwise. An Initial with a forged source address therefore takes no
//! place the address's real connections need; an unproven Initial from an address that
//! holds its share is asked to Retry. A handshake that does not finish within the
//! handshake timeout is dropped. On drain the endpoint stops taking new connections
//! (their Initials are dropped unanswered, so that a process taking over the socket in an
//! upgrade answers the client's next one) and waits for the application to close the
//! ones it has.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::net::IpAddr;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use quinn::{Endpoint, Runtime, TokioRuntime};
use tokio::sync::watch;

use crate::amplify::Limited;
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
    /// The send windows of the connections serving now, summed: what their response bytes
    /// held in the transport until acknowledged can reach.
    pub send_windows: AtomicU64,
}

/// Counts a connection's send window in [`QuicCounters::send_windows`] while it serves.
struct Window(Arc<QuicCounters>, u64);

impl Window {
    fn new(counters: &Arc<QuicCounters>, bytes: u64) -> Window {
        counters.send_windows.fetch_add(bytes, Ordering::Relaxed);
        Window(counters.clone(), bytes)
    }
}

impl Drop for Window {
    fn drop(&mut self) {
        self.0.send_windows.fetch_sub(self.1, Ordering::Relaxed);
    }
}

/// The application close code of a connection refused after its handshake, when its
/// address filled its share meanwhile (HTTP/3's `H3_EXCESSIVE_LOAD`).
const REFUSED: quinn::VarInt = quinn::VarInt::from_u32(0x107);

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

/// What the admission knows of a new connection.
#[derive(Debug, Clone, Copy, Default)]
pub struct Arrival {
    /// Connections of the worker (handshaking ones included).
    pub open: usize,
    /// Those still in their handshake.
    pub handshaking: usize,
    /// Handshakes in flight on the worker from the same client address.
    pub handshaking_client: usize,
    /// The Initial carried a valid Retry token (its address is proven).
    pub validated: bool,
}

impl Admission {
    /// Decides on a new connection, before its client's share is counted (after a
    /// Retry, its address is proven).
    pub fn decide(s: &QuicSettings, a: Arrival) -> Admission {
        if a.open >= s.max_per_worker {
            return Admission::RefuseWorker;
        }
        let retry = match s.retry {
            RetryMode::Always => true,
            RetryMode::Auto => {
                a.handshaking >= s.retry_above || a.handshaking_client >= s.retry_above_per_client
            }
            RetryMode::Never => false,
        };
        if retry && !a.validated { Admission::Retry } else { Admission::Accept }
    }
}

/// The worker's connection counts.
#[derive(Default)]
struct Tally {
    open: Cell<usize>,
    handshaking: Cell<usize>,
    /// Handshakes in flight per client address (IPv6: per /64, as one client may hold a
    /// whole prefix).
    handshaking_by_client: RefCell<HashMap<IpAddr, usize>>,
}

impl Tally {
    fn handshaking_from(&self, ip: IpAddr) -> usize {
        self.handshaking_by_client.borrow().get(&client_key(ip)).copied().unwrap_or(0)
    }
}

/// The key a client address is counted under: an IPv4 address (also as seen through a
/// dual-stack socket), or an IPv6 address's /64 prefix.
pub fn client_key(ip: IpAddr) -> IpAddr {
    match ip.to_canonical() {
        IpAddr::V6(a) => IpAddr::V6(std::net::Ipv6Addr::from(u128::from(a) & !(u64::MAX as u128))),
        v4 => v4,
    }
}

/// Holds a connection's place in the worker's tally until it is gone.
struct Place {
    tally: Rc<Tally>,
    counters: Arc<QuicCounters>,
}

impl Place {
    fn new(tally: &Rc<Tally>, counters: &Arc<QuicCounters>) -> Place {
        tally.open.set(tally.open.get() + 1);
        counters.open.fetch_add(1, Ordering::Relaxed);
        Place { tally: tally.clone(), counters: counters.clone() }
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        let t = &self.tally;
        t.open.set(t.open.get().saturating_sub(1));
        self.counters.open.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Marks a handshake in progress, from a client address.
struct Handshaking(Rc<Tally>, IpAddr);

impl Handshaking {
    fn new(t: &Rc<Tally>, ip: IpAddr) -> Handshaking {
        let key = client_key(ip);
        t.handshaking.set(t.handshaking.get() + 1);
        *t.handshaking_by_client.borrow_mut().entry(key).or_insert(0) += 1;
        Handshaking(t.clone(), key)
    }
}

impl Drop for Handshaking {
    fn drop(&mut self) {
        let t = &self.0;
        t.handshaking.set(t.handshaking.get().saturating_sub(1));
        let mut m = t.handshaking_by_client.borrow_mut();
        if let Some(n) = m.get_mut(&self.1) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                m.remove(&self.1);
            }
        }
    }
}

/// Serves QUIC on `socket` (this worker's member of the listener's reuseport group) as
/// worker `worker`, until `drain` turns true and every connection has closed. Each
/// established connection is handed to `on_conn` as a local task; the endpoint's and the
/// connections' drivers run on the calling thread's runtime (a `current_thread` one).
/// A new value in `config` (a reload's certificates or settings) applies to new
/// connections. `client_place(ip, quic_cap)` gives a connection from an address a place in
/// the application's per-client count, held (and given back when dropped) while it is
/// open, or `None` to refuse it; `quic_cap` is [`QuicSettings::max_per_client`], the
/// address's QUIC connections across workers. It is asked once the address is proven
/// (see the module's documentation).
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
    C: Fn(IpAddr, usize) -> Option<S> + 'static,
    S: 'static,
{
    let first = config.borrow_and_update().server.clone();
    // The socket holds the anti-amplification limit exactly (see `amplify`).
    let socket = Arc::new(Limited::new(TokioRuntime.wrap_udp_socket(socket)?));
    let endpoint = Endpoint::new_with_abstract_socket(
        endpoint_config(worker, &keys),
        Some(first),
        socket,
        Arc::new(TokioRuntime),
    )?;
    let tally = Rc::new(Tally::default());
    let on_conn = Rc::new(on_conn);
    let client_place = Rc::new(client_place);
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
        let validated = incoming.remote_address_validated();
        let arrival = Arrival {
            open: tally.open.get(),
            handshaking: tally.handshaking.get(),
            handshaking_client: tally.handshaking_from(ip),
            validated,
        };
        let verdict = Admission::decide(&settings, arrival);
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
        // A proven address takes its place now, or is refused before any handshake work.
        // An unproven one takes none until its handshake completes; if it holds its share
        // already it is asked to prove itself first (a forged one never does).
        let client = if validated {
            let Some(place) = client_place(ip, settings.max_per_client) else {
                counters.refused_client.fetch_add(1, Ordering::Relaxed);
                incoming.refuse();
                continue;
            };
            Some(place)
        } else {
            if client_place(ip, settings.max_per_client).is_none() {
                if incoming.may_retry() {
                    counters.retries.fetch_add(1, Ordering::Relaxed);
                    if let Err(e) = incoming.retry() {
                        e.into_incoming().ignore();
                    }
                } else {
                    counters.refused_client.fetch_add(1, Ordering::Relaxed);
                    incoming.refuse();
                }
                continue;
            }
            None
        };
        let connecting = match incoming.accept() {
            Ok(c) => c,
            Err(e) => {
                tracing::debug!(error = %e, "QUIC connection not accepted");
                counters.handshake_failures.fetch_add(1, Ordering::Relaxed);
                continue;
            }
        };
        let place = Place::new(&tally, &counters);
        let handshaking = Handshaking::new(&tally, ip);
        let (on_conn, counters, limit) =
            (on_conn.clone(), counters.clone(), settings.handshake_timeout);
        let client_place = client_place.clone();
        let (tally, settings) = (tally.clone(), settings.clone());
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
            // The handshake proved the address: now it counts (its address may have filled
            // its share meanwhile).
            let Some(_client) = client
                .or_else(|| client_place(conn.remote_address().ip(), settings.max_per_client))
            else {
                counters.refused_client.fetch_add(1, Ordering::Relaxed);
                conn.close(REFUSED, b"connection refused: client limit");
                return;
            };
            // Its share of the worker's send budget, among the connections open now.
            let window = settings.send_share(tally.open.get());
            conn.set_send_window(window);
            let _window = Window::new(&counters, window);
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

    fn at(open: usize, handshaking: usize, handshaking_client: usize, validated: bool) -> Arrival {
        Arrival { open, handshaking, handshaking_client, validated }
    }

    #[test]
    fn admission_limits_then_retry() {
        let mut s = QuicSettings { max_per_worker: 10, ..Default::default() };
        assert_eq!(Admission::decide(&s, at(10, 0, 0, true)), Admission::RefuseWorker);
        assert_eq!(Admission::decide(&s, at(3, 0, 0, false)), Admission::Accept);
        s.retry_above = 4;
        assert_eq!(Admission::decide(&s, at(5, 4, 0, false)), Admission::Retry);
        assert_eq!(Admission::decide(&s, at(5, 4, 0, true)), Admission::Accept);
        s.retry = RetryMode::Always;
        assert_eq!(Admission::decide(&s, at(0, 0, 0, false)), Admission::Retry);
        assert_eq!(Admission::decide(&s, at(10, 0, 0, false)), Admission::RefuseWorker);
        s.retry = RetryMode::Never;
        assert_eq!(Admission::decide(&s, at(5, 50, 50, false)), Admission::Accept);
    }

    #[test]
    fn connections_share_the_workers_send_budget() {
        let s = QuicSettings::default();
        assert_eq!(s.send_share(1), s.send_window);
        assert_eq!(s.send_share(256), s.send_window, "256 full windows in 64 MiB");
        assert_eq!(s.send_share(512), s.send_window / 2);
        assert_eq!(s.send_share(100_000), crate::config::MIN_SEND_WINDOW);
        // Connections that arrive one after the other, each given its share then: at the
        // default worker limit they hold at most about 5 times the budget between them
        // (the budget times 1 + ln(4096 / 256), then 16 KiB each), not 2.4 GiB.
        let held: u64 = (1..=10_000).map(|n| s.send_share(n)).sum();
        assert!(
            held < 5 * s.worker_send_budget + (s.worker_send_budget >> 2),
            "{} MiB",
            held >> 20
        );
    }

    #[test]
    fn a_few_handshakes_in_flight_from_one_address_bring_retry() {
        let s = QuicSettings::default();
        let few = s.retry_above_per_client;
        assert!(few < s.retry_above);
        assert_eq!(Admission::decide(&s, at(9, 9, few - 1, false)), Admission::Accept);
        assert_eq!(Admission::decide(&s, at(9, 9, few, false)), Admission::Retry);
        assert_eq!(Admission::decide(&s, at(9, 9, few, true)), Admission::Accept);
    }

    #[test]
    fn an_ipv6_client_is_its_64_prefix_and_a_mapped_ipv4_its_address() {
        let k = |a: &str| client_key(a.parse().unwrap());
        assert_eq!(k("2001:db8:1:2:aaaa::1"), k("2001:db8:1:2:bbbb::9"));
        assert_ne!(k("2001:db8:1:2::1"), k("2001:db8:1:3::1"));
        assert_eq!(k("::ffff:10.0.0.1"), k("10.0.0.1"));
    }
}
