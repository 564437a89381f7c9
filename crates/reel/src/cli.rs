//! The subcommands that inspect rather than serve: `reel check` (`check`, and with
//! `--print` the effective configuration: `print`) and `reel plan` (`plan`). `main` parses
//! the command line; `reel serve` is `crate::process::server`.

pub(crate) mod check;
pub(crate) mod plan;
pub(crate) mod print;
