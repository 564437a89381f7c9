//! The listener set of a running runtime: which listeners there are and where they are bound
//! ([`ListenerInfo`]), and changing the set live ([`change`], for
//! [`Runtime::set_listeners`](crate::Runtime::set_listeners)): new sockets are bound on the
//! caller's thread, then every worker closes, re-listens or registers its own sockets
//! ([`apply`]).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::mpsc as std_mpsc;

use socket2::SockRef;
use tokio::net::TcpListener;

use super::command::{Command, WorkerHandle};
use super::local::Local;
use crate::error::RuntimeError;
use crate::options::ListenerSpec;
use crate::sockets::bind_group;
use crate::steer;

/// A listener of the runtime: its spec and the address its sockets are bound to.
#[derive(Debug, Clone)]
pub(super) struct ListenerInfo {
    pub(super) spec: ListenerSpec,
    pub(super) addr: SocketAddr,
}

/// Refuses a listener set that names a listener twice.
pub(super) fn check_unique(listeners: &[ListenerSpec]) -> Result<(), RuntimeError> {
    let mut names = std::collections::BTreeSet::new();
    for l in listeners {
        if !names.insert(l.name.as_str()) {
            return Err(RuntimeError::DuplicateListener(l.name.clone()));
        }
    }
    Ok(())
}

/// Replaces the listener set `current` of `workers` with `specs` (the steps and guarantees
/// are [`Runtime::set_listeners`](crate::Runtime::set_listeners)'s). New groups get
/// `steer_prog`, the steering program, when there is one.
pub(super) fn change(
    current: &mut BTreeMap<String, ListenerInfo>,
    workers: &[WorkerHandle],
    steer_prog: Option<&[steer::Insn]>,
    specs: Vec<ListenerSpec>,
) -> Result<(), RuntimeError> {
    let n = workers.len();
    let mut add_infos = Vec::new();
    let mut per_worker: Vec<Vec<(String, std::net::TcpListener)>> =
        (0..n).map(|_| Vec::new()).collect();
    let mut relisten = Vec::new();
    let mut remove = Vec::new();
    for spec in &specs {
        match current.get(&spec.name) {
            Some(cur) if cur.spec == *spec => {}
            Some(cur) if cur.spec.addr == spec.addr => {
                relisten.push((spec.name.clone(), spec.backlog));
            }
            _ => {
                // Binding errors return here, before any worker was told anything.
                let own: Vec<SocketAddr> = current.values().map(|i| i.addr).collect();
                let (socks, addr) = bind_group(spec, n, steer_prog, &own)?;
                for (w, socks) in socks.into_iter().enumerate() {
                    per_worker[w].extend(socks.into_iter().map(|s| (spec.name.clone(), s)));
                }
                add_infos.push(ListenerInfo { spec: spec.clone(), addr });
                if current.contains_key(&spec.name) {
                    remove.push(spec.name.clone());
                }
            }
        }
    }
    for name in current.keys() {
        if !specs.iter().any(|s| &s.name == name) {
            remove.push(name.clone());
        }
    }
    let proxied = proxied_names(&specs);
    let mut waits = Vec::with_capacity(n);
    for (w, add) in workers.iter().zip(per_worker) {
        let (done, rx) = std_mpsc::channel();
        let (relisten, remove, proxied) = (relisten.clone(), remove.clone(), proxied.clone());
        w.cmd
            .send(Command::Apply { add, relisten, remove, proxied, done })
            .map_err(|_| RuntimeError::WorkerGone(w.index))?;
        waits.push((w.index, rx));
    }
    let mut first_err = None;
    for (index, rx) in waits {
        let r = match rx.recv() {
            Ok(Ok(())) => Ok(()),
            Ok(Err(message)) => Err(RuntimeError::Worker { index, message }),
            Err(_) => Err(RuntimeError::WorkerGone(index)),
        };
        if let Err(e) = r {
            first_err.get_or_insert(e);
        }
    }
    for name in &remove {
        current.remove(name);
    }
    for info in add_infos {
        current.insert(info.spec.name.clone(), info);
    }
    for (name, backlog) in relisten {
        if let Some(i) = current.get_mut(&name) {
            i.spec.backlog = backlog;
            if let Some(s) = specs.iter().find(|s| s.name == name) {
                i.spec.proxy_protocol = s.proxy_protocol;
            }
        }
    }
    first_err.map_or(Ok(()), Err)
}

/// The names of the listeners in `specs` that take a PROXY protocol header first.
pub(super) fn proxied_names(specs: &[ListenerSpec]) -> Vec<String> {
    specs.iter().filter(|s| s.proxy_protocol).map(|s| s.name.clone()).collect()
}

/// Sets which of this worker's listeners take a PROXY protocol header first; a connection
/// already accepted keeps what it was accepted with.
pub(super) fn set_proxied(state: &Local, names: &[String]) {
    *state.proxied.borrow_mut() = names.iter().map(|n| Rc::from(n.as_str())).collect();
}

/// Applies a listener change on this worker: closes the removed listeners, re-listens the
/// kept ones with their new backlog, registers the added ones and takes the new set of
/// PROXY protocol listeners. Every step is tried; the last error is returned.
pub(super) fn apply(
    state: &Local,
    add: Vec<(String, std::net::TcpListener)>,
    relisten: Vec<(String, i32)>,
    remove: Vec<String>,
    proxied: &[String],
) -> Result<(), String> {
    let mut result = Ok(());
    set_proxied(state, proxied);
    // Dropping the tokio listener deregisters and closes the socket right here.
    state.listeners.borrow_mut().retain(|(n, _)| !remove.iter().any(|r| **r == **n));
    for (name, backlog) in relisten {
        if let Err(e) = relisten_one(state, &name, backlog) {
            result = Err(e);
        }
    }
    for (name, l) in add {
        if let Err(e) = add_listener(state, name, l) {
            result = Err(e);
        }
    }
    result
}

/// Registers a bound socket with this worker's reactor and hands it to the acceptor (a
/// worker may hold several sockets of one listener, see [`crate::start_with`]). Must run
/// inside the worker's runtime context.
pub(super) fn add_listener(
    state: &Local,
    name: String,
    l: std::net::TcpListener,
) -> Result<(), String> {
    let l = TcpListener::from_std(l).map_err(|e| format!("registering listener {name:?}: {e}"))?;
    state.listeners.borrow_mut().push((Rc::from(name.as_str()), l));
    state.listeners_changed.notify_waiters();
    Ok(())
}

/// Re-runs `listen(2)` on a listener's sockets, which updates their backlog in place.
fn relisten_one(state: &Local, name: &str, backlog: i32) -> Result<(), String> {
    let ls = state.listeners.borrow();
    let mut found = false;
    for (_, l) in ls.iter().filter(|(n, _)| **n == *name) {
        found = true;
        SockRef::from(l)
            .listen(backlog)
            .map_err(|e| format!("changing backlog of {name:?}: {e}"))?;
    }
    if found { Ok(()) } else { Err(format!("listener {name:?} not found")) }
}
