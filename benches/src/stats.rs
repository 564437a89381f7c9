//! Per-connection accounting (counters and HdrHistograms, merged once at the
//! end so the hot path never shares state) and the final report, as a human
//! table or JSON.

use std::fmt;
use std::time::Duration;

use hdrhistogram::Histogram;
use serde::Serialize;

/// Classes of failed requests reported separately.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// TCP connect failed.
    Connect,
    /// No complete response within the request timeout.
    Timeout,
    /// Connection reset or closed before a response head arrived.
    Reset,
    /// Response with a 4xx status (the response itself completed).
    Status4xx,
    /// Response with a 5xx status (the response itself completed).
    Status5xx,
    /// Connection ended before the body announced by the framing was complete.
    ShortBody,
    /// Unparseable response head or chunk framing, or an unusable playlist.
    Protocol,
}

/// Error counts by [`ErrorKind`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct ErrorCounts {
    /// See [`ErrorKind::Connect`].
    pub connect: u64,
    /// See [`ErrorKind::Timeout`].
    pub timeout: u64,
    /// See [`ErrorKind::Reset`].
    pub reset: u64,
    /// See [`ErrorKind::Status4xx`].
    pub status_4xx: u64,
    /// See [`ErrorKind::Status5xx`].
    pub status_5xx: u64,
    /// See [`ErrorKind::ShortBody`].
    pub short_body: u64,
    /// See [`ErrorKind::Protocol`].
    pub protocol: u64,
}

impl ErrorCounts {
    /// Sum over all kinds.
    pub fn total(&self) -> u64 {
        self.connect
            + self.timeout
            + self.reset
            + self.status_4xx
            + self.status_5xx
            + self.short_body
            + self.protocol
    }

    fn add(&mut self, o: &ErrorCounts) {
        self.connect += o.connect;
        self.timeout += o.timeout;
        self.reset += o.reset;
        self.status_4xx += o.status_4xx;
        self.status_5xx += o.status_5xx;
        self.short_body += o.short_body;
        self.protocol += o.protocol;
    }

    fn bump(&mut self, kind: ErrorKind) {
        let c = match kind {
            ErrorKind::Connect => &mut self.connect,
            ErrorKind::Timeout => &mut self.timeout,
            ErrorKind::Reset => &mut self.reset,
            ErrorKind::Status4xx => &mut self.status_4xx,
            ErrorKind::Status5xx => &mut self.status_5xx,
            ErrorKind::ShortBody => &mut self.short_body,
            ErrorKind::Protocol => &mut self.protocol,
        };
        *c += 1;
    }
}

/// Accumulated results of one task (connection or viewer); merged with [`Stats::merge`].
#[derive(Debug, Clone)]
pub struct Stats {
    /// Completed responses (any status).
    pub requests: u64,
    /// Bytes read off the socket for completed responses (head + body + chunk framing).
    pub bytes: u64,
    /// Decoded body bytes of completed responses.
    pub body_bytes: u64,
    /// Request latency in µs (open loop: from the intended send time).
    pub latency: Histogram<u64>,
    /// Time to first response byte in µs (same origin of time as `latency`).
    pub ttfb: Histogram<u64>,
    /// Media segments fetched completely (live / vod).
    pub segments: u64,
    /// Time to first byte of media segments in µs (live / vod / herd).
    pub segment_ttfb: Histogram<u64>,
    /// Playlists fetched completely (live / vod).
    pub playlists: u64,
    /// Failures by kind.
    pub errors: ErrorCounts,
    /// Completed responses that were marked (see `Mark` in the scenarios).
    pub marked: u64,
    /// Latency of marked responses in µs.
    pub marked_latency: Histogram<u64>,
    /// Latency of the other responses in µs, when marking is on.
    pub unmarked_latency: Histogram<u64>,
    /// Connections that were established and stayed open (`idle`).
    pub held: u64,
    /// Completed responses to URLs requested once in the run (`zipf --one-hit-share`).
    pub one_hit: u64,
    /// Those of them that were marked.
    pub one_hit_marked: u64,
}

