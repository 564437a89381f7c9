//! The process-wide state ([`Shared`]) and the part of it that a reload replaces
//! ([`Live`]): the config, the HTTP limits, the origin groups, the cache settings and the
//! access log, swapped atomically with `arc-swap` so every worker sees the new
//! generation on its next request without a lock.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, SystemTime};

use anyhow::Context;
use arc_swap::ArcSwap;
use reel_config::{AccessLogFormat, Config, HostPort};
use reel_ops::access_log::{AccessLog, Format};
use reel_ops::health::Thresholds;
use reel_ops::metrics::WorkerMetrics;
use reel_ops::sampler::Health;
use reel_origin::{Balance, GroupSpec, HealthSpec, HostSpec, Origins, TlsSpec};
use reel_runtime::{CorePlan, ListenerSpec, WorkerStats};
use serde::Serialize;
use tokio::sync::{mpsc, oneshot};
use tracing::{error, info, warn};

/// Name of the origin group that `--origin` creates.
pub const FLAG_GROUP: &str = "--origin";

/// One generation of reloadable state.
pub struct Live {
    /// Generation number, 1 at start-up, +1 per successful reload.
    pub generation: u64,
    /// The config it was built from.
    pub cfg: Config,
    /// HTTP codec limits.
    pub limits: reel_http::Limits,
    /// Origin groups (health checks run while this generation is alive).
    pub origins: Arc<Origins>,
    /// The cache's routing and policy settings.
    pub cache: Arc<reel_cache::Settings>,
    /// The access log, if enabled.
    pub access_log: Option<Arc<AccessLog>>,
    /// When it was loaded.
    pub loaded_at: SystemTime,
}

/// The outcome of the last reload, shown in `/status`.
#[derive(Debug, Clone, Serialize, Default)]
pub struct ReloadStatus {
    /// Reloads attempted.
    pub attempts: u64,
    /// Reloads that failed.
    pub failures: u64,
    /// Whether the last attempt succeeded.
    pub last_ok: Option<bool>,
    /// The last error (file:line:column: key: message lines).
    pub last_error: Option<String>,
    /// Keys that changed but need a restart to take effect.
    pub needs_restart: Vec<String>,
    /// Unix time of the last attempt.
    pub last_at: Option<u64>,
}

/// A data listener as bound (the real port when the config says port 0), shown in `/status`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BoundListener {
    /// The `[[listener]]` name.
    pub name: String,
    /// The address every worker's socket is bound to.
    pub address: SocketAddr,
}

/// A reload request from the admin listener, answered with the outcome.
pub type ReloadReply = oneshot::Sender<Result<ReloadStatus, String>>;

/// Process-wide state shared by workers, the admin listener and the control thread.
pub struct Shared {
    live: ArcSwap<Live>,
    /// The config file (reloads re-read it).
    pub config_path: PathBuf,
    origin_flag: Option<OriginFlag>,
    /// Per-worker counters, in worker order.
    pub metrics: Vec<Arc<WorkerMetrics>>,
    /// The segment store (shared by every worker).
    pub store: Arc<reel_store::Store>,
    /// The cache's cross-worker state (in-flight fills).
    pub cache: Arc<reel_cache::SharedCache>,
    health: OnceLock<Arc<Health>>,
    worker_stats: OnceLock<Vec<Arc<WorkerStats>>>,
    /// The core plan, shown in `/status`.
    pub plan: CorePlan,
    reload_status: Mutex<ReloadStatus>,
    reload_tx: mpsc::Sender<ReloadReply>,
    reload_rx: Mutex<Option<mpsc::Receiver<ReloadReply>>>,
    generation: AtomicU64,
    listeners: Mutex<Vec<BoundListener>>,
    /// When the process started.
    pub started: SystemTime,
}

