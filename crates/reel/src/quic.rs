//! HTTP/3 listeners in the binary: the UDP side of each TLS listener with `http3 = true`.
//!
//! After the TCP listeners are bound (so a port 0 in the config is known), each such
//! listener gets a reuseport group of UDP sockets on the same address and port, one per
//! worker in worker order, with the connection-ID routing program attached
//! (`reel_runtime::quic_route`); where the kernel refuses the program, the log says so and
//! packets are spread by address hash (a client that changes address then loses its
//! connection). Each worker serves its socket with `reel_quic::serve_worker` and each
//! connection with `reel_http::serve_h3`, in front of the same handler as TCP.
//!
//! The set of listeners is live: a reload publishes every kept listener's new
//! configuration (certificates, `quic_retry`) to its endpoints, binds the listeners that
//! `http3` turned on, and closes those it turned off, whose endpoints refuse new
//! connections and whose open connections get GOAWAY and finish.

use std::collections::BTreeMap;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use anyhow::Context;
use reel_config::{Config, ListenerConfig, QuicRetry};
use reel_quic::{Keys, QuicConfig, QuicCounters, QuicSettings, RetryMode};
use tokio::sync::watch;
use tracing::{info, warn};

use crate::generation::Live;

/// One listener's QUIC side.
pub(crate) struct QuicListener {
    /// The `[[listener]]` name.
    pub name: String,
    /// The UDP address every worker's socket is bound to.
    pub address: SocketAddr,
    /// One socket per worker, in worker order (reuseport group order).
    sockets: Vec<UdpSocket>,
    /// Why packets are routed by address hash instead of by connection ID, if they are.
    pub hash_routing: Option<String>,
    /// The current configuration, for every worker's endpoint.
    config: watch::Sender<QuicConfig>,
    /// Turned true when a reload removed the listener.
    closed: watch::Sender<bool>,
    /// Per-worker counters, in worker order.
    pub counters: Vec<Arc<QuicCounters>>,
}

impl QuicListener {
    /// Worker `i`'s socket (a new descriptor for the same socket).
    pub(crate) fn socket(&self, i: usize) -> std::io::Result<UdpSocket> {
        self.sockets
            .get(i)
            .ok_or_else(|| std::io::Error::other("no QUIC socket for this worker"))?
            .try_clone()
    }

    /// The configuration's updates.
    pub(crate) fn configs(&self) -> watch::Receiver<QuicConfig> {
        self.config.subscribe()
    }

    /// Turns true when the listener is removed.
    pub(crate) fn closed(&self) -> watch::Receiver<bool> {
        self.closed.subscribe()
    }
}

/// Every HTTP/3 listener of the process, as a set the workers follow.
pub(crate) struct Quic {
    set: watch::Sender<Vec<Arc<QuicListener>>>,
    /// UDP sockets handed over by the process this one replaces, by listener name, until
    /// a listener of that name takes them.
    inherited: Mutex<BTreeMap<String, Vec<UdpSocket>>>,
    /// Workers whose HTTP/3 side runs (the upgrade waits for none before it lets the
    /// next process read the sockets).
    running: AtomicUsize,
    /// Retry-token and stateless-reset keys, the same for every listener and reload.
    pub keys: Keys,
    n_workers: usize,
}

/// The transport settings of listener `l` from the config.
pub(crate) fn settings(cfg: &Config, l: &ListenerConfig) -> QuicSettings {
    let h = &cfg.http;
    QuicSettings {
        retry: match l.quic_retry.unwrap_or_default() {
            QuicRetry::Auto => RetryMode::Auto,
            QuicRetry::Always => RetryMode::Always,
            QuicRetry::Never => RetryMode::Never,
        },
        // The HTTP layer closes an idle connection at `idle_timeout` with GOAWAY; the
        // transport's silent timeout comes later, for a client that went away.
        idle_timeout: h.idle_timeout.get() + std::time::Duration::from_secs(5),
        handshake_timeout: h.header_timeout.get().max(std::time::Duration::from_secs(1)),
        max_per_worker: h.max_connections_per_worker as usize,
        worker_send_budget: h.h3_send_budget.bytes(),
        // A measurement knob (benches/README.md), not a setting.
        segmentation_offload: std::env::var_os("REEL_QUIC_GSO").is_none_or(|v| v != "0"),
        ..QuicSettings::default()
    }
}