impl Default for Stats {
    fn default() -> Self {
        Self::new()
    }
}

pub(crate) fn hist() -> Histogram<u64> {
    // 3 significant digits, auto-resizing: values are µs and can reach minutes.
    // `new` only fails for more than 5 significant figures: a constant here.
    let mut h = Histogram::new(3).expect("3 significant figures is valid");
    h.auto(true);
    h
}

/// Records with auto-resize (`saturating_record` would clamp to the current range instead).
pub(crate) fn put(h: &mut Histogram<u64>, v: u64) {
    if h.record(v).is_err() {
        h.saturating_record(v);
    }
}

fn us(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX).max(1)
}

impl Stats {
    /// Empty accounting.
    pub fn new() -> Self {
        Self {
            requests: 0,
            bytes: 0,
            body_bytes: 0,
            latency: hist(),
            ttfb: hist(),
            segments: 0,
            segment_ttfb: hist(),
            playlists: 0,
            errors: ErrorCounts::default(),
            marked: 0,
            marked_latency: hist(),
            unmarked_latency: hist(),
            held: 0,
            one_hit: 0,
            one_hit_marked: 0,
        }
    }

    /// Files a completed response's latency as marked or not (marking on).
    pub fn record_mark(&mut self, marked: bool, latency: Duration) {
        if marked {
            self.marked += 1;
            put(&mut self.marked_latency, us(latency));
        } else {
            put(&mut self.unmarked_latency, us(latency));
        }
    }

    /// Records one completed response: latency, time to first byte, sizes, and
    /// a 4xx/5xx status as an error of that kind.
    pub fn record(
        &mut self,
        status: u16,
        wire_bytes: u64,
        body_bytes: u64,
        latency: Duration,
        ttfb: Duration,
    ) {
        self.requests += 1;
        self.bytes += wire_bytes;
        self.body_bytes += body_bytes;
        put(&mut self.latency, us(latency));
        put(&mut self.ttfb, us(ttfb));
        match status {
            400..=499 => self.errors.bump(ErrorKind::Status4xx),
            500..=599 => self.errors.bump(ErrorKind::Status5xx),
            _ => {}
        }
    }

    /// Records a media segment's time to first byte (the response itself goes through [`Stats::record`]).
    pub fn record_segment(&mut self, ttfb: Duration) {
        self.segments += 1;
        put(&mut self.segment_ttfb, us(ttfb));
    }

    /// Counts one failed request.
    pub fn error(&mut self, kind: ErrorKind) {
        self.errors.bump(kind);
    }

    /// Adds another task's results into this one.
    pub fn merge(&mut self, o: &Stats) {
        self.requests += o.requests;
        self.bytes += o.bytes;
        self.body_bytes += o.body_bytes;
        self.segments += o.segments;
        self.playlists += o.playlists;
        self.errors.add(&o.errors);
        self.marked += o.marked;
        self.held += o.held;
        self.one_hit += o.one_hit;
        self.one_hit_marked += o.one_hit_marked;
        let _ = self.marked_latency.add(&o.marked_latency);
        let _ = self.unmarked_latency.add(&o.unmarked_latency);
        // Auto-resizing histograms with equal precision cannot fail to add.
        let _ = self.latency.add(&o.latency);
        let _ = self.ttfb.add(&o.ttfb);
        let _ = self.segment_ttfb.add(&o.segment_ttfb);
    }

