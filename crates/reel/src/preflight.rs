//! What a valid config must also find in this process: the parts it asks for compiled into
//! this binary, and the environment variables it names. `reel check`, `reel serve` and
//! every reload run these after the file's own validation; each problem names its key's
//! file, line and column like the validator's.

use reel_config::{Config, ConfigProblem};

/// A config this process cannot run.
#[derive(Debug, thiserror::Error)]
pub(crate) enum PreflightError {
    /// The config asks for a part this binary was built without.
    #[error("{0}")]
    NotBuiltIn(ConfigProblem),
    /// `admin.token_env` names a variable that is unset or empty: the admin API would run
    /// without authentication.
    #[error("{0}")]
    TokenEnvUnset(ConfigProblem),
}

/// Parts of the config that need a cargo feature this binary lacks. With `--origin`
/// (`origin_flag`) the demo origin is not started, so it needs no feature.
pub(crate) fn check_build(cfg: &Config, origin_flag: bool) -> Result<(), PreflightError> {
    if cfg.demo_origin.enabled && !origin_flag && !cfg!(feature = "demo") {
        return Err(PreflightError::NotBuiltIn(cfg.problem(
            "demo_origin.enabled",
            "this reel was built without the demo origin (cargo feature `demo`); \
             set `enabled = false` or use a build with default features",
        )));
    }
    Ok(())
}

/// Environment variables the config names.
pub(crate) fn check_environment(cfg: &Config) -> Result<(), PreflightError> {
    if !cfg.admin.token_env.is_empty() && cfg.admin.resolved_token().is_none() {
        return Err(PreflightError::TokenEnvUnset(cfg.problem(
            "admin.token_env",
            format!(
                "names {:?}, which is not set (or empty) in the environment: the admin API \
                 would run without its token",
                cfg.admin.token_env
            ),
        )));
    }
    Ok(())
}

/// Every preflight problem of `cfg` (`origin_flag`: see [`check_build`]).
pub(crate) fn problems(cfg: &Config, origin_flag: bool) -> Vec<PreflightError> {
    [check_build(cfg, origin_flag), check_environment(cfg)]
        .into_iter()
        .filter_map(Result::err)
        .collect()
}
