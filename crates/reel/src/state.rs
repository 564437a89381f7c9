//! The process-wide state ([`Shared`]) that workers, the admin listener and the control
//! thread all see: the current [`Live`] generation (swapped atomically with `arc-swap`, so
//! every worker sees a new one on its next request without a lock), the store, per-worker
//! counters, health, the bound listeners, the reload and upgrade bookkeeping, and whether
//! keep-alive clients are being told to close (stopping, or handed to a successor).
//!
//! The folder holds what a config becomes on its way to the workers: the libraries'
//! options built from it (`options`), with the descriptor budget that caps connections
//! (`fds`), the sites' access rules and the country database (`access`), the checks it
//! must pass on this host (`preflight`), one generation of the
//! reloadable state (`generation`), the log filter it sets (`logging`), live reload
//! (`reload`), and the outcomes of reloads and upgrades kept for `/status` (`status`).

pub(crate) mod access;
pub(crate) mod access_log;
pub(crate) mod fds;
pub(crate) mod generation;
pub(crate) mod logging;
pub(crate) mod options;
pub(crate) mod preflight;
pub(crate) mod reload;
pub(crate) mod status;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, SystemTime};

use anyhow::Context;
use arc_swap::ArcSwap;
use reel_config::Config;

use crate::state::options::OriginFlag;
use reel_ops::metrics::WorkerMetrics;
use reel_ops::sampler::Health;
use reel_runtime::{CorePlan, WorkerStats};
use serde::Serialize;
use tokio::sync::{mpsc, oneshot};
use tracing::{info, warn};

use crate::state::fds::FdBudget;
use crate::state::generation::Live;
use crate::state::status::{ReloadError, ReloadStatus, UpgradeStatus};

/// How long shutdown waits for the access-log writer to write what workers handed over.
const ACCESS_LOG_CLOSE: Duration = Duration::from_secs(5);

/// A data listener as bound (the real port when the config says port 0), shown in `/status`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct BoundListener {
    /// The `[[listener]]` name.
    pub name: String,
    /// The address every worker's socket is bound to.
    pub address: SocketAddr,
}

/// A reload request from the admin listener, answered with the outcome.
pub(crate) type ReloadReply = oneshot::Sender<Result<ReloadStatus, ReloadError>>;

/// Process-wide state shared by workers, the admin listener and the control thread.
pub(crate) struct Shared {
    pub(crate) live: ArcSwap<Live>,
    /// The config file (reloads re-read it); `None` on the built-in defaults.
    pub config_path: Option<PathBuf>,
    pub(crate) origin_flag: Option<OriginFlag>,
    /// Per-worker counters, in worker order.
    pub metrics: Vec<Arc<WorkerMetrics>>,
    /// The sites' ids in the per-site metrics, by name, for the whole process.
    pub site_ids: Arc<reel_ops::sites::SiteIds>,
    /// What players report through CMCD, per site.
    pub cmcd: reel_ops::cmcd_metrics::CmcdMetrics,
    /// The segment store (shared by every worker).
    pub store: Arc<reel_store::Store>,
    /// The cache's cross-worker state (in-flight fills).
    pub cache: Arc<reel_cache::SharedCache>,
    health: OnceLock<Arc<Health>>,
    worker_stats: OnceLock<Vec<Arc<WorkerStats>>>,
    /// The core plan, shown in `/status`.
    pub plan: CorePlan,
    pub(crate) reload_status: Mutex<ReloadStatus>,
    reload_tx: mpsc::Sender<ReloadReply>,
    reload_rx: Mutex<Option<mpsc::Receiver<ReloadReply>>>,
    pub(crate) generation: AtomicU64,
    listeners: Mutex<Vec<BoundListener>>,
    /// When the process started.
    pub started: SystemTime,
    /// The descriptor limit and what was open before serving (`http.reserved_fds`).
    pub fds: FdBudget,
    /// Responses tell keep-alive clients to close (the process stops, or hands over).
    closing: AtomicBool,
    upgrade: Mutex<UpgradeStatus>,
    /// Session-ticket keys shared by every worker and every generation.
    pub tickets: reel_tls::Tickets,
    /// Per-worker TLS handshake counters, in worker order.
    pub tls_counters: Vec<Arc<reel_tls::HandshakeCounters>>,
    /// The HTTP/3 listeners (bound after the TCP ones, whose ports they share).
    pub quic: Arc<crate::listeners::quic::Quic>,
}

impl Shared {
    /// Builds generation 1 (with the TLS state built from `cfg` with `tickets`) and the
    /// store.
    pub(crate) fn new(
        cfg: Config,
        config_path: Option<PathBuf>,
        origin_flag: Option<OriginFlag>,
        plan: &CorePlan,
        tls: crate::listeners::tls::TlsState,
        tickets: reel_tls::Tickets,
        frozen: bool,
    ) -> anyhow::Result<Arc<Shared>> {
        let open = if frozen { reel_store::Store::open_frozen } else { reel_store::Store::open };
        let store = open(options::store(&cfg)).with_context(|| {
            let paths: Vec<String> =
                cfg.store.disks().iter().map(|(_, p, _)| p.display().to_string()).collect();
            format!("opening the store at {}", paths.join(", "))
        })?;
        let window = cfg.store.admission_window;
        let site_ids = Arc::new(reel_ops::sites::SiteIds::new(reel_cache::MAX_SITE_ID));
        let live = Live::build(cfg, 1, origin_flag.as_ref(), None, tls, &site_ids)?;
        let (reload_tx, reload_rx) = mpsc::channel(4);
        let n = plan.workers.len();
        Ok(Arc::new(Shared {
            live: ArcSwap::from_pointee(live),
            config_path,
            origin_flag,
            metrics: (0..n).map(|_| Arc::new(WorkerMetrics::new(&reel_cache::OUTCOMES))).collect(),
            site_ids,
            cmcd: reel_ops::cmcd_metrics::CmcdMetrics::new(n),
            cache: reel_cache::SharedCache::with_admission_window(store.clone(), window),
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
            fds: FdBudget::take(),
            closing: AtomicBool::new(false),
            upgrade: Mutex::new(UpgradeStatus::default()),
            tickets,
            tls_counters: (0..n).map(|_| Arc::default()).collect(),
            quic: Arc::new(crate::listeners::quic::Quic::new(n)?),
        }))
    }