    /// Turns the totals into a report over `elapsed` wall time.
    pub fn report(
        &self,
        scenario: &str,
        target: &str,
        connections: usize,
        elapsed: Duration,
    ) -> Report {
        let secs = elapsed.as_secs_f64().max(1e-9);
        let q = |h: &Histogram<u64>, p: f64| if h.is_empty() { 0 } else { h.value_at_quantile(p) };
        let pct = |h: &Histogram<u64>| Percentiles {
            p50: q(h, 0.5),
            p90: q(h, 0.9),
            p99: q(h, 0.99),
            p999: q(h, 0.999),
            max: h.max(),
            mean: if h.is_empty() { 0.0 } else { h.mean() },
        };
        Report {
            scenario: scenario.to_string(),
            target: target.to_string(),
            connections,
            elapsed_s: elapsed.as_secs_f64(),
            requests: self.requests,
            requests_per_s: self.requests as f64 / secs,
            bytes: self.bytes,
            body_bytes: self.body_bytes,
            gbit_per_s: self.bytes as f64 * 8.0 / secs / 1e9,
            mib_per_s: self.bytes as f64 / secs / 1_048_576.0,
            latency_us: Percentiles {
                p50: q(&self.latency, 0.5),
                p90: q(&self.latency, 0.9),
                p99: q(&self.latency, 0.99),
                p999: q(&self.latency, 0.999),
                max: self.latency.max(),
                mean: if self.latency.is_empty() { 0.0 } else { self.latency.mean() },
            },
            ttfb_us: Ttfb { p50: q(&self.ttfb, 0.5), p99: q(&self.ttfb, 0.99) },
            segments: self.segments,
            segment_ttfb_us: Ttfb {
                p50: q(&self.segment_ttfb, 0.5),
                p99: q(&self.segment_ttfb, 0.99),
            },
            playlists: self.playlists,
            errors_total: self.errors.total(),
            errors: self.errors,
            marked: self.marked,
            marked_latency_us: pct(&self.marked_latency),
            unmarked: self.unmarked_latency.len(),
            unmarked_latency_us: pct(&self.unmarked_latency),
            held: self.held,
            one_hit: self.one_hit,
            one_hit_marked: self.one_hit_marked,
        }
    }
}

/// Latency percentiles in µs.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Percentiles {
    /// Median.
    pub p50: u64,
    /// 90th percentile.
    pub p90: u64,
    /// 99th percentile.
    pub p99: u64,
    /// 99.9th percentile.
    pub p999: u64,
    /// Largest recorded value.
    pub max: u64,
    /// Arithmetic mean.
    pub mean: f64,
}

/// Time-to-first-byte percentiles in µs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Ttfb {
    /// Median.
    pub p50: u64,
    /// 99th percentile.
    pub p99: u64,
}

/// Final result of a run; `Display` prints the human table, `serde_json` the `--json` form.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    /// Scenario name (`fixed`, `open`, `live`, `vod`, `herd`).
    pub scenario: String,
    /// First target URL.
    pub target: String,
    /// Connections (or viewers).
    pub connections: usize,
    /// Measured wall time in seconds (start of load to the last task finishing).
    pub elapsed_s: f64,
    /// Completed responses, any status.
    pub requests: u64,
    /// `requests / elapsed_s`.
    pub requests_per_s: f64,
    /// Bytes received for completed responses, head and framing included.
    pub bytes: u64,
    /// Decoded body bytes.
    pub body_bytes: u64,
    /// `bytes` as Gbit/s (10^9 bits).
    pub gbit_per_s: f64,
    /// `bytes` as MiB/s.
    pub mib_per_s: f64,
    /// Latency of completed responses.
    pub latency_us: Percentiles,
    /// Time to first byte of completed responses.
    pub ttfb_us: Ttfb,
    /// Media segments fetched (live / vod / herd).
    pub segments: u64,
    /// Time to first byte of media segments.
    pub segment_ttfb_us: Ttfb,
    /// Playlists fetched (live / vod).
    pub playlists: u64,
    /// Sum of `errors`.
    pub errors_total: u64,
    /// Errors by kind.
    pub errors: ErrorCounts,
    /// Marked responses (by `--mark-header` or `--mark-url`); 0 when marking is off.
    pub marked: u64,
    /// Latency of the marked responses.
    pub marked_latency_us: Percentiles,
    /// The other responses, when marking is on.
    pub unmarked: u64,
    /// Latency of the other responses.
    pub unmarked_latency_us: Percentiles,
    /// Connections held open to the end (`idle`).
    pub held: u64,
    /// Completed responses to URLs requested once in the run (`zipf --one-hit-share`).
    pub one_hit: u64,
    /// Those of them that were marked.
    pub one_hit_marked: u64,
}

