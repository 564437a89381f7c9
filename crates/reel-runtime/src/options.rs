//! The runtime's public options: the listeners to bind ([`ListenerSpec`]), how the kernel
//! picks the worker of a new connection ([`Steer`]) and the runtime's tunables
//! ([`RuntimeOptions`]).

use std::net::SocketAddr;

/// One listening address; every worker binds its own socket for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListenerSpec {
    /// Name handed to [`WorkerApp::on_conn`](crate::WorkerApp::on_conn) and used by
    /// [`Runtime::local_addr`](crate::Runtime::local_addr).
    pub name: String,
    /// Address to bind. Port 0 picks one free port shared by all workers.
    pub addr: SocketAddr,
    /// `listen(2)` backlog of each worker's socket.
    pub backlog: i32,
    /// Each connection starts with a PROXY protocol header (v1 or v2) naming the client,
    /// from a source [`WorkerApp::proxy_header_timeout`](crate::WorkerApp::proxy_header_timeout)
    /// accepts; any other connection is closed.
    pub proxy_protocol: bool,
    /// The listener also serves UDP on its port (HTTP/3): with port 0 the port picked is
    /// one whose UDP twin is free too, so the UDP bind that follows does not find it
    /// taken by some other socket's ephemeral port.
    pub udp_twin: bool,
}

/// How the kernel picks the worker socket for a new connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Steer {
    /// The kernel's 4-tuple hash (default).
    #[default]
    Hash,
    /// By the CPU that processed the SYN, through a classic BPF program (see [`crate::steer`]).
    Cpu,
}

/// Tunables of the runtime.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuntimeOptions {
    /// Open connections per worker; a connection accepted beyond it is closed at accept
    /// (see [`WorkerApp::on_refused`](crate::WorkerApp::on_refused)). Must be at least 1.
    pub max_connections_per_worker: usize,
    /// Open connections from one client address, all workers together; 0 = no cap.
    pub max_connections_per_client: usize,
    /// Open client connections of the whole process (its descriptor budget); 0 = no cap.
    pub max_connections: usize,
    /// Connections over a limit that [`WorkerApp::on_refused`](crate::WorkerApp::on_refused)
    /// may answer at once, all workers together (each holds a descriptor meanwhile, from the
    /// reserve the limits keep); beyond this a refused connection is closed unanswered.
    pub max_answering_refused: usize,
    /// Connection steering within the reuseport group.
    pub steer: Steer,
    /// CPUs servicing NIC interrupts (from [`crate::CorePlan::irq_cpus`]); only used to build
    /// the [`Steer::Cpu`] table.
    pub irq_cpus: Vec<usize>,
    /// Pin each worker thread to its CPU. Failures to pin are logged, never fatal.
    pub pin: bool,
}

impl Default for RuntimeOptions {
    fn default() -> Self {
        Self {
            max_connections_per_worker: 16_384,
            max_connections_per_client: 0,
            max_connections: 0,
            max_answering_refused: 64,
            steer: Steer::Hash,
            irq_cpus: Vec::new(),
            pin: true,
        }
    }
}
