//! The worker's acceptor: one loop over all the worker's listeners that takes every
//! connection from the kernel at once, checks it against the connection limits (`conn_limits`) and gives it its task (a PROXY
//! protocol listener's connection first reads its header: `proxied`).

use std::io;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tokio::net::TcpStream;

use super::local::{ConnGuard, Local};
use super::park::Guarded;
use super::{conn_limits, proxied};
use crate::app::WorkerApp;

/// A finished accept: the listener's name and the result.
type Accepted = (Rc<str>, io::Result<(TcpStream, SocketAddr)>);

/// Polls every listener of the worker once, starting after the one that accepted last.
fn poll_accept_any(state: &Local, cx: &mut Context<'_>) -> Poll<Accepted> {
    let ls = state.listeners.borrow();
    let n = ls.len();
    let start = state.next.get();
    for i in 0..n {
        let k = (start + i) % n;
        let (name, l) = &ls[k];
        if let Poll::Ready(r) = l.poll_accept(cx) {
            state.next.set(k + 1);
            return Poll::Ready((name.clone(), r));
        }
    }
    Poll::Pending
}

/// Rate limit for accept error logs: at most one line per second per worker.
struct ErrorLog {
    last: Option<Instant>,
    suppressed: u64,
}

/// The worker's single acceptor over all its listeners. Every connection is taken from
/// the kernel at once; one over a limit (this worker's cap, the process's descriptor
/// budget, its client address's cap) is closed at accept, after the app had a short
/// chance to answer it, so nothing waits in a backlog nobody takes from.
pub(super) async fn accept_loop<A: WorkerApp>(state: Rc<Local>, app: Rc<A>) {
    let mut log = ErrorLog { last: None, suppressed: 0 };
    loop {
        let (name, res) = tokio::select! {
            r = std::future::poll_fn(|cx| poll_accept_any(&state, cx)) => r,
            // A new listener has no waker registered yet: poll the set again.
            () = state.listeners_changed.notified() => continue,
        };
        match res {
            Ok((stream, peer)) => {
                state.stats.accepted.fetch_add(1, Ordering::Relaxed);
                if state.is_proxied(&name) {
                    proxied::accept(&state, &app, stream, peer, name);
                    continue;
                }
                match conn_limits::check(&state, peer) {
                    Ok(client) => {
                        state.open.set(state.open.get() + 1);
                        state.stats.open.fetch_add(1, Ordering::Relaxed);
                        let listener = state.name_id(&name);
                        let guard = ConnGuard {
                            local: state.clone(),
                            client,
                            port: 0,
                            proxied: false,
                            listener,
                        };
                        let conn = app.on_conn(stream, peer, &name, state.drain.clone());
                        tokio::task::spawn_local(Guarded::new(conn, guard));
                    }
                    Err(why) => conn_limits::refuse(&state, &app, stream, peer, name, why),
                }
            }
            Err(e) => {
                state.stats.accept_errors.fetch_add(1, Ordering::Relaxed);
                let now = Instant::now();
                if log.last.is_none_or(|t| now.duration_since(t) >= Duration::from_secs(1)) {
                    tracing::warn!(
                        listener = %name,
                        error = %e,
                        suppressed = log.suppressed,
                        "accept failed"
                    );
                    log.last = Some(now);
                    log.suppressed = 0;
                } else {
                    log.suppressed += 1;
                }
                tokio::time::sleep(accept_backoff(&e)).await;
            }
        }
    }
}

/// How long to pause after a failed accept. Descriptor or memory exhaustion persists until
/// connections close, so retrying at once would spin.
fn accept_backoff(e: &io::Error) -> Duration {
    match e.raw_os_error() {
        Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM) => {
            Duration::from_millis(100)
        }
        Some(libc::ECONNABORTED | libc::EINTR | libc::EPROTO | libc::EPERM) => Duration::ZERO,
        _ => Duration::from_millis(10),
    }
}
