//! `reel check`: validate a config file like `nginx -t`.

use std::path::Path;
use std::process::ExitCode;

use crate::EX_USAGE;
use crate::state::fds::FdBudget;

/// Prints every problem with file, line, column and key; exit 0 or 64. Besides the file's
/// own rules, every check `serve` makes before it binds runs ([`crate::state::preflight::check`]):
/// what `check` accepts, `serve` starts with, short of an address another process holds.
/// `named`: the file was given with `--config` (otherwise the output says which file was
/// read). `print`: then print the effective configuration on stdout (`crate::cli::print`),
/// the verdict going to stderr.
pub(crate) fn run(path: &Path, named: bool, print: bool) -> ExitCode {
    if !named {
        let shown = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
        eprintln!("reel: no --config given; checking the default {}", shown.display());
    }
    let problems: Vec<String> = match reel_config::load_and_validate(path) {
        Ok(cfg) => {
            let checked =
                reel_tls::Tickets::new().map_err(|e| vec![e.to_string()]).and_then(|tickets| {
                    crate::state::preflight::check(&cfg, false, &tickets, &FdBudget::estimate(&cfg))
                        .map_err(|e| e.problems.iter().map(ToString::to_string).collect())
                });
            match checked {
                Ok(ready) => {
                    for w in &ready.warnings {
                        eprintln!("warning: {w}");
                    }
                    for w in &ready.plan.warnings {
                        eprintln!("warning: core plan: {w}");
                    }
                    for n in &ready.notes {
                        eprintln!("note: {n}");
                    }
                    let valid = format!(
                        "reel: configuration file {} is valid (hash {})",
                        path.display(),
                        cfg.hash()
                    );
                    if print {
                        eprintln!("{valid}");
                        return crate::cli::print::run(&cfg);
                    }
                    println!("{valid}");
                    return ExitCode::SUCCESS;
                }
                Err(found) => found,
            }
        }
        Err(errs) => errs.problems.iter().map(|p| p.to_string()).collect(),
    };
    for p in &problems {
        eprintln!("{p}");
    }
    eprintln!("reel: configuration file {} has {} problem(s)", path.display(), problems.len());
    ExitCode::from(EX_USAGE)
}
