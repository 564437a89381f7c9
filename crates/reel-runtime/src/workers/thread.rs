//! One worker's thread: its runtime, its accept loop over its own listening sockets, the
//! connection limits applied at accept, live listener changes and the drain.

use super::idle::{Lot, Woken};
use super::*;
use std::os::fd::OwnedFd;
use tokio::io::unix::AsyncFd;

/// What a worker thread is started with.
pub(super) struct WorkerCfg {
    pub(super) ctx: WorkerCtx,
    pub(super) pin: bool,
    pub(super) shared: Arc<Shared>,
}

/// Per-worker state shared by its local tasks.
struct Local {
    stats: Arc<WorkerStats>,
    open: Cell<usize>,
    /// The caps and the process-wide counts.
    shared: Arc<Shared>,
    /// Woken whenever a connection closes.
    closed: Notify,
    /// Woken whenever a listener is added, so the acceptor polls it.
    listeners_changed: Notify,
    drain: watch::Receiver<bool>,
    /// This worker's listening sockets. Removing one closes it at once.
    listeners: RefCell<Vec<(Rc<str>, TcpListener)>>,
    /// Where the next accept poll starts, so a busy listener cannot starve the others.
    next: Cell<usize>,
    /// Idle connections kept without a task (`None` once the worker drained).
    lot: RefCell<Option<Lot<ConnGuard>>>,
    /// Woken when a parked connection's deadline is the lot's earliest.
    lot_changed: Notify,
    /// Listener names by id (a connection's guard keeps the id: no room in its task for
    /// the name). Only grows; names are few.
    names: RefCell<Vec<Rc<str>>>,
}

impl Local {
    /// The id of listener name `name`.
    fn name_id(&self, name: &Rc<str>) -> u32 {
        let mut names = self.names.borrow_mut();
        if let Some(i) = names.iter().position(|n| n == name) {
            return i as u32;
        }
        names.push(name.clone());
        (names.len() - 1) as u32
    }

    /// The listener name of id `id`.
    fn name(&self, id: u32) -> Rc<str> {
        self.names.borrow().get(id as usize).cloned().unwrap_or_else(|| Rc::from(""))
    }
}