impl Shared {
    /// Builds generation 1 and the store.
    pub fn new(
        cfg: Config,
        config_path: PathBuf,
        origin_flag: Option<OriginFlag>,
        plan: &CorePlan,
    ) -> anyhow::Result<Arc<Shared>> {
        let store = reel_store::Store::open(store_config(&cfg))
            .with_context(|| format!("opening the store at {}", cfg.store.path.display()))?;
        let live = build_live(cfg, 1, origin_flag.as_ref(), None)?;
        let (reload_tx, reload_rx) = mpsc::channel(4);
        let n = plan.workers.len();
        Ok(Arc::new(Shared {
            live: ArcSwap::from_pointee(live),
            config_path,
            origin_flag,
            metrics: (0..n).map(|_| Arc::new(WorkerMetrics::default())).collect(),
            cache: reel_cache::SharedCache::new(store.clone()),
            store,
            health: OnceLock::new(),
            worker_stats: OnceLock::new(),
            plan: plan.clone(),
            reload_status: Mutex::new(ReloadStatus::default()),
            reload_tx,
            reload_rx: Mutex::new(Some(reload_rx)),
            generation: AtomicU64::new(1),
            listeners: Mutex::new(Vec::new()),
            started: SystemTime::now(),
        }))
    }

    /// The current generation (lock-free).
    pub fn live(&self) -> arc_swap::Guard<Arc<Live>> {
        self.live.load()
    }

    /// The current generation as an owned `Arc`.
    pub fn live_full(&self) -> Arc<Live> {
        self.live.load_full()
    }

    /// Records the health state and worker stats once the workers run.
    pub fn set_health(&self, h: Arc<Health>, stats: Vec<Arc<WorkerStats>>) {
        let _ = self.health.set(h);
        let _ = self.worker_stats.set(stats);
    }

    /// The health state, once the sampler runs.
    pub fn health(&self) -> Option<&Arc<Health>> {
        self.health.get()
    }

    /// Per-worker runtime stats (open connections ...), once the workers run.
    pub fn worker_stats(&self) -> &[Arc<WorkerStats>] {
        self.worker_stats.get().map(|v| v.as_slice()).unwrap_or(&[])
    }

    /// Whether the store can serve.
    pub fn store_ok(&self) -> bool {
        let st = self.store.stats();
        st.volumes > st.quarantined_volumes
    }

    /// The receiving end of admin reload requests (taken once by the control thread).
    pub fn take_reload_requests(&self) -> mpsc::Receiver<ReloadReply> {
        match self.reload_rx.lock().ok().and_then(|mut r| r.take()) {
            Some(rx) => rx,
            None => mpsc::channel(1).1,
        }
    }

    /// Asks the control thread to reload; waits for the outcome.
    pub async fn request_reload(&self) -> Result<ReloadStatus, String> {
        let (tx, rx) = oneshot::channel();
        self.reload_tx.send(tx).await.map_err(|_| "the server is shutting down".to_string())?;
        rx.await.map_err(|_| "the reload was abandoned".to_string())?
    }

    /// The last reload's outcome.
    pub fn reload_status(&self) -> ReloadStatus {
        self.reload_status.lock().map(|s| s.clone()).unwrap_or_default()
    }

    /// The data listeners as bound, sorted by name.
    pub fn listeners(&self) -> Vec<BoundListener> {
        self.listeners.lock().map(|l| l.clone()).unwrap_or_default()
    }

    /// Reads the runtime's listeners after start-up or a listener change, logs each new or
    /// moved one as `listening` (with the bound address, which is what a caller of a port-0
    /// config needs) and each removed one as `listener closed`.
    pub fn record_listeners(&self, runtime: &reel_runtime::Runtime) {
        let mut now: Vec<BoundListener> = runtime
            .listeners()
            .into_iter()
            .map(|l| {
                let address =
                    runtime.local_addrs(&l.name).and_then(|a| a.first().copied()).unwrap_or(l.addr);
                BoundListener { name: l.name, address }
            })
            .collect();
        now.sort_by(|a, b| a.name.cmp(&b.name));
        let Ok(mut cur) = self.listeners.lock() else { return };
        for l in &now {
            if !cur.contains(l) {
                info!(listener = %l.name, address = %l.address, workers = runtime.n_workers(), "listening");
            }
        }
        for l in cur.iter() {
            if !now.iter().any(|n| n.name == l.name) {
                info!(listener = %l.name, address = %l.address, "listener closed");
            }
        }
        *cur = now;
    }

