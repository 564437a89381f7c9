//! Per-worker request counters and latency histograms, and their Prometheus rendering.
//!
//! Each worker owns one [`WorkerMetrics`] and is its only writer: counters are relaxed
//! atomics on memory no other core writes, so recording a request costs a few uncontended
//! increments and never takes a lock. Readers (the admin listener, the health sampler) sum
//! the workers' values when asked.

use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

/// Upper bounds, in milliseconds, of the latency histogram buckets (plus +Inf).
pub const LATENCY_BUCKETS_MS: [f64; 14] =
    [0.5, 1.0, 2.5, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0, 1000.0, 2500.0, 5000.0, 10000.0];

/// How a request was answered with respect to the cache (the `Cache-Status` outcome).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(usize)]
pub enum CacheResult {
    /// Served from a complete stored object.
    Hit = 0,
    /// Fetched from the origin (this request started the fetch).
    Miss = 1,
    /// Joined another request's in-flight origin fetch.
    Coalesced = 2,
    /// Stored but stale: revalidated with the origin.
    Revalidated = 3,
    /// Served stale (stale-while-revalidate or stale-if-error).
    Stale = 4,
    /// Not cacheable: passed through to the origin.
    Pass = 5,
    /// Answered by reel itself (health, errors, refusals).
    Local = 6,
}

impl CacheResult {
    /// Every variant, in index order.
    pub const ALL: [CacheResult; 7] = [
        CacheResult::Hit,
        CacheResult::Miss,
        CacheResult::Coalesced,
        CacheResult::Revalidated,
        CacheResult::Stale,
        CacheResult::Pass,
        CacheResult::Local,
    ];

    /// The label used in metrics and access logs.
    pub fn as_str(self) -> &'static str {
        match self {
            CacheResult::Hit => "hit",
            CacheResult::Miss => "miss",
            CacheResult::Coalesced => "coalesced",
            CacheResult::Revalidated => "revalidated",
            CacheResult::Stale => "stale",
            CacheResult::Pass => "pass",
            CacheResult::Local => "local",
        }
    }
}

const N_RESULTS: usize = CacheResult::ALL.len();
/// Status classes 1xx..5xx, index 0 for anything else.
const N_CLASSES: usize = 6;

/// A fixed-bucket latency histogram of relaxed atomics (one writer, many readers).
#[derive(Debug, Default)]
pub struct Histogram {
    buckets: [AtomicU64; LATENCY_BUCKETS_MS.len() + 1],
    sum_us: AtomicU64,
}

impl Histogram {
    /// Records one observation.
    pub fn record(&self, d: Duration) {
        let ms = d.as_secs_f64() * 1000.0;
        let i =
            LATENCY_BUCKETS_MS.iter().position(|&b| ms <= b).unwrap_or(LATENCY_BUCKETS_MS.len());
        self.buckets[i].fetch_add(1, Relaxed);
        self.sum_us.fetch_add(d.as_micros() as u64, Relaxed);
    }

    /// A copy of the per-bucket counts (not cumulative) and the sum in microseconds.
    pub fn snapshot(&self) -> HistogramSnapshot {
        let mut counts = [0u64; LATENCY_BUCKETS_MS.len() + 1];
        for (c, b) in counts.iter_mut().zip(&self.buckets) {
            *c = b.load(Relaxed);
        }
        HistogramSnapshot { counts, sum_us: self.sum_us.load(Relaxed) }
    }
}

/// Point-in-time histogram counts; subtract two to get a window.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HistogramSnapshot {
    /// Per-bucket counts; the last bucket is +Inf.
    pub counts: [u64; LATENCY_BUCKETS_MS.len() + 1],
    /// Sum of all observations in microseconds.
    pub sum_us: u64,
}

impl HistogramSnapshot {
    /// Adds another snapshot into this one.
    pub fn add(&mut self, o: &HistogramSnapshot) {
        for (a, b) in self.counts.iter_mut().zip(&o.counts) {
            *a += b;
        }
        self.sum_us += o.sum_us;
    }

    /// The counts observed since `earlier`.
    pub fn since(&self, earlier: &HistogramSnapshot) -> HistogramSnapshot {
        let mut out = *self;
        for (a, b) in out.counts.iter_mut().zip(&earlier.counts) {
            *a = a.saturating_sub(*b);
        }
        out.sum_us = out.sum_us.saturating_sub(earlier.sum_us);
        out
    }

