//! Log set-up: a `tracing` subscriber with the config's filter (or `RUST_LOG`) and format.
//!
//! ANSI colours are used only when standard error is a terminal, so the lines that land in
//! the journal, a file or a test harness are plain text (or plain JSON).

use std::io::IsTerminal;

use reel_config::{LogConfig, LogFormat};
use tracing_subscriber::EnvFilter;

/// Installs the global subscriber. `RUST_LOG`, when set, overrides `log.level`.
pub fn init(cfg: &LogConfig) {
    let filter = std::env::var("RUST_LOG")
        .ok()
        .and_then(|v| EnvFilter::try_new(v).ok())
        .or_else(|| EnvFilter::try_new(&cfg.level).ok())
        .unwrap_or_else(|| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal());
    let _ = match cfg.format {
        LogFormat::Json => builder.json().with_current_span(false).try_init(),
        LogFormat::Human => builder.with_target(true).try_init(),
    };
}
