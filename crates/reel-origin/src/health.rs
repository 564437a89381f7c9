//! Health of each origin host, shared by every worker, and the active checker thread.
//!
//! Health is a property of the host, not of a worker, so one [`HostState`] per host of a group
//! lives behind an `Arc` and is updated with atomics from two sides:
//!
//! * Active checks: one thread off the workers runs a small current_thread runtime and probes
//!   every host every `interval` with `GET path`; `rise` consecutive successes bring a host
//!   up, `fall` consecutive failures take it down.
//! * Passive ejection: workers report what they see. A refused connection takes the host down
//!   at once (nothing listens there, every further attempt would fail the same way); any other
//!   failure (connect error or timeout, first-byte or idle timeout, reset, truncated body,
//!   protocol error) counts, and `fall` consecutive ones take the host down. Any response head
//!   resets the count. A 5xx status is an answer, not a failure.
//!
//! A passively ejected host recovers through the active checker. When no checker runs for it
//! (checks disabled for the group, or [`crate::Origins::start_health_checks`] not called), it
//! becomes eligible again `interval` after it went down; the next request to it decides: a
//! response head brings it up, one more failure takes it down for another `interval`.
//!
//! Races between workers and the checker are benign: the worst case is one extra request to a
//! host that has just gone down, or one probe result applied after a passive ejection.

use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering::Relaxed};
use std::time::Instant;

use http::uri::PathAndQuery;
use http::{HeaderMap, HeaderValue, Method, header};
use tokio::sync::watch;

use crate::body::RequestBody;
use crate::error::ErrorKind;
use crate::places::Places;
use crate::spec::{HealthSpec, HostSpec};
use crate::stats::HostStats;
use crate::tls::TlsTarget;

/// Which idle connections a host may reuse: plain ones by address (shared by every group
/// listing it), TLS ones by address, group and verified name.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct PoolKey {
    pub(crate) addr: String,
    pub(crate) tls: Option<(usize, String)>,
}

/// Shared state of one host of one group.
#[derive(Debug)]
pub(crate) struct HostState {
    pub(crate) group: String,
    pub(crate) addr: String,
    pub(crate) tier: usize,
    /// `Host` override from the spec, validated at build time.
    pub(crate) host_header: Option<HeaderValue>,
    /// TLS connector and name, for an HTTPS host.
    pub(crate) tls: Option<TlsTarget>,
    pub(crate) pool_key: PoolKey,
    /// Rendezvous weight and identity (a hash of `addr`, the same on every node).
    pub(crate) weight: u32,
    pub(crate) rank_id: u64,
    pub(crate) health: HealthSpec,
    pub(crate) stats: HostStats,
    /// Places for HTTP/1.1 connections carrying a request (`max_connections`), shared by
    /// every worker: a connection holds one from checkout (or connect) until it returns to
    /// the pool or closes.
    pub(crate) busy: Arc<Places>,
    healthy: AtomicBool,
    /// Set while the active checker is probing this host.
    actively_checked: AtomicBool,
    passive_failures: AtomicU32,
    active_ok: AtomicU32,
    active_fail: AtomicU32,
    /// Milliseconds since `base` when the host last went (or stayed) down.
    down_at_ms: AtomicU64,
    base: Instant,
}

impl HostState {
    /// `gi` is the group's index, which keeps TLS pools of different groups apart.
    pub(crate) fn new(
        (group, gi): (&str, usize),
        spec: &HostSpec,
        tier: usize,
        tls: Option<TlsTarget>,
        (health, max_connections): (HealthSpec, usize),
        base: Instant,
    ) -> Self {
        // Validated with the spec; an invalid value is dropped rather than trusted.
        let host_header = spec.host_header.as_deref().and_then(|v| HeaderValue::from_str(v).ok());
        let pool_key = PoolKey {
            addr: spec.addr.clone(),
            tls: tls.as_ref().map(|_| (gi, spec.tls_name().to_owned())),
        };
        Self {
            group: group.to_owned(),
            addr: spec.addr.clone(),
            tier,
            host_header,
            tls,
            pool_key,
            weight: spec.weight.max(1),
            rank_id: crate::balance::host_id(&spec.addr),
            health,
            stats: HostStats::default(),
            busy: Places::new(max_connections),
            // Hosts start healthy so traffic flows before the first probe; a dead host is
            // found by that probe or by the first refused connection.
            healthy: AtomicBool::new(true),
            actively_checked: AtomicBool::new(false),
            passive_failures: AtomicU32::new(0),
            active_ok: AtomicU32::new(0),
            active_fail: AtomicU32::new(0),
            down_at_ms: AtomicU64::new(0),
            base,
        }
    }

