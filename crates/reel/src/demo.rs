//! The built-in origin simulator of `[demo_origin]`, compiled in with the `demo` cargo
//! feature (a default feature, so the README's run command serves the demo). A build
//! without it rejects a config that enables the demo origin (see `preflight`).

use reel_config::Config;

/// Starts the demo origin when the config enables it; it runs until the value is dropped.
pub fn start(cfg: &Config) -> anyhow::Result<Option<reel_demo_origin::DemoOrigin>> {
    if !cfg.demo_origin.enabled {
        return Ok(None);
    }
    let d = reel_demo_origin::spawn(cfg.demo_origin.address, crate::options::demo_origin(cfg))?;
    tracing::info!(address = %d.local_addr(), "demo origin listening");
    Ok(Some(d))
}
