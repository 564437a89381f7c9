//! The contract between the runtime and the application it runs: the per-worker
//! [`WorkerApp`] that serves every connection its worker accepts, how a connection's future
//! ends ([`ConnEnd`]: closed, or parked idle), and what a worker tells the app about itself
//! ([`WorkerCtx`], with its counters in [`WorkerStats`]).

use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize};
use std::time::{Duration, Instant};

use tokio::net::TcpStream;
use tokio::sync::watch;

use crate::limits::Refusal;

/// Identity of a worker, given to the app factory and [`WorkerApp::run`].
#[derive(Debug, Clone)]
pub struct WorkerCtx {
    /// Worker index, 0-based, equal to its index in the reuseport groups.
    pub index: usize,
    /// Planned CPU.
    pub cpu: usize,
    /// Number of workers.
    pub n_workers: usize,
    /// This worker's counters.
    pub stats: Arc<WorkerStats>,
    /// The process's per-client connection counts, for connections the app accepts itself.
    pub clients: crate::limits::ClientCounts,
}

/// Counters of one worker, readable from any thread.
#[derive(Debug, Default)]
pub struct WorkerStats {
    /// Currently open connections (parked ones included).
    pub open: AtomicUsize,
    /// Open connections idle in the worker's idle lot, without a task.
    pub parked: AtomicUsize,
    /// Connections accepted since start.
    pub accepted: AtomicU64,
    /// Failed `accept` calls since start.
    pub accept_errors: AtomicU64,
    /// Connections closed at accept because a connection limit was reached, and on a PROXY
    /// protocol listener those from an untrusted source or without a valid header.
    pub refused: AtomicU64,
    /// Whether the thread is pinned to its CPU.
    pub pinned: AtomicBool,
}

/// How a connection's future ended ([`WorkerApp::on_conn`]); `()` means closed.
#[derive(Debug)]
pub enum ConnEnd {
    /// The connection is closed.
    Closed,
    /// Idle between requests: the worker keeps the socket without a task (its idle lot)
    /// and calls [`WorkerApp::on_conn`] again when bytes arrive; it closes the socket at
    /// `idle_until`, or at once when the worker drains (a request already on its way in
    /// is still handed to the app). The connection stays counted against every limit.
    Park {
        /// The socket, out of the reactor, nonblocking, with no unread byte buffered.
        stream: std::net::TcpStream,
        /// When its keep-alive idle timeout ends.
        idle_until: Instant,
    },
}

impl From<()> for ConnEnd {
    fn from((): ()) -> ConnEnd {
        ConnEnd::Closed
    }
}

/// The per-worker application. One instance is created on each worker thread by the factory
/// given to [`start`](crate::start), so it may hold `Rc`/`RefCell` state.
pub trait WorkerApp: 'static {
    /// Serves one accepted connection. Runs as a local task on the accepting worker. When
    /// `drain` becomes `true` the server is shutting down: finish the in-flight request and
    /// return. The future is dropped (closing the connection) at the shutdown deadline.
    /// It may end with [`ConnEnd::Park`] to keep an idle connection without a task; a
    /// parked connection that becomes readable comes back here.
    fn on_conn(
        &self,
        stream: TcpStream,
        peer: SocketAddr,
        listener: &str,
        drain: watch::Receiver<bool>,
    ) -> impl Future<Output = impl Into<ConnEnd>> + 'static;

    /// A connection of a PROXY protocol listener
    /// ([`ListenerSpec::proxy_protocol`](crate::ListenerSpec::proxy_protocol)), after its
    /// header: `client` is the address the header named (`socket` when it named none, as a
    /// balancer's own health check does), `socket` the TCP peer (the balancer). Otherwise as
    /// [`WorkerApp::on_conn`], which the default calls with the client as the peer.
    fn on_proxied_conn(
        &self,
        stream: TcpStream,
        client: SocketAddr,
        socket: SocketAddr,
        listener: &str,
        drain: watch::Receiver<bool>,
    ) -> impl Future<Output = impl Into<ConnEnd>> + 'static {
        let _ = socket;
        self.on_conn(stream, client, listener, drain)
    }

    /// Whether a connection from `source` to a PROXY protocol listener may send its header,
    /// and how long it has to: `None` closes the connection at accept (a source that is no
    /// trusted proxy). The default trusts nobody.
    fn proxy_header_timeout(&self, source: IpAddr) -> Option<Duration> {
        let _ = source;
        None
    }

    /// A connection accepted over a limit (`why`), about to be closed: the app may answer
    /// it briefly (e.g. a 503 to the request it sent) before dropping it. The runtime runs
    /// at most a few of these per worker at once and closes the rest unanswered; the
    /// default closes it at once.
    fn on_refused(
        &self,
        stream: TcpStream,
        peer: SocketAddr,
        listener: &str,
        why: Refusal,
    ) -> impl Future<Output = ()> {
        let _ = (peer, listener, why);
        drop(stream);
        async {}
    }

    /// Per-worker background work (timers, cache maintenance, connections the app accepts
    /// itself such as QUIC's), started once per worker next to the accept loops. After a
    /// shutdown starts, the worker waits for it to return (as for open connections, until
    /// the shutdown deadline), so it should return soon after `drain` turns true.
    fn run(&self, ctx: WorkerCtx, drain: watch::Receiver<bool>) -> impl Future<Output = ()> {
        let _ = (ctx, drain);
        async {}
    }
}