pin_project_lite::pin_project! {
    /// A connection's task: the app's future and the guard, nothing else. A connection
    /// waiting for its next request costs its task cell until it is parked, so the task is
    /// not an `async` block: one that awaits a future it captured keeps the future twice
    /// (captured and awaited), and keeps the stream, address and name it was made from.
    /// The guard drops with the task, when the future completes or at the shutdown
    /// deadline, unless the connection is parked: then it moves to the idle lot.
    struct Guarded<F> {
        #[pin]
        conn: F,
        guard: Option<ConnGuard>,
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

/// The idle lot's task: gives parked connections that became readable a task again
/// (through [`WorkerApp::on_conn`]), closes those whose idle deadline passed, and on drain
/// hands out the readable ones and closes the rest.
async fn lot_loop<A: WorkerApp>(state: Rc<Local>, app: Rc<A>, afd: AsyncFd<OwnedFd>) {
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
        let conn = app.on_conn(stream, peer, &listener, state.drain.clone());
        tokio::task::spawn_local(Guarded { conn, guard: Some(w.guard) });
    }
}

/// Decrements the open counts when a connection task ends or is dropped at the deadline.
struct ConnGuard {
    local: Rc<Local>,
    client: std::net::IpAddr,
    /// The listener's name id ([`Local::name_id`]).
    listener: u32,
}

impl Drop for ConnGuard {
    fn drop(&mut self) {
        let l = &self.local;
        l.open.set(l.open.get().saturating_sub(1));
        l.stats.open.fetch_sub(1, Ordering::Relaxed);
        l.shared.conns.release(self.client);
        l.closed.notify_waiters();
    }
}

/// Counts a refused connection being answered (process-wide).
struct RefusingGuard(Arc<Shared>);

impl Drop for RefusingGuard {
    fn drop(&mut self) {
        self.0.conns.end_answering();
    }
}

pub(super) fn worker_thread<A: WorkerApp>(
    cfg: WorkerCfg,
    initial: Vec<(String, std::net::TcpListener)>,
    cmd_rx: mpsc::UnboundedReceiver<Command>,
    ready: std_mpsc::Sender<(usize, Result<i32, String>)>,
    factory: impl FnOnce(&WorkerCtx) -> A,
) -> usize {
    let index = cfg.ctx.index;
    if cfg.pin {
        let pinned = core_affinity::set_for_current(core_affinity::CoreId { id: cfg.ctx.cpu });
        cfg.ctx.stats.pinned.store(pinned, Ordering::Relaxed);
        if !pinned {
            tracing::warn!(
                worker = index,
                cpu = cfg.ctx.cpu,
                "could not pin worker thread; running unpinned"
            );
        }
    }
    let rt = match tokio::runtime::Builder::new_current_thread().enable_io().enable_time().build() {
        Ok(rt) => rt,
        Err(e) => {
            let _ = ready.send((index, Err(format!("building tokio runtime: {e}"))));
            return 0;
        }
    };
    let local = LocalSet::new();
    let state = Rc::new(Local {
        stats: cfg.ctx.stats.clone(),
        open: Cell::new(0),
        shared: cfg.shared.clone(),
        closed: Notify::new(),
        listeners_changed: Notify::new(),
        drain: cfg.shared.drain.subscribe(),
        listeners: RefCell::new(Vec::new()),
        next: Cell::new(0),
        lot: RefCell::new(None),
        lot_changed: Notify::new(),
        names: RefCell::new(Vec::new()),
    });
    // A factory that panics is reported as this worker's startup failure, with its message.
    let app = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| factory(&cfg.ctx))) {
        Ok(app) => Rc::new(app),
        Err(payload) => {
            let why = payload
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a non-string payload".into());
            let _ = ready.send((index, Err(format!("panicked during startup: {why}"))));
            return 0;
        }
    };
    // Registering with the reactor needs the runtime context.
    let setup = {
        let _guard = rt.enter();
        initial
            .into_iter()
            .try_for_each(|(name, l)| add_listener(&state, name, l))
            .and_then(|()| open_lot(&state))
    };
    let lot_fd = match setup {
        Ok(fd) => fd,
        Err(e) => {
            let _ = ready.send((index, Err(e)));
            return 0;
        }
    };
    let _ = ready.send((index, Ok(thread_tid())));
    drop(ready);

    let shared = cfg.shared.clone();
    let ctx = cfg.ctx.clone();
    let dropped = local.block_on(&rt, async {
        let run_app = app.clone();
        let drain = state.drain.clone();
        tokio::task::spawn_local(async move { run_app.run(ctx, drain).await });
        let cmd_task = tokio::task::spawn_local(command_loop(state.clone(), cmd_rx));
        let acceptor = tokio::task::spawn_local(accept_loop(state.clone(), app.clone()));
        let lot_task = tokio::task::spawn_local(lot_loop(state.clone(), app.clone(), lot_fd));

        let mut drain = state.drain.clone();
        // An error means the sender is gone, which only happens with the Runtime: shut down too.
        let _ = drain.wait_for(|d| *d).await;
        cmd_task.abort();
        acceptor.abort();
        let _ = cmd_task.await;
        let _ = acceptor.await;
        // The lot hands out its readable connections and closes the rest.
        let _ = lot_task.await;
        state.listeners.borrow_mut().clear();
        let all_closed = async {
            while state.open.get() > 0 {
                state.closed.notified().await;
            }
        };
        match shared.deadline() {
            Some(d) => {
                let _ = tokio::time::timeout_at(d.into(), all_closed).await;
            }
            None => all_closed.await,
        }
        state.open.get()
    });
    // Dropping the LocalSet drops connections that outlived the deadline.
    drop(local);
    // Parked guards hold the worker's state: none may outlive the worker.
    drop(state.lot.borrow_mut().take());
    if dropped > 0 {
        tracing::warn!(
            worker = index,
            dropped,
            "shutdown deadline passed; dropped open connections"
        );
    }
    dropped
}

