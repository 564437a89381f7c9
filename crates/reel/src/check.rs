//! `reel check`: validate a config file like `nginx -t`.

use std::path::Path;
use std::process::ExitCode;

use crate::EX_USAGE;

/// Prints every problem with file, line, column and key; exit 0 or 64. Besides the file's
/// own rules, the file must not ask for a part this binary was built without, nor name an
/// environment variable that is not set (as `serve` and reloads refuse both), and the
/// certificates it names must load.
pub(crate) fn run(path: &Path) -> ExitCode {
    let problems: Vec<String> = match reel_config::load_and_validate(path) {
        Ok(cfg) => {
            let mut found: Vec<String> =
                crate::preflight::problems(&cfg, false).iter().map(|e| e.to_string()).collect();
            // The files the config names: certificates must load and match their keys.
            if let Err(tls) = tls_problems(&cfg) {
                found.extend(tls);
            }
            if found.is_empty() {
                println!(
                    "reel: configuration file {} is valid (hash {})",
                    path.display(),
                    cfg.hash()
                );
                return ExitCode::SUCCESS;
            }
            found
        }
        Err(errs) => errs.problems.iter().map(|p| p.to_string()).collect(),
    };
    for p in &problems {
        eprintln!("{p}");
    }
    eprintln!("reel: configuration file {} has {} problem(s)", path.display(), problems.len());
    ExitCode::from(EX_USAGE)
}

/// Loads the certificates `cfg` names; problems as `file:line:column: key: message` lines.
/// Certificates that expire soon (or have) are printed as warnings.
fn tls_problems(cfg: &reel_config::Config) -> Result<(), Vec<String>> {
    let tickets = reel_tls::Tickets::new().map_err(|e| vec![e.to_string()])?;
    match crate::tls::TlsState::build(cfg, &tickets) {
        Ok(tls) => {
            for w in tls.warnings(std::time::SystemTime::now()) {
                eprintln!("warning: {}", cfg.problem(&w.key, w.message));
            }
            Ok(())
        }
        Err(problems) => {
            Err(problems.iter().map(|p| cfg.problem(&p.key, &p.message).to_string()).collect())
        }
    }
}
