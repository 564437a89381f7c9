//! Per-host counters shared by all workers, and the plain-data snapshots exported from them.
//!
//! Everything is a relaxed atomic: counters are monotonic and read only for reporting, so no
//! ordering with other memory is needed.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use crate::error::ErrorKind;

/// Upper bounds (milliseconds, inclusive) of the latency histogram buckets; an implicit
/// `+Inf` bucket follows. Chosen to match Prometheus conventions for HTTP latencies.
pub const LATENCY_BUCKETS_MS: [u64; 11] = [5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000];

/// Live counters of one host.
#[derive(Debug, Default)]
pub(crate) struct HostStats {
    requests: AtomicU64,
    responses: AtomicU64,
    errors: [AtomicU64; ErrorKind::ALL.len()],
    // One slot per bound plus the +Inf bucket; non-cumulative.
    buckets: [AtomicU64; LATENCY_BUCKETS_MS.len() + 1],
    latency_sum_us: AtomicU64,
}

impl HostStats {
    pub(crate) fn request(&self) {
        self.requests.fetch_add(1, Relaxed);
    }

    pub(crate) fn error(&self, kind: ErrorKind) {
        self.errors[kind.index()].fetch_add(1, Relaxed);
    }

    /// Records a response head and its time to first byte.
    pub(crate) fn response(&self, first_byte: Duration) {
        self.responses.fetch_add(1, Relaxed);
        let ms = first_byte.as_millis();
        let slot = LATENCY_BUCKETS_MS
            .iter()
            .position(|&b| ms <= u128::from(b))
            .unwrap_or(LATENCY_BUCKETS_MS.len());
        self.buckets[slot].fetch_add(1, Relaxed);
        let us = u64::try_from(first_byte.as_micros()).unwrap_or(u64::MAX);
        self.latency_sum_us.fetch_add(us, Relaxed);
    }

    pub(crate) fn snapshot(&self) -> (u64, u64, ErrorCounts, LatencySnapshot) {
        let errors = ErrorCounts(ErrorKind::ALL.map(|k| (k, self.errors[k.index()].load(Relaxed))));
        let latency = LatencySnapshot {
            bounds_ms: LATENCY_BUCKETS_MS,
            counts: std::array::from_fn(|i| self.buckets[i].load(Relaxed)),
            sum_seconds: self.latency_sum_us.load(Relaxed) as f64 / 1e6,
        };
        (self.requests.load(Relaxed), self.responses.load(Relaxed), errors, latency)
    }
}

/// Error counters of one host, one entry per [`ErrorKind`] in [`ErrorKind::ALL`] order.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ErrorCounts(pub [(ErrorKind, u64); ErrorKind::ALL.len()]);

impl ErrorCounts {
    /// Count for one kind.
    pub fn get(&self, kind: ErrorKind) -> u64 {
        self.0[kind.index()].1
    }

    /// Sum over all kinds.
    pub fn total(&self) -> u64 {
        self.0.iter().map(|(_, n)| n).sum()
    }
}

/// Time-to-first-byte histogram of one host.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct LatencySnapshot {
    /// Upper bounds in milliseconds ([`LATENCY_BUCKETS_MS`]).
    pub bounds_ms: [u64; LATENCY_BUCKETS_MS.len()],
    /// Non-cumulative counts: `counts[i]` for `bounds_ms[i]`, the last one for `+Inf`.
    pub counts: [u64; LATENCY_BUCKETS_MS.len() + 1],
    /// Sum of all observations in seconds (Prometheus `_sum`).
    pub sum_seconds: f64,
}

impl LatencySnapshot {
    /// Cumulative counts as Prometheus `le` buckets expect; the last one is `+Inf` (`_count`).
    pub fn cumulative(&self) -> [u64; LATENCY_BUCKETS_MS.len() + 1] {
        let mut acc = 0;
        self.counts.map(|c| {
            acc += c;
            acc
        })
    }

    /// Number of observations.
    pub fn count(&self) -> u64 {
        self.counts.iter().sum()
    }
}

/// State and counters of one host of one group.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct HostSnapshot {
    /// `host:port` from the spec.
    pub addr: String,
    /// Tier index inside the group.
    pub tier: usize,
    /// Current health.
    pub healthy: bool,
    /// Attempts sent to this host (a retried request counts once per host tried).
    pub requests: u64,
    /// Response heads received.
    pub responses: u64,
    /// Failures by kind.
    pub errors: ErrorCounts,
    /// Time to first byte.
    pub latency: LatencySnapshot,
}

/// State of one group.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct GroupSnapshot {
    /// Group name.
    pub name: String,
    /// Hosts in tier order, then spec order.
    pub hosts: Vec<HostSnapshot>,
}

/// State of every group, for `/status` and `/metrics`.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct OriginsSnapshot {
    /// Groups in spec order.
    pub groups: Vec<GroupSnapshot>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets() {
        let s = HostStats::default();
        s.response(Duration::from_millis(3));
        s.response(Duration::from_millis(5));
        s.response(Duration::from_millis(7));
        s.response(Duration::from_secs(60));
        s.error(ErrorKind::Reset);
        let (_, responses, errors, lat) = s.snapshot();
        assert_eq!(responses, 4);
        assert_eq!(errors.get(ErrorKind::Reset), 1);
        assert_eq!(errors.total(), 1);
        assert_eq!(lat.counts[0], 2);
        assert_eq!(lat.counts[1], 1);
        assert_eq!(lat.counts[LATENCY_BUCKETS_MS.len()], 1);
        assert_eq!(lat.cumulative()[LATENCY_BUCKETS_MS.len()], 4);
        assert_eq!(lat.count(), 4);
        assert!(lat.sum_seconds > 60.0);
    }
}
