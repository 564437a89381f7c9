//! The health verdict for multi-CDN load balancers: load figures over a sliding window,
//! overload thresholds with hysteresis, and the `/healthz` JSON.
//!
//! A balancer probes every edge about once a second and moves traffic within minutes, so
//! the answer must be honest (draining, store down, overloaded) and must not flap: a
//! threshold trips at `max_*` and clears only once every figure is back under its
//! `resume_*` value. The verdict is computed once a second by the housekeeping sampler
//! ([`crate::sampler`]); a probe only reads the latest pre-rendered answer.

use std::time::Duration;

use serde::Serialize;

/// Overload thresholds (`[health]` in the config). `max_*` trips, `resume_*` clears.
#[derive(Debug, Clone, PartialEq)]
pub struct Thresholds {
    /// Worker-core CPU use, percent of the worker cores, above which the node is overloaded.
    pub max_cpu_percent: f64,
    /// CPU use under which an overloaded node is healthy again.
    pub resume_cpu_percent: f64,
    /// Open client connections (all workers) above which the node is overloaded.
    pub max_connections: u64,
    /// Connections under which an overloaded node is healthy again.
    pub resume_connections: u64,
    /// p99 time to first byte of cache hits over the window above which the node is
    /// overloaded.
    pub max_hit_p99: Duration,
    /// Hit first-byte p99 under which an overloaded node is healthy again.
    pub resume_hit_p99: Duration,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            max_cpu_percent: 90.0,
            resume_cpu_percent: 75.0,
            max_connections: 100_000,
            resume_connections: 80_000,
            max_hit_p99: Duration::from_millis(50),
            resume_hit_p99: Duration::from_millis(20),
        }
    }
}

/// Load over the recent window (10 s), as carried in the health JSON.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct LoadFigures {
    /// Worker threads' CPU use, percent of the worker cores (0..=100).
    pub cpu_percent: f64,
    /// Open client connections now, all workers.
    pub connections: u64,
    /// Requests per second over the window.
    pub requests_per_sec: f64,
    /// Fraction of requests served from cache (hits and stale) over the window.
    pub hit_ratio: f64,
    /// Median total request time over the window (to the last byte written, so it includes
    /// the clients' download time), milliseconds (bucket upper bound). Not part of the verdict.
    pub p50_ms: f64,
    /// 99th percentile total request time over the window, milliseconds (bucket upper
    /// bound). Not part of the verdict.
    pub p99_ms: f64,
    /// 99th percentile time to first byte of cache hits over the window (complete request
    /// head to the response head going out), milliseconds: the latency signal of the verdict.
    pub hit_p99_ms: f64,
    /// 99th percentile total time of cache hits over the window, milliseconds. Not part of
    /// the verdict: a viewer on a slow link makes it long.
    pub hit_total_p99_ms: f64,
    /// Window length the figures cover, seconds.
    pub window_secs: f64,
    /// Fraction of the cgroup's CPU periods over the window in which it ran out of quota
    /// (0 without a quota). Not part of the verdict; a node throttled this way has latency
    /// spikes of up to a period that the CPU figure does not show.
    pub throttled_ratio: f64,
    /// Milliseconds per second the cgroup's threads waited for quota over the window.
    pub throttled_ms_per_sec: f64,
}

/// Why the node should or should not take traffic.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Take traffic.
    Ok,
    /// An operator asked the node to drain (`POST /admin/drain`).
    Draining,
    /// The process got SIGTERM: it serves for `server.shutdown_delay` more so balancers
    /// can move traffic away, then drains and exits.
    Stopping,
    /// The segment store cannot serve.
    StoreUnavailable,
    /// A load threshold tripped and has not cleared yet.
    Overloaded,
}

/// The hysteresis state machine.
#[derive(Debug, Default)]
pub struct Overload {
    tripped: bool,
    reasons: Vec<String>,
}

impl Overload {
    /// Feeds one window of figures; returns whether the node is overloaded now.
    pub fn update(&mut self, t: &Thresholds, f: &LoadFigures) -> bool {
        let hit_p99 = Duration::from_secs_f64(f.hit_p99_ms.max(0.0) / 1000.0);
        let mut over = Vec::new();
        if f.cpu_percent > t.max_cpu_percent {
            over.push(format!("cpu {:.0}% > {:.0}%", f.cpu_percent, t.max_cpu_percent));
        }
        if f.connections > t.max_connections {
            over.push(format!("connections {} > {}", f.connections, t.max_connections));
        }
        if hit_p99 > t.max_hit_p99 {
            over.push(format!("hit first-byte p99 {:.1} ms > {:?}", f.hit_p99_ms, t.max_hit_p99));
        }
        if !over.is_empty() {
            self.tripped = true;
            self.reasons = over;
        } else if self.tripped {
            let mut still = Vec::new();
            if f.cpu_percent >= t.resume_cpu_percent {
                still.push(format!(
                    "cpu {:.0}% >= resume {:.0}%",
                    f.cpu_percent, t.resume_cpu_percent
                ));
            }
            if f.connections >= t.resume_connections {
                still.push(format!(
                    "connections {} >= resume {}",
                    f.connections, t.resume_connections
                ));
            }
            if hit_p99 >= t.resume_hit_p99 {
                still.push(format!(
                    "hit first-byte p99 {:.1} ms >= resume {:?}",
                    f.hit_p99_ms, t.resume_hit_p99
                ));
            }
            if still.is_empty() {
                self.tripped = false;
                self.reasons.clear();
            } else {
                self.reasons = still;
            }
        }
        self.tripped
    }

