//! Listening sockets a starting `reel serve` takes over instead of binding: from the
//! process it replaces (a binary upgrade: `REEL_UPGRADE_FD` names the control channel,
//! see `handoff`) or from systemd (socket activation: `LISTEN_FDS`, see `systemd/reel.socket`).
//!
//! Upgrade sockets come labelled (data listener name, admin, demo origin). systemd's are
//! matched to the config by `FileDescriptorName=` (a listener name, `admin` or `demo`),
//! else by the address they are bound to; a socket nothing matches is reported and closed
//! (systemd keeps its own copy). Only stream sockets: a datagram socket on an HTTP/3
//! listener stops the start (HTTP/3 binds its own, one per worker), another is closed.

use std::net::{SocketAddr, TcpListener};
use std::time::Duration;

use anyhow::{Context, bail};
use reel_config::Config;
use socket2::Type;
use tracing::{info, warn};

use crate::upgrade::handoff::{Channel, ENV_FD, Msg, SocketRole};

/// How long a successor waits for its predecessor's sockets.
const SOCKETS_WAIT: Duration = Duration::from_secs(30);

/// What the process inherited.
#[derive(Default)]
pub(crate) struct Inherited {
    /// Data listener sockets, by listener name.
    pub data: reel_runtime::Inherited,
    /// The admin listener.
    pub admin: Option<TcpListener>,
    /// The demo origin's listener.
    pub demo: Option<TcpListener>,
    /// HTTP/3 UDP sockets, by listener name, in worker order.
    pub quic: std::collections::BTreeMap<String, Vec<std::net::UdpSocket>>,
    /// The process being replaced, during a binary upgrade.
    pub predecessor: Option<Predecessor>,
}

/// The running process this one replaces.
pub(crate) struct Predecessor {
    channel: Channel,
    /// Its process id.
    pub pid: u32,
}

impl Inherited {
    /// Collects inherited sockets: a predecessor's if `REEL_UPGRADE_FD` is set, else
    /// systemd's if `LISTEN_FDS` is meant for this process, else none.
    pub(crate) fn collect(cfg: &Config) -> anyhow::Result<Inherited> {
        if let Some(v) = std::env::var_os(ENV_FD) {
            let fd = v
                .to_str()
                .and_then(|s| s.parse().ok())
                .with_context(|| format!("{ENV_FD}={v:?}: expected a descriptor number"))?;
            let fd = reel_ops::activation::take_inherited(fd)?;
            return from_predecessor(Channel::from_fd(fd));
        }
        let activated = reel_ops::activation::listen_fds()?;
        let mut out = Inherited::default();
        for a in activated {
            let sock = socket2::Socket::from(a.fd);
            let addr = sock
                .local_addr()
                .ok()
                .and_then(|a| a.as_socket())
                .context("a socket from systemd is not an internet socket")?;
            if sock.r#type().context("the type of a socket from systemd")? != Type::STREAM {
                refuse_datagram(cfg, a.name.as_deref(), addr)?;
                continue;
            }
            let l = TcpListener::from(std::os::fd::OwnedFd::from(sock));
            match match_systemd(cfg, a.name.as_deref(), addr) {
                Some(SocketRole::Data(name)) => {
                    info!(listener = %name, address = %addr, "listener socket from systemd");
                    out.data.entry(name).or_default().push(l);
                }
                Some(SocketRole::Admin) => out.admin = Some(l),
                Some(SocketRole::Demo) => out.demo = Some(l),
                Some(SocketRole::Quic(_)) | None => warn!(
                    address = %addr,
                    name = a.name.as_deref().unwrap_or(""),
                    "systemd passed a socket no listener of the config uses; closing it"
                ),
            }
        }
        Ok(out)
    }
}

/// A datagram socket from systemd (`ListenDatagram=`): reel binds HTTP/3's UDP sockets
/// itself, one per worker in a group routed by connection ID, which a socket bound by
/// systemd (another user, no `SO_REUSEPORT`) cannot join, and which systemd's copy would
/// keep from binding. One on an HTTP/3 listener's address stops the start; another is
/// closed with a warning.
fn refuse_datagram(cfg: &Config, name: Option<&str>, addr: SocketAddr) -> anyhow::Result<()> {
    if let Some(SocketRole::Data(l)) = match_systemd(cfg, name, addr)
        && cfg.listener.iter().any(|c| c.name == l && c.http3_enabled())
    {
        bail!(
            "systemd passed a datagram socket (UDP {addr}) for listener {l:?}, which serves \
             HTTP/3: reel binds its UDP sockets itself, one per worker; remove the \
             ListenDatagram= line from the socket unit"
        );
    }
    warn!(
        address = %addr,
        name = name.unwrap_or(""),
        "systemd passed a datagram socket; reel takes only stream sockets from systemd \
         (HTTP/3 binds its own UDP sockets); closing it"
    );
    Ok(())
}

