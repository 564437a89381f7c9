//! Connection limits checked at accept: per worker, per process (the file-descriptor
//! budget) and per client address. A connection over any of them is closed at accept
//! (handed to [`crate::WorkerApp::on_refused`] first), so the listen backlog never fills
//! with connections nobody will take and the descriptors kept in reserve stay free for
//! the admin listener, health probes and origin connections.
//!
//! The process and client counts are shared by every worker: one atomic for the total, a
//! sharded map of addresses (one short lock per accept and per close).

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Shards of the per-client map; a power of two.
const SHARDS: usize = 64;

/// Why a connection was closed at accept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The accepting worker holds `max_connections_per_worker` connections.
    Worker,
    /// The process holds `max_connections` connections (its descriptor budget).
    Process,
    /// The client address holds `max_connections_per_client` connections.
    Client,
}

impl Refusal {
    /// A short name for logs and metrics labels.
    pub fn as_str(self) -> &'static str {
        match self {
            Refusal::Worker => "worker",
            Refusal::Process => "process",
            Refusal::Client => "client",
        }
    }
}

/// The live caps (0 means "no cap" for the process and client caps).
#[derive(Debug, Default)]
pub(crate) struct Caps {
    pub(crate) per_worker: AtomicUsize,
    pub(crate) per_client: AtomicUsize,
    pub(crate) total: AtomicUsize,
    pub(crate) answering: AtomicUsize,
}

/// Open connections of the whole process, and per client address.
#[derive(Debug)]
pub(crate) struct Conns {
    total: AtomicUsize,
    answering: AtomicUsize,
    clients: Box<[Mutex<HashMap<IpAddr, u32>>]>,
    /// QUIC connections per client key (see [`ClientCounts::enter_quic`]), against their
    /// own, lower cap.
    quic: Box<[Mutex<HashMap<IpAddr, u32>>]>,
}

impl Conns {
    pub(crate) fn new() -> Conns {
        Conns {
            total: AtomicUsize::new(0),
            answering: AtomicUsize::new(0),
            clients: (0..SHARDS).map(|_| Mutex::default()).collect(),
            quic: (0..SHARDS).map(|_| Mutex::default()).collect(),
        }
    }

    /// Open connections of the process.
    pub(crate) fn total(&self) -> usize {
        self.total.load(Ordering::Relaxed)
    }

    /// Open connections from `ip`.
    #[cfg(test)]
    pub(crate) fn of(&self, ip: IpAddr) -> u32 {
        let ip = ip.to_canonical();
        self.clients[shard_of(ip)].lock().map(|m| m.get(&ip).copied().unwrap_or(0)).unwrap_or(0)
    }

    /// Counts a new connection from `ip` unless the process cap (`total`) or the client
    /// cap (`per_client`) is reached; 0 means no cap. On success returns what
    /// [`Conns::release`] must be given when the connection closes.
    pub(crate) fn admit(
        &self,
        ip: IpAddr,
        total: usize,
        per_client: usize,
    ) -> Result<IpAddr, Refusal> {
        let before = self.total.fetch_add(1, Ordering::AcqRel);
        if total != 0 && before >= total {
            self.total.fetch_sub(1, Ordering::AcqRel);
            return Err(Refusal::Process);
        }
        self.enter_client(ip, per_client).inspect_err(|_| {
            self.total.fetch_sub(1, Ordering::AcqRel);
        })
    }

    /// Counts a connection from `ip` against the client cap only (`per_client`, 0 = none):
    /// one that holds no descriptor (QUIC). Returns what [`Conns::leave_client`] must be
    /// given when it closes.
    pub(crate) fn enter_client(&self, ip: IpAddr, per_client: usize) -> Result<IpAddr, Refusal> {
        // An IPv4 client seen through a dual-stack socket is the same client.
        let ip = ip.to_canonical();
        enter(&self.clients, ip, per_client).map(|()| ip)
    }

