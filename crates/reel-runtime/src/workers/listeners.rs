//! The listener set of a running runtime: which listeners there are and where they are bound
//! ([`Runtime::local_addr`], [`Runtime::listeners`]), and changing the set live
//! ([`Runtime::set_listeners`]): new sockets are bound on the caller's thread, then every
//! worker closes, re-listens or registers its own sockets.

use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::mpsc as std_mpsc;

use socket2::SockRef;
use tokio::net::TcpListener;

use super::Runtime;
use super::command::Command;
use super::thread::Local;
use crate::error::RuntimeError;
use crate::options::ListenerSpec;
use crate::sockets::bind_group;

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

impl Runtime {
    /// The address listener `name` is bound to (every worker's socket shares it; with port 0
    /// in the spec, the port the kernel chose); `None` if there is no such listener.
    pub fn local_addr(&self, name: &str) -> Option<SocketAddr> {
        let l = self.listeners.lock().ok()?;
        Some(l.get(name)?.addr)
    }

    /// The specs of the current listeners, by name.
    pub fn listeners(&self) -> Vec<ListenerSpec> {
        self.listeners
            .lock()
            .map(|l| l.values().map(|i| i.spec.clone()).collect())
            .unwrap_or_default()
    }

    /// Replaces the listener set: binds new listeners on every worker, changes the backlog of
    /// kept ones in place, and closes removed ones (their established connections continue;
    /// connections still in a removed socket's accept queue are reset by the kernel).
    /// All-or-nothing for binding: if any new socket fails to bind, nothing changes.
    /// Blocks until every worker applied the change.
    ///
    /// A listener is matched by name; an address change binds the new address before closing
    /// the old one. Under [`Steer::Cpu`](crate::Steer::Cpu) a name change that keeps the same
    /// address joins the old reuseport group before the old sockets leave, which reorders the
    /// group until restart.
    pub fn set_listeners(&self, specs: Vec<ListenerSpec>) -> Result<(), RuntimeError> {
        check_unique(&specs)?;
        if *self.shared.drain.borrow() {
            return Err(RuntimeError::ShuttingDown);
        }
        let mut current = self.listeners.lock().map_err(|_| RuntimeError::ShuttingDown)?;
        let n = self.workers.len();
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
                    let (socks, addr) = bind_group(spec, n, self.steer_prog.as_deref(), &own)?;
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
        let mut waits = Vec::with_capacity(n);
        for (w, add) in self.workers.iter().zip(per_worker) {
            let (done, rx) = std_mpsc::channel();
            w.cmd
                .send(Command::Apply {
                    add,
                    relisten: relisten.clone(),
                    remove: remove.clone(),
                    done,
                })
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
            }
        }
        first_err.map_or(Ok(()), Err)
    }
}

/// Applies a listener change on this worker: closes the removed listeners, re-listens the
/// kept ones with their new backlog and registers the added ones. Every step is tried; the
/// last error is returned.
pub(super) fn apply(
    state: &Local,
    add: Vec<(String, std::net::TcpListener)>,
    relisten: Vec<(String, i32)>,
    remove: Vec<String>,
) -> Result<(), String> {
    let mut result = Ok(());
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