    /// Total number of observations.
    pub fn count(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// The quantile `q` (0..=1) in milliseconds, as the upper bound of the bucket that holds
    /// it (the +Inf bucket reports the largest finite bound); `None` when empty.
    pub fn quantile_ms(&self, q: f64) -> Option<f64> {
        let total = self.count();
        if total == 0 {
            return None;
        }
        let rank = ((q.clamp(0.0, 1.0) * total as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return Some(LATENCY_BUCKETS_MS[i.min(LATENCY_BUCKETS_MS.len() - 1)]);
            }
        }
        LATENCY_BUCKETS_MS.last().copied()
    }
}

/// One worker's counters. Shared as `Arc` so the admin thread can read them.
#[derive(Debug, Default)]
pub struct WorkerMetrics {
    requests: [[AtomicU64; N_CLASSES]; N_RESULTS],
    bytes_out: AtomicU64,
    /// Latency of every request, first byte received to last byte written.
    pub latency: Histogram,
    /// Latency of cache hits only (the performance-health signal).
    pub hit_latency: Histogram,
    /// Requests that waited on another request's origin fetch right now.
    pub coalesced_waiters: AtomicU64,
    /// Client-side protocol errors answered 4xx by the codec.
    pub client_errors: AtomicU64,
}

impl WorkerMetrics {
    /// Records one finished request.
    pub fn record(&self, status: u16, result: CacheResult, bytes: u64, took: Duration) {
        let class = match status / 100 {
            c @ 1..=5 => c as usize,
            _ => 0,
        };
        self.requests[result as usize][class].fetch_add(1, Relaxed);
        self.bytes_out.fetch_add(bytes, Relaxed);
        self.latency.record(took);
        if result == CacheResult::Hit {
            self.hit_latency.record(took);
        }
    }

    /// Requests so far with this cache result, over all statuses.
    pub fn requests_with(&self, result: CacheResult) -> u64 {
        self.requests[result as usize].iter().map(|c| c.load(Relaxed)).sum()
    }

    /// All requests so far.
    pub fn requests_total(&self) -> u64 {
        CacheResult::ALL.iter().map(|r| self.requests_with(*r)).sum()
    }

    /// Body and header bytes written so far.
    pub fn bytes_out(&self) -> u64 {
        self.bytes_out.load(Relaxed)
    }
}

/// Writes Prometheus text exposition format.
#[derive(Debug, Default)]
pub struct PromWriter {
    out: String,
}

impl PromWriter {
    /// Starts an empty exposition.
    pub fn new() -> Self {
        Self::default()
    }

    /// Writes `# HELP` and `# TYPE` lines for a metric family.
    pub fn family(&mut self, name: &str, kind: &str, help: &str) {
        let _ = writeln!(self.out, "# HELP {name} {help}\n# TYPE {name} {kind}");
    }

    /// Writes one sample. Label values are escaped per the exposition format.
    pub fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: f64) {
        self.out.push_str(name);
        if !labels.is_empty() {
            self.out.push('{');
            for (i, (k, v)) in labels.iter().enumerate() {
                if i > 0 {
                    self.out.push(',');
                }
                let _ = write!(self.out, "{k}=\"");
                for ch in v.chars() {
                    match ch {
                        '\\' => self.out.push_str("\\\\"),
                        '"' => self.out.push_str("\\\""),
                        '\n' => self.out.push_str("\\n"),
                        c => self.out.push(c),
                    }
                }
                self.out.push('"');
            }
            self.out.push('}');
        }
        let _ = writeln!(self.out, " {value}");
    }

    /// Writes a histogram family's `_bucket`, `_sum` and `_count` samples (in seconds).
    pub fn histogram(&mut self, name: &str, labels: &[(&str, &str)], h: &HistogramSnapshot) {
        let mut cum = 0;
        let bucket = format!("{name}_bucket");
        for (i, c) in h.counts.iter().enumerate() {
            cum += c;
            let le = match LATENCY_BUCKETS_MS.get(i) {
                Some(ms) => format!("{}", ms / 1000.0),
                None => "+Inf".to_string(),
            };
            let mut l: Vec<(&str, &str)> = labels.to_vec();
            l.push(("le", &le));
            self.sample(&bucket, &l, cum as f64);
        }
        self.sample(&format!("{name}_sum"), labels, h.sum_us as f64 / 1e6);
        self.sample(&format!("{name}_count"), labels, cum as f64);
    }

