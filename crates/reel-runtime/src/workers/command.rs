//! The [`Runtime`](crate::Runtime)'s side of a running worker: its handle on the worker's
//! thread ([`WorkerHandle`]) and what it asks of the worker over its command channel
//! ([`Command`]: listener changes and socket export; the worker's `thread` carries them out).

use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::sync::mpsc as std_mpsc;

use tokio::sync::mpsc;

use crate::app::WorkerStats;

/// A request to one worker; `done` carries its answer back.
pub(super) enum Command {
    /// Change the listeners (see `listeners::apply`).
    Apply {
        add: Vec<(String, std::net::TcpListener)>,
        relisten: Vec<(String, i32)>,
        remove: Vec<String>,
        /// Every listener that takes a PROXY protocol header first, after the change.
        proxied: Vec<String>,
        done: std_mpsc::Sender<Result<(), String>>,
    },
    /// Duplicate the listening sockets (see `export::duplicates`).
    Export { done: std_mpsc::Sender<Result<Vec<(String, OwnedFd)>, String>> },
}

/// The [`Runtime`](crate::Runtime)'s handle on one worker thread.
pub(super) struct WorkerHandle {
    pub(super) index: usize,
    pub(super) cpu: usize,
    pub(super) tid: i32,
    pub(super) stats: Arc<WorkerStats>,
    pub(super) cmd: mpsc::UnboundedSender<Command>,
    pub(super) thread: Option<std::thread::JoinHandle<usize>>,
}
