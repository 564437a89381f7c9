//! The running process's control loop and how it ends.
//!
//! The loop waits for signals and admin requests: SIGHUP reloads, SIGUSR1 reopens the
//! access log, SIGUSR2 starts a binary upgrade (`upgrade`), SIGTERM/SIGINT stop.
//!
//! - **Stop (SIGTERM), lame duck first.** `/healthz` answers 503 `stopping` and every
//!   response tells keep-alive clients `Connection: close`, while reel keeps accepting and
//!   serving for `server.shutdown_delay` (a second SIGTERM or SIGINT cuts it short), so
//!   balancers that probe every few hundred milliseconds move traffic away before anything
//!   is refused. Then the drain: stop accepting, finish in-flight requests for up to
//!   `server.shutdown_timeout`, close what is left.
//! - **Hand-over (the successor serves).** The successor accepts on the same sockets, so
//!   this process stops accepting at once, tells keep-alive clients to close, waits up to
//!   `server.shutdown_delay` for them to leave, then drains like a stop. `/healthz` stays
//!   as it was: the node is healthy, only the process changes.
//!
//! Either way the access log is written out and the exit status is 0 (1 if a worker
//! thread panicked).

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use reel_ops::notify;
use reel_ops::sampler::Health;
use reel_runtime::ShutdownReport;
use tokio::signal::unix::Signal;
use tokio::sync::mpsc;
use tracing::{error, info, warn};

use crate::admin::Admin;
use crate::state::Shared;
use crate::upgrade::handoff::SocketRole;
use crate::upgrade::{self, Event};

/// The signals the control loop handles.
pub(crate) struct Signals {
    /// Reload.
    pub hup: Signal,
    /// Reopen the access log.
    pub usr1: Signal,
    /// Binary upgrade.
    pub usr2: Signal,
    /// Stop.
    pub term: Signal,
    /// Stop (Ctrl-C).
    pub int: Signal,
}

/// What the control loop runs and stops.
pub(crate) struct Process {
    /// The shared state.
    pub shared: Arc<Shared>,
    /// The workers.
    pub runtime: reel_runtime::Runtime,
    /// The admin listener.
    pub admin: Admin,
    /// The health state.
    pub health: Arc<Health>,
    /// The demo origin, if enabled.
    #[cfg(feature = "demo")]
    pub demo: Option<crate::process::demo::Demo>,
}

enum Stop {
    Signal,
    HandedOver(u32),
}

/// Runs the control loop until the process stops; returns the exit status.
pub(crate) async fn run(p: Process, mut sig: Signals) -> ExitCode {
    let shared = p.shared.clone();
    let mut reload_requests = shared.take_reload_requests();
    let (events_tx, mut events) = mpsc::unbounded_channel();
    // A reload may block this thread briefly (binding new listeners waits for every
    // worker to apply the change); nothing else runs on it.
    let why = loop {
        tokio::select! {
            _ = sig.hup.recv() => {
                let _ = crate::state::reload::reload(&shared, &p.runtime);
            }
            Some(reply) = reload_requests.recv() => {
                let _ = reply.send(crate::state::reload::reload(&shared, &p.runtime));
            }
            _ = sig.usr1.recv() => shared.reopen_access_log(),
            _ = sig.usr2.recv() => start_upgrade(&p, &events_tx),
            Some(ev) = events.recv() => match ev {
                Event::Serving(pid) => break Stop::HandedOver(pid),
                Event::Failed(reason) => {
                    error!(%reason, "upgrade failed; this process keeps serving");
                    notify::status(&format!("serving; the last upgrade failed: {reason}"));
                }
            },
            _ = sig.term.recv() => break Stop::Signal,
            _ = sig.int.recv() => break Stop::Signal,
        }
    };
    let live = shared.live_full();
    let delay = live.cfg.server.shutdown_delay.get();
    let deadline = live.cfg.server.shutdown_timeout.get();
    drop(live);
    let handed_over = match why {
        Stop::Signal => {
            lame_duck(&p, &mut sig, delay).await;
            false
        }
        Stop::HandedOver(pid) => {
            hand_over(&p, &mut sig, pid, delay).await;
            true
        }
    };
    drain(p, deadline, handed_over)
}

