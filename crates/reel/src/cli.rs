//! The subcommands that inspect rather than serve: `reel check` (`check`) and `reel plan`
//! (`plan`). `main` parses the command line; `reel serve` is `crate::process::server`.

pub(crate) mod check;
pub(crate) mod plan;
