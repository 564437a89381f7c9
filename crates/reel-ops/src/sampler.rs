//! The housekeeping sampler: once a second it reads every worker's counters and thread CPU
//! time, keeps a sliding window of the last [`WINDOW`] seconds, runs the overload
//! hysteresis and publishes a pre-rendered health answer.
//!
//! Workers never compute anything for a probe: `/healthz` loads the published answer
//! through an [`ArcSwap`] (no lock, no allocation beyond cloning an `Arc`), so many
//! balancers probing every second cost next to nothing.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use reel_runtime::cgroup::CpuStat;

use crate::health::{LoadFigures, Overload, Thresholds, Verdict, verdict};
use crate::metrics::{HistogramSnapshot, WorkerMetrics};

/// Length of the sliding window the load figures cover.
pub const WINDOW: Duration = Duration::from_secs(10);

/// A published health answer: status code and JSON body, ready to send.
#[derive(Debug, Clone)]
pub struct HealthAnswer {
    /// 200 or 503.
    pub status: u16,
    /// The JSON body.
    pub body: bytes::Bytes,
    /// The verdict it was rendered from.
    pub verdict: Verdict,
}

/// What the sampler reads each tick besides the worker counters.
pub struct Inputs {
    /// Per-worker counters, in worker order.
    pub workers: Vec<Arc<WorkerMetrics>>,
    /// Kernel thread ids of the worker threads (for their CPU time).
    pub worker_tids: Vec<i32>,
    /// Open client connections now, all workers.
    pub connections: Box<dyn Fn() -> u64 + Send + Sync>,
    /// Whether the store can serve, and its disks out of service.
    pub store: Box<dyn Fn() -> crate::health::StoreHealth + Send + Sync>,
    /// The process cgroup's CPU throttling counters, where there is a cgroup to read.
    pub cpu_stat: Box<dyn Fn() -> Option<CpuStat> + Send + Sync>,
    /// The verdict's details: sentences that do not change it.
    pub details: Box<dyn Fn() -> Vec<String> + Send + Sync>,
    /// Set while a load threshold has tripped (the verdict's `overloaded`), cleared when it
    /// clears: what workers read for CMSD's `du`.
    pub duress: Arc<AtomicBool>,
}

/// State shared between the sampler thread, the workers and the admin listener.
pub struct Health {
    answer: ArcSwap<HealthAnswer>,
    draining: AtomicBool,
    stopping: AtomicBool,
    thresholds: ArcSwap<Thresholds>,
    state: Mutex<SamplerState>,
    inputs: Inputs,
}

#[derive(Default)]
struct SamplerState {
    window: VecDeque<Sample>,
    overload: Overload,
}

#[derive(Clone)]
struct Sample {
    at: Instant,
    cpu_ticks: u64,
    requests: u64,
    cached: u64,
    latency: HistogramSnapshot,
    hit_latency: HistogramSnapshot,
    hit_first_byte: HistogramSnapshot,
    cpu_stat: Option<CpuStat>,
}

impl Health {
    /// Creates the shared state with an initial "ok, no load yet" answer.
    pub fn new(inputs: Inputs, thresholds: Thresholds) -> Arc<Health> {
        let n = inputs.workers.len();
        let v = verdict(
            false,
            &crate::health::StoreHealth::ok(),
            &Overload::default(),
            n,
            LoadFigures::default(),
        );
        let h = Arc::new(Health {
            answer: ArcSwap::from_pointee(render(v)),
            draining: AtomicBool::new(false),
            stopping: AtomicBool::new(false),
            thresholds: ArcSwap::from_pointee(thresholds),
            state: Mutex::new(SamplerState::default()),
            inputs,
        });
        h.tick();
        h
    }

    /// The latest answer (lock-free).
    pub fn answer(&self) -> Arc<HealthAnswer> {
        self.answer.load_full()
    }

    /// Marks the node as draining (or not) and republishes at once.
    pub fn set_draining(&self, on: bool) {
        self.draining.store(on, Ordering::SeqCst);
        self.tick();
    }

    /// Whether the node is draining.
    pub fn draining(&self) -> bool {
        self.draining.load(Ordering::SeqCst)
    }

    /// Marks the process as stopping (SIGTERM; 503 `stopping`, which nothing clears) and
    /// republishes at once.
    pub fn set_stopping(&self) {
        self.stopping.store(true, Ordering::SeqCst);
        self.tick();
    }

    /// Kernel thread ids of the worker threads, in worker order (for per-worker CPU time).
    pub fn worker_tids(&self) -> &[i32] {
        &self.inputs.worker_tids
    }

    /// Replaces the thresholds (config reload).
    pub fn set_thresholds(&self, t: Thresholds) {
        self.thresholds.store(Arc::new(t));
    }

