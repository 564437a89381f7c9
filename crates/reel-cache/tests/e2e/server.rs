//! reel's serving stack in-process: a real store in a tempdir, real origin groups, two
//! thread-per-core workers running the HTTP codec with a handler that calls
//! `WorkerCache::handle`, as the `reel` binary assembles them.

use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use reel_cache::key::KeyConfig;
use reel_cache::policy::freshness::PolicyConfig;
use reel_cache::policy::rules::{TtlRule, TtlRules};
use reel_cache::{InvalidateOn, Node, Prefetch, Settings, SharedCache, Site, Slicing, WorkerCache};
use reel_http::{Handler, Limits, Request, RequestBody, Response};
use reel_ops::metrics::WorkerMetrics;
use reel_origin::{Balance, GroupSpec, HostSpec, Origins};
use reel_runtime::{ListenerSpec, Runtime, RuntimeOptions, WorkerApp};
use reel_store::{IoMode, Store, StoreConfig};
use reel_test_support::wait_until;
use tokio::net::TcpStream;
use tokio::sync::watch;

/// The Host every test site answers for.
pub(crate) const HOST: &str = "test.local";

/// How the server under test is set up.
pub struct Opts {
    /// Origin tiers of the site's group (addresses).
    pub tiers: Vec<Vec<SocketAddr>>,
    /// Freshness knobs.
    pub policy: PolicyConfig,
    /// Path TTL rules.
    pub rules: Vec<(String, TtlRule)>,
    /// Default stale-while-revalidate.
    pub swr_default: Duration,
    /// Active health checks (interval) for the group; `None` disables them.
    pub health_interval: Option<Duration>,
    /// `client_cache_control = "honor"` (else `ignore`).
    pub honor_client_cache_control: bool,
    /// Request fields never sent on fills (lowercase).
    pub fill_drop_headers: Vec<String>,
    /// Store size and volume size, bytes.
    pub store: (u64, u64),
    /// Most Vary variants per URL.
    pub max_variants: usize,
    /// How long a follower waits for its leader's origin response.
    pub lock_timeout: Duration,
    /// Longest a fill may take.
    pub fill_timeout: Duration,
    /// The site's cache-key options.
    pub key: KeyConfig,
    /// The site's slice caching.
    pub slicing: Slicing,
    /// Most read-ahead slice fetches in flight per worker.
    pub read_ahead_per_worker: usize,
    /// How long an LL-HLS blocking request waits.
    pub blocking_timeout: Duration,
    /// The site's LL-HLS prefetch.
    pub prefetch: Prefetch,
    /// Which passed-through methods invalidate their URL.
    pub invalidate_on: InvalidateOn,
    /// How the group picks a host within a tier.
    pub balance: Balance,
    /// `CDN-Loop` and `Cache-Status` names.
    pub node: Node,
    /// Which fetched objects are stored.
    pub admission: reel_store::AdmissionPolicy,
}

impl Opts {
    /// One origin, defaults everywhere else.
    pub fn new(origin: SocketAddr) -> Opts {
        Opts {
            tiers: vec![vec![origin]],
            policy: PolicyConfig::default(),
            rules: Vec::new(),
            swr_default: Duration::ZERO,
            health_interval: None,
            honor_client_cache_control: true,
            fill_drop_headers: Settings::default_fill_drop_headers(),
            store: (64 << 20, 4 << 20),
            max_variants: 32,
            lock_timeout: Duration::from_secs(30),
            fill_timeout: Duration::from_secs(600),
            key: KeyConfig::default(),
            slicing: Slicing::default(),
            read_ahead_per_worker: 64,
            blocking_timeout: Duration::from_secs(3),
            prefetch: Prefetch::Off,
            invalidate_on: InvalidateOn::Standard,
            balance: Balance::RoundRobin,
            node: Node::default(),
            admission: reel_store::AdmissionPolicy::Always,
        }
    }
}

struct CacheHandler {
    cache: WorkerCache,
    metrics: Arc<WorkerMetrics>,
}

impl Handler for CacheHandler {
    async fn handle(&self, req: &Request, body: &mut RequestBody<'_>) -> Response {
        self.cache.handle(req, body, &self.metrics).await
    }
}

struct App {
    handler: Rc<CacheHandler>,
    limits: Rc<Limits>,
}

impl WorkerApp for App {
    fn on_conn(
        &self,
        stream: TcpStream,
        peer: SocketAddr,
        _listener: &str,
        drain: watch::Receiver<bool>,
    ) -> impl std::future::Future<Output = impl Into<reel_runtime::ConnEnd>> + 'static {
        let conn = reel_http::serve_connection(
            stream,
            peer,
            self.handler.clone(),
            self.limits.clone(),
            drain,
        );
        async move {
            conn.await;
        }
    }
}

