//! `reel check`: validate a config file like `nginx -t`.

use std::path::Path;
use std::process::ExitCode;

use crate::EX_USAGE;

/// Prints every problem with file, line, column and key; exit 0 or 64.
pub fn run(path: &Path) -> ExitCode {
    match reel_config::load_and_validate(path) {
        Ok(cfg) => {
            // The files the config names: certificates must load and match their keys.
            let tickets = match reel_tls::Tickets::new() {
                Ok(t) => t,
                Err(e) => {
                    eprintln!("reel: {e}");
                    return ExitCode::FAILURE;
                }
            };
            match crate::tls::TlsState::build(&cfg, &tickets) {
                Ok(tls) => {
                    for w in tls.warnings(std::time::SystemTime::now()) {
                        eprintln!("warning: {}", cfg.problem(&w.key, w.message));
                    }
                }
                Err(problems) => {
                    eprintln!("{}", crate::tls::report(&cfg, &problems));
                    eprintln!(
                        "reel: configuration file {} has {} problem(s)",
                        path.display(),
                        problems.len()
                    );
                    return ExitCode::from(EX_USAGE);
                }
            }
            println!("reel: configuration file {} is valid (hash {})", path.display(), cfg.hash());
            ExitCode::SUCCESS
        }
        Err(errs) => {
            for p in &errs.problems {
                eprintln!("{p}");
            }
            eprintln!(
                "reel: configuration file {} has {} problem(s)",
                path.display(),
                errs.problems.len()
            );
            ExitCode::from(EX_USAGE)
        }
    }
}