    /// Renders request counters, bytes and latency of all workers.
    pub fn workers(&mut self, workers: &[Arc<WorkerMetrics>]) {
        self.family(
            "reel_requests_total",
            "counter",
            "Requests answered, by status class and cache result.",
        );
        for result in CacheResult::ALL {
            for class in 0..N_CLASSES {
                let v: u64 =
                    workers.iter().map(|w| w.requests[result as usize][class].load(Relaxed)).sum();
                if v == 0 {
                    continue;
                }
                let cls = if class == 0 { "other".to_string() } else { format!("{class}xx") };
                self.sample(
                    "reel_requests_total",
                    &[("status", &cls), ("cache", result.as_str())],
                    v as f64,
                );
            }
        }
        self.family("reel_bytes_out_total", "counter", "Bytes written to clients.");
        let bytes: u64 = workers.iter().map(|w| w.bytes_out()).sum();
        self.sample("reel_bytes_out_total", &[], bytes as f64);
        self.family(
            "reel_coalesced_waiters",
            "gauge",
            "Requests waiting on another's origin fetch.",
        );
        let waiters: u64 = workers.iter().map(|w| w.coalesced_waiters.load(Relaxed)).sum();
        self.sample("reel_coalesced_waiters", &[], waiters as f64);
        self.family("reel_client_errors_total", "counter", "Malformed or refused client requests.");
        let ce: u64 = workers.iter().map(|w| w.client_errors.load(Relaxed)).sum();
        self.sample("reel_client_errors_total", &[], ce as f64);
        for (name, help, pick) in [
            (
                "reel_request_duration_seconds",
                "Time from request to last byte written.",
                (|w: &WorkerMetrics| w.latency.snapshot())
                    as fn(&WorkerMetrics) -> HistogramSnapshot,
            ),
            ("reel_hit_duration_seconds", "Time to serve cache hits.", |w: &WorkerMetrics| {
                w.hit_latency.snapshot()
            }),
        ] {
            self.family(name, "histogram", help);
            let mut sum = HistogramSnapshot::default();
            for w in workers {
                sum.add(&pick(w));
            }
            self.histogram(name, &[], &sum);
        }
    }

    /// The finished text.
    pub fn finish(self) -> String {
        self.out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_come_from_bucket_bounds() {
        let h = Histogram::default();
        for _ in 0..98 {
            h.record(Duration::from_micros(800));
        }
        h.record(Duration::from_millis(40));
        h.record(Duration::from_secs(60));
        let s = h.snapshot();
        assert_eq!(s.count(), 100);
        assert_eq!(s.quantile_ms(0.5), Some(1.0));
        assert_eq!(s.quantile_ms(0.99), Some(50.0));
        assert_eq!(s.quantile_ms(1.0), Some(10000.0));
        assert_eq!(HistogramSnapshot::default().quantile_ms(0.5), None);
    }

    #[test]
    fn window_subtracts_earlier_snapshot() {
        let h = Histogram::default();
        h.record(Duration::from_millis(3));
        let a = h.snapshot();
        h.record(Duration::from_millis(300));
        let w = h.snapshot().since(&a);
        assert_eq!(w.count(), 1);
        assert_eq!(w.quantile_ms(0.5), Some(500.0));
    }

    #[test]
    fn prometheus_text_sums_workers_and_escapes_labels() {
        let a = Arc::new(WorkerMetrics::default());
        let b = Arc::new(WorkerMetrics::default());
        a.record(200, CacheResult::Hit, 100, Duration::from_millis(1));
        b.record(200, CacheResult::Hit, 50, Duration::from_millis(1));
        b.record(502, CacheResult::Miss, 10, Duration::from_millis(20));
        let mut p = PromWriter::new();
        p.workers(&[a, b]);
        p.sample("x", &[("k", "a\"b\\c")], 1.0);
        let t = p.finish();
        assert!(t.contains("reel_requests_total{status=\"2xx\",cache=\"hit\"} 2\n"), "{t}");
        assert!(t.contains("reel_requests_total{status=\"5xx\",cache=\"miss\"} 1\n"), "{t}");
        assert!(t.contains("reel_bytes_out_total 160\n"));
        assert!(t.contains("reel_request_duration_seconds_count 3\n"));
        assert!(t.contains("reel_hit_duration_seconds_bucket{le=\"0.001\"} 2\n"), "{t}");
        assert!(t.contains("x{k=\"a\\\"b\\\\c\"} 1\n"));
    }
}
