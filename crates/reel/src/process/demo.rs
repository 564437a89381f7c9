//! The built-in origin simulator of `[demo_origin]`, compiled in with the `demo` cargo
//! feature (a default feature, so the README's run command serves the demo). A build
//! without it rejects a config that enables the demo origin (see `crate::state::preflight`).

use std::net::TcpListener;
use std::os::fd::OwnedFd;

use anyhow::Context;
use reel_config::Config;

/// A running demo origin and a duplicate of its listening socket (for a successor).
pub(crate) struct Demo {
    _origin: reel_demo_origin::DemoOrigin,
    listener: TcpListener,
}

impl Demo {
    /// A duplicate of the listening socket.
    pub(crate) fn listener_fd(&self) -> std::io::Result<OwnedFd> {
        self.listener.try_clone().map(OwnedFd::from)
    }
}

/// Starts the demo origin when the config enables it, on `inherited` when the process
/// took over its socket; it runs until the value is dropped.
pub(crate) fn start(cfg: &Config, inherited: Option<TcpListener>) -> anyhow::Result<Option<Demo>> {
    if !cfg.demo_origin.enabled {
        return Ok(None);
    }
    let addr = cfg.demo_origin.address;
    let listener = match inherited {
        Some(l) => l,
        None => TcpListener::bind(addr).with_context(|| format!("binding {addr}"))?,
    };
    let keep = listener.try_clone()?;
    let d = reel_demo_origin::spawn_on(listener, crate::state::options::demo_origin(cfg))?;
    tracing::info!(address = %d.local_addr(), "demo origin listening");
    Ok(Some(Demo { _origin: d, listener: keep }))
}
