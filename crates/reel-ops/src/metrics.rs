//! Per-worker request counters and latency histograms, rendered through the shared
//! Prometheus writer of `reel-metrics` (re-exported here).
//!
//! Each worker owns one [`WorkerMetrics`] and is its only writer: counters are relaxed
//! atomics on memory no other core writes, so recording a request costs a few uncontended
//! increments and never takes a lock. Readers (the admin listener, the health sampler) sum
//! the workers' values when asked.
//!
//! Requests are counted by status class and by outcome (the `cache` label). The outcomes
//! belong to the cache, which hands its table ([`Outcomes`]) to [`WorkerMetrics::new`];
//! ops knows them only as indexes and labels.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use reel_access::DenyReason;

pub use reel_metrics::{Histogram, HistogramSnapshot, Kind, LATENCY_BUCKETS_MS, PromWriter};

/// The outcomes requests are counted by, supplied by the cache: the values of the `cache`
/// label, in index order.
#[derive(Debug)]
pub struct Outcomes {
    /// Label of each outcome; a request is recorded with an index into this list.
    pub labels: &'static [&'static str],
    /// The outcome whose latency feeds `reel_hit_duration_seconds` (and the health hit p99).
    pub hit: usize,
    /// The outcomes that count as served from the cache in the health hit ratio.
    pub from_cache: &'static [usize],
}

/// The protocol a request came over, for the dashboard's requests by protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// HTTP/1.x (plain or TLS).
    Http1,
    /// HTTP/2.
    Http2,
    /// HTTP/3.
    Http3,
}

impl Protocol {
    /// Every protocol, in index order.
    pub const ALL: [Protocol; 3] = [Protocol::Http1, Protocol::Http2, Protocol::Http3];

    /// The label used in `/status/history`.
    pub fn label(self) -> &'static str {
        match self {
            Protocol::Http1 => "h1",
            Protocol::Http2 => "h2",
            Protocol::Http3 => "h3",
        }
    }
}

/// Status classes 1xx..5xx, index 0 for anything else.
const N_CLASSES: usize = 6;

/// One worker's counters. Shared as `Arc` so the admin thread can read them.
#[derive(Debug)]
pub struct WorkerMetrics {
    outcomes: &'static Outcomes,
    /// One row per outcome, one column per status class.
    requests: Box<[[AtomicU64; N_CLASSES]]>,
    bytes_out: AtomicU64,
    /// Requests by protocol, indexed by [`Protocol`].
    protocols: [AtomicU64; Protocol::ALL.len()],
    /// Latency of every request, complete request head to last byte written (includes the
    /// time the client takes to receive the body).
    pub latency: Histogram,
    /// The same, cache hits only.
    pub hit_latency: Histogram,
    /// Time to first byte of every request: complete request head to the response head
    /// going out (what the server took, whatever the client's link).
    pub first_byte: Histogram,
    /// The same, cache hits only (the performance-health signal).
    pub hit_first_byte: Histogram,
    /// Requests that wait on another request's origin fetch right now.
    pub coalesced_waiters: AtomicU64,
    /// Client-side protocol errors answered 4xx by the codec.
    pub client_errors: AtomicU64,
    /// LL-HLS blocking requests answered 504 because their media did not appear within
    /// `blocking_timeout`.
    pub blocking_timeouts: AtomicU64,
    /// Requests refused by the site's access rules, indexed by [`DenyReason`].
    denied: [AtomicU64; DenyReason::ALL.len()],
    /// Playlist requests (HLS playlists, DASH manifests), one counter per outcome: also
    /// counted in `requests`, so segments are the difference.
    playlists: Box<[AtomicU64]>,
    /// Requests, hits and bytes by site (`reel_site_*`), written through the worker's
    /// [`crate::sites::SiteView`].
    pub sites: crate::sites::WorkerSites,
}

