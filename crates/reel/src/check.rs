//! `reel check`: validate a config file like `nginx -t`.

use std::path::Path;
use std::process::ExitCode;

use crate::EX_USAGE;

/// Prints every problem with file, line, column and key; exit 0 or 64. Besides the file's
/// own rules, the file must not ask for a part this binary was built without.
pub fn run(path: &Path) -> ExitCode {
    let problems = match reel_config::load_and_validate(path) {
        Ok(cfg) => match crate::preflight::check_build(&cfg) {
            // The files the config names: certificates must load and match their keys.
            Ok(()) => match tls_problems(&cfg) {
                Ok(()) => {
                    println!(
                        "reel: configuration file {} is valid (hash {})",
                        path.display(),
                        cfg.hash()
                    );
                    return ExitCode::SUCCESS;
                }
                Err(problems) => problems,
            },
            Err(e) => vec![e.to_string()],
        },
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
