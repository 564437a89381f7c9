//! Operations: the pieces ops rely on to run reel for months.
//!
//! - [`metrics`]: per-worker request counters and latency histograms, rendered through the
//!   shared Prometheus writer of `reel-metrics`;
//! - [`sites`]: per-site request, hit and byte counters under a bounded `site` label;
//! - [`health`] and [`sampler`]: load figures, overload hysteresis, the `/healthz` answer;
//! - [`access_log`]: per-worker buffered access log with a non-blocking writer thread;
//! - [`notify`]: systemd readiness notifications;
//! - [`activation`]: descriptors inherited at exec (socket activation, upgrades).
#![deny(unsafe_code)]

pub mod access_log;
pub mod activation;
pub mod health;
pub mod metrics;
pub mod notify;
pub mod sampler;
pub mod sites;
#[allow(unsafe_code)]
mod sys;
