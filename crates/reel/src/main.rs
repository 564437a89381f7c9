//! The `reel` binary: parses the CLI and the config, then runs a subcommand.
//!
//! - `reel serve --config F [--origin URL [--origin-host viewer|NAME]]` (the default
//!   subcommand: `reel --origin URL` is the same) runs the server; without `--config` it
//!   reads `config/reel.toml`, or, when there is none, runs `--origin` on built-in
//!   defaults;
//! - `reel check --config F [--print]` validates a config like `nginx -t` (exit 64 on
//!   problems); `--print` then prints the effective configuration, like `nginx -T`;
//! - `reel plan --config F [--format text|env]` prints the core plan.

mod admin;
mod cli;
mod listeners;
mod process;
mod state;
mod upgrade;
mod worker;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Exit status for a bad config or bad usage (sysexits.h `EX_USAGE`): systemd's
/// `RestartPreventExitStatus=64` keeps a broken config from restarting in a loop.
pub const EX_USAGE: u8 = 64;

const DEFAULT_CONFIG: &str = "config/reel.toml";

#[derive(Parser)]
#[command(name = "reel", version, about = "Edge CDN cache for HTTP video segments")]
#[command(args_conflicts_with_subcommands = true)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// Config file (when no subcommand is given, `serve` runs with it).
    #[arg(long, short, global = true)]
    config: Option<PathBuf>,
    /// `serve`'s flags, for `reel --origin URL` without the subcommand.
    #[command(flatten)]
    serve: ServeFlags,
}

/// The flags of `serve`, the default subcommand.
#[derive(clap::Args, Default)]
struct ServeFlags {
    /// Serve every Host from this one origin (`http://HOST:PORT` or `https://HOST:PORT`), on
    /// top of the config: its sites keep their cache keys and policies, its origin groups
    /// and demo origin are not used.
    #[arg(long, value_name = "URL")]
    origin: Option<String>,
    /// The `Host` (and TLS server name) sent to `--origin`: by default the origin's own
    /// `HOST[:PORT]`, as nginx's `proxy_pass`; `viewer` passes the viewer's `Host`; any
    /// other value is sent as it is.
    #[arg(long, value_name = "viewer|NAME", requires = "origin")]
    origin_host: Option<String>,
}

#[derive(Subcommand)]
enum Command {
    /// Run the server (the default).
    Serve(ServeFlags),
    /// Validate the config and exit: 0 if it is valid, 64 with every problem listed.
    Check {
        /// After a successful check, print the effective configuration on stdout (defaults
        /// filled in, secrets redacted), as `nginx -T` does.
        #[arg(long)]
        print: bool,
    },
    /// Print the core plan: each CPU, its role, and the evidence.
    Plan {
        /// `text` (a table) or `env` (shell assignments for reel-irq.sh).
        #[arg(long, default_value = "text")]
        format: cli::plan::Format,
    },
}

fn main() -> ExitCode {
    process::alloc::configure();
    let cli = Cli::parse();
    let named = cli.config.is_some();
    // `serve` without `--config` and without the default file runs on built-in defaults.
    let file = cli.config.clone().or_else(|| {
        let default = PathBuf::from(DEFAULT_CONFIG);
        std::fs::symlink_metadata(&default).is_ok().then_some(default)
    });
    let config = cli.config.unwrap_or_else(|| PathBuf::from(DEFAULT_CONFIG));
    let result = match cli.command.unwrap_or(Command::Serve(cli.serve)) {
        Command::Check { print } => return cli::check::run(&config, named, print),
        Command::Plan { format } => cli::plan::run(&config, format),
        Command::Serve(ServeFlags { origin, origin_host }) => {
            process::server::run(process::server::ServeArgs { config: file, origin, origin_host })
        }
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("reel: {}", causes(&e));
            ExitCode::FAILURE
        }
    }
}

/// `e` and its causes on one line, `a: b: c`, leaving out a cause whose text the line
/// already holds (an error that prints its source would otherwise say it twice).
fn causes(e: &anyhow::Error) -> String {
    let mut line = e.to_string();
    for cause in e.chain().skip(1) {
        let c = cause.to_string();
        if !line.contains(&c) {
            line.push_str(": ");
            line.push_str(&c);
        }
    }
    line
}