impl WorkerMetrics {
    /// Counters for requests whose outcomes are `outcomes`.
    pub fn new(outcomes: &'static Outcomes) -> WorkerMetrics {
        WorkerMetrics {
            outcomes,
            requests: outcomes.labels.iter().map(|_| Default::default()).collect(),
            bytes_out: AtomicU64::new(0),
            protocols: Default::default(),
            latency: Histogram::default(),
            hit_latency: Histogram::default(),
            first_byte: Histogram::default(),
            hit_first_byte: Histogram::default(),
            coalesced_waiters: AtomicU64::new(0),
            client_errors: AtomicU64::new(0),
            blocking_timeouts: AtomicU64::new(0),
            denied: Default::default(),
            playlists: outcomes.labels.iter().map(|_| AtomicU64::new(0)).collect(),
            sites: crate::sites::WorkerSites::default(),
        }
    }

    /// Counts a request [`WorkerMetrics::record`] counted as a playlist too (one relaxed
    /// increment; nothing for other requests).
    pub fn record_playlist(&self, outcome: usize) {
        if let Some(c) = self.playlists.get(outcome) {
            c.fetch_add(1, Relaxed);
        }
    }

    /// Playlist requests so far with this outcome.
    pub fn playlists_with(&self, outcome: usize) -> u64 {
        self.playlists.get(outcome).map_or(0, |c| c.load(Relaxed))
    }

    /// Playlist requests so far.
    pub fn playlists_total(&self) -> u64 {
        self.playlists.iter().map(|c| c.load(Relaxed)).sum()
    }

    /// Playlist requests so far served from the cache ([`Outcomes::from_cache`]).
    pub fn playlists_from_cache(&self) -> u64 {
        self.outcomes.from_cache.iter().map(|&o| self.playlists_with(o)).sum()
    }

    /// Counts one request refused by the site's access rules.
    pub fn record_denied(&self, reason: DenyReason) {
        self.denied[reason as usize].fetch_add(1, Relaxed);
    }

    /// Requests refused so far for this reason.
    pub fn denied(&self, reason: DenyReason) -> u64 {
        self.denied[reason as usize].load(Relaxed)
    }

    /// Records one finished request; `outcome` indexes [`Outcomes::labels`] (an index
    /// outside it counts bytes and latency but no request). `first_byte` is the time to the
    /// response head (`None` when no response was written), `took` the total.
    pub fn record(
        &self,
        status: u16,
        outcome: usize,
        bytes: u64,
        first_byte: Option<Duration>,
        took: Duration,
    ) {
        let class = match status / 100 {
            c @ 1..=5 => c as usize,
            _ => 0,
        };
        if let Some(row) = self.requests.get(outcome) {
            row[class].fetch_add(1, Relaxed);
        }
        self.bytes_out.fetch_add(bytes, Relaxed);
        self.latency.record(took);
        let hit = outcome == self.outcomes.hit;
        if hit {
            self.hit_latency.record(took);
        }
        if let Some(fb) = first_byte {
            self.first_byte.record(fb);
            if hit {
                self.hit_first_byte.record(fb);
            }
        }
    }

    /// Counts one request under its protocol (one relaxed increment on this worker's own
    /// counter, like [`WorkerMetrics::record`]).
    pub fn record_protocol(&self, p: Protocol) {
        self.protocols[p as usize].fetch_add(1, Relaxed);
    }

    /// Requests so far over this protocol.
    pub fn requests_over(&self, p: Protocol) -> u64 {
        self.protocols[p as usize].load(Relaxed)
    }

    /// Requests so far with this outcome, over all statuses.
    pub fn requests_with(&self, outcome: usize) -> u64 {
        self.requests.get(outcome).map_or(0, |row| row.iter().map(|c| c.load(Relaxed)).sum())
    }

    /// Whether `outcome` counts as served from the cache ([`Outcomes::from_cache`]).
    pub fn is_from_cache(&self, outcome: usize) -> bool {
        self.outcomes.from_cache.contains(&outcome)
    }

