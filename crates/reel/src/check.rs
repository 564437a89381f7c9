//! `reel check`: validate a config file like `nginx -t`.

use std::path::Path;
use std::process::ExitCode;

use crate::EX_USAGE;

/// Prints every problem with file, line, column and key; exit 0 or 64. Besides the file's
/// own rules, the file must not ask for a part this binary was built without.
pub fn run(path: &Path) -> ExitCode {
    let problems = match reel_config::load_and_validate(path) {
        Ok(cfg) => match crate::preflight::check_build(&cfg, false) {
            Ok(()) => {
                println!(
                    "reel: configuration file {} is valid (hash {})",
                    path.display(),
                    cfg.hash()
                );
                return ExitCode::SUCCESS;
            }
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
