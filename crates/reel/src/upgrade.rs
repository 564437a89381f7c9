//! Binary upgrade, the running process's side (SIGUSR2, as with nginx): start the binary
//! now installed at our path with our arguments, hand it every listening socket over the
//! `handoff` channel, stop writing the store when it is ready to open it, and once it
//! serves, report [`Event::Serving`] so the control loop stops accepting and drains.
//!
//! A successor that fails before it serves (bad config, crash, a hang past
//! [`SERVE_WAIT`]) is killed if still running and reported as [`Event::Failed`]; this
//! process thaws its store and keeps serving as if nothing happened.
//!
//! The folder holds both ends of the hand-over: the control channel (`handoff`), the
//! successor's standard error relayed while it starts (`relay`), and the listening sockets
//! a starting process takes over from its predecessor or from systemd (`inherit`).

pub(crate) mod handoff;
pub(crate) mod inherit;
mod relay;

use std::ffi::OsString;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use anyhow::Context;
use tokio::sync::mpsc;
use tracing::{error, info, warn};

use crate::state::Shared;
use crate::upgrade::handoff::{Channel, ENV_FD, FDS_PER_MSG, Msg, SocketRole};

/// How long the successor may take to load its config and ask for the store.
const START_WAIT: Duration = Duration::from_secs(60);
/// How long it may take to open the store (rebuilding its index) and start serving.
pub(crate) const SERVE_WAIT: Duration = Duration::from_secs(300);

/// What became of an upgrade, for the control loop.
#[derive(Debug)]
pub(crate) enum Event {
    /// The successor (this pid) accepts on the sockets: stop accepting and drain.
    Serving(u32),
    /// The upgrade failed; this process keeps serving.
    Failed(String),
}

/// Starts an upgrade on a thread of its own; events arrive on `events`.
pub(crate) fn begin(
    shared: Arc<Shared>,
    sockets: Vec<(SocketRole, OwnedFd)>,
    fill_wait: Duration,
    events: mpsc::UnboundedSender<Event>,
) -> anyhow::Result<()> {
    shared.update_upgrade(|u| {
        u.attempts += 1;
        u.in_progress = true;
        u.last_at =
            SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).ok().map(|d| d.as_secs());
    });
    let s = shared.clone();
    let spawned = std::thread::Builder::new().name("reel-upgrade".into()).spawn(move || {
        let mut attempt =
            Attempt { shared: s.clone(), child: None, relay: None, froze: false, released: false };
        match attempt.run(sockets, fill_wait) {
            Ok((pid, channel)) => {
                s.update_upgrade(|u| {
                    u.in_progress = false;
                    u.last_ok = Some(true);
                    u.last_error = None;
                    u.successor = Some(pid);
                });
                let _ = events.send(Event::Serving(pid));
                // The drain that starts now closes this process's HTTP/3 connections; then
                // the successor may read the UDP sockets.
                let wait = s.live().cfg.server.shutdown_timeout.get() + Duration::from_secs(5);
                if !s.quic.wait_stopped(wait) {
                    warn!(pid, "upgrade: HTTP/3 connections still open; letting go of the sockets");
                }
                if let Err(e) = channel.send(&Msg::QuicReleased, &[]) {
                    warn!(pid, "upgrade: could not tell the new process to serve HTTP/3: {e}");
                }
                // Our end stays open until this process exits: its closing tells the
                // successor that nobody reads the store any more.
                while let Ok(Some(_)) = channel.recv(None) {}
                if let Some(mut c) = attempt.child.take() {
                    let st = c.wait().map(|s| s.to_string()).unwrap_or_default();
                    warn!(pid, status = %st, "the successor exited before this process");
                }
            }
            Err(e) => {
                let reason = attempt.fail(e);
                s.update_upgrade(|u| {
                    u.in_progress = false;
                    u.failures += 1;
                    u.last_ok = Some(false);
                    u.last_error = Some(reason.clone());
                });
                let _ = events.send(Event::Failed(reason));
            }
        }
    });
    if let Err(e) = spawned {
        shared.update_upgrade(|u| u.in_progress = false);
        return Err(e).context("starting the upgrade thread");
    }
    Ok(())
}

struct Attempt {
    shared: Arc<Shared>,
    child: Option<Child>,
    /// The successor's standard error, until it serves.
    relay: Option<relay::Relay>,
    froze: bool,
    released: bool,
}

