//! Log set-up: a `tracing` subscriber with the config's filter (or `RUST_LOG`) and format.
//!
//! ANSI colours are used only when standard error is a terminal, so the lines that land in
//! the journal, a file or a test harness are plain text (or plain JSON). The filter can be
//! replaced later ([`set_level`]) so `log.level` changes with a reload; the format cannot.

use std::io::IsTerminal;
use std::sync::OnceLock;

use reel_config::{LogConfig, LogFormat};
use tracing_subscriber::EnvFilter;

type SetFilter = Box<dyn Fn(EnvFilter) -> Result<(), String> + Send + Sync>;

/// Replaces the installed subscriber's filter; absent when `RUST_LOG` rules or when no
/// subscriber was installed by [`init`].
static SET_FILTER: OnceLock<SetFilter> = OnceLock::new();

/// Installs the global subscriber. `RUST_LOG`, when set, overrides `log.level` (also across
/// reloads).
pub(crate) fn init(cfg: &LogConfig) {
    let from_env = std::env::var("RUST_LOG").ok().and_then(|v| EnvFilter::try_new(v).ok());
    let env_rules = from_env.is_some();
    let filter = from_env
        .or_else(|| EnvFilter::try_new(&cfg.level).ok())
        .unwrap_or_else(|| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal());
    let (installed, set): (bool, SetFilter) = match cfg.format {
        LogFormat::Json => {
            let b = builder.json().with_current_span(false).with_filter_reloading();
            let h = b.reload_handle();
            (b.try_init().is_ok(), Box::new(move |f| h.reload(f).map_err(|e| e.to_string())))
        }
        LogFormat::Human => {
            let b = builder.with_target(true).with_filter_reloading();
            let h = b.reload_handle();
            (b.try_init().is_ok(), Box::new(move |f| h.reload(f).map_err(|e| e.to_string())))
        }
    };
    if installed && !env_rules {
        let _ = SET_FILTER.set(set);
    }
}

/// Applies a reloaded `log.level`. Returns an error for a directive the filter rejects
/// (validation already accepted it, so this is unexpected) or a failed swap.
pub(crate) fn set_level(level: &str) -> Result<(), String> {
    let Some(set) = SET_FILTER.get() else { return Ok(()) };
    let f = EnvFilter::try_new(level).map_err(|e| format!("log.level {level:?}: {e}"))?;
    set(f)
}