/// A running server. Dropping it drains and joins the workers.
pub struct Server {
    /// Where clients connect.
    pub addr: SocketAddr,
    /// The cross-worker cache state (store, in-flight map, purge).
    pub shared: Arc<SharedCache>,
    /// The routing and policy settings the workers use.
    pub settings: Arc<Settings>,
    /// Each worker's request metrics.
    metrics: Vec<Arc<WorkerMetrics>>,
    runtime: Option<Runtime>,
    _origins: Arc<Origins>,
    _dir: tempfile::TempDir,
}

impl Server {
    /// Starts two workers over a fresh store (by default 64 MiB of 4 MiB volumes).
    pub fn start(opts: Opts) -> Server {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::open(StoreConfig::single(
            dir.path().join("store"),
            opts.store.0,
            opts.store.1,
            IoMode::Auto,
        ))
        .expect("open store");
        let shared = SharedCache::new(store);
        let tiers = opts
            .tiers
            .iter()
            .map(|t| t.iter().map(|a| HostSpec::new(a.to_string())).collect())
            .collect();
        let mut g = GroupSpec::new("g", tiers);
        g.balance = opts.balance;
        g.connect_timeout = Duration::from_secs(5);
        g.first_byte_timeout = Duration::from_secs(30);
        g.idle_timeout = Duration::from_secs(30);
        match opts.health_interval {
            Some(i) => {
                g.health.enabled = true;
                g.health.path = "/healthz".into();
                g.health.interval = i;
                g.health.timeout = Duration::from_secs(2);
                g.health.rise = 1;
                g.health.fall = 1;
            }
            None => g.health.enabled = false,
        }
        let origins = Arc::new(Origins::new(vec![g]).expect("origin groups"));
        if opts.health_interval.is_some() {
            origins.start_health_checks().expect("health checks");
        }
        let settings = Arc::new(Settings {
            sites: vec![Site {
                hosts: vec![HOST.to_string()],
                group: "g".into(),
                key: opts.key.clone(),
                pass_methods: true,
                invalidate_on: opts.invalidate_on,
                policy: opts.policy.clone(),
                honor_client_cache_control: opts.honor_client_cache_control,
                slicing: opts.slicing,
                prefetch: opts.prefetch,
                forward_cmcd: false,
                prefetch_next: false,
                token: None,
                access: None,
                edits: None,
                compress: None,
                cmsd: None,
                metrics_id: 0,
            }],
            fallback: None,
            policy: opts.policy,
            rules: TtlRules::new(opts.rules),
            swr_default: opts.swr_default,
            fill_drop_headers: opts.fill_drop_headers,
            max_variants: opts.max_variants,
            lock_timeout: opts.lock_timeout,
            max_misses_per_connection: 32,
            read_ahead_per_worker: opts.read_ahead_per_worker,
            compressed_memory: 0,
            fill_timeout: opts.fill_timeout,
            blocking_timeout: opts.blocking_timeout,
            node: opts.node,
            admission: opts.admission,
        });
        let (sh, st, or) = (shared.clone(), settings.clone(), origins.clone());
        let metrics = Arc::new(Mutex::new(Vec::new()));
        let worker_metrics = metrics.clone();
        let listeners = vec![ListenerSpec {
            name: "http".into(),
            addr: "127.0.0.1:0".parse().expect("addr"),
            backlog: 1024,
            proxy_protocol: false,
            udp_twin: false,
        }];
        let ropts = RuntimeOptions { pin: false, ..Default::default() };
        let runtime = reel_runtime::start(&[0, 1], listeners, ropts, move |_ctx| {
            let metrics = Arc::new(WorkerMetrics::new(&reel_cache::OUTCOMES));
            worker_metrics.lock().expect("metrics").push(metrics.clone());
            App {
                handler: Rc::new(CacheHandler {
                    cache: WorkerCache::new(sh.clone(), st.clone(), or.worker_client()),
                    metrics,
                }),
                limits: Rc::new(Limits {
                    idle_timeout: Duration::from_secs(30),
                    ..Limits::default()
                }),
            }
        })
        .expect("start workers");
        let addr = runtime.local_addr("http").expect("listener");
        // Every worker has built its app by the time `start` returns.
        let metrics = std::mem::take(&mut *metrics.lock().expect("metrics"));
        Server {
            addr,
            shared,
            settings,
            metrics,
            runtime: Some(runtime),
            _origins: origins,
            _dir: dir,
        }
    }

    /// Requests waiting on another request's origin fetch right now, over all workers
    /// (the `reel_coalesced_waiters` gauge).
    pub fn coalesced_waiters(&self) -> u64 {
        self.metrics.iter().map(|m| m.coalesced_waiters.load(Ordering::Relaxed)).sum()
    }

    /// Waits until no origin fetch is in flight (fills committed, refreshes done).
    pub fn settle(&self) {
        wait_until("every origin fetch to finish", || self.shared.inflight.is_empty());
    }

    /// Runs `f` (a future using the store) to completion on a throwaway runtime.
    pub fn block_on<F: std::future::Future>(&self, f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime")
            .block_on(f)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(rt) = self.runtime.take() {
            rt.shutdown(Duration::from_secs(5));
        }
    }
}
