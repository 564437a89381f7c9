//! A connection's task ([`Guarded`]) and the worker's side of the idle lot: a connection
//! the app hands back idle ([`ConnEnd::Park`]) moves into the lot (`idle`); the lot's task
//! gives it a task again when it speaks, closes it at its idle deadline, and empties the lot
//! on drain.

use std::future::Future;
use std::io;
use std::os::fd::OwnedFd;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::task::Poll;
use std::time::Instant;

use tokio::io::unix::AsyncFd;
use tokio::net::TcpStream;

use super::idle::{Lot, Woken};
use super::local::{ConnGuard, Local};
use crate::app::{ConnEnd, WorkerApp};

pin_project_lite::pin_project! {
    /// A connection's task: the app's future and the guard, nothing else. A connection
    /// waiting for its next request costs its task cell until it is parked, so the task is
    /// not an `async` block: one that awaits a future it captured keeps the future twice
    /// (captured and awaited), and keeps the stream, address and name it was made from.
    /// The guard drops with the task, when the future completes or at the shutdown
    /// deadline, unless the connection is parked: then it moves to the idle lot.
    pub(super) struct Guarded<F> {
        #[pin]
        conn: F,
        guard: Option<ConnGuard>,
    }
}

impl<F> Guarded<F> {
    /// The task of a connection: its future `conn`, and the guard that keeps it counted.
    pub(super) fn new(conn: F, guard: ConnGuard) -> Self {
        Guarded { conn, guard: Some(guard) }
    }
}

impl<F: Future> Future for Guarded<F>
where
    F::Output: Into<ConnEnd>,
{
    type Output = ();
    fn poll(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<()> {
        let this = self.project();
        let end = std::task::ready!(this.conn.poll(cx)).into();
        if let (ConnEnd::Park { stream, idle_until }, Some(guard)) = (end, this.guard.take()) {
            park(stream, guard, idle_until);
        }
        Poll::Ready(())
    }
}

/// Moves an idle connection into its worker's lot; closes it when the worker drains or
/// the lot cannot take it.
fn park(stream: std::net::TcpStream, guard: ConnGuard, idle_until: Instant) {
    let local = guard.local.clone();
    if *local.drain.borrow() {
        return;
    }
    let mut lot = local.lot.borrow_mut();
    let Some(lot) = lot.as_mut() else { return };
    let parked = lot.park(stream, guard, idle_until);
    local.stats.parked.store(lot.len(), Ordering::Relaxed);
    match parked {
        Ok(true) => local.lot_changed.notify_one(),
        Ok(false) => {}
        Err((e, guard)) => {
            tracing::debug!(error = %e, "idle connection not parked; closed");
            drop(guard);
        }
    }
}

/// Makes the worker's idle lot and registers its epoll descriptor with the worker's
/// reactor (in the runtime context). A worker that cannot fails to start: without it an
/// idle connection could be neither parked nor kept.
pub(super) fn open_lot(state: &Local) -> Result<AsyncFd<OwnedFd>, String> {
    let err = |e: io::Error| format!("creating the idle connection lot: {e}");
    let lot = Lot::new().map_err(err)?;
    let fd = lot.fd().try_clone_to_owned().map_err(err)?;
    // A registration with tokio's reactor, not a system call a safe wrapper could make: tokio
    // offers only this unsafe constructor (its safe ones are deprecated as unsound).
    // SAFETY: the `AsyncFd` owns the descriptor (a duplicate of the lot's epoll
    // descriptor, so the lot may be dropped first) and nothing else closes or replaces it:
    // it stays open and the same for the `AsyncFd`'s whole life.
    #[allow(unsafe_code)]
    let afd = unsafe { AsyncFd::register_with_interest(fd, tokio::io::Interest::READABLE) }
        .map_err(|e| err(e.into()))?;
    *state.lot.borrow_mut() = Some(lot);
    Ok(afd)
}

/// The idle lot's task: gives parked connections that became readable a task again
/// (through [`WorkerApp::on_conn`]), closes those whose idle deadline passed, and on drain
/// hands out the readable ones and closes the rest.
pub(super) async fn lot_loop<A: WorkerApp>(state: Rc<Local>, app: Rc<A>, afd: AsyncFd<OwnedFd>) {
    let mut drain = state.drain.clone();
    let mut woken = Vec::new();
    loop {
        let next = state.lot.borrow().as_ref().and_then(Lot::next_deadline);
        let expiry = async {
            match next {
                Some(t) => tokio::time::sleep_until(t.into()).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            r = afd.readable() => {
                let mut ready = match r {
                    Ok(g) => g,
                    Err(e) => {
                        // Without the lot's readiness nothing parked would wake: empty it
                        // (from now on an idle connection handed back is closed).
                        tracing::error!(error = %e, "idle lot lost its readiness; parked connections closed");
                        empty_lot(&state, &app, &mut woken);
                        return;
                    }
                };
                let more = match state.lot.borrow_mut().as_mut() {
                    Some(lot) => {
                        let more = lot.take_ready(&mut woken).unwrap_or(false);
                        state.stats.parked.store(lot.len(), Ordering::Relaxed);
                        more
                    }
                    None => false,
                };
                if !more {
                    ready.clear_ready();
                }
            }
            () = expiry => {
                if let Some(lot) = state.lot.borrow_mut().as_mut() {
                    lot.expire(Instant::now());
                    state.stats.parked.store(lot.len(), Ordering::Relaxed);
                }
            }
            () = state.lot_changed.notified() => {}
            _ = drain.wait_for(|d| *d) => {
                empty_lot(&state, &app, &mut woken);
                return;
            }
        }
        resume(&state, &app, &mut woken);
    }
}

/// Takes the lot away for good: its readable connections get a task (a request may be on
/// its way in), the rest are closed.
fn empty_lot<A: WorkerApp>(state: &Rc<Local>, app: &Rc<A>, woken: &mut Vec<Woken<ConnGuard>>) {
    // Taken out first: the closed ones' guards drop outside the borrow.
    let lot = state.lot.borrow_mut().take();
    if let Some(mut lot) = lot {
        lot.drain(woken);
    }
    state.stats.parked.store(0, Ordering::Relaxed);
    resume(state, app, woken);
}

/// Gives woken connections a task again.
fn resume<A: WorkerApp>(state: &Rc<Local>, app: &Rc<A>, woken: &mut Vec<Woken<ConnGuard>>) {
    for w in woken.drain(..) {
        // Asked of the kernel again rather than kept for every parked connection.
        let Ok(peer) = w.stream.peer_addr() else { continue };
        let Ok(stream) = TcpStream::from_std(w.stream) else { continue };
        let listener = state.name(w.guard.listener);
        let drain = state.drain.clone();
        if w.guard.proxied {
            // The client its PROXY header named, kept by its guard.
            let client = std::net::SocketAddr::new(w.guard.client, w.guard.port);
            let conn = app.on_proxied_conn(stream, client, peer, &listener, drain);
            tokio::task::spawn_local(Guarded::new(conn, w.guard));
        } else {
            let conn = app.on_conn(stream, peer, &listener, drain);
            tokio::task::spawn_local(Guarded::new(conn, w.guard));
        }
    }
}
