//! `reel check`: validate a config file like `nginx -t`.

use std::path::Path;
use std::process::ExitCode;

use crate::EX_USAGE;

/// Prints every problem with file, line, column and key; exit 0 or 64.
pub fn run(path: &Path) -> ExitCode {
    match reel_config::load_and_validate(path) {
        Ok(cfg) => {
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
