//! The last 15 minutes of load, one [`Sample`] a second in a fixed ring ([`History`]), for
//! `GET /status/history` and the `/dashboard` page.
//!
//! The admin thread takes the samples: it reads the totals the workers already keep
//! ([`Totals`]) and turns the difference from the previous second into rates and
//! per-interval quantiles. Nothing is added to the request path but the protocol counter.
//! A counter that went backwards (a reload replaced an origin group) gives a zero rate,
//! never a negative one.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Instant, SystemTime};

use reel_ops::metrics::{HistogramSnapshot, Protocol};
use serde::Serialize;

use crate::state::Shared;

/// Samples kept: 15 minutes at one a second.
pub(crate) const CAPACITY: usize = 900;

/// One second of load. Every field is a rate over the interval or a gauge at its end; a
/// new figure is a new field here and a line in [`Sample::build`] (the page draws every
/// number in `extra` as a chart of its own).
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Sample {
    /// End of the interval, Unix milliseconds.
    pub t: u64,
    /// Length of the interval, milliseconds (about 1000; longer when the admin thread was
    /// late): a rate times this is the interval's count.
    pub span_ms: u64,
    /// Requests per second, all of them.
    pub requests: f64,
    /// Requests per second by protocol (`h1`, `h2`, `h3`).
    pub by_protocol: BTreeMap<&'static str, f64>,
    /// Requests per second by cache result (the `cache` label of `reel_requests_total`).
    pub by_result: BTreeMap<&'static str, f64>,
    /// Requests served from the cache over all requests in the interval (0 when idle).
    pub hit_ratio: f64,
    /// Playlist requests per second (HLS playlists and DASH manifests, blocking reloads
    /// included): also in `requests`.
    pub playlist_requests: f64,
    /// The hit ratio of playlist requests alone (`null` without any in the interval): live
    /// playlists are fetched again every target duration, so they pull `hit_ratio` down on
    /// a healthy node.
    pub hit_ratio_playlists: Option<f64>,
    /// The hit ratio of every other request (segments, parts, init sections, keys;
    /// `null` without any).
    pub hit_ratio_segments: Option<f64>,
    /// Bytes per second written to clients.
    pub bytes_out: f64,
    /// Per origin host.
    pub origins: Vec<OriginSample>,
    /// Time to first byte of hits, milliseconds (bucket upper bounds; `null` without hits).
    pub hit_ttfb_p50_ms: Option<f64>,
    /// As above, 99th percentile.
    pub hit_ttfb_p99_ms: Option<f64>,
    /// Time to first byte of every response that was not a hit (misses, revalidations,
    /// passes, local answers), milliseconds.
    pub miss_ttfb_p50_ms: Option<f64>,
    /// As above, 99th percentile.
    pub miss_ttfb_p99_ms: Option<f64>,
    /// Open client connections (parked ones included).
    pub connections_active: u64,
    /// Open client connections idle without a task.
    pub connections_parked: u64,
    /// Bytes used in the store.
    pub store_bytes: u64,
    /// Objects in the store.
    pub store_objects: u64,
    /// Store capacity in bytes.
    pub store_capacity: u64,
    /// Every disk of the store and its state (`online`, `frozen`, `offline`).
    pub disks: Vec<Disk>,
    /// CPU use of each worker thread, percent of one core.
    pub worker_cpu: Vec<f64>,
    /// Share of the cgroup's CPU periods in the interval that ran out of quota, percent
    /// (`null` without a readable cgroup).
    pub cpu_throttled_pct: Option<f64>,
    /// Milliseconds per second the cgroup's threads waited for CPU quota.
    pub cpu_throttled_ms_per_s: Option<f64>,
    /// Bytes per second received on the data interfaces (`[cores] nic`, the whole host's
    /// traffic on them; `null` without any).
    pub net_rx_bytes: Option<f64>,
    /// Bytes per second sent on the data interfaces.
    pub net_tx_bytes: Option<f64>,
    /// Further rates (per second) by name.
    pub extra: BTreeMap<&'static str, f64>,
}

