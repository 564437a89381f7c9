//! `reel serve`: assembles the process from the config and runs it until a signal stops it.
//!
//! Start-up order: config, logging, the demo origin (if enabled), origins, the core plan,
//! the workers (every listener bound before anything is announced), the health sampler,
//! the admin listener, then `READY=1`. The main thread then waits for signals:
//! SIGHUP reloads, SIGUSR1 reopens the access log, SIGTERM/SIGINT drain, write out the
//! access log and exit 0 (1 if a worker thread panicked).

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::Context;
use reel_config::Config;
use reel_ops::notify;
use reel_ops::sampler::{Health, Inputs};
use reel_runtime::ShutdownReport;
use tokio::signal::unix::{SignalKind, signal};
use tracing::{error, info, warn};

use crate::admin;
use crate::options;
use crate::preflight;
use crate::shared::Shared;
use crate::worker::App;

/// Everything `serve` was asked to do on the command line.
pub struct ServeArgs {
    /// The config file.
    pub config: PathBuf,
    /// `--origin http(s)://HOST:PORT`: serve every Host from this origin.
    pub origin: Option<String>,
}

/// Runs the server; returns the process exit code.
pub fn run(args: ServeArgs) -> anyhow::Result<ExitCode> {
    let cfg = match load(&args.config) {
        Ok(c) => c,
        Err(text) => {
            eprintln!("{text}");
            return Ok(ExitCode::from(crate::EX_USAGE));
        }
    };
    let problems = preflight::problems(&cfg, args.origin.is_some());
    if !problems.is_empty() {
        for e in &problems {
            eprintln!("{e}");
        }
        return Ok(ExitCode::from(crate::EX_USAGE));
    }
    let tickets = reel_tls::Tickets::new().context("making session-ticket keys")?;
    let tls = match crate::tls::TlsState::build(&cfg, &tickets) {
        Ok(t) => t,
        Err(problems) => {
            eprintln!("{}", crate::tls::report(&cfg, &problems));
            return Ok(ExitCode::from(crate::EX_USAGE));
        }
    };
    crate::logging::init(&cfg.log);
    for w in tls.warnings(std::time::SystemTime::now()) {
        warn!("{}", cfg.problem(&w.key, w.message));
    }
    let origin_override = match args.origin.as_deref().map(options::parse_origin_flag) {
        Some(Ok(o)) => Some(o),
        Some(Err(e)) => {
            eprintln!("reel: --origin: {e}");
            return Ok(ExitCode::from(crate::EX_USAGE));
        }
        None => None,
    };

    // `--origin` serves every Host: the demo origin would serve nobody.
    #[cfg(feature = "demo")]
    let _demo = match &origin_override {
        None => crate::demo::start(&cfg).context("starting the demo origin")?,
        Some(_) => None,
    };

    let spec = options::core_spec(&cfg);
    let plan = reel_runtime::plan_system(&spec).context("planning cores")?;
    for w in &plan.warnings {
        warn!("core plan: {w}");
    }
    info!(workers = ?plan.workers, irq_cpus = ?plan.irq_cpus, "core plan");

    let shared = Shared::new(cfg, args.config.clone(), origin_override, &plan, tls, tickets)?;
    let opts = options::runtime(&shared.live().cfg, &plan);
    let listeners = options::listeners(&shared.live().cfg);
    let factory_shared = shared.clone();
    let runtime = reel_runtime::start(&plan.workers, listeners, opts, move |ctx| {
        App::new(ctx, &factory_shared)
    })
    .context("starting workers")?;
    shared.record_listeners(&runtime);

    let stats = runtime.stats();
    let conn_stats = stats.clone();
    let store_shared = shared.clone();
    let health = Health::new(
        Inputs {
            workers: shared.metrics.clone(),
            worker_tids: runtime.worker_tids().iter().map(|t| t.2).collect(),
            connections: Box::new(move || {
                conn_stats.iter().map(|s| s.open.load(Ordering::Relaxed) as u64).sum()
            }),
            store_ok: Box::new(move || store_shared.store_ok()),
        },
        options::thresholds(&shared.live().cfg),
    );
    let stop = Arc::new(AtomicBool::new(false));
    health.spawn_sampler(stop.clone()).context("starting the health sampler")?;
    shared.set_health(health.clone(), stats);

    let admin = admin::start(shared.clone()).context("starting the admin listener")?;
    info!(address = %admin.local_addr(), "admin listening");

    let ctl = shared.clone();
    let control = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("building the control runtime")?;
    // Signal handlers go in before READY=1: systemd (or an operator) may send SIGHUP the
    // moment reel says it is ready, and SIGHUP's default action would kill the process.
    let signals = {
        let _in_runtime = control.enter();
        (
            signal(SignalKind::hangup()),
            signal(SignalKind::user_defined1()),
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
        )
    };
    let (mut hup, mut usr1, mut term, mut int) = match signals {
        (Ok(a), Ok(b), Ok(c), Ok(d)) => (a, b, c, d),
        _ => anyhow::bail!("cannot install signal handlers"),
    };

    notify::ready();
    let node = options::node(&shared.live().cfg);
    info!(
        version = env!("CARGO_PKG_VERSION"),
        cdn_loop = node.loop_entry(),
        cache_status = node.cache_status_name(),
        "reel is serving"
    );

    let shutdown = runtime.shutdown_handle();
    let drain_deadline = shared.live().cfg.server.shutdown_timeout.get();
    // The control thread only waits for signals and admin requests, so a reload may block
    // it briefly (binding new listeners waits for every worker to apply the change).
    let runtime = control.block_on(async move {
        let mut reload_requests = ctl.take_reload_requests();
        loop {
            tokio::select! {
                _ = hup.recv() => {
                    let _ = crate::reload::reload(&ctl, &runtime);
                }
                Some(reply) = reload_requests.recv() => {
                    let _ = reply.send(crate::reload::reload(&ctl, &runtime));
                }
                _ = usr1.recv() => ctl.reopen_access_log(),
                _ = term.recv() => break,
                _ = int.recv() => break,
            }
        }
        runtime
    });
    notify::stopping();
    info!(deadline = ?drain_deadline, "shutting down: draining connections");
    health.set_draining(true);
    shutdown.shutdown(drain_deadline);
    let report = runtime.wait();
    stop.store(true, Ordering::Relaxed);
    admin.stop();
    // The workers are gone and have handed over their buffers: write them out.
    shared.close_access_log();
    // A clean close: the next start loads the index checkpoint instead of scanning.
    if let Err(e) = shared.store.close() {
        warn!(error = %e, "store index checkpoint not written");
    }
    if report.dropped_connections > 0 {
        warn!(
            dropped = report.dropped_connections,
            "connections still open at the deadline were closed"
        );
    }
    Ok(exit_code(&report))
}

/// The exit status after a shutdown: a worker thread that panicked means the process did
/// not stop cleanly, whatever else went well.
fn exit_code(report: &ShutdownReport) -> ExitCode {
    if report.panicked_workers > 0 {
        error!(panicked = report.panicked_workers, "worker threads panicked; exiting with failure");
        return ExitCode::FAILURE;
    }
    info!("reel stopped");
    ExitCode::SUCCESS
}

fn load(path: &Path) -> Result<Config, String> {
    reel_config::load_and_validate(path).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panicked_worker_fails_the_exit_status() {
        let clean = ShutdownReport { dropped_connections: 3, panicked_workers: 0 };
        assert_eq!(exit_code(&clean), ExitCode::SUCCESS);
        let panicked = ShutdownReport { dropped_connections: 0, panicked_workers: 1 };
        assert_eq!(exit_code(&panicked), ExitCode::FAILURE);
    }
}
