//! Connection limits on the worker side: an accepted connection is checked against its
//! worker's cap and the process and client counts ([`crate::limits`]); one over a limit is
//! refused, after the app had a short chance to answer it.

use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use tokio::net::TcpStream;

use super::local::{ConnGuard, Local};
use crate::app::WorkerApp;
use crate::limits::{Limits, Refusal};

/// Checks the connection limits for a connection from `peer`.
pub(super) fn check(state: &Local, peer: SocketAddr) -> Result<std::net::IpAddr, Refusal> {
    let caps = &state.limits.caps;
    if state.open.get() >= caps.per_worker.load(Ordering::Relaxed) {
        return Err(Refusal::Worker);
    }
    state.limits.conns.enter(
        peer.ip(),
        caps.total.load(Ordering::Relaxed),
        caps.per_client.load(Ordering::Relaxed),
    )
}

/// Checks the limits that do not depend on the client for a connection from `peer` of a
/// PROXY protocol listener (this worker's cap, the process's), before its header names the
/// client: `peer`, a balancer, is counted with no client cap until then
/// ([`move_to_client`]).
pub(super) fn check_transport(
    state: &Local,
    peer: SocketAddr,
) -> Result<std::net::IpAddr, Refusal> {
    let caps = &state.limits.caps;
    if state.open.get() >= caps.per_worker.load(Ordering::Relaxed) {
        return Err(Refusal::Worker);
    }
    state.limits.conns.enter(peer.ip(), caps.total.load(Ordering::Relaxed), 0)
}

/// Moves a connection counted by [`check_transport`] to `client`, the address its PROXY
/// header named, against the client cap; on a refusal the guard still counts the source.
pub(super) fn move_to_client(guard: &mut ConnGuard, client: SocketAddr) -> Result<(), Refusal> {
    let conns = &guard.local.limits.conns;
    let cap = guard.local.limits.caps.per_client.load(Ordering::Relaxed);
    let ip = conns.enter_client(client.ip(), cap)?;
    conns.leave_client(guard.client);
    guard.client = ip;
    guard.port = client.port();
    Ok(())
}

/// Closes a connection over a limit, letting the app answer it first while few are.
pub(super) fn refuse<A: WorkerApp>(
    state: &Rc<Local>,
    app: &Rc<A>,
    stream: TcpStream,
    peer: SocketAddr,
    name: Rc<str>,
    why: Refusal,
) {
    state.stats.refused.fetch_add(1, Ordering::Relaxed);
    let cap = state.limits.caps.answering.load(Ordering::Relaxed);
    if *state.drain.borrow() || !state.limits.conns.start_answering(cap) {
        return;
    }
    let guard = RefusingGuard(state.limits.clone());
    let app = app.clone();
    tokio::task::spawn_local(async move {
        let _guard = guard;
        app.on_refused(stream, peer, &name, why).await;
    });
}

/// Counts a refused connection being answered (process-wide).
struct RefusingGuard(Arc<Limits>);

impl Drop for RefusingGuard {
    fn drop(&mut self) {
        self.0.conns.end_answering();
    }
}