impl Quic {
    /// No listeners yet; `n_workers` sockets per listener once bound.
    pub(crate) fn new(n_workers: usize) -> anyhow::Result<Quic> {
        Ok(Quic {
            set: watch::channel(Vec::new()).0,
            inherited: Mutex::new(BTreeMap::new()),
            running: AtomicUsize::new(0),
            keys: Keys::new()?,
            n_workers,
        })
    }

    /// Keeps the UDP sockets a predecessor handed over, for [`Quic::apply`] to adopt.
    pub(crate) fn inherit(&self, sockets: BTreeMap<String, Vec<UdpSocket>>) {
        if let Ok(mut i) = self.inherited.lock() {
            *i = sockets;
        }
    }

    /// Every listener's sockets in worker order, as new descriptors, for a successor.
    pub(crate) fn export(&self) -> std::io::Result<Vec<(String, OwnedFd)>> {
        let mut out = Vec::new();
        for l in self.listeners() {
            for s in &l.sockets {
                out.push((l.name.clone(), OwnedFd::from(s.try_clone()?)));
            }
        }
        Ok(out)
    }

    /// Counts a worker's HTTP/3 side as running until the guard goes.
    pub(crate) fn running_guard(self: &Arc<Self>) -> RunningGuard {
        self.running.fetch_add(1, Ordering::SeqCst);
        RunningGuard(self.clone())
    }

