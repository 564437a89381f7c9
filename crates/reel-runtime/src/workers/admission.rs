//! Connection limits on the worker side, and changing them live: an accepted connection is
//! checked against its worker's cap and the process and client counts ([`crate::limits`]);
//! one over a limit is refused, after the app had a short chance to answer it; and
//! [`Runtime::set_connection_limits`] changes the caps for the next accept.

use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use tokio::net::TcpStream;

use super::thread::Local;
use super::{Runtime, Shared};
use crate::app::WorkerApp;
use crate::error::RuntimeError;
use crate::limits::Refusal;

impl Runtime {
    /// Changes the connection cap of every worker; takes effect at the next accept.
    /// Connections above a lowered cap stay open.
    pub fn set_max_connections_per_worker(&self, cap: usize) -> Result<(), RuntimeError> {
        let c = &self.shared.caps;
        self.set_connection_limits(
            cap,
            c.per_client.load(Ordering::Relaxed),
            c.total.load(Ordering::Relaxed),
            c.answering.load(Ordering::Relaxed),
        )
    }

    /// Changes every connection limit (see [`RuntimeOptions`](crate::RuntimeOptions): per
    /// worker, per client address, for the process, refused connections answered at once);
    /// takes effect at the next accept. Connections above a lowered limit stay open.
    pub fn set_connection_limits(
        &self,
        per_worker: usize,
        per_client: usize,
        total: usize,
        answering: usize,
    ) -> Result<(), RuntimeError> {
        if per_worker == 0 {
            return Err(RuntimeError::InvalidOptions(
                "max_connections_per_worker must be at least 1".into(),
            ));
        }
        if *self.shared.drain.borrow() {
            return Err(RuntimeError::ShuttingDown);
        }
        let c = &self.shared.caps;
        c.per_worker.store(per_worker, Ordering::Relaxed);
        c.per_client.store(per_client, Ordering::Relaxed);
        c.total.store(total, Ordering::Relaxed);
        c.answering.store(answering, Ordering::Relaxed);
        Ok(())
    }

    /// Open client connections of the whole process.
    pub fn open_connections(&self) -> usize {
        self.shared.conns.total()
    }
}

/// Checks the connection limits for a connection from `peer`.
pub(super) fn admit(state: &Local, peer: SocketAddr) -> Result<std::net::IpAddr, Refusal> {
    let caps = &state.shared.caps;
    if state.open.get() >= caps.per_worker.load(Ordering::Relaxed) {
        return Err(Refusal::Worker);
    }
    state.shared.conns.admit(
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
    let cap = state.shared.caps.answering.load(Ordering::Relaxed);
    if *state.drain.borrow() || !state.shared.conns.start_answering(cap) {
        return;
    }
    let guard = RefusingGuard(state.shared.clone());
    let app = app.clone();
    tokio::task::spawn_local(async move {
        let _guard = guard;
        app.on_refused(stream, peer, &name, why).await;
    });
}

/// Counts a refused connection being answered (process-wide).
struct RefusingGuard(Arc<Shared>);

impl Drop for RefusingGuard {
    fn drop(&mut self) {
        self.0.conns.end_answering();
    }
}
