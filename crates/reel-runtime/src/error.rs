//! The runtime's error type, [`RuntimeError`]: what can go wrong starting the workers,
//! binding or adopting their listeners, and changing them while they run.

use std::io;
use std::net::SocketAddr;

/// Errors of starting and controlling the runtime.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// `start` was given no worker CPUs.
    #[error("no worker cpus")]
    NoWorkers,
    /// An option is out of range.
    #[error("invalid runtime options: {0}")]
    InvalidOptions(String),
    /// Two listeners share a name.
    #[error("listener name {0:?} is used twice")]
    DuplicateListener(String),
    /// Creating, binding or listening on a socket failed. The message names the config
    /// key to change: `listener "NAME" address ADDR`.
    #[error("listener {name:?} address {addr}: {source}")]
    Bind {
        /// Listener name.
        name: String,
        /// Requested address.
        addr: SocketAddr,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// Attaching the steering program failed.
    #[error("listener {name:?}: attaching the cpu steering program: {source}")]
    Steer {
        /// Listener name.
        name: String,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// The worker CPU table does not fit a classic BPF program.
    #[error("cpu steering table too large for a classic BPF program")]
    SteerTable,
    /// An OS thread could not be spawned.
    #[error("spawning worker thread {index}: {source}")]
    Spawn {
        /// Worker index.
        index: usize,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// A worker failed to set up or apply a command.
    #[error("worker {index}: {message}")]
    Worker {
        /// Worker index.
        index: usize,
        /// What failed.
        message: String,
    },
    /// A worker thread is gone (it exited or panicked).
    #[error("worker {0} is not running")]
    WorkerGone(usize),
    /// The runtime is draining; listeners can no longer change.
    #[error("the runtime is shutting down")]
    ShuttingDown,
}