    /// Requests so far served from the cache ([`Outcomes::from_cache`]).
    pub fn requests_from_cache(&self) -> u64 {
        self.outcomes.from_cache.iter().map(|&o| self.requests_with(o)).sum()
    }

    /// All requests so far.
    pub fn requests_total(&self) -> u64 {
        (0..self.requests.len()).map(|o| self.requests_with(o)).sum()
    }

    /// Body and header bytes written so far.
    pub fn bytes_out(&self) -> u64 {
        self.bytes_out.load(Relaxed)
    }
}

/// Renders the request counters, bytes and latency of all workers (summed):
/// `reel_requests_total{status,cache}`, `reel_bytes_out_total`, `reel_coalesced_waiters`,
/// `reel_client_errors_total`, `reel_blocking_timeouts_total`, `reel_denied_total{reason}`,
/// `reel_playlist_requests_total{cache}`, `reel_request_duration_seconds`,
/// `reel_hit_duration_seconds`, `reel_first_byte_seconds`, `reel_hit_first_byte_seconds`.
pub fn render_workers(p: &mut PromWriter, workers: &[Arc<WorkerMetrics>]) {
    p.family(
        "reel_requests_total",
        Kind::Counter,
        "Requests answered, by status class and cache result.",
    );
    if let Some(outcomes) = workers.first().map(|w| w.outcomes) {
        for (outcome, label) in outcomes.labels.iter().enumerate() {
            for class in 0..N_CLASSES {
                let v: u64 = workers
                    .iter()
                    .filter_map(|w| w.requests.get(outcome))
                    .map(|row| row[class].load(Relaxed))
                    .sum();
                if v == 0 {
                    continue;
                }
                let cls = if class == 0 { "other".to_string() } else { format!("{class}xx") };
                p.sample("reel_requests_total", &[("status", &cls), ("cache", label)], v);
            }
        }
    }
    let sum = |f: fn(&WorkerMetrics) -> u64| workers.iter().map(|w| f(w)).sum::<u64>();
    p.single(
        "reel_bytes_out_total",
        Kind::Counter,
        "Bytes written to clients.",
        sum(WorkerMetrics::bytes_out),
    );
    p.single(
        "reel_coalesced_waiters",
        Kind::Gauge,
        "Requests waiting on another's origin fetch.",
        sum(|w| w.coalesced_waiters.load(Relaxed)),
    );
    p.single(
        "reel_client_errors_total",
        Kind::Counter,
        "Malformed or refused client requests.",
        sum(|w| w.client_errors.load(Relaxed)),
    );
    p.single(
        "reel_blocking_timeouts_total",
        Kind::Counter,
        "LL-HLS blocking requests answered 504: their media did not appear within blocking_timeout.",
        sum(|w| w.blocking_timeouts.load(Relaxed)),
    );
    p.family(
        "reel_denied_total",
        Kind::Counter,
        "Requests refused by a site's access rules (token, address, country, rate), by reason.",
    );
    for reason in DenyReason::ALL {
        let v: u64 = workers.iter().map(|w| w.denied(reason)).sum();
        p.sample("reel_denied_total", &[("reason", reason.as_str())], v);
    }
    p.family(
        "reel_playlist_requests_total",
        Kind::Counter,
        "Playlist requests (HLS .m3u8, DASH .mpd, blocking reloads too), by cache result; also in reel_requests_total.",
    );
    if let Some(outcomes) = workers.first().map(|w| w.outcomes) {
        for (outcome, label) in outcomes.labels.iter().enumerate() {
            let v: u64 = workers.iter().map(|w| w.playlists_with(outcome)).sum();
            if v > 0 {
                p.sample("reel_playlist_requests_total", &[("cache", label)], v);
            }
        }
    }
    type Pick = fn(&WorkerMetrics) -> HistogramSnapshot;
    let histograms: [(&str, &str, Pick); 4] = [
        (
            "reel_request_duration_seconds",
            "Time from request to last byte written (includes the client's download time).",
            |w| w.latency.snapshot(),
        ),
        ("reel_hit_duration_seconds", "The same, cache hits only.", |w| w.hit_latency.snapshot()),
        ("reel_first_byte_seconds", "Time from request to the response head going out.", |w| {
            w.first_byte.snapshot()
        }),
        ("reel_hit_first_byte_seconds", "The same, cache hits only.", |w| {
            w.hit_first_byte.snapshot()
        }),
    ];
    for (name, help, pick) in histograms {
        p.family(name, Kind::Histogram, help);
        let mut total = HistogramSnapshot::default();
        for w in workers {
            total.add(&pick(w));
        }
        p.histogram(name, &[], &total);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    static OUTCOMES: Outcomes =
        Outcomes { labels: &["hit", "miss", "stale"], hit: 0, from_cache: &[0, 2] };

    #[test]
    fn prometheus_text_sums_workers() {
        let a = Arc::new(WorkerMetrics::new(&OUTCOMES));
        let b = Arc::new(WorkerMetrics::new(&OUTCOMES));
        let ms = Duration::from_millis;
        a.record(200, 0, 100, Some(ms(1)), ms(1));
        b.record(200, 0, 50, Some(ms(1)), ms(3000));
        b.record(502, 1, 10, Some(ms(20)), ms(20));
        b.record(0, 2, 0, None, ms(20));
        let mut p = PromWriter::new();
        render_workers(&mut p, &[a.clone(), b.clone()]);
        let t = p.finish();
        assert!(t.contains("reel_requests_total{status=\"2xx\",cache=\"hit\"} 2\n"), "{t}");
        assert!(t.contains("reel_requests_total{status=\"5xx\",cache=\"miss\"} 1\n"), "{t}");
        assert!(t.contains("reel_requests_total{status=\"other\",cache=\"stale\"} 1\n"), "{t}");
        assert!(!t.contains("cache=\"miss\"} 0"), "zero series are left out: {t}");
        assert!(t.contains("reel_bytes_out_total 160\n"));
        assert!(t.contains("reel_request_duration_seconds_count 4\n"));
        assert!(t.contains("reel_hit_duration_seconds_bucket{le=\"0.001\"} 1\n"), "{t}");
        assert!(t.contains("reel_hit_duration_seconds_count 2\n"), "{t}");
        // The slow hit's head left after 1 ms: time to first byte does not see the download.
        assert!(t.contains("reel_hit_first_byte_seconds_bucket{le=\"0.001\"} 2\n"), "{t}");
        assert!(t.contains("reel_first_byte_seconds_count 3\n"), "nothing written: {t}");
        assert_eq!(b.requests_total(), 3);
        assert_eq!(b.requests_from_cache(), 2);
    }

    #[test]
    fn playlists_are_counted_apart_by_outcome() {
        let w = Arc::new(WorkerMetrics::new(&OUTCOMES));
        w.record_playlist(0);
        w.record_playlist(1);
        w.record_playlist(1);
        w.record_playlist(2);
        w.record_playlist(99);
        assert_eq!(w.playlists_total(), 4);
        assert_eq!(w.playlists_from_cache(), 2, "hit and stale");
        let mut p = PromWriter::new();
        render_workers(&mut p, &[w.clone(), w]);
        let t = p.finish();
        assert!(t.contains("# TYPE reel_playlist_requests_total counter\n"), "{t}");
        assert!(t.contains("reel_playlist_requests_total{cache=\"miss\"} 4\n"), "{t}");
        assert!(t.contains("reel_playlist_requests_total{cache=\"hit\"} 2\n"), "{t}");
    }

    #[test]
    fn an_unknown_outcome_counts_no_request() {
        let w = WorkerMetrics::new(&OUTCOMES);
        w.record(200, 99, 10, None, Duration::from_millis(1));
        assert_eq!(w.requests_total(), 0);
        assert_eq!(w.bytes_out(), 10);
        assert_eq!(w.latency.snapshot().count(), 1);
    }
}
