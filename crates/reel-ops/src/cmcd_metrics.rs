//! What players report through CMCD, counted per site: requests that carried CMCD,
//! buffer starvation (`bs`), startup requests (`su`), malformed data, and histograms of
//! the requested bitrate (`br`) and measured throughput (`mtp`) in kbps.
//!
//! The `site` label is bounded by the config: one series set per site name ever
//! configured in the process's life (a site a reload removes keeps its last values), and
//! nothing from the request (no session ids). Each site's counters have one slot per
//! worker, written only by that worker with relaxed atomics; the registry's mutex is
//! taken when a worker builds a config generation and when `/metrics` is rendered, never
//! per request.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

use reel_metrics::{Kind, PromWriter};

use crate::cmcd::Cmcd;

/// Upper bounds (inclusive) of the bitrate buckets, in kbps; a `+Inf` bucket follows.
/// From audio-only renditions to 4K.
pub const RATE_BUCKETS_KBPS: [u64; 12] =
    [200, 400, 800, 1200, 2000, 3000, 4500, 6000, 8000, 12000, 20000, 40000];

const N_RATE: usize = RATE_BUCKETS_KBPS.len() + 1;

/// A kbps histogram (one writer).
#[derive(Debug, Default)]
struct Rates {
    counts: [AtomicU64; N_RATE],
    sum: AtomicU64,
}

impl Rates {
    fn record(&self, kbps: i64) {
        let v = u64::try_from(kbps).unwrap_or(0);
        let i = RATE_BUCKETS_KBPS.iter().position(|&b| v <= b).unwrap_or(RATE_BUCKETS_KBPS.len());
        if let Some(c) = self.counts.get(i) {
            c.fetch_add(1, Relaxed);
        }
        self.sum.fetch_add(v, Relaxed);
    }
}

/// One worker's counters of one site, on cache lines of their own.
#[derive(Debug, Default)]
#[repr(align(128))]
struct Slot {
    requests: AtomicU64,
    starvation: AtomicU64,
    startup: AtomicU64,
    malformed: AtomicU64,
    bitrate: Rates,
    throughput: Rates,
}

/// One site's counters, a slot per worker.
#[derive(Debug)]
pub struct SiteCmcd {
    slots: Box<[Slot]>,
}

impl SiteCmcd {
    /// Counts one request's CMCD on worker `worker`'s slot (an index past the workers
    /// counts nothing).
    pub fn record(&self, worker: usize, c: &Cmcd) {
        let Some(s) = self.slots.get(worker) else { return };
        s.requests.fetch_add(1, Relaxed);
        if c.flag("bs") {
            s.starvation.fetch_add(1, Relaxed);
        }
        if c.flag("su") {
            s.startup.fetch_add(1, Relaxed);
        }
        if c.malformed {
            s.malformed.fetch_add(1, Relaxed);
        }
        if let Some(br) = c.int("br") {
            s.bitrate.record(br);
        }
        if let Some(mtp) = c.int("mtp") {
            s.throughput.record(mtp);
        }
    }

    fn sum(&self, f: impl Fn(&Slot) -> &AtomicU64) -> u64 {
        self.slots.iter().map(|s| f(s).load(Relaxed)).sum()
    }

    fn rates(&self, f: impl Fn(&Slot) -> &Rates) -> ([u64; N_RATE], u64) {
        let mut counts = [0; N_RATE];
        let mut sum = 0;
        for s in self.slots.iter() {
            let r = f(s);
            for (a, b) in counts.iter_mut().zip(&r.counts) {
                *a += b.load(Relaxed);
            }
            sum += r.sum.load(Relaxed);
        }
        (counts, sum)
    }
}

/// Every site's counters, by site name.
#[derive(Debug)]
pub struct CmcdMetrics {
    workers: usize,
    sites: Mutex<Vec<(String, Arc<SiteCmcd>)>>,
}

impl CmcdMetrics {
    /// Counters for `workers` workers.
    pub fn new(workers: usize) -> CmcdMetrics {
        CmcdMetrics { workers: workers.max(1), sites: Mutex::new(Vec::new()) }
    }

    /// The counters of the site named `name`, made on first use (when a worker builds a
    /// config generation).
    pub fn site(&self, name: &str) -> Arc<SiteCmcd> {
        let mut sites = self.sites.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((_, s)) = sites.iter().find(|(n, _)| n == name) {
            return s.clone();
        }
        let slots = (0..self.workers).map(|_| Slot::default()).collect();
        let s = Arc::new(SiteCmcd { slots });
        sites.push((name.to_owned(), s.clone()));
        s
    }