    /// SIGUSR1: the access log writer reopens its file.
    pub fn reopen_access_log(&self) {
        if let Some(l) = &self.live().access_log {
            info!("reopening the access log");
            l.reopen();
        }
    }

    /// Gives the access log writer a moment to write what workers handed over.
    pub fn flush_access_logs(&self) {
        if self.live().access_log.is_some() {
            std::thread::sleep(Duration::from_millis(600));
        }
    }
}

/// Re-reads the config file and swaps in a new generation. An invalid file leaves the
/// running config untouched; the error is logged and kept for `/status`.
pub fn reload(
    shared: &Arc<Shared>,
    runtime: &reel_runtime::Runtime,
) -> Result<ReloadStatus, String> {
    reel_ops::notify::reloading();
    let outcome = try_reload(shared, runtime);
    let mut st = shared.reload_status.lock().map(|s| s.clone()).unwrap_or_default();
    st.attempts += 1;
    st.last_at = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).ok().map(|d| d.as_secs());
    match &outcome {
        Ok(restart) => {
            st.last_ok = Some(true);
            st.last_error = None;
            st.needs_restart = restart.clone();
            info!(generation = shared.live().generation, "configuration reloaded");
            for k in restart {
                warn!(key = %k, "changed in the file but needs a restart to take effect");
            }
        }
        Err(e) => {
            st.failures += 1;
            st.last_ok = Some(false);
            st.last_error = Some(e.clone());
            error!("reload failed; the running configuration is unchanged:\n{e}");
        }
    }
    if let Ok(mut s) = shared.reload_status.lock() {
        *s = st.clone();
    }
    reel_ops::notify::ready();
    outcome.map(|_| st)
}

fn try_reload(
    shared: &Arc<Shared>,
    runtime: &reel_runtime::Runtime,
) -> Result<Vec<String>, String> {
    let mut new = reel_config::load_and_validate(&shared.config_path).map_err(|e| e.to_string())?;
    check_environment(&new)?;
    let old = shared.live_full();
    let needs_restart = old.cfg.diff_needs_restart(&new);
    // Keys that cannot change live keep their running values, so what runs stays coherent.
    new.store = old.cfg.store.clone();
    new.cores = old.cfg.cores.clone();
    new.server = old.cfg.server.clone();
    new.admin.address = old.cfg.admin.address;
    new.admin.allow_non_loopback = old.cfg.admin.allow_non_loopback;
    new.log.format = old.cfg.log.format;
    new.demo_origin = old.cfg.demo_origin.clone();
    let listeners_changed = old.cfg.listener != new.listener;
    let needs_restart: Vec<String> = needs_restart
        .into_iter()
        .filter(|k| !(listeners_changed && k.starts_with("listener")))
        .collect();
    // Everything that can fail without side effects comes first: a failure after the
    // listeners changed would leave them out of step with the running config.
    let generation = shared.generation.load(Ordering::SeqCst) + 1;
    let live = build_live(new, generation, shared.origin_flag.as_ref(), Some(&old))
        .map_err(|e| format!("{e:#}"))?;
    if listeners_changed {
        let r = runtime.set_listeners(listener_specs(&live.cfg));
        // Even a partly failed change may have bound or closed sockets: show what is real.
        shared.record_listeners(runtime);
        r.map_err(|e| format!("listeners: {e}"))?;
    }
    shared.generation.store(generation, Ordering::SeqCst);
    if live.cfg.log.level != old.cfg.log.level {
        if let Err(e) = crate::logging::set_level(&live.cfg.log.level) {
            warn!("keeping the previous log filter: {e}");
        }
    }
    if let Some(h) = shared.health() {
        h.set_thresholds(thresholds(&live.cfg));
    }
    shared.live.store(Arc::new(live));
    Ok(needs_restart)
}

