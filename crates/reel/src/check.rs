//! `reel check`: validate a config file like `nginx -t`.

use std::path::Path;
use std::process::ExitCode;

use crate::EX_USAGE;

/// Prints every problem with file, line, column and key; exit 0 or 64. Besides the file's
/// own rules, the file must not ask for a part this binary was built without, nor name an
/// environment variable that is not set (as `serve` and reloads refuse both).
pub fn run(path: &Path) -> ExitCode {
    let problems: Vec<String> = match reel_config::load_and_validate(path) {
        Ok(cfg) => {
            let found = crate::preflight::problems(&cfg, false);
            if found.is_empty() {
                println!(
                    "reel: configuration file {} is valid (hash {})",
                    path.display(),
                    cfg.hash()
                );
                return ExitCode::SUCCESS;
            }
            found.iter().map(|e| e.to_string()).collect()
        }
        Err(errs) => errs.problems.iter().map(|p| p.to_string()).collect(),
    };
    for p in &problems {
        eprintln!("{p}");
    }
    eprintln!("reel: configuration file {} has {} problem(s)", path.display(), problems.len());
    ExitCode::from(EX_USAGE)
}
