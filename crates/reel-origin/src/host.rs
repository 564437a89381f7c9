//! One host of one group as every worker shares it ([`HostState`]): where it is, how it is
//! reached (its TLS target, its pool key, its connection places), its statistics, and its
//! health.
//!
//! Health is a property of the host, not of a worker, so one [`HostState`] per host of a group
//! lives behind an `Arc` and is updated with atomics from two sides:
//!
//! * Active checks (`health.rs`): one thread off the workers runs a small current_thread
//!   runtime and probes every host every `interval` with `GET path`; `rise` consecutive
//!   successes bring a host up, `fall` consecutive failures take it down.
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

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering::Relaxed};
use std::time::Instant;

use http::HeaderValue;

use crate::auth::GroupAuth;
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
    /// The group's origin authentication, for requests and probes alike.
    pub(crate) auth: Option<Arc<GroupAuth>>,
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
            auth: None,
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

    /// Whether the active checker probes this host (it then owns the host's recovery).
    pub(crate) fn set_actively_checked(&self, on: bool) {
        self.actively_checked.store(on, Relaxed);
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

    pub(crate) fn active_result(&self, result: Result<(), String>) {
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

    /// The `Host` a health probe sends: the spec's override, else the address.
    pub(crate) fn probe_host_header(&self) -> HeaderValue {
        self.host_header
            .clone()
            .or_else(|| HeaderValue::from_str(&self.addr).ok())
            .unwrap_or_else(|| HeaderValue::from_static("localhost"))
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