/// Problems a config file cannot show but its environment can: a `token_env` naming an
/// unset variable would otherwise leave the admin API without authentication.
pub fn check_environment(cfg: &Config) -> Result<(), String> {
    if !cfg.admin.token_env.is_empty() && cfg.admin.resolved_token().is_none() {
        return Err(format!(
            "admin.token_env names {:?}, which is not set (or empty) in the environment",
            cfg.admin.token_env
        ));
    }
    Ok(())
}

fn build_live(
    cfg: Config,
    generation: u64,
    origin_flag: Option<&OriginFlag>,
    old: Option<&Live>,
) -> anyhow::Result<Live> {
    let mut groups: Vec<GroupSpec> = cfg.origin_group.iter().map(group_spec).collect();
    if let Some(o) = origin_flag {
        let mut host = HostSpec::new(host_port(&o.addr));
        host.tls = o.tls;
        let mut g = GroupSpec::new(FLAG_GROUP, vec![vec![host]]);
        g.health.enabled = false;
        groups.push(g);
    }
    // Unchanged origin groups keep their `Origins`: health state, connection pools and
    // counters survive a reload that did not touch them.
    let origins = match old {
        Some(o) if o.cfg.origin_group == cfg.origin_group => o.origins.clone(),
        _ => {
            let origins = Arc::new(Origins::new(groups).context("origin groups")?);
            origins.start_health_checks().context("starting origin health checks")?;
            origins
        }
    };
    let access_log = match (&cfg.access_log, old) {
        (a, _) if !a.enabled => None,
        // The writer thread and its file stay across reloads that keep the path and the
        // format; `buffer` and `flush_interval` are per-worker and apply to the new
        // generation without reopening anything.
        (a, Some(o))
            if o.cfg.access_log.enabled
                && o.cfg.access_log.path == a.path
                && o.cfg.access_log.format == a.format
                && o.access_log.is_some() =>
        {
            o.access_log.clone()
        }
        (a, _) => {
            if let Some(dir) = a.path.parent().filter(|d| !d.as_os_str().is_empty()) {
                if !a.is_stdout() {
                    std::fs::create_dir_all(dir)
                        .with_context(|| format!("creating {}", dir.display()))?;
                }
            }
            let f = match a.format {
                AccessLogFormat::Json => Format::Json,
                AccessLogFormat::Combined => Format::Combined,
            };
            Some(AccessLog::open(a.path.clone(), f)?)
        }
    };
    let limits = reel_http::Limits {
        max_request_line: cfg.http.max_request_line.bytes() as usize,
        max_header_bytes: cfg.http.max_header_bytes.bytes() as usize,
        max_headers: cfg.http.max_headers as usize,
        max_body_bytes: cfg.http.max_body.bytes(),
        header_timeout: cfg.http.header_timeout.get(),
        idle_timeout: cfg.http.idle_timeout.get(),
    };
    let cache = Arc::new(reel_cache::Settings::from_config(&cfg, origin_flag.map(|_| FLAG_GROUP)));
    Ok(Live { generation, cfg, limits, origins, cache, access_log, loaded_at: SystemTime::now() })
}

fn host_port(h: &HostPort) -> String {
    if h.host.contains(':') {
        format!("[{}]:{}", h.host, h.port)
    } else {
        format!("{}:{}", h.host, h.port)
    }
}

fn group_spec(g: &reel_config::OriginGroupConfig) -> GroupSpec {
    let tiers = g
        .tier
        .iter()
        .map(|t| {
            t.hosts
                .iter()
                .enumerate()
                .map(|(i, h)| {
                    let mut s = HostSpec::new(host_port(h));
                    if !t.host_header.is_empty() {
                        s.host_header = Some(t.host_header.clone());
                    }
                    s.tls = t.tls;
                    s.weight = t.weights.get(i).copied().unwrap_or(1);
                    s
                })
                .collect()
        })
        .collect();
    let mut s = GroupSpec::new(g.name.clone(), tiers);
    s.connect_timeout = g.connect_timeout.get();
    s.first_byte_timeout = g.first_byte_timeout.get();
    s.idle_timeout = g.idle_timeout.get();
    s.max_idle_per_host = g.max_idle_per_host as usize;
    s.retries = g.retries;
    s.balance = match g.balance {
        reel_config::OriginBalance::RoundRobin => Balance::RoundRobin,
        reel_config::OriginBalance::Rendezvous => Balance::Rendezvous,
    };
    s.tls = TlsSpec {
        ca_file: Some(g.ca_file.clone()).filter(|p| !p.as_os_str().is_empty()),
        insecure_skip_verify: g.insecure_skip_verify,
        http2: g.http2,
    };
    s.health = HealthSpec {
        enabled: g.health.enabled,
        path: g.health.path.clone(),
        interval: g.health.interval.get(),
        timeout: g.health.timeout.get(),
        expect_status: g.health.expect_status,
        rise: g.health.rise,
        fall: g.health.fall,
    };
    s
}