fn ms(us: u64) -> String {
    format!("{:.3} ms", us as f64 / 1000.0)
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let l = &self.latency_us;
        writeln!(f, "scenario      {} -> {}", self.scenario, self.target)?;
        writeln!(f, "connections   {}", self.connections)?;
        writeln!(f, "elapsed       {:.3} s", self.elapsed_s)?;
        writeln!(f, "requests      {} ({:.1} req/s)", self.requests, self.requests_per_s)?;
        writeln!(
            f,
            "bytes         {} ({:.3} Gbit/s, {:.1} MiB/s; body {})",
            self.bytes, self.gbit_per_s, self.mib_per_s, self.body_bytes
        )?;
        writeln!(
            f,
            "latency       p50 {}  p90 {}  p99 {}  p99.9 {}  max {}",
            ms(l.p50),
            ms(l.p90),
            ms(l.p99),
            ms(l.p999),
            ms(l.max)
        )?;
        writeln!(f, "ttfb          p50 {}  p99 {}", ms(self.ttfb_us.p50), ms(self.ttfb_us.p99))?;
        if self.segments > 0 || self.playlists > 0 {
            writeln!(
                f,
                "segments      {} (ttfb p50 {}  p99 {}), playlists {}",
                self.segments,
                ms(self.segment_ttfb_us.p50),
                ms(self.segment_ttfb_us.p99),
                self.playlists
            )?;
        }
        if self.marked > 0 || self.unmarked > 0 {
            for (name, n, l) in [
                ("marked", self.marked, &self.marked_latency_us),
                ("unmarked", self.unmarked, &self.unmarked_latency_us),
            ] {
                writeln!(
                    f,
                    "{name:<13} {n}: p50 {}  p99 {}  p99.9 {}  max {}",
                    ms(l.p50),
                    ms(l.p99),
                    ms(l.p999),
                    ms(l.max)
                )?;
            }
        }
        if self.held > 0 {
            writeln!(f, "held          {} connections open to the end", self.held)?;
        }
        if self.one_hit > 0 {
            writeln!(
                f,
                "one-hit URLs  {} requests ({} marked); catalog {} requests ({} marked)",
                self.one_hit,
                self.one_hit_marked,
                self.requests - self.one_hit,
                self.marked - self.one_hit_marked
            )?;
        }
        let e = &self.errors;
        writeln!(
            f,
            "errors        {} (connect {}, timeout {}, reset {}, 4xx {}, 5xx {}, short body {}, protocol {})",
            self.errors_total,
            e.connect,
            e.timeout,
            e.reset,
            e.status_4xx,
            e.status_5xx,
            e.short_body,
            e.protocol
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_and_report() {
        let mut a = Stats::new();
        a.record(200, 1100, 1000, Duration::from_millis(2), Duration::from_millis(1));
        a.record(503, 100, 0, Duration::from_millis(4), Duration::from_millis(1));
        let mut b = Stats::new();
        b.record(404, 100, 10, Duration::from_millis(1), Duration::from_millis(1));
        b.error(ErrorKind::ShortBody);
        b.record_segment(Duration::from_millis(3));
        a.merge(&b);
        let r = a.report("fixed", "http://127.0.0.1/", 2, Duration::from_secs(2));
        assert_eq!(r.requests, 3);
        assert_eq!(r.bytes, 1300);
        assert_eq!(r.body_bytes, 1010);
        assert!((r.requests_per_s - 1.5).abs() < 1e-9);
        assert_eq!(r.errors.status_5xx, 1);
        assert_eq!(r.errors.status_4xx, 1);
        assert_eq!(r.errors.short_body, 1);
        assert_eq!(r.errors_total, 3);
        assert_eq!(r.segments, 1);
        assert!(r.latency_us.max >= 3990 && r.latency_us.max <= 4010, "{:?}", r.latency_us);
        assert_eq!(r.latency_us.p50, 2000);
        let text = r.to_string();
        assert!(text.contains("short body 1"));
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["errors"]["status_5xx"], 1);
    }
}
