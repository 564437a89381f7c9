//! Connection limits on the worker side: an accepted connection is checked against its
//! worker's cap and the process and client counts ([`crate::limits`]); one over a limit is
//! refused, after the app had a short chance to answer it.

use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use tokio::net::TcpStream;

use super::local::Local;
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