/// The origin given by `--origin`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OriginFlag {
    /// Where to connect.
    pub addr: HostPort,
    /// `https://`: TLS verified against the system roots, SNI the host name.
    pub tls: bool,
}

/// `--origin http://HOST[:PORT]` or `https://HOST[:PORT]` (ports 80 and 443 by default).
pub fn parse_origin_flag(url: &str) -> Result<OriginFlag, String> {
    let (rest, tls, default_port) =
        match (url.strip_prefix("http://"), url.strip_prefix("https://")) {
            (Some(rest), _) => (rest, false, 80),
            (_, Some(rest)) => (rest, true, 443),
            _ => return Err(format!("{url:?}: expected http://HOST:PORT or https://HOST:PORT")),
        };
    let authority = rest.trim_end_matches('/');
    if authority.contains('/') || authority.contains('@') {
        return Err(format!("{url:?}: expected http(s)://HOST:PORT without a path"));
    }
    let with_port =
        if authority.rsplit_once(':').is_some_and(|(_, p)| p.bytes().all(|b| b.is_ascii_digit()))
            && !authority.ends_with(']')
        {
            authority.to_string()
        } else {
            format!("{authority}:{default_port}")
        };
    Ok(OriginFlag { addr: with_port.parse::<HostPort>()?, tls })
}

/// The runtime's listener specs for the config's `[[listener]]`s.
pub fn listener_specs(cfg: &Config) -> Vec<ListenerSpec> {
    cfg.listener
        .iter()
        .map(|l| ListenerSpec {
            name: l.name.clone(),
            addr: l.address,
            backlog: l.backlog.min(i32::MAX as u32) as i32,
        })
        .collect()
}

/// The health thresholds of `[health]`.
pub fn thresholds(cfg: &Config) -> Thresholds {
    let h = &cfg.health;
    Thresholds {
        max_cpu_percent: f64::from(h.max_cpu_percent),
        resume_cpu_percent: f64::from(h.resume_cpu_percent),
        max_connections: h.max_connections,
        resume_connections: h.resume_connections,
        max_hit_p99: h.max_hit_p99.get(),
        resume_hit_p99: h.resume_hit_p99.get(),
    }
}

/// The store's options from `[store]`.
pub fn store_config(cfg: &Config) -> reel_store::StoreConfig {
    reel_store::StoreConfig {
        path: cfg.store.path.clone(),
        size: cfg.store.size.bytes(),
        volume_size: cfg.store.volume_size.bytes(),
        io: match cfg.store.io {
            reel_config::StoreIo::Auto => reel_store::IoMode::Auto,
            reel_config::StoreIo::Uring => reel_store::IoMode::Uring,
            reel_config::StoreIo::Threads => reel_store::IoMode::Threads,
        },
    }
}

/// Starts the built-in origin simulator of `[demo_origin]`.
pub fn start_demo_origin(cfg: &Config) -> anyhow::Result<reel_demo_origin::DemoOrigin> {
    let d = &cfg.demo_origin;
    let oc = reel_demo_origin::DemoOriginConfig {
        latency_scale: d.latency_scale,
        error_rate: d.error_rate,
        reset_rate: d.reset_rate,
        segment_duration: d.segment_duration.get(),
        live_segment_size: d.live_segment_size.bytes(),
        ..Default::default()
    };
    Ok(reel_demo_origin::spawn(d.address, oc)?)
}