    /// Takes one of `cap` places for answering a refused connection; false when all are
    /// taken.
    pub(crate) fn start_answering(&self, cap: usize) -> bool {
        if self.answering.fetch_add(1, Ordering::AcqRel) >= cap {
            self.answering.fetch_sub(1, Ordering::AcqRel);
            return false;
        }
        true
    }

    /// Gives back a place taken by [`Conns::start_answering`].
    pub(crate) fn end_answering(&self) {
        self.answering.fetch_sub(1, Ordering::AcqRel);
    }

    /// Gives back one connection counted by [`Conns::admit`].
    pub(crate) fn release(&self, ip: IpAddr) {
        self.total.fetch_sub(1, Ordering::AcqRel);
        self.leave_client(ip);
    }

    /// Gives back one connection counted by [`Conns::enter_client`].
    pub(crate) fn leave_client(&self, ip: IpAddr) {
        leave(&self.clients, ip);
    }
}

fn shard_of(ip: IpAddr) -> usize {
    let h = match ip {
        IpAddr::V4(a) => u32::from(a) as usize,
        // The interface identifier varies most within one network.
        IpAddr::V6(a) => (u128::from(a) as u64 ^ (u128::from(a) >> 64) as u64) as usize,
    };
    (h ^ (h >> 16)) & (SHARDS - 1)
}

/// Counts one more for `key` in `map` unless it holds `cap` (0: no cap).
fn enter(map: &[Mutex<HashMap<IpAddr, u32>>], key: IpAddr, cap: usize) -> Result<(), Refusal> {
    // Counted also without a cap, so a cap set by a reload sees every open connection.
    let mut m = map[shard_of(key)].lock().unwrap_or_else(|p| p.into_inner());
    let n = m.entry(key).or_insert(0);
    if cap != 0 && *n as usize >= cap {
        if *n == 0 {
            m.remove(&key);
        }
        return Err(Refusal::Client);
    }
    *n += 1;
    Ok(())
}

/// Gives back one counted by [`enter`].
fn leave(map: &[Mutex<HashMap<IpAddr, u32>>], key: IpAddr) {
    let mut m = map[shard_of(key)].lock().unwrap_or_else(|p| p.into_inner());
    if let Some(n) = m.get_mut(&key) {
        *n = n.saturating_sub(1);
        if *n == 0 {
            m.remove(&key);
        }
    }
}

/// The per-client connection counts of the process, for connections the workers' apps
/// accept themselves (QUIC, on UDP): they count with the TCP ones against
/// `max_connections_per_client`, across all workers, but hold no descriptor, so not toward
/// the process cap.
#[derive(Clone)]
pub struct ClientCounts {
    pub(crate) shared: std::sync::Arc<crate::workers::Shared>,
}

impl std::fmt::Debug for ClientCounts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ClientCounts")
    }
}

impl ClientCounts {
    /// Counts a new connection from `ip`, or refuses it when the address holds the live
    /// `max_connections_per_client`. The place is given back when the slot is dropped.
    pub fn enter(&self, ip: IpAddr) -> Result<ClientSlot, Refusal> {
        let cap = self.shared.caps.per_client.load(Ordering::Relaxed);
        let ip = self.shared.conns.enter_client(ip, cap)?;
        Ok(ClientSlot { counts: self.clone(), ip, quic: None })
    }

    /// [`ClientCounts::enter`] for a QUIC connection, which also counts under `key` (its
    /// address, or an IPv6 address's prefix) against `quic_cap` (0: none), the QUIC
    /// connections a client may have across the workers: each may hold a send window of
    /// response bytes in the transport, so their share is well below the TCP one.
    pub fn enter_quic(
        &self,
        ip: IpAddr,
        key: IpAddr,
        quic_cap: usize,
    ) -> Result<ClientSlot, Refusal> {
        let conns = &self.shared.conns;
        enter(&conns.quic, key, quic_cap)?;
        let mut slot = self.enter(ip).inspect_err(|_| leave(&conns.quic, key))?;
        slot.quic = Some(key);
        Ok(slot)
    }
}