    /// Takes one sample and republishes the answer. Called once a second by
    /// [`Health::spawn_sampler`]; tests call it directly.
    pub fn tick(&self) {
        let now = self.sample();
        let Ok(mut st) = self.state.lock() else { return };
        st.window.push_back(now.clone());
        while st.window.len() > 2
            && now.at.duration_since(st.window[0].at) > WINDOW + Duration::from_millis(500)
        {
            st.window.pop_front();
        }
        let first = st.window[0].clone();
        let figures = self.figures(&first, &now);
        let t = self.thresholds.load();
        let overloaded = st.overload.update(&t, &figures);
        self.inputs.duress.store(overloaded, Ordering::Relaxed);
        let mut v = verdict(
            self.draining(),
            &(self.inputs.store)(),
            &st.overload,
            self.inputs.workers.len(),
            figures,
        );
        if self.stopping.load(Ordering::SeqCst) {
            v = v.stopping();
        }
        v.details = (self.inputs.details)();
        self.answer.store(Arc::new(render(v)));
    }

    /// Runs [`Health::tick`] every second on a named thread until `stop` is set.
    pub fn spawn_sampler(self: &Arc<Self>, stop: Arc<AtomicBool>) -> std::io::Result<()> {
        let h = Arc::clone(self);
        std::thread::Builder::new().name("reel-sampler".into()).spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_secs(1));
                h.tick();
            }
        })?;
        Ok(())
    }

    fn sample(&self) -> Sample {
        let mut s = Sample {
            at: Instant::now(),
            cpu_ticks: self.inputs.worker_tids.iter().map(|t| thread_cpu_ticks(*t)).sum(),
            requests: 0,
            cached: 0,
            latency: HistogramSnapshot::default(),
            hit_latency: HistogramSnapshot::default(),
            hit_first_byte: HistogramSnapshot::default(),
            cpu_stat: (self.inputs.cpu_stat)(),
        };
        for w in &self.inputs.workers {
            s.requests += w.requests_total();
            s.cached += w.requests_from_cache();
            s.latency.add(&w.latency.snapshot());
            s.hit_latency.add(&w.hit_latency.snapshot());
            s.hit_first_byte.add(&w.hit_first_byte.snapshot());
        }
        s
    }

    fn figures(&self, first: &Sample, now: &Sample) -> LoadFigures {
        let secs = now.at.duration_since(first.at).as_secs_f64();
        let n = self.inputs.workers.len().max(1) as f64;
        let ticks = now.cpu_ticks.saturating_sub(first.cpu_ticks) as f64;
        let cpu = if secs > 0.0 { ticks / clock_ticks_per_sec() / secs / n * 100.0 } else { 0.0 };
        let requests = now.requests.saturating_sub(first.requests);
        let cached = now.cached.saturating_sub(first.cached);
        let lat = now.latency.since(&first.latency);
        let hit = now.hit_latency.since(&first.hit_latency);
        let hit_fb = now.hit_first_byte.since(&first.hit_first_byte);
        let (throttled_ratio, throttled_ms) = match (first.cpu_stat, now.cpu_stat) {
            (Some(a), Some(b)) => {
                let (ratio, usec) = b.throttled_since(&a);
                let ms = if secs > 0.0 { usec as f64 / 1000.0 / secs } else { 0.0 };
                (ratio, ms)
            }
            _ => (0.0, 0.0),
        };
        LoadFigures {
            cpu_percent: round1(cpu.min(100.0)),
            connections: (self.inputs.connections)(),
            requests_per_sec: if secs > 0.0 { round1(requests as f64 / secs) } else { 0.0 },
            hit_ratio: if requests > 0 { round3(cached as f64 / requests as f64) } else { 0.0 },
            p50_ms: lat.quantile_ms(0.5).unwrap_or(0.0),
            p99_ms: lat.quantile_ms(0.99).unwrap_or(0.0),
            hit_p99_ms: hit_fb.quantile_ms(0.99).unwrap_or(0.0),
            hit_total_p99_ms: hit.quantile_ms(0.99).unwrap_or(0.0),
            window_secs: round1(secs),
            throttled_ratio: round3(throttled_ratio),
            throttled_ms_per_sec: round1(throttled_ms),
        }
    }
}

fn render(v: Verdict) -> HealthAnswer {
    let mut body = v.to_json();
    body.push('\n');
    HealthAnswer { status: v.http_status(), body: body.into(), verdict: v }
}

fn round1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// Clock ticks per second, the unit of [`thread_cpu_ticks`].
pub fn clock_ticks_per_sec() -> f64 {
    crate::sys::clock_ticks_per_sec()
}