impl Attempt {
    fn run(
        &mut self,
        sockets: Vec<(SocketRole, OwnedFd)>,
        fill_wait: Duration,
    ) -> anyhow::Result<(u32, Channel)> {
        let (ours, theirs) = Channel::pair().context("creating the upgrade channel")?;
        // The child keeps its end across exec; ours stays close-on-exec.
        rustix::io::fcntl_setfd(&theirs, rustix::io::FdFlags::empty())?;
        let exe = installed_binary()?;
        let args: Vec<OsString> = std::env::args_os().skip(1).collect();
        info!(binary = %exe.display(), ?args, "upgrade: starting the new binary");
        let mut child = Command::new(&exe)
            .args(&args)
            .env(ENV_FD, theirs.as_raw_fd().to_string())
            .env_remove("LISTEN_FDS")
            .env_remove("LISTEN_PID")
            .env_remove("LISTEN_FDNAMES")
            .stderr(Stdio::piped())
            .spawn()
            .with_context(|| format!("starting {}", exe.display()))?;
        drop(theirs);
        let pid = child.id();
        let stderr = child.stderr.take();
        self.child = Some(child);
        if let Some(e) = stderr {
            self.relay = Some(relay::Relay::start(e).context("relaying its standard error")?);
        }

        let gone = |_| anyhow::anyhow!("it closed the channel before it took the sockets");
        for chunk in sockets.chunks(FDS_PER_MSG) {
            let roles = chunk.iter().map(|(r, _)| r.clone()).collect();
            let fds: Vec<_> = chunk.iter().map(|(_, fd)| fd.as_fd()).collect();
            ours.send(&Msg::Sockets { roles }, &fds).map_err(gone)?;
        }
        ours.send(&Msg::SocketsDone { pid: std::process::id() }, &[]).map_err(gone)?;
        drop(sockets);

        expect(&ours, START_WAIT, "asked for the store", |m| matches!(m, Msg::WantStore))?;
        // From here misses are served without being stored.
        self.shared.store.freeze();
        self.froze = true;
        let deadline = Instant::now() + fill_wait;
        while self.shared.store.writes_in_progress() > 0 {
            if Instant::now() >= deadline {
                let reason = format!("fills under way did not finish within {fill_wait:?}");
                let _ = ours.send(&Msg::Abort { reason: reason.clone() }, &[]);
                anyhow::bail!(reason);
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        self.shared.store.release_lock().context("giving up the store's lock")?;
        self.released = true;
        ours.send(&Msg::StoreReleased, &[])?;
        info!(pid, "upgrade: the store is handed over; waiting for the new process to serve");
        let serving = expect(
            &ours,
            SERVE_WAIT,
            "started serving",
            |m| matches!(m, Msg::Serving { pid: p } if *p == pid),
        );
        serving?;
        // It writes where this process does from now on: the relay ends with this process.
        if let Err(e) = ours.send(&Msg::Stderr, &[std::io::stderr().as_fd()]) {
            warn!(pid, "upgrade: could not hand over standard error: {e}");
        }
        info!(pid, "upgrade: the new process serves; this one stops accepting and drains");
        Ok((pid, ours))
    }

    /// Cleans up after a failure (kills and reaps the successor, thaws the store) and
    /// returns the reason to report.
    fn fail(&mut self, e: anyhow::Error) -> String {
        let mut reason = format!("{e:#}");
        if let Some(mut c) = self.child.take() {
            let pid = c.id();
            // A child that closed the channel is exiting: give it a moment to be reaped.
            let until = Instant::now() + Duration::from_secs(2);
            let mut status = None;
            while Instant::now() < until {
                if let Ok(Some(st)) = c.try_wait() {
                    status = Some(st);
                    break;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            reason = match status {
                Some(st) => format!("the new process exited ({st}) before it served: {reason}"),
                None => {
                    let _ = c.kill();
                    let _ = c.wait();
                    format!("the new process was killed: {reason}")
                }
            };
            // Its own account of what went wrong, into this process's log.
            let said = self.relay.take().map(|r| r.problems(Duration::from_secs(2)));
            let said = said.unwrap_or_default();
            for line in &said {
                error!(successor = pid, line = %line, "upgrade: the new process said");
            }
            if !said.is_empty() {
                let last = &said[said.len().saturating_sub(5)..];
                reason = format!("{reason}; it said: {}", last.join(" / "));
            }
        }
        // The successor is gone (killed and reaped above), so its lock on the store is too.
        let relocked = !self.released || self.shared.store.relock().is_ok();
        if self.froze && relocked {
            self.shared.store.thaw();
        } else if self.froze {
            reason = format!(
                "{reason}; the store's lock is held by another process, so this one serves \
                 it read-only (misses are not stored) until restarted"
            );
        }
        reason
    }
}

/// Waits for the next message and checks it with `ok`.
fn expect(
    ch: &Channel,
    wait: Duration,
    what: &str,
    ok: impl Fn(&Msg) -> bool,
) -> anyhow::Result<()> {
    match ch.recv(Some(wait)) {
        Ok(Some((m, _))) if ok(&m) => Ok(()),
        Ok(Some((m, _))) => anyhow::bail!("unexpected message {m:?} (expected it {what})"),
        Ok(None) => anyhow::bail!("it closed the channel before it {what}"),
        Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {
            anyhow::bail!("it had not {what} after {wait:?}")
        }
        Err(e) => Err(e).context("upgrade channel"),
    }
}

/// The path this process was started from, which now names the newly installed binary
/// (`/proc/self/exe` shows a replaced file as `PATH (deleted)`).
fn installed_binary() -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe().context("finding this binary's path")?;
    let s = exe.as_os_str().to_string_lossy();
    Ok(match s.strip_suffix(" (deleted)") {
        Some(p) => PathBuf::from(p),
        None => exe,
    })
}