/// Which socket of the config a socket from systemd is.
fn match_systemd(cfg: &Config, name: Option<&str>, addr: SocketAddr) -> Option<SocketRole> {
    if let Some(n) = name {
        if let Some(l) = cfg.listener.iter().find(|l| l.name == n) {
            return Some(SocketRole::Data(l.name.clone()));
        }
        match n {
            "admin" => return Some(SocketRole::Admin),
            "demo" | "demo_origin" => return Some(SocketRole::Demo),
            _ => {}
        }
    }
    if let Some(l) = cfg.listener.iter().find(|l| l.address == addr) {
        return Some(SocketRole::Data(l.name.clone()));
    }
    if cfg.admin.address == addr {
        return Some(SocketRole::Admin);
    }
    (cfg.demo_origin.enabled && cfg.demo_origin.address == addr).then_some(SocketRole::Demo)
}

fn from_predecessor(channel: Channel) -> anyhow::Result<Inherited> {
    let mut out = Inherited::default();
    loop {
        let Some((msg, fds)) = channel.recv(Some(SOCKETS_WAIT)).context("upgrade channel")? else {
            bail!("the process being replaced went away before handing over its sockets");
        };
        match msg {
            Msg::Sockets { roles } => {
                if roles.len() != fds.len() {
                    bail!("{} sockets announced, {} received", roles.len(), fds.len());
                }
                for (role, fd) in roles.into_iter().zip(fds) {
                    match role {
                        SocketRole::Data(name) => {
                            out.data.entry(name).or_default().push(TcpListener::from(fd))
                        }
                        SocketRole::Admin => out.admin = Some(TcpListener::from(fd)),
                        SocketRole::Demo => out.demo = Some(TcpListener::from(fd)),
                        SocketRole::Quic(name) => {
                            out.quic.entry(name).or_default().push(std::net::UdpSocket::from(fd))
                        }
                    }
                }
            }
            Msg::SocketsDone { pid } => {
                let n: usize = out.data.values().map(Vec::len).sum();
                info!(from = pid, data_sockets = n, "took over the listening sockets");
                out.predecessor = Some(Predecessor { channel, pid });
                return Ok(out);
            }
            other => bail!("unexpected upgrade message {other:?}"),
        }
    }
}

impl Predecessor {
    /// Asks the predecessor to stop writing the store and waits until it has (its fills
    /// under way finish first). If it is gone already, the store is free too.
    pub(crate) fn want_store(&self, wait: Duration) -> anyhow::Result<()> {
        self.channel.send(&Msg::WantStore, &[]).context("upgrade channel")?;
        match self.channel.recv(Some(wait)).context("waiting for the store")? {
            Some((Msg::StoreReleased, _)) | None => Ok(()),
            Some((Msg::Abort { reason }, _)) => {
                bail!("the running process called the upgrade off: {reason}")
            }
            Some((other, _)) => bail!("unexpected upgrade message {other:?}"),
        }
    }

    /// Tells the predecessor this process serves. `on_quic` runs (on a thread of its own)
    /// once the predecessor has let go of its UDP sockets, or has exited without saying
    /// so; `on_exit` once it has exited.
    pub(crate) fn serving(
        self,
        on_quic: impl FnOnce() + Send + 'static,
        on_exit: impl FnOnce() + Send + 'static,
    ) -> anyhow::Result<()> {
        let pid = std::process::id();
        self.channel.send(&Msg::Serving { pid }, &[]).context("upgrade channel")?;
        let old = self.pid;
        std::thread::Builder::new().name("reel-predecessor".into()).spawn(move || {
            let mut on_quic = Some(on_quic);
            // The channel closes when the predecessor exits (its end is close-on-exec).
            while let Ok(Some((msg, fds))) = self.channel.recv(None) {
                match (msg, fds.first()) {
                    (Msg::Stderr, Some(fd)) => {
                        // Standard error was a pipe the predecessor relays; it goes away
                        // with it.
                        if let Err(e) = rustix::stdio::dup2_stderr(fd) {
                            warn!("could not take over the replaced process's standard error: {e}");
                        }
                    }
                    (Msg::QuicReleased, _) => {
                        info!(pid = old, "the replaced process let go of its HTTP/3 sockets");
                        if let Some(f) = on_quic.take() {
                            f();
                        }
                    }
                    _ => {}
                }
            }
            info!(pid = old, "the replaced process has exited");
            if let Some(f) = on_quic.take() {
                f();
            }
            on_exit();
        })?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CFG: &str = r#"
[[listener]]
name = "http"
address = "127.0.0.1:8080"
[[listener]]
name = "alt"
address = "127.0.0.1:8081"
[admin]
address = "127.0.0.1:9090"
[demo_origin]
enabled = false
"#;

    #[test]
    fn systemd_sockets_match_by_name_then_address() {
        let cfg = Config::parse_and_validate(CFG, "t.toml").expect("valid");
        let a = |s: &str| s.parse::<SocketAddr>().unwrap();
        let data = |n: &str| Some(SocketRole::Data(n.into()));
        assert_eq!(match_systemd(&cfg, Some("alt"), a("0.0.0.0:80")), data("alt"));
        assert_eq!(match_systemd(&cfg, None, a("127.0.0.1:8080")), data("http"));
        assert_eq!(match_systemd(&cfg, Some("x"), a("127.0.0.1:8081")), data("alt"));
        assert_eq!(match_systemd(&cfg, None, a("127.0.0.1:9090")), Some(SocketRole::Admin));
        assert_eq!(match_systemd(&cfg, Some("admin"), a("10.0.0.1:1")), Some(SocketRole::Admin));
        assert_eq!(match_systemd(&cfg, None, a("127.0.0.1:1")), None);
    }
}
