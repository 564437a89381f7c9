//! Fixed-bucket latency histograms: one bucket layout for every latency reel exports
//! (client requests, cache hits, origin time to first byte), recorded with relaxed atomics
//! by a single writer and read by snapshot.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use serde::ser::SerializeStruct;
use serde::{Serialize, Serializer};

/// Upper bounds (inclusive), in milliseconds, of the latency buckets; a `+Inf` bucket
/// follows. From sub-millisecond page-cache hits to ten-second origin stalls.
pub const LATENCY_BUCKETS_MS: [f64; 14] =
    [0.5, 1.0, 2.5, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0, 1000.0, 2500.0, 5000.0, 10000.0];

/// Number of buckets including `+Inf`.
pub const N_BUCKETS: usize = LATENCY_BUCKETS_MS.len() + 1;

/// A latency histogram of relaxed atomics (one writer, many readers).
#[derive(Debug, Default)]
pub struct Histogram {
    buckets: [AtomicU64; N_BUCKETS],
    sum_us: AtomicU64,
}

impl Histogram {
    /// Records one observation in the first bucket whose bound is at least `d`.
    pub fn record(&self, d: Duration) {
        let ms = d.as_secs_f64() * 1000.0;
        let i =
            LATENCY_BUCKETS_MS.iter().position(|&b| ms <= b).unwrap_or(LATENCY_BUCKETS_MS.len());
        self.buckets[i].fetch_add(1, Relaxed);
        self.sum_us.fetch_add(u64::try_from(d.as_micros()).unwrap_or(u64::MAX), Relaxed);
    }

    /// A copy of the per-bucket counts (not cumulative) and the sum.
    pub fn snapshot(&self) -> HistogramSnapshot {
        HistogramSnapshot {
            counts: std::array::from_fn(|i| self.buckets[i].load(Relaxed)),
            sum_us: self.sum_us.load(Relaxed),
        }
    }
}

/// Point-in-time histogram counts; add several to merge, subtract two to get a window.
///
/// Serializes (for `/status`) as `{"bounds_ms": [...], "counts": [...], "sum_seconds": x}`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HistogramSnapshot {
    /// Per-bucket counts, not cumulative: `counts[i]` for `LATENCY_BUCKETS_MS[i]`, the last
    /// one for `+Inf`.
    pub counts: [u64; N_BUCKETS],
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

    /// Cumulative counts, as Prometheus `le` buckets expect; the last one (`+Inf`) is the
    /// total.
    pub fn cumulative(&self) -> [u64; N_BUCKETS] {
        let mut acc = 0;
        self.counts.map(|c| {
            acc += c;
            acc
        })
    }

    /// Sum of all observations in seconds (Prometheus `_sum`).
    pub fn sum_seconds(&self) -> f64 {
        self.sum_us as f64 / 1e6
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

impl Serialize for HistogramSnapshot {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut st = s.serialize_struct("HistogramSnapshot", 3)?;
        st.serialize_field("bounds_ms", &LATENCY_BUCKETS_MS)?;
        st.serialize_field("counts", &self.counts)?;
        st.serialize_field("sum_seconds", &self.sum_seconds())?;
        st.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_are_inclusive_and_not_truncated() {
        let h = Histogram::default();
        h.record(Duration::from_micros(500));
        h.record(Duration::from_micros(501));
        h.record(Duration::from_micros(5_000));
        // 5.5 ms is above the 5 ms bound, whatever whole-millisecond rounding would say.
        h.record(Duration::from_micros(5_500));
        h.record(Duration::from_secs(60));
        let s = h.snapshot();
        assert_eq!(s.counts[0], 1, "0.5 ms is in le=0.5ms");
        assert_eq!(s.counts[1], 1, "0.501 ms is in le=1ms");
        assert_eq!(s.counts[3], 1, "5 ms is in le=5ms");
        assert_eq!(s.counts[4], 1, "5.5 ms is in le=10ms");
        assert_eq!(s.counts[N_BUCKETS - 1], 1, "60 s is in +Inf");
        assert_eq!(s.cumulative()[N_BUCKETS - 1], 5);
        assert_eq!(s.sum_us, 500 + 501 + 5_000 + 5_500 + 60_000_000);
    }

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
        let mut both = a;
        both.add(&w);
        assert_eq!(both, h.snapshot());
    }

    #[test]
    fn serializes_with_bounds_and_seconds() {
        let h = Histogram::default();
        h.record(Duration::from_millis(20));
        let v = serde_json::to_value(h.snapshot()).unwrap();
        assert_eq!(v["bounds_ms"][0], 0.5);
        assert_eq!(v["bounds_ms"].as_array().unwrap().len(), LATENCY_BUCKETS_MS.len());
        assert_eq!(v["counts"][5], 1);
        assert_eq!(v["sum_seconds"], 0.02);
    }
}