/// One origin host in a [`Sample`].
#[derive(Debug, Clone, Serialize)]
pub(crate) struct OriginSample {
    /// Origin group name.
    pub group: String,
    /// `host:port`.
    pub host: String,
    /// Attempts per second.
    pub requests: f64,
    /// Failures per second.
    pub errors: f64,
    /// Health state at the end of the interval.
    pub healthy: bool,
}

/// One store disk in a [`Sample`].
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Disk {
    /// The store path.
    pub path: String,
    /// `online`, `frozen` (handed over in an upgrade) or `offline` (out of service, as
    /// `/status` says, or every volume quarantined).
    pub state: &'static str,
    /// Bytes used on this disk.
    pub bytes_used: u64,
    /// This disk's capacity in bytes.
    pub capacity: u64,
    /// Objects on this disk.
    pub objects: u64,
}

/// Counter totals at one instant; two of them make a [`Sample`].
#[derive(Debug, Clone, Default)]
pub(crate) struct Totals {
    at: Option<Instant>,
    by_result: Vec<u64>,
    by_protocol: [u64; Protocol::ALL.len()],
    from_cache: u64,
    playlists: u64,
    playlists_from_cache: u64,
    bytes_out: u64,
    first_byte: HistogramSnapshot,
    hit_first_byte: HistogramSnapshot,
    /// `(group, host)` to (requests, errors).
    origins: BTreeMap<(String, String), (u64, u64)>,
    cpu_ticks: Vec<u64>,
    cpu_stat: Option<reel_runtime::cgroup::CpuStat>,
    /// (received, sent) bytes over the data interfaces, when there are any.
    net: Option<(u64, u64)>,
}

/// The ring of samples, allocated once at [`CAPACITY`].
#[derive(Debug)]
pub(crate) struct History {
    samples: VecDeque<Sample>,
    capacity: usize,
    last: Totals,
}

// === impl Totals ===

impl Totals {
    /// Reads the counters the workers keep.
    pub(crate) fn read(s: &Shared) -> Totals {
        let labels = reel_cache::OUTCOMES.labels;
        let mut t = Totals {
            at: Some(Instant::now()),
            by_result: vec![0; labels.len()],
            ..Totals::default()
        };
        for w in &s.metrics {
            for (i, v) in t.by_result.iter_mut().enumerate() {
                *v += w.requests_with(i);
            }
            for (i, p) in Protocol::ALL.iter().enumerate() {
                t.by_protocol[i] += w.requests_over(*p);
            }
            t.from_cache += w.requests_from_cache();
            t.playlists += w.playlists_total();
            t.playlists_from_cache += w.playlists_from_cache();
            t.bytes_out += w.bytes_out();
            t.first_byte.add(&w.first_byte.snapshot());
            t.hit_first_byte.add(&w.hit_first_byte.snapshot());
        }
        for g in s.live().origins.snapshot().groups {
            for h in g.hosts {
                t.origins.insert((g.name.clone(), h.addr), (h.requests, h.errors.total()));
            }
        }
        let (_, cpu_stat, net) =
            crate::admin::host::counters(&crate::state::options::core_spec(&s.live().cfg).nic);
        t.cpu_stat = cpu_stat;
        if !net.is_empty() {
            t.net = Some(net.iter().fold((0, 0), |(r, x), n| (r + n.rx_bytes, x + n.tx_bytes)));
        }
        if let Some(h) = s.health() {
            t.cpu_ticks = h
                .worker_tids()
                .iter()
                .map(|&tid| reel_ops::sampler::thread_cpu_ticks(tid))
                .collect();
        }
        t
    }
}

// === impl Sample ===

