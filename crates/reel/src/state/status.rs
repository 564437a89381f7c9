//! The outcomes of reloads and binary upgrades that [`crate::state::Shared`] keeps for
//! `/status` and `/metrics`: plain records written by live reload and by the upgrade and
//! read by the admin listener, defined here, below all three, so that the shared state
//! names no module that uses it.

use reel_config::ConfigErrors;
use reel_runtime::RuntimeError;
use serde::Serialize;

use crate::state::generation::GenerationError;

/// The outcome of the last reload, shown in `/status`.
#[derive(Debug, Clone, Serialize, Default)]
pub(crate) struct ReloadStatus {
    /// Reloads attempted.
    pub attempts: u64,
    /// Reloads that failed.
    pub failures: u64,
    /// Whether the last attempt succeeded.
    pub last_ok: Option<bool>,
    /// The last error (file:line:column: key: message lines).
    pub last_error: Option<String>,
    /// Keys that changed but need a restart to take effect.
    pub needs_restart: Vec<String>,
    /// Unix time of the last attempt.
    pub last_at: Option<u64>,
}

/// Why a reload changed nothing (or, for listeners, only part of what it meant to).
#[derive(Debug, thiserror::Error)]
pub(crate) enum ReloadError {
    /// The file is unreadable or invalid (every problem, one per line).
    #[error("{0}")]
    Config(#[from] ConfigErrors),
    /// The file is valid but cannot run here (every problem as `file:line:column: key:
    /// message`, one per line, as `reel check` prints them).
    #[error(transparent)]
    Preflight(ConfigErrors),
    /// Building the new generation failed.
    #[error(transparent)]
    Generation(#[from] GenerationError),
    /// Binding or closing listeners failed; what was bound is shown in `/status`.
    #[error("listeners: {0}")]
    Listeners(#[source] RuntimeError),
    /// An HTTP/3 listener could not be bound (the rest of the reload applied).
    #[error("HTTP/3: {0}")]
    Quic(String),
    /// The workers did not take the new connection limits.
    #[error("http connection limits: {0}")]
    ConnectionCap(#[source] RuntimeError),
    /// The process runs on built-in defaults: there is no file to read again.
    #[error(
        "running on built-in defaults: there is no config file to reload (start with --config FILE)"
    )]
    BuiltIn,
    /// The server is shutting down.
    #[error("the server is shutting down")]
    ShuttingDown,
    /// The control thread went away before answering.
    #[error("the reload was abandoned")]
    Abandoned,
}

/// Upgrades so far, shown in `/status`.
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct UpgradeStatus {
    /// Upgrades attempted (SIGUSR2).
    pub attempts: u64,
    /// Upgrades that failed.
    pub failures: u64,
    /// Whether one is under way.
    pub in_progress: bool,
    /// Whether the last one succeeded.
    pub last_ok: Option<bool>,
    /// Why the last one failed.
    pub last_error: Option<String>,
    /// Unix time of the last attempt.
    pub last_at: Option<u64>,
    /// The successor's pid, once it serves.
    pub successor: Option<u32>,
    /// The process this one replaced, while it is still draining.
    pub predecessor: Option<u32>,
}
