//! `reel check --print`: after a successful check, the effective configuration on stdout
//! (as `nginx -T` does): every key with its value in force, defaults filled in, secrets
//! redacted ([`reel_config::Config::to_effective_toml`]). `GET /status/config` on the admin
//! listener answers the same text for the running generation ([`render`]).

use std::process::ExitCode;

/// The effective configuration of `cfg` as a TOML file, headed by a comment naming the file
/// and its hash.
pub(crate) fn render(cfg: &reel_config::Config) -> Result<String, reel_config::PrintError> {
    let body = cfg.to_effective_toml()?;
    Ok(format!(
        "# reel: effective configuration of {} (hash {}): defaults filled in, secrets redacted\n\n{body}",
        cfg.file_name(),
        cfg.hash(),
    ))
}

/// Prints [`render`] to stdout; exit 0, or 1 when it cannot be printed.
pub(crate) fn run(cfg: &reel_config::Config) -> ExitCode {
    match render(cfg) {
        Ok(text) => {
            print!("{text}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("reel: {e}");
            ExitCode::FAILURE
        }
    }
}