impl Sample {
    /// The sample for the interval from `prev` to `now`, with the gauges read from `s`.
    pub(crate) fn build(s: &Shared, prev: &Totals, now: &Totals) -> Sample {
        let mut out = Sample::rates(prev, now);
        let stats = s.worker_stats();
        out.connections_active = stats.iter().map(|w| w.open.load(Relaxed) as u64).sum();
        out.connections_parked = stats.iter().map(|w| w.parked.load(Relaxed) as u64).sum();
        let st = s.store.stats();
        out.store_bytes = st.bytes_used;
        out.store_objects = st.objects;
        out.store_capacity = st.capacity;
        let frozen = s.store.is_frozen();
        out.disks = s
            .store
            .disks()
            .into_iter()
            .map(|d| {
                let state = if d.state == reel_store::DiskState::Offline
                    || d.stats.volumes <= d.stats.quarantined_volumes
                {
                    reel_store::DiskState::Offline.as_str()
                } else if frozen {
                    "frozen"
                } else {
                    "online"
                };
                Disk {
                    path: d.path.display().to_string(),
                    state,
                    bytes_used: d.stats.bytes_used,
                    capacity: d.stats.capacity,
                    objects: d.stats.objects,
                }
            })
            .collect();
        let live = s.live();
        let healthy: BTreeMap<(String, String), bool> = live
            .origins
            .snapshot()
            .groups
            .into_iter()
            .flat_map(|g| g.hosts.into_iter().map(move |h| ((g.name.clone(), h.addr), h.healthy)))
            .collect();
        for o in &mut out.origins {
            o.healthy = healthy.get(&(o.group.clone(), o.host.clone())).copied().unwrap_or(false);
        }
        out
    }

    /// The counter-derived part of a sample (rates, quantiles, CPU); gauges left at zero.
    fn rates(prev: &Totals, now: &Totals) -> Sample {
        let secs = match (prev.at, now.at) {
            (Some(a), Some(b)) => b.duration_since(a).as_secs_f64(),
            _ => 0.0,
        };
        let rate = |a: u64, b: u64| {
            if secs > 0.0 { round1(b.saturating_sub(a) as f64 / secs) } else { 0.0 }
        };
        let labels = reel_cache::OUTCOMES.labels;
        let by_result: BTreeMap<_, _> = labels
            .iter()
            .enumerate()
            .map(|(i, l)| {
                let p = prev.by_result.get(i).copied().unwrap_or(0);
                (*l, rate(p, now.by_result.get(i).copied().unwrap_or(0)))
            })
            .collect();
        let by_protocol = Protocol::ALL
            .iter()
            .enumerate()
            .map(|(i, p)| (p.label(), rate(prev.by_protocol[i], now.by_protocol[i])))
            .collect();
        let total: u64 = now.by_result.iter().sum();
        let prev_total: u64 = prev.by_result.iter().sum();
        let n = total.saturating_sub(prev_total);
        let cached = now.from_cache.saturating_sub(prev.from_cache);
        let hit_ratio = if n > 0 { round3((cached.min(n)) as f64 / n as f64) } else { 0.0 };
        // Playlists are counted in the totals too: segments are the difference.
        let lists = now.playlists.saturating_sub(prev.playlists).min(n);
        let lists_cached = now.playlists_from_cache.saturating_sub(prev.playlists_from_cache);
        let ratio =
            |hit: u64, all: u64| (all > 0).then(|| round3(hit.min(all) as f64 / all as f64));
        let hit_ratio_playlists = ratio(lists_cached, lists);
        let hit_ratio_segments = ratio(cached.saturating_sub(lists_cached), n - lists);
        let hit = now.hit_first_byte.since(&prev.hit_first_byte);
        let not_hit = now.first_byte.since(&prev.first_byte).since(&hit);
        let origins = now
            .origins
            .iter()
            .map(|((group, host), &(req, err))| {
                // A host not in the previous reading is new (the first request to it, or a
                // group a reload made, whose counters start at 0): all it did is this interval's.
                let (preq, perr) =
                    prev.origins.get(&(group.clone(), host.clone())).copied().unwrap_or((0, 0));
                OriginSample {
                    group: group.clone(),
                    host: host.clone(),
                    requests: rate(preq, req),
                    errors: rate(perr, err),
                    healthy: false,
                }
            })
            .collect();
        let tps = reel_ops::sampler::clock_ticks_per_sec();
        let worker_cpu = now
            .cpu_ticks
            .iter()
            .enumerate()
            .map(|(i, &t)| {
                let p = prev.cpu_ticks.get(i).copied().unwrap_or(t);
                if secs > 0.0 && tps > 0.0 {
                    round1((t.saturating_sub(p) as f64 / tps / secs * 100.0).min(100.0))
                } else {
                    0.0
                }
            })
            .collect();
        let (cpu_throttled_pct, cpu_throttled_ms_per_s) = match (prev.cpu_stat, now.cpu_stat) {
            (Some(a), Some(b)) if secs > 0.0 => {
                let (ratio, usec) = b.throttled_since(&a);
                (Some(round1(ratio * 100.0)), Some(round1(usec as f64 / 1000.0 / secs)))
            }
            _ => (None, None),
        };
        let (net_rx_bytes, net_tx_bytes) = match (prev.net, now.net) {
            (Some((pr, px)), Some((r, x))) => (Some(rate(pr, r)), Some(rate(px, x))),
            _ => (None, None),
        };
        Sample {
            t: unix_ms(SystemTime::now()),
            span_ms: (secs * 1000.0).round() as u64,
            requests: rate(prev_total, total),
            by_protocol,
            by_result,
            hit_ratio,
            playlist_requests: rate(prev.playlists, now.playlists),
            hit_ratio_playlists,
            hit_ratio_segments,
            bytes_out: rate(prev.bytes_out, now.bytes_out),
            origins,
            hit_ttfb_p50_ms: hit.quantile_ms(0.5),
            hit_ttfb_p99_ms: hit.quantile_ms(0.99),
            miss_ttfb_p50_ms: not_hit.quantile_ms(0.5),
            miss_ttfb_p99_ms: not_hit.quantile_ms(0.99),
            connections_active: 0,
            connections_parked: 0,
            store_bytes: 0,
            store_objects: 0,
            store_capacity: 0,
            disks: Vec::new(),
            worker_cpu,
            cpu_throttled_pct,
            cpu_throttled_ms_per_s,
            net_rx_bytes,
            net_tx_bytes,
            extra: BTreeMap::new(),
        }
    }
}

