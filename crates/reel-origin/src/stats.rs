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

impl OriginsSnapshot {
    /// Appends the snapshot in the Prometheus text exposition format (version 0.0.4):
    /// `reel_origin_healthy`, `reel_origin_requests_total`, `reel_origin_responses_total`,
    /// `reel_origin_errors_total{kind}` and the `reel_origin_first_byte_seconds` histogram, all
    /// labelled with `group` and `host`.
    pub fn render_prometheus(&self, out: &mut String) {
        use std::fmt::Write as _;
        let hosts = || self.groups.iter().flat_map(|g| g.hosts.iter().map(move |h| (g, h)));
        let labels = |g: &GroupSnapshot, h: &HostSnapshot| {
            format!("group=\"{}\",host=\"{}\"", escape_label(&g.name), escape_label(&h.addr))
        };
        // Writing to a String cannot fail.
        let _ = writeln!(out, "# HELP reel_origin_healthy Whether the origin host is healthy.");
        let _ = writeln!(out, "# TYPE reel_origin_healthy gauge");
        for (g, h) in hosts() {
            let _ =
                writeln!(out, "reel_origin_healthy{{{}}} {}", labels(g, h), u8::from(h.healthy));
        }
        let _ =
            writeln!(out, "# HELP reel_origin_requests_total Attempts sent to the origin host.");
        let _ = writeln!(out, "# TYPE reel_origin_requests_total counter");
        for (g, h) in hosts() {
            let _ = writeln!(out, "reel_origin_requests_total{{{}}} {}", labels(g, h), h.requests);
        }
        let _ = writeln!(out, "# HELP reel_origin_responses_total Response heads received.");
        let _ = writeln!(out, "# TYPE reel_origin_responses_total counter");
        for (g, h) in hosts() {
            let _ =
                writeln!(out, "reel_origin_responses_total{{{}}} {}", labels(g, h), h.responses);
        }
        let _ = writeln!(out, "# HELP reel_origin_errors_total Failed exchanges by kind.");
        let _ = writeln!(out, "# TYPE reel_origin_errors_total counter");
        for (g, h) in hosts() {
            for (kind, n) in &h.errors.0 {
                let _ = writeln!(
                    out,
                    "reel_origin_errors_total{{{},kind=\"{}\"}} {n}",
                    labels(g, h),
                    kind.as_str()
                );
            }
        }
        let _ = writeln!(out, "# HELP reel_origin_first_byte_seconds Time to the response head.");
        let _ = writeln!(out, "# TYPE reel_origin_first_byte_seconds histogram");
        for (g, h) in hosts() {
            let l = labels(g, h);
            let cum = h.latency.cumulative();
            for (i, bound) in h.latency.bounds_ms.iter().enumerate() {
                let le = *bound as f64 / 1000.0;
                let _ = writeln!(
                    out,
                    "reel_origin_first_byte_seconds_bucket{{{l},le=\"{le}\"}} {}",
                    cum[i]
                );
            }
            let total = cum[cum.len() - 1];
            let _ =
                writeln!(out, "reel_origin_first_byte_seconds_bucket{{{l},le=\"+Inf\"}} {total}");
            let _ = writeln!(
                out,
                "reel_origin_first_byte_seconds_sum{{{l}}} {}",
                h.latency.sum_seconds
            );
            let _ = writeln!(out, "reel_origin_first_byte_seconds_count{{{l}}} {total}");
        }
    }
}

/// Label value escaping of the Prometheus text format: backslash, double quote, newline.
fn escape_label(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
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
        let mut out = String::new();
        snap.render_prometheus(&mut out);
        let l = r#"group="vod\"x",host="127.0.0.1:81""#;
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