/// Makes the worker's idle lot and registers its epoll descriptor with the worker's
/// reactor (in the runtime context). A worker that cannot fails to start: without it an
/// idle connection could be neither parked nor kept.
fn open_lot(state: &Local) -> Result<AsyncFd<OwnedFd>, String> {
    let err = |e: io::Error| format!("creating the idle connection lot: {e}");
    let lot = Lot::new().map_err(err)?;
    let fd = lot.fd().try_clone_to_owned().map_err(err)?;
    // SAFETY: the `AsyncFd` owns the descriptor (a duplicate of the lot's epoll
    // descriptor, so the lot may be dropped first) and nothing else closes or replaces it:
    // it stays open and the same for the `AsyncFd`'s whole life.
    #[allow(unsafe_code)]
    let afd = unsafe { AsyncFd::register_with_interest(fd, tokio::io::Interest::READABLE) }
        .map_err(|e| err(e.into()))?;
    *state.lot.borrow_mut() = Some(lot);
    Ok(afd)
}

/// Registers a bound socket with this worker's reactor and hands it to the acceptor (a
/// worker may hold several sockets of one listener, see [`crate::start_with`]). Must run
/// inside the worker's runtime context.
fn add_listener(state: &Local, name: String, l: std::net::TcpListener) -> Result<(), String> {
    let l = TcpListener::from_std(l).map_err(|e| format!("registering listener {name:?}: {e}"))?;
    state.listeners.borrow_mut().push((Rc::from(name.as_str()), l));
    state.listeners_changed.notify_waiters();
    Ok(())
}

async fn command_loop(state: Rc<Local>, mut rx: mpsc::UnboundedReceiver<Command>) {
    while let Some(cmd) = rx.recv().await {
        match cmd {
            Command::Apply { add, relisten, remove, done } => {
                let mut result = Ok(());
                // Dropping the tokio listener deregisters and closes the socket right here.
                state.listeners.borrow_mut().retain(|(n, _)| !remove.iter().any(|r| **r == **n));
                for (name, backlog) in relisten {
                    if let Err(e) = relisten_one(&state, &name, backlog) {
                        result = Err(e);
                    }
                }
                for (name, l) in add {
                    if let Err(e) = add_listener(&state, name, l) {
                        result = Err(e);
                    }
                }
                let _ = done.send(result);
            }
            Command::Export { done } => {
                use std::os::fd::AsFd;
                let r = state
                    .listeners
                    .borrow()
                    .iter()
                    .map(|(n, l)| {
                        l.as_fd()
                            .try_clone_to_owned()
                            .map(|fd| (n.to_string(), fd))
                            .map_err(|e| format!("duplicating listener {n:?}: {e}"))
                    })
                    .collect();
                let _ = done.send(r);
            }
        }
    }
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
async fn accept_loop<A: WorkerApp>(state: Rc<Local>, app: Rc<A>) {
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
                match admit(&state, peer) {
                    Ok(client) => {
                        state.open.set(state.open.get() + 1);
                        state.stats.open.fetch_add(1, Ordering::Relaxed);
                        let listener = state.name_id(&name);
                        let guard = Some(ConnGuard { local: state.clone(), client, listener });
                        let conn = app.on_conn(stream, peer, &name, state.drain.clone());
                        tokio::task::spawn_local(Guarded { conn, guard });
                    }
                    Err(why) => refuse(&state, &app, stream, peer, name, why),
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

/// Checks the connection limits for a connection from `peer`.
fn admit(state: &Local, peer: SocketAddr) -> Result<std::net::IpAddr, Refusal> {
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
fn refuse<A: WorkerApp>(
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

#[cfg(test)]
mod tests {
    /// Every connection's task carries a guard: the listener's name id fits in the space
    /// the client address leaves, so parking costs the task nothing.
    #[test]
    fn a_connection_guard_is_32_bytes() {
        assert_eq!(std::mem::size_of::<Option<super::ConnGuard>>(), 32);
    }

    /// A parked connection's slot in the lot, as the lot's module doc says.
    #[test]
    fn a_parked_slot_is_56_bytes() {
        assert_eq!(super::super::idle::slot_size::<super::ConnGuard>(), 56);
    }
}
