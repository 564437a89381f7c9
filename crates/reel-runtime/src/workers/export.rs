//! Handing the listeners to a successor process: [`collect`] gathers a duplicate of every
//! worker's listening sockets (for [`Runtime::export_listeners`](crate::Runtime::export_listeners)),
//! which stay open here too; each worker makes its own with [`duplicates`].

use std::os::fd::{AsFd, OwnedFd};
use std::sync::mpsc as std_mpsc;

use super::command::{Command, WorkerHandle};
use super::local::Local;
use crate::error::RuntimeError;

/// Duplicates of the listening sockets of `workers`, by listener name, in worker order.
/// Blocks until every worker answered.
pub(super) fn collect(workers: &[WorkerHandle]) -> Result<Vec<(String, OwnedFd)>, RuntimeError> {
    let mut waits = Vec::with_capacity(workers.len());
    for w in workers {
        let (done, rx) = std_mpsc::channel();
        w.cmd.send(Command::Export { done }).map_err(|_| RuntimeError::WorkerGone(w.index))?;
        waits.push((w.index, rx));
    }
    let mut out = Vec::new();
    for (index, rx) in waits {
        match rx.recv() {
            Ok(Ok(v)) => out.extend(v),
            Ok(Err(message)) => return Err(RuntimeError::Worker { index, message }),
            Err(_) => return Err(RuntimeError::WorkerGone(index)),
        }
    }
    Ok(out)
}

/// Duplicates of this worker's listening sockets, by listener name.
pub(super) fn duplicates(state: &Local) -> Result<Vec<(String, OwnedFd)>, String> {
    state
        .listeners
        .borrow()
        .iter()
        .map(|(n, l)| {
            l.as_fd()
                .try_clone_to_owned()
                .map(|fd| (n.to_string(), fd))
                .map_err(|e| format!("duplicating listener {n:?}: {e}"))
        })
        .collect()
}