    /// Why the node is overloaded (empty when it is not).
    pub fn reasons(&self) -> &[String] {
        &self.reasons
    }
}

/// The `/healthz` answer.
#[derive(Debug, Clone, Serialize)]
pub struct Verdict {
    /// The overall status.
    pub status: Status,
    /// Human-readable reasons for a non-ok status.
    pub reasons: Vec<String>,
    /// Number of worker threads.
    pub workers: usize,
    /// reel's version.
    pub version: &'static str,
    /// The load figures.
    pub load: LoadFigures,
    /// What an operator should know that is not part of the verdict (an access-log sink
    /// dropping lines, ...); left out of the JSON when empty.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub details: Vec<String>,
}

impl Verdict {
    /// The same verdict for a process that is stopping: that wins over everything.
    pub fn stopping(mut self) -> Verdict {
        self.status = Status::Stopping;
        self.reasons = vec!["stopping".to_string()];
        self
    }

    /// The HTTP status a balancer should see: 200 to take traffic, 503 otherwise.
    pub fn http_status(&self) -> u16 {
        if self.status == Status::Ok { 200 } else { 503 }
    }

    /// The JSON body.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|_| "{}".to_string())
    }
}

/// What the store says about itself for the verdict.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StoreHealth {
    /// Whether it can serve at all (a disk in service with a usable volume).
    pub ok: bool,
    /// One reason per disk out of service (`store_degraded: …`). Not a 503 on its own:
    /// the node serves from its other disks.
    pub degraded: Vec<String>,
}

impl StoreHealth {
    /// A store that serves, with every disk in service.
    pub fn ok() -> StoreHealth {
        StoreHealth { ok: true, degraded: Vec::new() }
    }
}

/// Combines the inputs into a verdict; draining wins over everything, then the store.
/// Disks out of service are listed among the reasons whatever the status.
pub fn verdict(
    draining: bool,
    store: &StoreHealth,
    overloaded: &Overload,
    workers: usize,
    load: LoadFigures,
) -> Verdict {
    let (status, mut reasons) = if draining {
        (Status::Draining, vec!["draining".to_string()])
    } else if !store.ok {
        (Status::StoreUnavailable, vec!["store unavailable".to_string()])
    } else if overloaded.tripped {
        (Status::Overloaded, overloaded.reasons.clone())
    } else {
        (Status::Ok, Vec::new())
    };
    reasons.extend(store.degraded.iter().cloned());
    Verdict {
        status,
        reasons,
        workers,
        version: env!("CARGO_PKG_VERSION"),
        load,
        details: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fig(cpu: f64, conns: u64, hit_p99: f64) -> LoadFigures {
        LoadFigures {
            cpu_percent: cpu,
            connections: conns,
            hit_p99_ms: hit_p99,
            ..Default::default()
        }
    }

    #[test]
    fn trips_at_max_and_clears_only_under_resume() {
        let t = Thresholds::default();
        let mut o = Overload::default();
        assert!(!o.update(&t, &fig(80.0, 10, 1.0)), "80% is under max 90%");
        assert!(o.update(&t, &fig(95.0, 10, 1.0)));
        assert!(o.reasons()[0].starts_with("cpu 95%"));
        assert!(o.update(&t, &fig(85.0, 10, 1.0)), "85% is above resume 75%: still overloaded");
        assert!(o.update(&t, &fig(76.0, 10, 1.0)));
        assert!(!o.update(&t, &fig(70.0, 10, 1.0)), "under every resume value: clears");
        assert!(o.reasons().is_empty());
    }

    #[test]
    fn each_signal_trips_on_its_own() {
        let t = Thresholds::default();
        assert!(Overload::default().update(&t, &fig(1.0, 200_000, 1.0)));
        assert!(Overload::default().update(&t, &fig(1.0, 1, 60.0)));
        let mut o = Overload::default();
        o.update(&t, &fig(1.0, 1, 60.0));
        assert!(o.update(&t, &fig(1.0, 1, 30.0)), "hit p99 30 ms is above resume 20 ms");
        assert!(!o.update(&t, &fig(1.0, 1, 10.0)));
    }

    #[test]
    fn draining_wins_and_maps_to_503() {
        let o = Overload::default();
        let down = StoreHealth { ok: false, degraded: Vec::new() };
        let v = verdict(true, &down, &o, 2, LoadFigures::default());
        assert_eq!(v.status, Status::Draining);
        assert_eq!(v.http_status(), 503);
        let v = verdict(false, &down, &o, 2, LoadFigures::default());
        assert_eq!(v.status, Status::StoreUnavailable);
        let degraded = StoreHealth { ok: true, degraded: vec!["store_degraded: /d2".into()] };
        let v = verdict(false, &degraded, &o, 2, LoadFigures::default());
        assert_eq!((v.http_status(), v.reasons.clone()), (200, vec!["store_degraded: /d2".into()]));
        let v = verdict(false, &StoreHealth::ok(), &o, 2, LoadFigures::default());
        assert_eq!(v.http_status(), 200);
        let j: serde_json::Value = serde_json::from_str(&v.to_json()).unwrap();
        assert_eq!(j["status"], "ok");
        assert_eq!(j["workers"], 2);
        assert!(j["load"]["cpu_percent"].is_number());
        let s = verdict(true, &StoreHealth::ok(), &o, 2, LoadFigures::default()).stopping();
        assert_eq!((s.status, s.http_status()), (Status::Stopping, 503));
        let j: serde_json::Value = serde_json::from_str(&s.to_json()).unwrap();
        assert_eq!(
            (j["status"].as_str(), j["reasons"][0].as_str()),
            (Some("stopping"), Some("stopping"))
        );
    }
}
