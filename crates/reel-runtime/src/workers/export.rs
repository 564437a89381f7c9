//! Handing the listeners to a successor process: [`Runtime::export_listeners`] collects a
//! duplicate of every worker's listening sockets, which stay open here too.

use std::os::fd::{AsFd, OwnedFd};
use std::sync::mpsc as std_mpsc;

use super::Runtime;
use super::command::Command;
use super::thread::Local;
use crate::error::RuntimeError;

impl Runtime {
    /// Duplicates of every worker's listening sockets, by listener name, in worker order:
    /// what a successor process needs to take over the listeners (the sockets stay open
    /// here too). Blocks until every worker answered.
    pub fn export_listeners(&self) -> Result<Vec<(String, OwnedFd)>, RuntimeError> {
        if *self.shared.drain.borrow() {
            return Err(RuntimeError::ShuttingDown);
        }
        let mut waits = Vec::with_capacity(self.workers.len());
        for w in &self.workers {
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