    /// Waits (blocking) until no worker's HTTP/3 side runs, at most `wait`; whether none
    /// does.
    pub(crate) fn wait_stopped(&self, wait: std::time::Duration) -> bool {
        let until = std::time::Instant::now() + wait;
        while self.running.load(Ordering::SeqCst) > 0 {
            if std::time::Instant::now() >= until {
                return false;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        true
    }

    /// The listeners now.
    pub(crate) fn listeners(&self) -> Vec<Arc<QuicListener>> {
        self.set.borrow().clone()
    }

    /// Open QUIC connections, every listener and worker.
    pub(crate) fn open_connections(&self) -> u64 {
        self.listeners()
            .iter()
            .flat_map(|l| l.counters.iter())
            .map(|c| c.open.load(Ordering::Relaxed))
            .sum()
    }

    /// What `/status` shows: each HTTP/3 listener's address, routing and open
    /// connections.
    pub(crate) fn status(&self) -> serde_json::Value {
        let ls: Vec<serde_json::Value> = self
            .listeners()
            .iter()
            .map(|l| {
                let open: u64 = l.counters.iter().map(|c| c.open.load(Ordering::Relaxed)).sum();
                serde_json::json!({
                    "name": l.name,
                    "address": l.address,
                    "routing": if l.hash_routing.is_none() { "connection_id" } else { "hash" },
                    "routing_problem": l.hash_routing,
                    "connections": open,
                })
            })
            .collect();
        serde_json::Value::Array(ls)
    }

    /// The set of listeners as it changes.
    pub(crate) fn subscribe(&self) -> watch::Receiver<Vec<Arc<QuicListener>>> {
        self.set.subscribe()
    }

    /// The configuration of listener `l` in `live`.
    fn config(
        &self,
        live: &Live,
        l: &ListenerConfig,
        tickets: &reel_tls::Tickets,
    ) -> anyhow::Result<QuicConfig> {
        let tls = live
            .tls
            .listener(&l.name)
            .with_context(|| format!("listener {} has no TLS configuration", l.name))?;
        let rustls = tls.quic_config(tickets, false).context("the QUIC TLS configuration")?;
        let settings = settings(&live.cfg, l);
        let server = reel_quic::server_config(rustls, &settings, &self.keys)
            .context("the QUIC configuration")?;
        Ok(QuicConfig { server, settings })
    }

    /// Makes the set match `live`: every TLS listener with `http3 = true` served on the
    /// address its TCP side is bound to (`bound`, by name). Kept listeners take the new
    /// configuration; new ones are bound; removed ones close. A listener that fails to
    /// bind is left out and reported; the others are applied.
    pub(crate) fn apply(
        &self,
        live: &Live,
        bound: &[(String, SocketAddr)],
        tickets: &reel_tls::Tickets,
    ) -> anyhow::Result<()> {
        let current = self.listeners();
        let mut next = Vec::new();
        let mut failed = Vec::new();
        for l in live.cfg.listener.iter().filter(|l| l.http3_enabled()) {
            let address = bound.iter().find(|(n, _)| *n == l.name).map_or(l.address, |b| b.1);
            let made = self.config(live, l, tickets).and_then(|config| {
                match current.iter().find(|q| q.name == l.name && q.address == address) {
                    Some(q) => {
                        q.config.send_replace(config);
                        Ok(q.clone())
                    }
                    None => self.bind(&l.name, address, config),
                }
            });
            match made {
                Ok(q) => next.push(q),
                Err(e) => failed.push(format!("{}: {e:#}", l.name)),
            }
        }
        for q in &current {
            if !next.iter().any(|n| Arc::ptr_eq(n, q)) {
                info!(listener = %q.name, address = %q.address, "HTTP/3 closing (UDP)");
                q.closed.send_replace(true);
            }
        }
        self.set.send_replace(next);
        // Sockets a predecessor handed over for a listener this config does not serve
        // HTTP/3 on: closed, or their port would stay bound with nobody reading it.
        if let Ok(mut left) = self.inherited.lock() {
            for (name, socks) in std::mem::take(&mut *left) {
                info!(listener = %name, sockets = socks.len(), "closing HTTP/3 sockets no listener takes");
            }
        }
        if failed.is_empty() { Ok(()) } else { anyhow::bail!("{}", failed.join("; ")) }
    }

    fn bind(
        &self,
        name: &str,
        address: SocketAddr,
        config: QuicConfig,
    ) -> anyhow::Result<Arc<QuicListener>> {
        let handed = self.inherited.lock().ok().and_then(|mut i| i.remove(name));
        let mut group = match handed {
            Some(socks) if socks.first().and_then(|s| s.local_addr().ok()) == Some(address) => {
                info!(listener = %name, %address, sockets = socks.len(), "took over the HTTP/3 sockets");
                reel_runtime::quic_route::adopt_udp_group(socks, self.n_workers)
                    .with_context(|| format!("taking over UDP {address}"))?
            }
            _ => reel_runtime::quic_route::bind_udp_group(address, self.n_workers)
                .with_context(|| format!("binding UDP {address}"))?,
        };
        // A diagnosis knob (docs/operations.md), not a setting: route by address hash.
        if std::env::var_os("REEL_QUIC_BPF").is_some_and(|v| v == "0") {
            group
                .route_by_hash("REEL_QUIC_BPF=0")
                .with_context(|| format!("detaching the routing program of UDP {address}"))?;
        }
        let hash_routing = match group.routing {
            reel_runtime::quic_route::UdpRouting::ConnectionId => None,
            reel_runtime::quic_route::UdpRouting::Hash(why) => {
                warn!(
                    listener = %name,
                    reason = %why,
                    "HTTP/3: no connection-ID routing program on the group (see reason); packets \
                     are spread by address hash, and a client whose address changes loses \
                     its connection"
                );
                Some(why)
            }
        };
        info!(listener = %name, %address, workers = self.n_workers, "HTTP/3 listening (UDP)");
        Ok(Arc::new(QuicListener {
            name: name.to_owned(),
            address,
            sockets: group.sockets,
            hash_routing,
            config: watch::channel(config).0,
            closed: watch::channel(false).0,
            counters: (0..self.n_workers).map(|_| Arc::default()).collect(),
        }))
    }
}

/// A worker's HTTP/3 side counted as running ([`Quic::running_guard`]).
pub(crate) struct RunningGuard(Arc<Quic>);

impl Drop for RunningGuard {
    fn drop(&mut self) {
        self.0.running.fetch_sub(1, Ordering::SeqCst);
    }
}
