//! The one place reel's metrics are written: the latency histogram (its bucket bounds,
//! its lock-free recording and its snapshots) and the Prometheus text exposition writer
//! ([`PromWriter`]) that renders counters, gauges and histograms for `GET /metrics`.
//!
//! Crates that export metrics keep their own counters on their hot paths (relaxed atomics
//! written by one worker) and render them through this writer, so the text format, label
//! escaping and bucket bounds cannot drift between them. It depends on no other reel crate.
#![forbid(unsafe_code)]

mod histogram;
mod prom;

pub use histogram::{Histogram, HistogramSnapshot, LATENCY_BUCKETS_MS, N_BUCKETS};
pub use prom::{Kind, PromWriter, Value};
