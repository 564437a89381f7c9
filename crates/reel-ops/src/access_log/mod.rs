//! The access log: one line per request, formatted on the worker into a per-worker buffer
//! and shipped in batches to one or more sinks (a file, syslog, an HTTP collector), each
//! on a thread of its own that workers never wait for.
//!
//! A worker hands a full buffer to every sink with a non-blocking `try_send` on the sink's
//! bounded mailbox; when a sink is slow or down and its mailbox is full, the batch is
//! dropped for that sink and its lines counted (`reel_access_log_dropped_total{sink}`)
//! rather than stalling requests. SIGUSR1 (logrotate's convention) makes file sinks reopen
//! their file before their next write. At shutdown, [`AccessLog::close`] lets every sink
//! ship what was handed over and joins it; a worker's buffer is handed over when dropped.
//!
//! - `fields`: the JSON fields and their order, and a generation's [`Layout`];
//! - `sample`: which lines of each status class are kept;
//! - `format`: writing a line (JSON or combined); `time`: its timestamps;
//! - `buffer`: the worker's [`LogBuffer`];
//! - `writer`: a sink's mailbox and thread; `sink`: the file, syslog and HTTP sinks.

mod buffer;
mod fields;
mod format;
mod sample;
mod sink;
mod time;
mod writer;

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use reel_metrics::{Kind, PromWriter};

pub use buffer::LogBuffer;
pub use fields::{Field, Layout};
pub use sample::Sample;
pub use sink::{Collector, SinkSpec, SyslogTarget};

use writer::{Batch, SinkHandle};

/// How long after its last dropped line a sink is still named in `/healthz` details.
const DROPS_SHOWN_FOR: Duration = Duration::from_secs(60);

/// Line format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// One JSON object per line.
    Json,
    /// The combined log format, with cache result and times appended.
    Combined,
}

/// Errors opening the log.
#[derive(Debug, thiserror::Error)]
pub enum AccessLogError {
    /// The file could not be opened for appending.
    #[error("cannot open access log {path}: {source}")]
    Open {
        /// The path.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
}

/// What is logged about one request.
#[derive(Debug, Clone)]
pub struct Entry<'a> {
    /// When the request arrived.
    pub time: SystemTime,
    /// The client's address: the socket's peer, or the client a PROXY protocol header or
    /// a trusted proxy's `X-Forwarded-For` named.
    pub client: SocketAddr,
    /// The socket's peer when it is not the client (the balancer or proxy it came
    /// through): JSON `peer`, combined `peer=`.
    pub peer: Option<IpAddr>,
    /// The request method.
    pub method: &'a str,
    /// The Host header (empty if none).
    pub host: &'a [u8],
    /// The request target (path and query).
    pub target: &'a [u8],
    /// The protocol the request came over: `HTTP/1.0`, `HTTP/1.1`, `HTTP/2` or `HTTP/3`
    /// (empty for a refused request, whose line is in [`Refused::request_line`]).
    pub protocol: &'a str,
    /// Response status.
    pub status: u16,
    /// Bytes written to the client.
    pub bytes: u64,
    /// Cache result label (`hit`, `miss`, ...).
    pub cache: &'a str,
    /// Time the origin took to answer, if it was asked.
    pub origin_time: Option<Duration>,
    /// Total time of the request.
    pub total_time: Duration,
    /// The User-Agent header (empty if none).
    pub user_agent: &'a [u8],
    /// Set for a request refused before it was parsed (400, 408, 413, 414, 431, 501,
    /// 505, ...): `method`, `host`, `target` and `user_agent` are then empty.
    pub refused: Option<Refused<'a>>,
    /// Why the site's access rules refused the request (`token_expired`, `ip_denied`,
    /// `rate_limited`, ...: the `reason` label of `reel_denied_total`), if they did.
    pub denied: Option<&'a str>,
    /// The request's CMCD (CTA-5004), if it carried any: written after the chosen fields.
    pub cmcd: Option<crate::access_log_cmcd::CmcdLine<'a>>,
}

/// What is known of a request the HTTP codec refused.
#[derive(Debug, Clone, Copy)]
pub struct Refused<'a> {
    /// The request line as received, or its first bytes (raw; escaped when written).
    pub request_line: &'a [u8],
    /// The rule or limit it broke.
    pub reason: &'a str,
}

/// The process-wide access log: its sinks and counters.
pub struct AccessLog {
    format: Format,
    sinks: Vec<SinkHandle>,
    sampled_out: AtomicU64,
}

impl AccessLog {
    /// Opens `path` for appending (`-` is standard output) as the one sink, named `file`.
    pub fn open(
        path: PathBuf,
        format: Format,
    ) -> Result<std::sync::Arc<AccessLog>, AccessLogError> {
        AccessLog::start(format, vec![SinkSpec::File { name: "file".into(), path }])
    }

