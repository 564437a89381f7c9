//! `reel serve`: assembles the process from the config and runs it until a signal stops it.
//!
//! Start-up order: config, logging, inherited sockets (from the process this one replaces,
//! or systemd's socket activation), the demo origin (if enabled), origins, the core plan,
//! the store (during an upgrade only once the old process stopped writing it), the workers
//! (every listener bound or taken over before anything is announced), the health sampler,
//! the admin listener, signal handlers, then `READY=1` (or, in an upgrade, `Serving` to the
//! old process). `lifecycle` then runs the signal loop and the stop sequences.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::Context;
use reel_config::Config;
use reel_ops::notify;
use reel_ops::sampler::{Health, Inputs};
use tokio::signal::unix::{SignalKind, signal};
use tracing::{error, info, warn};

use crate::admin;
use crate::process::defaults;
use crate::process::lifecycle::{self, Process, Signals};
use crate::state::Shared;
use crate::state::options;
use crate::state::preflight;
use crate::upgrade::inherit::Inherited;
use crate::worker::app::App;

/// Everything `serve` was asked to do on the command line.
pub(crate) struct ServeArgs {
    /// The config file; `None`: none was given and there is none at the default path, so
    /// `--origin` runs on the built-in defaults ([`defaults`]).
    pub config: Option<PathBuf>,
    /// `--origin http(s)://HOST:PORT`: serve every Host from this origin.
    pub origin: Option<String>,
    /// `--origin-host viewer|NAME`: the `Host` sent to `--origin` instead of its own.
    pub origin_host: Option<String>,
}