    pub(crate) fn is_healthy(&self) -> bool {
        self.healthy.load(Relaxed)
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.base.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// Whether selection may pick this host: healthy, or down without an active checker and
    /// past the cool-down.
    pub(crate) fn is_available(&self) -> bool {
        if self.is_healthy() {
            return true;
        }
        if self.actively_checked.load(Relaxed) {
            return false;
        }
        let cooldown = u64::try_from(self.health.interval.as_millis()).unwrap_or(u64::MAX);
        self.now_ms().saturating_sub(self.down_at_ms.load(Relaxed)) >= cooldown
    }

    fn mark_down(&self, why: &dyn std::fmt::Display) {
        self.down_at_ms.store(self.now_ms(), Relaxed);
        self.active_ok.store(0, Relaxed);
        if self.healthy.swap(false, Relaxed) {
            tracing::warn!(group = %self.group, host = %self.addr, reason = %why, "origin host down");
        }
    }

    fn mark_up(&self, why: &str) {
        self.passive_failures.store(0, Relaxed);
        self.active_fail.store(0, Relaxed);
        if !self.healthy.swap(true, Relaxed) {
            tracing::info!(group = %self.group, host = %self.addr, reason = why, "origin host up");
        }
    }

    /// A worker saw `kind` from this host.
    pub(crate) fn passive_failure(&self, kind: ErrorKind) {
        if matches!(
            kind,
            ErrorKind::NoHealthyHost
                | ErrorKind::UnknownGroup
                | ErrorKind::RequestBodyAborted
                | ErrorKind::BlockingTimeout
                | ErrorKind::ConnectionLimit
        ) {
            return;
        }
        let n = self.passive_failures.fetch_add(1, Relaxed).saturating_add(1);
        // A host already down (tried through fail-open or after its cool-down) goes back down
        // at once, restarting the cool-down.
        if kind == ErrorKind::ConnectRefused || n >= self.health.fall || !self.is_healthy() {
            self.mark_down(&format_args!("{n} consecutive failures, last {kind}"));
        }
    }

    /// A worker received a response head from this host.
    pub(crate) fn passive_success(&self) {
        self.passive_failures.store(0, Relaxed);
        if !self.is_healthy() && !self.actively_checked.load(Relaxed) {
            self.mark_up("request succeeded after cool-down");
        }
    }

    fn active_result(&self, result: Result<(), String>) {
        match result {
            Ok(()) => {
                self.active_fail.store(0, Relaxed);
                let n = self.active_ok.fetch_add(1, Relaxed).saturating_add(1);
                if !self.is_healthy() && n >= self.health.rise {
                    self.mark_up("health check passed");
                }
            }
            Err(why) => {
                tracing::debug!(group = %self.group, host = %self.addr, %why, "health probe failed");
                self.active_ok.store(0, Relaxed);
                let n = self.active_fail.fetch_add(1, Relaxed).saturating_add(1);
                if self.is_healthy() && n >= self.health.fall {
                    self.mark_down(&format_args!("health check: {why}"));
                }
            }
        }
    }

    fn probe_host_header(&self) -> HeaderValue {
        self.host_header
            .clone()
            .or_else(|| HeaderValue::from_str(&self.addr).ok())
            .unwrap_or_else(|| HeaderValue::from_static("localhost"))
    }
}

/// One probe: connect (over TLS for an HTTPS host, with the same verification as requests),
/// `GET path`, compare the status. The whole exchange is bounded by the probe timeout; the
/// body is not read and the connection is closed afterwards.
async fn probe(host: &HostState) -> Result<(), String> {
    let h = &host.health;
    let exchange = async {
        let mut send = crate::conn::open(host, h.timeout).await.map_err(|e| e.to_string())?;
        let pq = PathAndQuery::try_from(h.path.as_str()).map_err(|e| format!("path: {e}"))?;
        let mut headers = HeaderMap::new();
        if !send.is_h2() {
            headers.insert(header::CONNECTION, HeaderValue::from_static("close"));
        }
        headers.insert(header::USER_AGENT, HeaderValue::from_static("reel-health-check"));
        let req = send.request(
            Method::GET,
            pq,
            headers,
            host.probe_host_header(),
            &host.addr,
            RequestBody::Empty,
        );
        let resp = send.send(req).await.map_err(|e| format!("request: {}", e.error()))?;
        if resp.status().as_u16() == h.expect_status {
            Ok(())
        } else {
            Err(format!("status {} (want {})", resp.status().as_u16(), h.expect_status))
        }
    };
    match tokio::time::timeout(h.timeout, exchange).await {
        Ok(r) => r,
        Err(_) => Err(format!("timed out after {:?}", h.timeout)),
    }
}

async fn check_loop(host: Arc<HostState>, mut stop: watch::Receiver<bool>) {
    loop {
        let result = tokio::select! {
            r = probe(&host) => r,
            _ = stop.changed() => return,
        };
        host.active_result(result);
        tokio::select! {
            _ = tokio::time::sleep(host.health.interval) => {}
            _ = stop.changed() => return,
        }
    }
}

/// Handle of a running checker thread; dropping it does not stop the thread, [`stop`] does.
///
/// [`stop`]: Checker::stop
#[derive(Debug)]
pub(crate) struct Checker {
    stop: watch::Sender<bool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Checker {
    /// Starts probing `hosts` on a new thread.
    pub(crate) fn start(hosts: Vec<Arc<HostState>>) -> io::Result<Self> {
        let (stop, rx) = watch::channel(false);
        let rt = tokio::runtime::Builder::new_current_thread().enable_io().enable_time().build()?;
        for h in &hosts {
            h.actively_checked.store(true, Relaxed);
        }
        let thread_hosts = hosts.clone();
        let spawned =
            std::thread::Builder::new().name("reel-origin-health".into()).spawn(move || {
                rt.block_on(async move {
                    let mut stop = rx.clone();
                    for h in thread_hosts {
                        tokio::spawn(check_loop(h, rx.clone()));
                    }
                    // Err means the sender is gone, which also means stop.
                    let _ = stop.changed().await;
                });
                // Dropping the runtime cancels the probe tasks.
            });
        match spawned {
            Ok(t) => Ok(Self { stop, thread: Some(t) }),
            Err(e) => {
                for h in &hosts {
                    h.actively_checked.store(false, Relaxed);
                }
                Err(e)
            }
        }
    }

    /// Stops the thread and waits for it; hosts fall back to passive cool-down recovery.
    pub(crate) fn stop(&mut self, hosts: &[Arc<HostState>]) {
        let _ = self.stop.send(true);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        for h in hosts {
            h.actively_checked.store(false, Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn host(fall: u32, rise: u32, interval_ms: u64) -> HostState {
        let health = HealthSpec {
            fall,
            rise,
            interval: Duration::from_millis(interval_ms),
            ..HealthSpec::default()
        };
        HostState::new(
            ("g", 0),
            &HostSpec::new("127.0.0.1:1"),
            0,
            None,
            (health, 8),
            Instant::now(),
        )
    }

    #[test]
    fn passive_fall_and_refused() {
        let h = host(3, 1, 60_000);
        h.passive_failure(ErrorKind::FirstByteTimeout);
        h.passive_failure(ErrorKind::FirstByteTimeout);
        assert!(h.is_healthy());
        h.passive_success();
        h.passive_failure(ErrorKind::Reset);
        h.passive_failure(ErrorKind::Reset);
        assert!(h.is_healthy(), "a success resets the count");
        h.passive_failure(ErrorKind::Reset);
        assert!(!h.is_healthy());
        assert!(!h.is_available(), "cool-down not over");

        let h = host(3, 1, 60_000);
        h.passive_failure(ErrorKind::ConnectRefused);
        assert!(!h.is_healthy());
    }

    #[test]
    fn cooldown_half_open() {
        let h = host(3, 1, 0);
        h.passive_failure(ErrorKind::ConnectRefused);
        assert!(!h.is_healthy());
        assert!(h.is_available(), "zero cool-down");
        h.passive_success();
        assert!(h.is_healthy());
    }

    #[test]
    fn active_rise_fall() {
        let h = host(2, 2, 60_000);
        h.actively_checked.store(true, Relaxed);
        h.active_result(Err("x".into()));
        assert!(h.is_healthy());
        h.active_result(Err("x".into()));
        assert!(!h.is_healthy());
        h.passive_success();
        assert!(!h.is_healthy(), "the checker owns recovery");
        assert!(!h.is_available());
        h.active_result(Ok(()));
        assert!(!h.is_healthy());
        h.active_result(Ok(()));
        assert!(h.is_healthy());
    }
}