/// utime + stime of one thread of this process, in clock ticks (0 if it is gone).
pub fn thread_cpu_ticks(tid: i32) -> u64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")) else {
        return 0;
    };
    // Fields after the parenthesised command name, which may itself contain spaces.
    let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else { return 0 };
    let f: Vec<&str> = rest.split_whitespace().collect();
    // rest starts at field 3 (state); utime and stime are fields 14 and 15.
    let get = |i: usize| f.get(i - 3).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    get(14) + get(15)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::Outcomes;
    use std::sync::atomic::AtomicU64;

    const HIT: usize = 0;
    const MISS: usize = 1;
    static OUTCOMES: Outcomes = Outcomes { labels: &["hit", "miss"], hit: HIT, from_cache: &[HIT] };

    fn inputs(w: Vec<Arc<WorkerMetrics>>, conns: Arc<AtomicU64>) -> Inputs {
        Inputs {
            workers: w,
            worker_tids: vec![],
            connections: Box::new(move || conns.load(Ordering::Relaxed)),
            store: Box::new(crate::health::StoreHealth::ok),
            cpu_stat: Box::new(|| None),
            details: Box::new(Vec::new),
            duress: Arc::default(),
        }
    }

    #[test]
    fn duress_follows_the_overload_hysteresis() {
        let w = Arc::new(WorkerMetrics::new(&OUTCOMES));
        let conns = Arc::new(AtomicU64::new(5));
        let duress = Arc::new(AtomicBool::new(false));
        let t = Thresholds { max_connections: 100, resume_connections: 50, ..Default::default() };
        let h = Health::new(Inputs { duress: duress.clone(), ..inputs(vec![w], conns.clone()) }, t);
        assert!(!duress.load(Ordering::Relaxed));
        conns.store(150, Ordering::Relaxed);
        h.tick();
        assert!(duress.load(Ordering::Relaxed));
        conns.store(70, Ordering::Relaxed);
        h.tick();
        assert!(duress.load(Ordering::Relaxed), "70 is above resume 50");
        conns.store(10, Ordering::Relaxed);
        h.tick();
        assert!(!duress.load(Ordering::Relaxed));
    }

    #[test]
    fn answer_reflects_drain_and_overload_with_hysteresis() {
        let w = Arc::new(WorkerMetrics::new(&OUTCOMES));
        let conns = Arc::new(AtomicU64::new(5));
        let t = Thresholds { max_connections: 100, resume_connections: 50, ..Default::default() };
        let h = Health::new(inputs(vec![w.clone()], conns.clone()), t);
        assert_eq!(h.answer().status, 200);
        h.set_draining(true);
        assert_eq!(h.answer().status, 503);
        assert!(std::str::from_utf8(&h.answer().body).unwrap().contains("\"draining\""));
        h.set_draining(false);
        assert_eq!(h.answer().status, 200);
        conns.store(150, Ordering::Relaxed);
        h.tick();
        assert_eq!(h.answer().status, 503);
        conns.store(70, Ordering::Relaxed);
        h.tick();
        assert_eq!(h.answer().status, 503, "70 is above resume 50");
        conns.store(10, Ordering::Relaxed);
        h.tick();
        assert_eq!(h.answer().status, 200);
    }

    #[test]
    fn figures_count_requests_and_hit_ratio_over_the_window() {
        let w = Arc::new(WorkerMetrics::new(&OUTCOMES));
        let h = Health::new(
            inputs(vec![w.clone()], Arc::new(AtomicU64::new(0))),
            Thresholds::default(),
        );
        let ms = Duration::from_millis;
        for _ in 0..3 {
            w.record(200, HIT, 10, Some(ms(1)), ms(1));
        }
        w.record(200, MISS, 10, Some(ms(30)), ms(40));
        std::thread::sleep(Duration::from_millis(20));
        h.tick();
        let l = &h.answer().verdict.load;
        assert_eq!(l.hit_ratio, 0.75);
        assert!(l.requests_per_sec > 0.0);
        assert_eq!(l.p99_ms, 50.0);
        assert_eq!(l.hit_p99_ms, 1.0);
    }

    #[test]
    fn a_slow_viewer_of_a_hit_is_not_overload() {
        let w = Arc::new(WorkerMetrics::new(&OUTCOMES));
        let h = Health::new(
            inputs(vec![w.clone()], Arc::new(AtomicU64::new(0))),
            Thresholds::default(),
        );
        // The head left after 1 ms; the viewer took 10 s to receive the body.
        for _ in 0..3 {
            w.record(200, HIT, 16 << 20, Some(Duration::from_millis(1)), Duration::from_secs(10));
        }
        h.tick();
        let a = h.answer();
        assert_eq!(a.status, 200, "{:?}", a.verdict);
        assert_eq!(a.verdict.load.hit_p99_ms, 1.0);
        assert_eq!(a.verdict.load.hit_total_p99_ms, 10_000.0);
        // A hit whose head took 60 ms is overload.
        w.record(200, HIT, 10, Some(Duration::from_millis(60)), Duration::from_millis(60));
        h.tick();
        assert_eq!(h.answer().status, 503);
    }

    #[test]
    fn own_thread_cpu_time_is_readable() {
        let tid = crate::sys::gettid();
        let mut x = 0u64;
        for i in 0..20_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        std::hint::black_box(x);
        assert!(thread_cpu_ticks(tid) > 0);
        assert_eq!(thread_cpu_ticks(-1), 0);
    }
}
