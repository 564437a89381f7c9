//! Per-host counters shared by all workers, the plain-data snapshots exported from them, and
//! their Prometheus families (written through `reel-metrics`).
//!
//! Everything is a relaxed atomic: counters are monotonic and read only for reporting, so no
//! ordering with other memory is needed.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use reel_metrics::{Histogram, HistogramSnapshot, Kind, PromWriter};

use crate::error::ErrorKind;

/// Live counters of one host.
#[derive(Debug, Default)]
pub(crate) struct HostStats {
    requests: AtomicU64,
    responses: AtomicU64,
    errors: [AtomicU64; ErrorKind::ALL.len()],
    first_byte: Histogram,
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
        self.first_byte.record(first_byte);
    }

    pub(crate) fn snapshot(&self) -> (u64, u64, ErrorCounts, HistogramSnapshot) {
        let errors = ErrorCounts(ErrorKind::ALL.map(|k| (k, self.errors[k.index()].load(Relaxed))));
        (
            self.requests.load(Relaxed),
            self.responses.load(Relaxed),
            errors,
            self.first_byte.snapshot(),
        )
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
    /// Time to first byte (the shared latency buckets of `reel-metrics`).
    pub latency: HistogramSnapshot,
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

impl OriginsSnapshot {
    /// Renders the snapshot: `reel_origin_healthy`, `reel_origin_requests_total`,
    /// `reel_origin_responses_total`, `reel_origin_errors_total{kind}` and the
    /// `reel_origin_first_byte_seconds` histogram, all labelled with `group` and `host`.
    pub fn render_prometheus(&self, p: &mut PromWriter) {
        let hosts =
            || self.groups.iter().flat_map(|g| g.hosts.iter().map(move |h| (g.name.as_str(), h)));
        p.family("reel_origin_healthy", Kind::Gauge, "Whether the origin host is healthy.");
        for (g, h) in hosts() {
            p.sample("reel_origin_healthy", &[("group", g), ("host", &h.addr)], h.healthy);
        }
        p.family("reel_origin_requests_total", Kind::Counter, "Attempts sent to the origin host.");
        for (g, h) in hosts() {
            p.sample("reel_origin_requests_total", &[("group", g), ("host", &h.addr)], h.requests);
        }
        p.family("reel_origin_responses_total", Kind::Counter, "Response heads received.");
        for (g, h) in hosts() {
            let labels = [("group", g), ("host", h.addr.as_str())];
            p.sample("reel_origin_responses_total", &labels, h.responses);
        }
        p.family("reel_origin_errors_total", Kind::Counter, "Failed exchanges by kind.");
        for (g, h) in hosts() {
            for (kind, n) in &h.errors.0 {
                let labels = [("group", g), ("host", h.addr.as_str()), ("kind", kind.as_str())];
                p.sample("reel_origin_errors_total", &labels, *n);
            }
        }
        p.family("reel_origin_first_byte_seconds", Kind::Histogram, "Time to the response head.");
        for (g, h) in hosts() {
            let labels = [("group", g), ("host", h.addr.as_str())];
            p.histogram("reel_origin_first_byte_seconds", &labels, &h.latency);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use reel_metrics::N_BUCKETS;

    #[test]
    fn counts_and_buckets() {
        let s = HostStats::default();
        s.response(Duration::from_millis(3));
        s.response(Duration::from_millis(5));
        s.response(Duration::from_micros(5_500));
        s.response(Duration::from_secs(60));
        s.error(ErrorKind::Reset);
        let (_, responses, errors, lat) = s.snapshot();
        assert_eq!(responses, 4);
        assert_eq!(errors.get(ErrorKind::Reset), 1);
        assert_eq!(errors.total(), 1);
        assert_eq!(lat.counts[3], 2, "3 ms and 5 ms are in le=5ms");
        assert_eq!(lat.counts[4], 1, "5.5 ms is in le=10ms, not truncated to 5 ms");
        assert_eq!(lat.counts[N_BUCKETS - 1], 1);
        assert_eq!(lat.cumulative()[N_BUCKETS - 1], 4);
        assert!(lat.sum_seconds() > 60.0);
    }

    #[test]
    fn prometheus_text() {
        let s = HostStats::default();
        s.request();
        s.response(Duration::from_millis(20));
        s.error(ErrorKind::ConnectTimeout);
        let (requests, responses, errors, latency) = s.snapshot();
        let snap = OriginsSnapshot {
            groups: vec![GroupSnapshot {
                name: "vod\"x".into(),
                hosts: vec![HostSnapshot {
                    addr: "127.0.0.1:81".into(),
                    tier: 0,
                    healthy: true,
                    requests,
                    responses,
                    errors,
                    latency,
                }],
            }],
        };
        let mut p = PromWriter::new();
        snap.render_prometheus(&mut p);
        let out = p.finish();
        let l = r#"group="vod\"x",host="127.0.0.1:81""#;
        assert!(out.contains("# TYPE reel_origin_first_byte_seconds histogram\n"), "{out}");
        assert!(out.contains(&format!("reel_origin_healthy{{{l}}} 1\n")), "{out}");
        assert!(out.contains(&format!("reel_origin_requests_total{{{l}}} 1\n")));
        assert!(
            out.contains(&format!("reel_origin_errors_total{{{l},kind=\"connect_timeout\"}} 1\n"))
        );
        assert!(
            out.contains(&format!("reel_origin_first_byte_seconds_bucket{{{l},le=\"0.01\"}} 0\n"))
        );
        assert!(
            out.contains(&format!("reel_origin_first_byte_seconds_bucket{{{l},le=\"0.025\"}} 1\n"))
        );
        assert!(
            out.contains(&format!("reel_origin_first_byte_seconds_bucket{{{l},le=\"+Inf\"}} 1\n"))
        );
        assert!(out.contains(&format!("reel_origin_first_byte_seconds_count{{{l}}} 1\n")));
    }
}