    /// Starts every sink. A file that cannot be opened fails the start; a syslog
    /// receiver or collector is reached later, from the sink's thread.
    pub fn start(
        format: Format,
        specs: Vec<SinkSpec>,
    ) -> Result<std::sync::Arc<AccessLog>, AccessLogError> {
        let mut sinks = Vec::with_capacity(specs.len());
        for spec in specs {
            match spec.start() {
                Ok(s) => sinks.push(s),
                Err(e) => {
                    let log = AccessLog { format, sinks, sampled_out: AtomicU64::new(0) };
                    log.close(Duration::from_secs(1));
                    return Err(e);
                }
            }
        }
        Ok(std::sync::Arc::new(AccessLog { format, sinks, sampled_out: AtomicU64::new(0) }))
    }

    /// Asks every sink to reopen its destination before its next write (SIGUSR1).
    pub fn reopen(&self) {
        for s in &self.sinks {
            s.reopen();
        }
    }

    /// Lets every sink ship every batch handed over so far, then stops and joins them.
    /// Returns `false` if they had not finished within `within` (a stalled disk, pipe or
    /// collector); the threads are then left behind and what they still hold may be lost
    /// at exit. Batches handed over after this are dropped and counted.
    pub fn close(&self, within: Duration) -> bool {
        let deadline = Instant::now() + within;
        let open: Vec<&SinkHandle> = self.sinks.iter().filter(|s| s.running()).collect();
        let mut ok = true;
        for s in &open {
            ok &= s.send_close(deadline);
        }
        for s in &open {
            ok &= s.join(deadline);
        }
        ok
    }

    /// Lines dropped, all sinks: a full mailbox or a failed delivery.
    pub fn dropped_lines(&self) -> u64 {
        self.sinks.iter().map(|s| s.stats.dropped.load(Relaxed)).sum()
    }

    /// Lines shipped, all sinks.
    pub fn written_lines(&self) -> u64 {
        self.sinks.iter().map(|s| s.stats.written.load(Relaxed)).sum()
    }

    /// Failed deliveries, all sinks (each loses a batch).
    pub fn write_errors(&self) -> u64 {
        self.sinks.iter().map(|s| s.stats.errors.load(Relaxed)).sum()
    }

    /// Lines left out by `[access_log.sample]`.
    pub fn sampled_out(&self) -> u64 {
        self.sampled_out.load(Relaxed)
    }

    /// Writes the counters in the Prometheus text format: per sink
    /// `reel_access_log_dropped_total{sink}` and `reel_access_log_shipped_total{sink}`;
    /// all sinks `reel_access_log_dropped_lines_total`, `reel_access_log_written_lines_total`
    /// and `reel_access_log_write_errors_total`; and `reel_access_log_sampled_out_total`.
    pub fn render_prometheus(&self, p: &mut PromWriter) {
        p.family(
            "reel_access_log_dropped_total",
            Kind::Counter,
            "Access-log lines a sink lost: its queue was full, or delivery failed.",
        );
        for s in &self.sinks {
            let labels = [("sink", s.name.as_str()), ("kind", s.kind)];
            p.sample("reel_access_log_dropped_total", &labels, s.stats.dropped.load(Relaxed));
        }
        p.family(
            "reel_access_log_shipped_total",
            Kind::Counter,
            "Access-log lines a sink wrote or delivered.",
        );
        for s in &self.sinks {
            let labels = [("sink", s.name.as_str()), ("kind", s.kind)];
            p.sample("reel_access_log_shipped_total", &labels, s.stats.written.load(Relaxed));
        }
        p.single(
            "reel_access_log_dropped_lines_total",
            Kind::Counter,
            "Access-log lines dropped, all sinks.",
            self.dropped_lines(),
        );
        p.single(
            "reel_access_log_written_lines_total",
            Kind::Counter,
            "Access-log lines written, all sinks.",
            self.written_lines(),
        );
        p.single(
            "reel_access_log_write_errors_total",
            Kind::Counter,
            "Failed access-log writes or deliveries (each loses a batch).",
            self.write_errors(),
        );
        p.single(
            "reel_access_log_sampled_out_total",
            Kind::Counter,
            "Requests whose line [access_log.sample] left out.",
            self.sampled_out(),
        );
    }

    /// One sentence per sink that dropped lines in the last minute, for `/healthz`
    /// details: `access_log sink "http" dropping lines: 120 dropped (last error: ...)`.
    pub fn details(&self) -> Vec<String> {
        let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
        let mut out = Vec::new();
        for s in &self.sinks {
            let last = s.stats.last_drop.load(Relaxed);
            if last == 0 || now.saturating_sub(last) > DROPS_SHOWN_FOR.as_secs() {
                continue;
            }
            let mut d = format!(
                "access_log sink {:?} ({}) dropping lines: {} dropped",
                s.name,
                s.kind,
                s.stats.dropped.load(Relaxed)
            );
            match s.stats.last_error() {
                Some(e) => d.push_str(&format!(" (last error: {e})")),
                None => d.push_str(" (queue full)"),
            }
            out.push(d);
        }
        out
    }

    /// The line format.
    pub fn format(&self) -> Format {
        self.format
    }

    /// Hands a batch to every sink.
    fn submit(&self, batch: Batch) {
        if let Some((last, rest)) = self.sinks.split_last() {
            for s in rest {
                s.offer(batch.clone());
            }
            last.offer(batch);
        }
    }
}

#[cfg(test)]
mod tests;