/// SIGUSR2: hands every listening socket to a new process of the installed binary.
fn start_upgrade(p: &Process, events: &mpsc::UnboundedSender<Event>) {
    let st = p.shared.upgrade_status();
    if st.in_progress {
        warn!("SIGUSR2 ignored: an upgrade is under way");
        return;
    }
    if let Some(pid) = st.predecessor {
        warn!(pid, "SIGUSR2 ignored: the process this one replaced has not exited yet");
        return;
    }
    let mut sockets: Vec<(SocketRole, std::os::fd::OwnedFd)> = Vec::new();
    let collected = (|| -> anyhow::Result<()> {
        for (name, fd) in p.runtime.export_listeners()? {
            sockets.push((SocketRole::Data(name), fd));
        }
        for (name, fd) in p.shared.quic.export()? {
            sockets.push((SocketRole::Quic(name), fd));
        }
        sockets.push((SocketRole::Admin, p.admin.listener_fd()?));
        #[cfg(feature = "demo")]
        if let Some(d) = &p.demo {
            sockets.push((SocketRole::Demo, d.listener_fd()?));
        }
        Ok(())
    })();
    let fill_wait = p.shared.live().cfg.server.shutdown_timeout.get();
    let started = collected
        .and_then(|()| upgrade::begin(p.shared.clone(), sockets, fill_wait, events.clone()));
    if let Err(e) = started {
        error!("upgrade failed; this process keeps serving: {e:#}");
    }
}

/// SIGTERM: 503 `stopping`, `Connection: close`, keep serving for `delay`.
async fn lame_duck(p: &Process, sig: &mut Signals, delay: Duration) {
    notify::stopping();
    p.health.set_stopping();
    p.shared.set_closing();
    if delay.is_zero() {
        return;
    }
    info!(
        ?delay,
        "stopping: /healthz answers 503 and keep-alive clients are told to close; \
         serving on until the delay ends, then draining"
    );
    tokio::select! {
        () = tokio::time::sleep(delay) => {}
        _ = sig.term.recv() => info!("second stop signal: draining now"),
        _ = sig.int.recv() => info!("second stop signal: draining now"),
    }
}

/// The successor serves: stop accepting, tell keep-alive clients to close, wait up to
/// `delay` for them to leave.
async fn hand_over(p: &Process, sig: &mut Signals, pid: u32, delay: Duration) {
    notify::main_pid(pid);
    p.shared.set_closing();
    if let Err(e) = p.runtime.set_listeners(Vec::new()) {
        warn!("closing this process's listeners: {e}");
    }
    p.shared.record_listeners(&p.runtime);
    // The successor answers on the admin socket from now on.
    p.admin.stop_accepting();
    info!(
        successor = pid,
        open = p.runtime.open_connections(),
        ?delay,
        "handed over: no longer accepting; keep-alive clients are told to close"
    );
    let left = async {
        while p.runtime.open_connections() > 0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    tokio::select! {
        () = left => {}
        () = tokio::time::sleep(delay) => {}
        _ = sig.term.recv() => {}
        _ = sig.int.recv() => {}
    }
}

/// Stops accepting, lets in-flight requests finish up to `deadline`, writes the access
/// log out.
fn drain(p: Process, deadline: Duration, handed_over: bool) -> ExitCode {
    info!(?deadline, "shutting down: draining connections");
    if !handed_over {
        // A stop (not a hand-over): balancers see the node go.
        p.health.set_draining(true);
    }
    let shutdown = p.runtime.shutdown_handle();
    shutdown.shutdown(deadline);
    let report = p.runtime.wait();
    p.admin.stop();
    // The workers are gone and have handed over their buffers: write them out.
    p.shared.close_access_log();
    // A clean close: the next start loads the index checkpoint instead of scanning. Not
    // once the store was handed over (also when stopped halfway through an upgrade): it
    // belongs to the successor now.
    if p.shared.store.has_lock()
        && let Err(e) = p.shared.store.close()
    {
        warn!(error = %e, "store index checkpoint not written");
    }
    if report.dropped_connections > 0 {
        warn!(
            dropped = report.dropped_connections,
            "connections still open at the deadline were closed"
        );
    }
    exit_code(&report)
}

/// The exit status after a shutdown: a worker thread that panicked means the process did
/// not stop cleanly, whatever else went well.
fn exit_code(report: &ShutdownReport) -> ExitCode {
    if report.panicked_workers > 0 {
        error!(panicked = report.panicked_workers, "worker threads panicked; exiting with failure");
        return ExitCode::FAILURE;
    }
    info!("reel stopped");
    ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panicked_worker_fails_the_exit_status() {
        let clean = ShutdownReport { dropped_connections: 3, panicked_workers: 0 };
        assert_eq!(exit_code(&clean), ExitCode::SUCCESS);
        let panicked = ShutdownReport { dropped_connections: 0, panicked_workers: 1 };
        assert_eq!(exit_code(&panicked), ExitCode::FAILURE);
    }
}
