//! What the [`Runtime`](crate::Runtime) asks of a running worker over its command channel,
//! and the worker's task that carries it out: listener changes (`listeners`) and socket
//! export (`export`).

use std::os::fd::OwnedFd;
use std::rc::Rc;
use std::sync::mpsc as std_mpsc;

use tokio::sync::mpsc;

use super::thread::Local;
use super::{export, listeners};

/// A request to one worker; `done` carries its answer back.
pub(super) enum Command {
    /// Change the listeners (see [`listeners::apply`]).
    Apply {
        add: Vec<(String, std::net::TcpListener)>,
        relisten: Vec<(String, i32)>,
        remove: Vec<String>,
        done: std_mpsc::Sender<Result<(), String>>,
    },
    /// Duplicate the listening sockets (see [`export::duplicates`]).
    Export { done: std_mpsc::Sender<Result<Vec<(String, OwnedFd)>, String>> },
}

/// The worker's command task: applies each command in turn and answers it.
pub(super) async fn command_loop(state: Rc<Local>, mut rx: mpsc::UnboundedReceiver<Command>) {
    while let Some(cmd) = rx.recv().await {
        match cmd {
            Command::Apply { add, relisten, remove, done } => {
                let _ = done.send(listeners::apply(&state, add, relisten, remove));
            }
            Command::Export { done } => {
                let _ = done.send(export::duplicates(&state));
            }
        }
    }
}