    /// Binds, reconfigures or closes the HTTP/3 listeners to match the current generation
    /// and the TCP listeners as bound.
    pub(crate) fn apply_quic(&self) -> anyhow::Result<()> {
        let bound: Vec<(String, SocketAddr)> =
            self.listeners().into_iter().map(|l| (l.name, l.address)).collect();
        let live = self.live();
        self.quic.apply(&live.cfg, &live.tls, &bound, &self.tickets)
    }

    /// From now on every response tells its keep-alive client to close (idle connections
    /// are left alone until their next request).
    pub(crate) fn set_closing(&self) {
        self.closing.store(true, Ordering::SeqCst);
    }

    /// Whether responses tell keep-alive clients to close.
    pub(crate) fn closing(&self) -> bool {
        self.closing.load(Ordering::Relaxed)
    }

    /// Changes the upgrade bookkeeping.
    pub(crate) fn update_upgrade(&self, f: impl FnOnce(&mut UpgradeStatus)) {
        if let Ok(mut u) = self.upgrade.lock() {
            f(&mut u);
        }
    }

    /// The upgrade bookkeeping, for `/status`.
    pub(crate) fn upgrade_status(&self) -> UpgradeStatus {
        self.upgrade.lock().map(|u| u.clone()).unwrap_or_default()
    }

    /// The current generation (lock-free).
    pub(crate) fn live(&self) -> arc_swap::Guard<Arc<Live>> {
        self.live.load()
    }

    /// The current generation as an owned `Arc`.
    pub(crate) fn live_full(&self) -> Arc<Live> {
        self.live.load_full()
    }

    /// Records the health state and worker stats once the workers run.
    pub(crate) fn set_health(&self, h: Arc<Health>, stats: Vec<Arc<WorkerStats>>) {
        let _ = self.health.set(h);
        let _ = self.worker_stats.set(stats);
    }

    /// The health state, once the sampler runs.
    pub(crate) fn health(&self) -> Option<&Arc<Health>> {
        self.health.get()
    }

    /// Per-worker runtime stats (open connections ...), once the workers run.
    pub(crate) fn worker_stats(&self) -> &[Arc<WorkerStats>] {
        self.worker_stats.get().map(|v| v.as_slice()).unwrap_or(&[])
    }

    /// Whether the store can serve (a disk in service with a usable volume), and a
    /// `store_degraded` reason per disk out of service.
    pub(crate) fn store_health(&self) -> reel_ops::health::StoreHealth {
        let st = self.store.stats();
        let degraded = self
            .store
            .disks()
            .into_iter()
            .filter(|d| d.state == reel_store::DiskState::Offline)
            .map(|d| match d.reason {
                Some(r) => format!("store_degraded: disk {} offline: {r}", d.path.display()),
                None => format!("store_degraded: disk {} offline", d.path.display()),
            })
            .collect();
        reel_ops::health::StoreHealth { ok: st.volumes > st.quarantined_volumes, degraded }
    }

    /// The receiving end of admin reload requests (taken once by the control thread).
    pub(crate) fn take_reload_requests(&self) -> mpsc::Receiver<ReloadReply> {
        match self.reload_rx.lock().ok().and_then(|mut r| r.take()) {
            Some(rx) => rx,
            None => mpsc::channel(1).1,
        }
    }

    /// Asks the control thread to reload; waits for the outcome.
    pub(crate) async fn request_reload(&self) -> Result<ReloadStatus, ReloadError> {
        let (tx, rx) = oneshot::channel();
        self.reload_tx.send(tx).await.map_err(|_| ReloadError::ShuttingDown)?;
        rx.await.map_err(|_| ReloadError::Abandoned)?
    }

    /// The last reload's outcome.
    pub(crate) fn reload_status(&self) -> ReloadStatus {
        self.reload_status.lock().map(|s| s.clone()).unwrap_or_default()
    }

    /// The data listeners as bound, sorted by name.
    pub(crate) fn listeners(&self) -> Vec<BoundListener> {
        self.listeners.lock().map(|l| l.clone()).unwrap_or_default()
    }

    /// Reads the runtime's listeners after start-up or a listener change, logs each new or
    /// moved one as `listening` (with the bound address, which is what a caller of a port-0
    /// config needs) and each removed one as `listener closed`.
    pub(crate) fn record_listeners(&self, runtime: &reel_runtime::Runtime) {
        let mut now: Vec<BoundListener> = runtime
            .listeners()
            .into_iter()
            .map(|l| {
                let address = runtime.local_addr(&l.name).unwrap_or(l.addr);
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
    pub(crate) fn reopen_access_log(&self) {
        if let Some(l) = &self.live().access_log {
            info!("reopening the access log");
            l.reopen();
        }
    }

    /// At exit, once the workers are gone (and have handed over their buffers): waits for
    /// the access-log writer to write everything and stop.
    pub(crate) fn close_access_log(&self) {
        if let Some(l) = &self.live().access_log
            && !l.close(ACCESS_LOG_CLOSE)
        {
            warn!(
                within = ?ACCESS_LOG_CLOSE,
                "the access log writer did not finish; the last lines may be lost"
            );
        }
    }
}