    /// Writes `reel_cmcd_requests_total`, `reel_cmcd_buffer_starvation_total`,
    /// `reel_cmcd_startup_total`, `reel_cmcd_malformed_total` and the histograms
    /// `reel_cmcd_requested_bitrate_kbps`, `reel_cmcd_measured_throughput_kbps`, each by
    /// `site`.
    pub fn render_prometheus(&self, p: &mut PromWriter) {
        let sites: Vec<(String, Arc<SiteCmcd>)> =
            self.sites.lock().unwrap_or_else(|e| e.into_inner()).clone();
        type Pick = fn(&Slot) -> &AtomicU64;
        let counters: [(&str, &str, Pick); 4] = [
            ("reel_cmcd_requests_total", "Requests that carried CMCD (CTA-5004), by site.", |s| {
                &s.requests
            }),
            (
                "reel_cmcd_buffer_starvation_total",
                "CMCD requests reporting buffer starvation (bs), by site.",
                |s| &s.starvation,
            ),
            (
                "reel_cmcd_startup_total",
                "CMCD requests made at startup, seek or recovery (su), by site.",
                |s| &s.startup,
            ),
            (
                "reel_cmcd_malformed_total",
                "Requests whose CMCD was malformed (served all the same), by site.",
                |s| &s.malformed,
            ),
        ];
        for (name, help, pick) in counters {
            p.family(name, Kind::Counter, help);
            for (site, c) in &sites {
                p.sample(name, &[("site", site)], c.sum(pick));
            }
        }
        type PickRates = fn(&Slot) -> &Rates;
        let histograms: [(&str, &str, PickRates); 2] = [
            (
                "reel_cmcd_requested_bitrate_kbps",
                "Encoded bitrate of the object requested (CMCD br), kbps, by site.",
                |s| &s.bitrate,
            ),
            (
                "reel_cmcd_measured_throughput_kbps",
                "Throughput the player measured (CMCD mtp), kbps, by site.",
                |s| &s.throughput,
            ),
        ];
        for (name, help, pick) in histograms {
            p.family(name, Kind::Histogram, help);
            let bucket = format!("{name}_bucket");
            for (site, c) in &sites {
                let (counts, sum) = c.rates(pick);
                let mut acc = 0;
                for (i, n) in counts.iter().enumerate() {
                    acc += n;
                    let le = RATE_BUCKETS_KBPS.get(i).map_or("+Inf".to_owned(), u64::to_string);
                    p.sample(&bucket, &[("site", site), ("le", &le)], acc);
                }
                p.sample(&format!("{name}_sum"), &[("site", site)], sum);
                p.sample(&format!("{name}_count"), &[("site", site)], acc);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sites_are_counted_apart_and_workers_summed() {
        let m = CmcdMetrics::new(2);
        let a = m.site("live.example.com");
        assert!(Arc::ptr_eq(&a, &m.site("live.example.com")), "one set per name");
        let b = m.site("vod.example.com");
        let mut c = Cmcd::default();
        c.add_field(b"bs,su,br=3200,mtp=25000");
        a.record(0, &c);
        a.record(1, &c);
        a.record(7, &c);
        let mut plain = Cmcd::default();
        plain.add_field(b"br=100000,sid=\"x\"");
        b.record(0, &plain);
        let mut p = PromWriter::new();
        m.render_prometheus(&mut p);
        let t = p.finish();
        let has = |l: &str| assert!(t.contains(l), "{l} in\n{t}");
        has("reel_cmcd_requests_total{site=\"live.example.com\"} 2\n");
        has("reel_cmcd_buffer_starvation_total{site=\"live.example.com\"} 2\n");
        has("reel_cmcd_startup_total{site=\"vod.example.com\"} 0\n");
        has("reel_cmcd_requested_bitrate_kbps_bucket{site=\"live.example.com\",le=\"3000\"} 0\n");
        has("reel_cmcd_requested_bitrate_kbps_bucket{site=\"live.example.com\",le=\"4500\"} 2\n");
        has("reel_cmcd_requested_bitrate_kbps_bucket{site=\"vod.example.com\",le=\"+Inf\"} 1\n");
        has("reel_cmcd_requested_bitrate_kbps_sum{site=\"live.example.com\"} 6400\n");
        has("reel_cmcd_measured_throughput_kbps_count{site=\"live.example.com\"} 2\n");
        has("reel_cmcd_measured_throughput_kbps_count{site=\"vod.example.com\"} 0\n");
        assert!(!t.contains("sid"), "no session ids");
    }
}