/// One connection's place in [`ClientCounts`], held while it is open.
#[derive(Debug)]
pub struct ClientSlot {
    counts: ClientCounts,
    ip: IpAddr,
    quic: Option<IpAddr>,
}

impl Drop for ClientSlot {
    fn drop(&mut self) {
        let conns = &self.counts.shared.conns;
        conns.leave_client(self.ip);
        if let Some(key) = self.quic {
            leave(&conns.quic, key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn caps_refuse_and_released_places_come_back() {
        let c = Conns::new();
        let a = c.admit(ip("10.0.0.1"), 3, 2).unwrap();
        let _b = c.admit(ip("10.0.0.1"), 3, 2).unwrap();
        assert_eq!(c.admit(ip("10.0.0.1"), 3, 2).unwrap_err(), Refusal::Client);
        assert_eq!(c.total(), 2, "a refusal gives its place back");
        let _d = c.admit(ip("10.0.0.2"), 3, 2).unwrap();
        assert_eq!(c.admit(ip("10.0.0.3"), 3, 2).unwrap_err(), Refusal::Process);
        c.release(a);
        assert_eq!(c.of(ip("10.0.0.1")), 1);
        c.admit(ip("10.0.0.1"), 3, 2).unwrap();
        assert_eq!(c.total(), 3);
    }

    #[test]
    fn client_only_places_count_with_the_others_but_not_toward_the_process_cap() {
        let c = Conns::new();
        let a = c.admit(ip("10.0.0.1"), 1, 3).unwrap();
        let q = c.enter_client(ip("10.0.0.1"), 3).unwrap();
        assert_eq!(c.total(), 1, "a client-only place is not in the process count");
        c.enter_client(ip("10.0.0.1"), 3).unwrap();
        assert_eq!(c.enter_client(ip("10.0.0.1"), 3).unwrap_err(), Refusal::Client);
        assert_eq!(c.admit(ip("10.0.0.1"), 0, 3).unwrap_err(), Refusal::Client);
        assert_eq!(c.total(), 1, "the refusal gave its process place back");
        c.leave_client(q);
        c.release(a);
        assert_eq!(c.of(ip("10.0.0.1")), 1);
        assert_eq!(c.total(), 0);
    }

    #[test]
    fn quic_places_have_their_own_cap_and_come_back() {
        let c = Conns::new();
        let k = ip("10.0.0.5");
        enter(&c.quic, k, 2).unwrap();
        enter(&c.quic, k, 2).unwrap();
        assert_eq!(enter(&c.quic, k, 2).unwrap_err(), Refusal::Client);
        leave(&c.quic, k);
        enter(&c.quic, k, 2).unwrap();
        assert_eq!(c.of(k), 0, "the QUIC count is not the shared one");
    }

    #[test]
    fn without_caps_connections_are_still_counted_and_mapped_v4_is_one_client() {
        let c = Conns::new();
        for _ in 0..100 {
            c.admit(ip("10.0.0.1"), 0, 0).unwrap();
        }
        assert_eq!(c.total(), 100);
        assert_eq!(c.of(ip("10.0.0.1")), 100, "a cap set later sees them");
        assert_eq!(c.admit(ip("10.0.0.1"), 0, 100).unwrap_err(), Refusal::Client);
        let c = Conns::new();
        c.admit(ip("::ffff:10.0.0.9"), 0, 1).unwrap();
        assert_eq!(c.admit(ip("10.0.0.9"), 0, 1).unwrap_err(), Refusal::Client);
        assert!(c.start_answering(2) && c.start_answering(2));
        assert!(!c.start_answering(2), "two places");
        c.end_answering();
        assert!(c.start_answering(2));
        let k = c.admit(ip("10.0.0.8"), 0, 1).unwrap();
        c.release(k);
        assert_eq!(c.of(ip("10.0.0.8")), 0);
        assert_eq!(c.total(), 1);
    }
}