/// Runs the server; returns the process exit code.
pub(crate) fn run(args: ServeArgs) -> anyhow::Result<ExitCode> {
    let loaded = match (&args.config, &args.origin) {
        (Some(path), _) => load(path),
        (None, Some(_)) => defaults::config().map_err(|e| e.to_string()),
        (None, None) => Err(format!(
            "reel: no --config given and no {} in this directory: give --config FILE, or \
             --origin URL to serve your origin on built-in defaults",
            crate::DEFAULT_CONFIG
        )),
    };
    let cfg = match loaded {
        Ok(c) => c,
        Err(text) => {
            eprintln!("{text}");
            return Ok(ExitCode::from(crate::EX_USAGE));
        }
    };
    let tickets = reel_tls::Tickets::new().context("making session-ticket keys")?;
    // Every check `reel check` makes, from the same function: what it accepts starts.
    let ready = match preflight::check(
        &cfg,
        args.origin.is_some(),
        &tickets,
        &crate::state::fds::FdBudget::estimate(&cfg),
    ) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("{e}");
            return Ok(ExitCode::from(crate::EX_USAGE));
        }
    };
    let preflight::Ready { tls, mut plan, warnings, notes, .. } = ready;
    crate::state::logging::init(&cfg.log);
    if args.config.is_none() {
        let cwd = std::env::current_dir().unwrap_or_default();
        info!(
            "no --config given and no {} in {}: running on built-in defaults (the shipped \
             config without its demo): {}",
            crate::DEFAULT_CONFIG,
            cwd.display(),
            defaults::summary(&cfg)
        );
    }
    for w in &warnings {
        warn!("{w}");
    }
    for n in &notes {
        info!("{n}");
    }
    for w in &plan.warnings {
        warn!("core plan: {w}");
    }
    let flag = |url: &str| options::parse_origin_flag(url, args.origin_host.as_deref());
    let origin_override = match args.origin.as_deref().map(flag) {
        Some(Ok(o)) => Some(o),
        Some(Err(e)) => {
            eprintln!("reel: --origin: {e}");
            return Ok(ExitCode::from(crate::EX_USAGE));
        }
        None => None,
    };
    let mut inherited = Inherited::collect(&cfg).context("taking over inherited sockets")?;

    // `--origin` serves every Host: the demo origin would serve nobody.
    #[cfg(feature = "demo")]
    let demo = match &origin_override {
        None => crate::process::demo::start(&cfg, inherited.demo.take())
            .context("starting the demo origin")?,
        Some(_) => None,
    };

    let test_workers = options::test_workers()?;
    if let Some(n) = test_workers {
        // More workers than CPUs, for correctness tests of N-worker guarantees on a small
        // machine: the planned CPUs are reused in turn and no thread is pinned.
        plan.workers = plan.workers.iter().copied().cycle().take(n).collect();
        warn!(
            workers = n,
            "{}: workers unpinned, CPUs shared (a test setting)",
            options::TEST_WORKERS
        );
    }
    info!(workers = ?plan.workers, irq_cpus = ?plan.irq_cpus, "core plan");

    // The old process must have stopped writing the store before this one opens it.
    if let Some(p) = &inherited.predecessor {
        p.want_store(cfg.server.shutdown_timeout.get() + crate::upgrade::SERVE_WAIT)
            .context("taking over the store")?;
    }
    // During an upgrade the old process may still read volumes this one's fills would
    // reuse: the store is opened frozen, and writes nothing until the old one has exited
    // (misses meanwhile are passed through).
    let upgrading = inherited.predecessor.is_some();
    let shared =
        Shared::new(cfg, args.config.clone(), origin_override, &plan, tls, tickets, upgrading)?;
    if upgrading {
        // The old process serves meanwhile: start with the whole index, hits are hits.
        shared.store.wait_loaded();
    }
    // Checked above against an estimate; the store and inherited sockets are open now.
    let limits = match options::connection_limits(&shared.live().cfg, &shared.fds) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("{}", shared.live().cfg.problem("http.reserved_fds", e));
            return Ok(ExitCode::from(crate::EX_USAGE));
        }
    };
    info!(
        descriptors = shared.fds.limit,
        open_at_start = shared.fds.base,
        max_connections = limits.total,
        "connection budget"
    );
    let origin_fds = options::origin_descriptors(&shared.live().cfg, plan.workers.len());
    let reserved = shared.live().cfg.http.reserved_fds;
    if origin_fds > u64::from(reserved) {
        warn!(
            origin_descriptors = origin_fds,
            reserved_fds = reserved,
            "origin connections may need more descriptors than http.reserved_fds keeps: raise \
             it, or lower the origin groups' max_connections or max_idle_per_host"
        );
    }
    let mut opts = options::runtime(&shared.live().cfg, &plan, limits);
    if test_workers.is_some() {
        opts.pin = false;
        opts.steer = reel_runtime::Steer::Hash;
    }
    let listeners = options::listeners(&shared.live().cfg);
    let factory_shared = shared.clone();
    let data = std::mem::take(&mut inherited.data);
    let runtime = reel_runtime::start_with(&plan.workers, listeners, data, opts, move |ctx| {
        App::new(ctx, &factory_shared)
    })
    .context("starting workers")?;
    shared.record_listeners(&runtime);
    // HTTP/3 takes the ports the TCP listeners were bound to. In an upgrade the UDP
    // sockets are read by the old process until it has closed its HTTP/3 connections.
    shared.quic.inherit(std::mem::take(&mut inherited.quic));
    if inherited.predecessor.is_none() {
        shared.apply_quic().context("starting HTTP/3")?;
    }

    let stats = runtime.stats();
    let conn_stats = stats.clone();
    let store_shared = shared.clone();
    let health = Health::new(
        Inputs {
            workers: shared.metrics.clone(),
            worker_tids: runtime.worker_tids().iter().map(|t| t.2).collect(),
            connections: {
                let quic = shared.quic.clone();
                Box::new(move || {
                    let tcp: u64 =
                        conn_stats.iter().map(|s| s.open.load(Ordering::Relaxed) as u64).sum();
                    tcp + quic.open_connections()
                })
            },
            store: Box::new(move || store_shared.store_health()),
            details: {
                let shared = shared.clone();
                Box::new(move || {
                    shared.live().access_log.as_ref().map(|l| l.details()).unwrap_or_default()
                })
            },
            duress: shared.cache.duress.clone(),
            cpu_stat: {
                let group = reel_runtime::cgroup::cpu_group(&reel_runtime::core_plan::RealSysFs);
                Box::new(move || {
                    let g = group.as_ref()?;
                    reel_runtime::cgroup::cpu_stat(&reel_runtime::core_plan::RealSysFs, g)
                })
            },
        },
        options::thresholds(&shared.live().cfg),
    );
    let stop = Arc::new(AtomicBool::new(false));
    health.spawn_sampler(stop.clone()).context("starting the health sampler")?;
    shared.set_health(health.clone(), stats);

    let admin = admin::start(shared.clone(), inherited.admin.take())
        .context("starting the admin listener")?;
    info!(address = %admin.local_addr(), "admin listening");

    let control = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("building the control runtime")?;
    // Signal handlers go in before READY=1: systemd (or an operator) may send SIGHUP the
    // moment reel says it is ready, and SIGHUP's default action would kill the process.
    let signals = {
        let _in_runtime = control.enter();
        (|| -> std::io::Result<Signals> {
            Ok(Signals {
                hup: signal(SignalKind::hangup())?,
                usr1: signal(SignalKind::user_defined1())?,
                usr2: signal(SignalKind::user_defined2())?,
                term: signal(SignalKind::terminate())?,
                int: signal(SignalKind::interrupt())?,
            })
        })()
        .context("installing signal handlers")?
    };

    match inherited.predecessor.take() {
        Some(p) => {
            let old = p.pid;
            shared.update_upgrade(|u| u.predecessor = Some(old));
            let s = shared.clone();
            let q = shared.clone();
            let on_quic = move || match q.apply_quic() {
                Ok(()) => info!("HTTP/3 serves"),
                Err(e) => error!("starting HTTP/3: {e:#}"),
            };
            p.serving(on_quic, move || {
                // The predecessor is gone: said first, so that a store seen taking writes
                // (`frozen: false`) never shows it still there. The thaw then records the
                // disks in service (a synced write on each), which takes a moment.
                s.update_upgrade(|u| u.predecessor = None);
                s.store.thaw();
                info!("the store takes writes again");
                notify::ready();
            })
            .context("telling the old process this one serves")?;
        }
        None => {
            notify::ready();
        }
    }
    let node = options::node(&shared.live().cfg);
    info!(
        version = env!("CARGO_PKG_VERSION"),
        pid = std::process::id(),
        cdn_loop = node.loop_entry(),
        cache_status = node.cache_status_name(),
        "reel is serving"
    );

    let process = Process {
        shared: shared.clone(),
        runtime,
        admin,
        health,
        #[cfg(feature = "demo")]
        demo,
    };
    let code = control.block_on(lifecycle::run(process, signals));
    stop.store(true, Ordering::Relaxed);
    if code != ExitCode::SUCCESS {
        error!("reel stopped with a failure");
    }
    Ok(code)
}

fn load(path: &Path) -> Result<Config, String> {
    reel_config::load_and_validate(path).map_err(|e| e.to_string())
}