// === impl History ===

impl History {
    /// An empty ring holding at most `capacity` samples.
    pub(crate) fn new(capacity: usize) -> History {
        History { samples: VecDeque::with_capacity(capacity), capacity, last: Totals::default() }
    }

    /// Reads the counters and, from the second call on, pushes the sample for the interval
    /// since the previous call.
    pub(crate) fn tick(&mut self, s: &Shared) {
        let now = Totals::read(s);
        if self.last.at.is_some() {
            let sample = Sample::build(s, &self.last, &now);
            self.push(sample);
        }
        self.last = now;
    }

    /// Adds a sample, dropping the oldest when full.
    pub(crate) fn push(&mut self, s: Sample) {
        if self.samples.len() == self.capacity {
            self.samples.pop_front();
        }
        self.samples.push_back(s);
    }

    /// The samples taken after `since` (Unix ms), oldest first.
    pub(crate) fn since(&self, since: u64) -> impl Iterator<Item = &Sample> {
        let skip = self.samples.partition_point(|s| s.t <= since);
        self.samples.iter().skip(skip)
    }

    /// The ring's capacity.
    pub(crate) fn capacity(&self) -> usize {
        self.capacity
    }
}

/// Milliseconds since the Unix epoch (0 before it).
pub(crate) fn unix_ms(t: SystemTime) -> u64 {
    t.duration_since(SystemTime::UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}

fn round1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn totals(at: Instant, hits: u64, misses: u64, bytes: u64) -> Totals {
        let mut by_result = vec![0; reel_cache::OUTCOMES.labels.len()];
        by_result[reel_cache::CacheResult::Hit.index()] = hits;
        by_result[reel_cache::CacheResult::Miss.index()] = misses;
        let mut origins = BTreeMap::new();
        origins.insert(("g".to_string(), "o:80".to_string()), (misses, 0));
        Totals {
            at: Some(at),
            by_result,
            from_cache: hits,
            bytes_out: bytes,
            origins,
            ..Totals::default()
        }
    }

    #[test]
    fn rates_are_deltas_over_the_interval() {
        let t0 = Instant::now();
        let a = totals(t0, 10, 5, 1000);
        let b = totals(t0 + Duration::from_secs(2), 30, 15, 5000);
        let s = Sample::rates(&a, &b);
        assert_eq!(s.by_result["hit"], 10.0);
        assert_eq!(s.by_result["miss"], 5.0);
        assert_eq!(s.requests, 15.0);
        assert_eq!(s.bytes_out, 2000.0);
        assert_eq!(s.hit_ratio, 0.667);
        assert_eq!(s.origins[0].requests, 5.0);
        assert_eq!((s.hit_ratio_playlists, s.hit_ratio_segments), (None, Some(0.667)));
    }

    #[test]
    fn playlists_and_segments_have_their_own_hit_ratios() {
        let t0 = Instant::now();
        let a = totals(t0, 0, 0, 0);
        // 100 requests: 90 segments of which 88 hits, 10 live playlists of which 2 hits.
        let mut b = totals(t0 + Duration::from_secs(1), 90, 10, 0);
        b.playlists = 10;
        b.playlists_from_cache = 2;
        let s = Sample::rates(&a, &b);
        assert_eq!(s.hit_ratio, 0.9);
        assert_eq!(s.playlist_requests, 10.0);
        assert_eq!(s.hit_ratio_playlists, Some(0.2));
        assert_eq!(s.hit_ratio_segments, Some(0.978));
        // Only playlists: no segment ratio at all, not 0 %.
        let mut c = totals(t0 + Duration::from_secs(2), 90, 15, 0);
        c.playlists = 15;
        c.playlists_from_cache = 2;
        let s = Sample::rates(&b, &c);
        assert_eq!((s.hit_ratio_playlists, s.hit_ratio_segments), (Some(0.0), None));
    }

    #[test]
    fn counters_going_backwards_give_zero_not_negative() {
        let t0 = Instant::now();
        let a = totals(t0, 100, 50, 9000);
        let b = totals(t0 + Duration::from_secs(1), 3, 2, 10);
        let s = Sample::rates(&a, &b);
        assert_eq!(s.requests, 0.0);
        assert_eq!(s.by_result["miss"], 0.0);
        assert_eq!(s.bytes_out, 0.0);
        assert_eq!(s.origins[0].requests, 0.0);
        assert_eq!(s.hit_ratio, 0.0);
        // A host not in the previous reading came to exist in this interval (a reload made
        // its group, whose counters start at 0; or its first request): all of its total is
        // this interval's.
        let mut c = totals(t0 + Duration::from_secs(2), 3, 2, 10);
        c.origins.insert(("new".to_string(), "n:80".to_string()), (500, 7));
        let s = Sample::rates(&b, &c);
        let new = s.origins.iter().find(|o| o.group == "new").expect("the new host");
        assert_eq!((new.requests, new.errors), (500.0, 7.0), "{s:?}");
        assert!(s.origins.iter().filter(|o| o.group != "new").all(|o| o.requests == 0.0));
    }

    #[test]
    fn the_ring_wraps_at_capacity_and_filters_by_time() {
        let mut h = History::new(3);
        let base = Sample::rates(&Totals::default(), &Totals::default());
        for t in 1..=5 {
            h.push(Sample { t, ..base.clone() });
        }
        assert_eq!(h.samples.len(), 3);
        assert_eq!(h.samples.capacity(), h.samples.capacity().max(3));
        let ts: Vec<u64> = h.since(0).map(|s| s.t).collect();
        assert_eq!(ts, [3, 4, 5]);
        let ts: Vec<u64> = h.since(4).map(|s| s.t).collect();
        assert_eq!(ts, [5]);
        assert_eq!(h.since(5).count(), 0);
    }
}
