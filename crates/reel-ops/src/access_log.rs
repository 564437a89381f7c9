//! The access log: one line per request, formatted on the worker into a per-worker buffer
//! and written in batches by a writer thread that workers never wait for.
//!
//! A worker hands a full buffer to the writer with a non-blocking `try_send` on a bounded
//! channel; when the disk is slow and the channel is full, the batch is dropped and its
//! lines are counted (`reel_access_log_dropped_lines_total`) rather than stalling requests.
//! SIGUSR1 (logrotate's convention) sets a flag that makes the writer reopen the file
//! before its next write. At shutdown, [`AccessLog::close`] lets the writer finish every
//! batch handed over and joins it; a worker's buffer is handed over when it is dropped.
//!
//! JSON lines are escaped by `serde_json`; request bytes that are not UTF-8 are written as
//! `\xNN` text (the combined format's convention), so a line is always valid JSON.

use std::cell::RefCell;
use std::fmt::Write as _;
use std::fs::{File, OpenOptions};
use std::io::Write as _;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TrySendError, sync_channel};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use reel_metrics::{Kind, PromWriter};

/// Batches the writer may hold before workers start dropping lines.
const QUEUE_BATCHES: usize = 64;

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
    /// The request's CMCD (CTA-5004), if it carried any.
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

/// The process-wide access log: the writer thread's mailbox and counters.
pub struct AccessLog {
    tx: SyncSender<Msg>,
    format: Format,
    reopen: Arc<AtomicBool>,
    dropped_lines: AtomicU64,
    written_lines: Arc<AtomicU64>,
    write_errors: Arc<AtomicU64>,
    /// The writer thread, until [`AccessLog::close`] joins it.
    writer: Mutex<Option<JoinHandle<()>>>,
}

/// What the writer thread receives, in order.
enum Msg {
    /// Lines to append.
    Lines(Batch),
    /// Wakes an idle writer (so a reopen happens promptly).
    Wake,
    /// Everything before it is written: exit.
    Close,
}

struct Batch {
    bytes: Vec<u8>,
    lines: u64,
}

impl AccessLog {
    /// Opens `path` for appending (`-` is standard output) and starts the writer thread.
    pub fn open(path: PathBuf, format: Format) -> Result<Arc<AccessLog>, AccessLogError> {
        let sink = Sink::open(&path)
            .map_err(|source| AccessLogError::Open { path: path.clone(), source })?;
        let (tx, rx) = sync_channel(QUEUE_BATCHES);
        let reopen = Arc::new(AtomicBool::new(false));
        let written = Arc::new(AtomicU64::new(0));
        let errors = Arc::new(AtomicU64::new(0));
        let w = Writer {
            rx,
            sink,
            path,
            reopen: reopen.clone(),
            written: written.clone(),
            errors: errors.clone(),
        };
        let writer = std::thread::Builder::new()
            .name("reel-accesslog".into())
            .spawn(move || w.run())
            .map_err(|source| AccessLogError::Open { path: PathBuf::from("<thread>"), source })?;
        Ok(Arc::new(AccessLog {
            tx,
            format,
            reopen,
            dropped_lines: AtomicU64::new(0),
            written_lines: written,
            write_errors: errors,
            writer: Mutex::new(Some(writer)),
        }))
    }

    /// Asks the writer to reopen the file before its next write (SIGUSR1).
    pub fn reopen(&self) {
        self.reopen.store(true, Relaxed);
        let _ = self.tx.try_send(Msg::Wake);
    }

    /// Lets the writer write every batch handed over so far, then stops and joins it.
    /// Returns `false` if it had not finished within `within` (a stalled disk or pipe); the
    /// thread is then left behind and what it still holds may be lost at exit. Batches
    /// handed over after this are dropped and counted.
    pub fn close(&self, within: Duration) -> bool {
        let Some(writer) = self.writer.lock().ok().and_then(|mut w| w.take()) else {
            return true;
        };
        let deadline = Instant::now() + within;
        // The queue is bounded; a full one means the writer is busy, so wait for room
        // rather than block without a bound.
        let mut msg = Msg::Close;
        loop {
            match self.tx.try_send(msg) {
                Ok(()) | Err(TrySendError::Disconnected(_)) => break,
                Err(TrySendError::Full(m)) if Instant::now() < deadline => {
                    msg = m;
                    std::thread::sleep(Duration::from_millis(5));
                }
                Err(TrySendError::Full(_)) => return false,
            }
        }
        while !writer.is_finished() {
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        writer.join().is_ok()
    }

    /// Lines dropped because the writer fell behind.
    pub fn dropped_lines(&self) -> u64 {
        self.dropped_lines.load(Relaxed)
    }

    /// Lines written to the file.
    pub fn written_lines(&self) -> u64 {
        self.written_lines.load(Relaxed)
    }

    /// Failed writes (each loses a batch).
    pub fn write_errors(&self) -> u64 {
        self.write_errors.load(Relaxed)
    }

    /// Writes the counters in the Prometheus text format:
    /// `reel_access_log_dropped_lines_total`, `reel_access_log_written_lines_total` and
    /// `reel_access_log_write_errors_total`.
    pub fn render_prometheus(&self, p: &mut PromWriter) {
        p.single(
            "reel_access_log_dropped_lines_total",
            Kind::Counter,
            "Access-log lines dropped because the writer fell behind.",
            self.dropped_lines(),
        );
        p.single(
            "reel_access_log_written_lines_total",
            Kind::Counter,
            "Access-log lines written.",
            self.written_lines(),
        );
        p.single(
            "reel_access_log_write_errors_total",
            Kind::Counter,
            "Failed access-log writes (each loses a batch).",
            self.write_errors(),
        );
    }

    /// The line format.
    pub fn format(&self) -> Format {
        self.format
    }

    fn submit(&self, batch: Batch) {
        match self.tx.try_send(Msg::Lines(batch)) {
            Ok(()) => {}
            Err(TrySendError::Full(m)) | Err(TrySendError::Disconnected(m)) => {
                if let Msg::Lines(b) = m {
                    self.dropped_lines.fetch_add(b.lines, Relaxed);
                }
            }
        }
    }
}

/// A worker's buffer. Not shared: each worker thread owns one. Dropping it hands over
/// what it holds.
pub struct LogBuffer {
    log: Arc<AccessLog>,
    buf: RefCell<Vec<u8>>,
    lines: std::cell::Cell<u64>,
    limit: usize,
    scratch: RefCell<Vec<u8>>,
}

impl LogBuffer {
    /// A buffer handed to the writer whenever it holds `limit` bytes (and on [`LogBuffer::flush`]).
    pub fn new(log: Arc<AccessLog>, limit: usize) -> LogBuffer {
        let limit = limit.max(1024);
        LogBuffer {
            log,
            buf: RefCell::new(Vec::with_capacity(limit + 1024)),
            lines: 0.into(),
            limit,
            scratch: RefCell::new(Vec::with_capacity(512)),
        }
    }

    /// Formats one line into the buffer; hands the buffer over when it is full.
    pub fn log(&self, e: &Entry<'_>) {
        let full = {
            let mut s = self.scratch.borrow_mut();
            s.clear();
            match self.log.format {
                Format::Json => json_line(&mut s, e),
                Format::Combined => combined_line(&mut s, e),
            }
            let mut b = self.buf.borrow_mut();
            b.extend_from_slice(&s);
            self.lines.set(self.lines.get() + 1);
            b.len() >= self.limit
        };
        if full {
            self.flush();
        }
    }

    /// Hands whatever is buffered to the writer (called by a per-worker timer).
    pub fn flush(&self) {
        let mut b = self.buf.borrow_mut();
        if b.is_empty() {
            return;
        }
        let bytes = std::mem::replace(&mut *b, Vec::with_capacity(self.limit + 1024));
        let lines = self.lines.replace(0);
        self.log.submit(Batch { bytes, lines });
    }
}

impl Drop for LogBuffer {
    fn drop(&mut self) {
        // Requests that finish while a worker drains log after its last timer flush.
        self.flush();
    }
}

enum Sink {
    Stdout,
    File(File),
}

impl Sink {
    fn open(path: &PathBuf) -> std::io::Result<Sink> {
        if path.as_os_str() == "-" {
            return Ok(Sink::Stdout);
        }
        Ok(Sink::File(OpenOptions::new().create(true).append(true).open(path)?))
    }

    fn write_all(&mut self, b: &[u8]) -> std::io::Result<()> {
        match self {
            Sink::Stdout => std::io::stdout().lock().write_all(b),
            Sink::File(f) => f.write_all(b),
        }
    }
}

struct Writer {
    rx: Receiver<Msg>,
    sink: Sink,
    path: PathBuf,
    reopen: Arc<AtomicBool>,
    written: Arc<AtomicU64>,
    errors: Arc<AtomicU64>,
}

impl Writer {
    fn run(mut self) {
        let last_err = Mutex::new(None::<std::time::Instant>);
        loop {
            let msg = match self.rx.recv_timeout(Duration::from_millis(500)) {
                Ok(m) => Some(m),
                Err(RecvTimeoutError::Timeout) => None,
                Err(RecvTimeoutError::Disconnected) => return,
            };
            if self.reopen.swap(false, Relaxed) {
                match Sink::open(&self.path) {
                    Ok(s) => self.sink = s,
                    Err(e) => {
                        tracing::error!(path = %self.path.display(), error = %e, "access log reopen failed; keeping the old file")
                    }
                }
            }
            let b = match msg {
                Some(Msg::Lines(b)) if !b.bytes.is_empty() => b,
                Some(Msg::Close) => return,
                _ => continue,
            };
            match self.sink.write_all(&b.bytes) {
                Ok(()) => {
                    self.written.fetch_add(b.lines, Relaxed);
                }
                Err(e) => {
                    self.errors.fetch_add(1, Relaxed);
                    if let Ok(mut l) = last_err.lock() {
                        let now = std::time::Instant::now();
                        if l.is_none_or(|t| now.duration_since(t) > Duration::from_secs(10)) {
                            *l = Some(now);
                            tracing::error!(path = %self.path.display(), error = %e, "access log write failed");
                        }
                    }
                }
            }
        }
    }
}

/// Appends `b` as a JSON string: UTF-8 as is (escaped by serde_json), each byte that is
/// not part of valid UTF-8 as the text `\xNN`.
fn json_str(s: &mut Vec<u8>, b: &[u8]) {
    let text: std::borrow::Cow<'_, str> = match std::str::from_utf8(b) {
        Ok(t) => t.into(),
        Err(_) => {
            let mut t = String::with_capacity(b.len() + 8);
            for chunk in b.utf8_chunks() {
                t.push_str(chunk.valid());
                for byte in chunk.invalid() {
                    let _ = write!(t, "\\x{byte:02x}");
                }
            }
            t.into()
        }
    };
    // Serializing a str into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *s, text.as_ref());
}

fn json_line(s: &mut Vec<u8>, e: &Entry<'_>) {
    s.extend_from_slice(b"{\"time\":\"");
    rfc3339(s, e.time);
    let _ = write!(s, "\",\"client\":\"{}\"", e.client.ip());
    if let Some(p) = e.peer {
        let _ = write!(s, ",\"peer\":\"{p}\"");
    }
    s.extend_from_slice(b",\"method\":");
    json_str(s, e.method.as_bytes());
    s.extend_from_slice(b",\"host\":");
    json_str(s, e.host);
    s.extend_from_slice(b",\"path\":");
    json_str(s, e.target);
    s.extend_from_slice(b",\"protocol\":");
    json_str(s, e.protocol.as_bytes());
    let _ = write!(s, ",\"status\":{},\"bytes\":{},\"cache\":", e.status, e.bytes);
    json_str(s, e.cache.as_bytes());
    match e.origin_time {
        Some(d) => {
            let _ = write!(s, ",\"origin_ms\":{:.3}", d.as_secs_f64() * 1000.0);
        }
        None => s.extend_from_slice(b",\"origin_ms\":null"),
    }
    let _ = write!(s, ",\"total_ms\":{:.3},\"ua\":", e.total_time.as_secs_f64() * 1000.0);
    json_str(s, e.user_agent);
    if let Some(r) = &e.refused {
        s.extend_from_slice(b",\"request\":");
        json_str(s, r.request_line);
        s.extend_from_slice(b",\"error\":");
        json_str(s, r.reason.as_bytes());
    }
    if let Some(d) = e.denied {
        s.extend_from_slice(b",\"denied\":");
        json_str(s, d.as_bytes());
    }
    if let Some(c) = &e.cmcd {
        crate::access_log_cmcd::json(s, c);
    }
    s.extend_from_slice(b"}\n");
}

fn quoted(s: &mut Vec<u8>, b: &[u8]) {
    for &c in b {
        match c {
            b'"' | b'\\' => {
                let _ = write!(s, "\\x{:02x}", c);
            }
            0x20..=0x7e => s.push(c),
            _ => {
                let _ = write!(s, "\\x{:02x}", c);
            }
        }
    }
}

fn combined_line(s: &mut Vec<u8>, e: &Entry<'_>) {
    let _ = write!(s, "{} - - [", e.client.ip());
    clf_time(s, e.time);
    match &e.refused {
        // `%r` is the request line as it came, as nginx logs a request it refused.
        Some(r) => {
            s.extend_from_slice(b"] \"");
            quoted(s, r.request_line);
        }
        None => {
            let _ = write!(s, "] \"{} ", e.method);
            quoted(s, e.target);
            s.push(b' ');
            quoted(s, e.protocol.as_bytes());
        }
    }
    let _ = write!(s, "\" {} {} \"-\" \"", e.status, e.bytes);
    quoted(s, e.user_agent);
    s.extend_from_slice(b"\" host=\"");
    quoted(s, e.host);
    let _ = write!(s, "\" cache={}", e.cache);
    match e.origin_time {
        Some(d) => {
            let _ = write!(s, " origin_ms={:.3}", d.as_secs_f64() * 1000.0);
        }
        None => s.extend_from_slice(b" origin_ms=-"),
    }
    let _ = write!(s, " total_ms={:.3}", e.total_time.as_secs_f64() * 1000.0);
    if let Some(p) = e.peer {
        let _ = write!(s, " peer={p}");
    }
    if let Some(r) = &e.refused {
        s.extend_from_slice(b" error=\"");
        quoted(s, r.reason.as_bytes());
        s.push(b'"');
    }
    if let Some(d) = e.denied {
        s.extend_from_slice(b" denied=");
        quoted(s, d.as_bytes());
    }
    if let Some(c) = &e.cmcd {
        crate::access_log_cmcd::combined(s, c);
    }
    s.push(b'\n');
}

/// (year, month, day, hour, minute, second, millisecond) in UTC.
fn civil(t: SystemTime) -> (i64, u32, u32, u32, u32, u32, u32) {
    let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = d.as_secs() as i64;
    let days = secs.div_euclid(86_400);
    let sod = secs.rem_euclid(86_400) as u32;
    // Howard Hinnant's days-to-civil algorithm.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day, sod / 3600, sod / 60 % 60, sod % 60, d.subsec_millis())
}

fn rfc3339(s: &mut Vec<u8>, t: SystemTime) {
    let (y, mo, d, h, mi, se, ms) = civil(t);
    let _ = write!(s, "{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{se:02}.{ms:03}Z");
}

fn clf_time(s: &mut Vec<u8>, t: SystemTime) {
    const M: [&str; 12] =
        ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
    let (y, mo, d, h, mi, se, _) = civil(t);
    let _ = write!(s, "{d:02}/{}/{y:04}:{h:02}:{mi:02}:{se:02} +0000", M[(mo - 1) as usize % 12]);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(path: &[u8]) -> Entry<'_> {
        Entry {
            time: UNIX_EPOCH + Duration::from_millis(1_795_000_000_123),
            client: "127.0.0.1:5555".parse().unwrap(),
            peer: None,
            method: "GET",
            host: b"live.example.com",
            target: path,
            protocol: "HTTP/1.1",
            status: 200,
            bytes: 1234,
            cache: "hit",
            origin_time: None,
            total_time: Duration::from_micros(1500),
            user_agent: b"player/1.0",
            refused: None,
            denied: None,
            cmcd: None,
        }
    }

    fn refused_entry(line: &[u8]) -> Entry<'_> {
        Entry {
            method: "",
            host: b"",
            target: b"",
            protocol: "",
            status: 414,
            bytes: 120,
            cache: "local",
            user_agent: b"",
            refused: Some(Refused { request_line: line, reason: "request line too long" }),
            ..entry(b"")
        }
    }

    #[test]
    fn refused_requests_log_their_line_escaped() {
        let line = b"GET /a\"b\xff\x01";
        let mut s = Vec::new();
        json_line(&mut s, &refused_entry(line));
        let v: serde_json::Value = serde_json::from_slice(&s).expect("valid JSON");
        assert_eq!(v["request"], "GET /a\"b\\xff\u{1}");
        assert_eq!(v["error"], "request line too long");
        assert_eq!((v["status"].as_u64(), v["cache"].as_str()), (Some(414), Some("local")));
        let mut s = Vec::new();
        combined_line(&mut s, &refused_entry(line));
        assert_eq!(
            text(s),
            "127.0.0.1 - - [18/Nov/2026:11:06:40 +0000] \"GET /a\\x22b\\xff\\x01\" 414 120 \"-\" \
             \"\" host=\"\" cache=local origin_ms=- total_ms=1.500 error=\"request line too long\"\n"
        );
        let mut s = Vec::new();
        json_line(&mut s, &entry(b"/ok"));
        let v: serde_json::Value = serde_json::from_slice(&s).expect("valid JSON");
        assert!(v.get("request").is_none() && v.get("error").is_none(), "{v}");
    }

    #[test]
    fn requests_refused_by_access_rules_log_the_reason() {
        let e = Entry { status: 429, cache: "local", denied: Some("rate_limited"), ..entry(b"/a") };
        let mut s = Vec::new();
        json_line(&mut s, &e);
        let v: serde_json::Value = serde_json::from_slice(&s).expect("valid JSON");
        assert_eq!((v["status"].as_u64(), v["denied"].as_str()), (Some(429), Some("rate_limited")));
        let mut s = Vec::new();
        combined_line(&mut s, &e);
        assert!(text(s).ends_with(" denied=rate_limited\n"));
        let mut s = Vec::new();
        json_line(&mut s, &entry(b"/ok"));
        let v: serde_json::Value = serde_json::from_slice(&s).expect("valid JSON");
        assert!(v.get("denied").is_none(), "{v}");
    }

    fn wait_for(p: &std::path::Path, lines: usize) -> String {
        for _ in 0..200 {
            let t = std::fs::read_to_string(p).unwrap_or_default();
            if t.lines().count() >= lines {
                return t;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        std::fs::read_to_string(p).unwrap_or_default()
    }

    fn text(b: Vec<u8>) -> String {
        String::from_utf8(b).unwrap()
    }

    fn json_of(path: &[u8]) -> serde_json::Value {
        let mut s = Vec::new();
        json_line(&mut s, &entry(path));
        assert_eq!(s.last(), Some(&b'\n'));
        serde_json::from_slice(&s)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&s)))
    }

    #[test]
    fn the_socket_peer_is_logged_when_it_is_not_the_client() {
        let v = json_of(b"/a");
        assert_eq!(v["client"], "127.0.0.1");
        assert!(v.get("peer").is_none(), "{v}");
        let e = Entry { peer: Some("10.0.0.2".parse().unwrap()), ..entry(b"/a") };
        let mut s = Vec::new();
        json_line(&mut s, &e);
        let v: serde_json::Value = serde_json::from_slice(&s).expect("valid JSON");
        assert_eq!(
            (v["client"].as_str(), v["peer"].as_str()),
            (Some("127.0.0.1"), Some("10.0.0.2"))
        );
        let mut s = Vec::new();
        combined_line(&mut s, &e);
        let line = text(s);
        assert!(line.starts_with("127.0.0.1 - - ["), "{line}");
        assert!(line.ends_with(" total_ms=1.500 peer=10.0.0.2\n"), "{line}");
    }

    #[test]
    fn dates_format_in_utc() {
        let mut s = Vec::new();
        rfc3339(&mut s, UNIX_EPOCH + Duration::from_millis(951_782_400_500));
        assert_eq!(text(s), "2000-02-29T00:00:00.500Z");
        let mut s = Vec::new();
        clf_time(&mut s, UNIX_EPOCH + Duration::from_secs(1_795_000_000));
        assert_eq!(text(s), "18/Nov/2026:11:06:40 +0000");
    }

    #[test]
    fn json_lines_are_valid_json_even_with_hostile_bytes() {
        let v = json_of(b"/a\"b\\c\x01\x7f");
        assert_eq!(v["path"], "/a\"b\\c\u{1}\u{7f}");
        assert_eq!(v["status"], 200);
        assert_eq!(v["cache"], "hit");
        assert_eq!(v["time"], "2026-11-18T11:06:40.123Z");
        assert_eq!(v["origin_ms"], serde_json::Value::Null);
        assert_eq!(v["total_ms"], 1.5);
    }

    #[test]
    fn json_keeps_non_ascii_utf8() {
        let path = "/видео/épisode 1/セグメント.ts";
        assert_eq!(json_of(path.as_bytes())["path"], path);
    }

    #[test]
    fn json_writes_invalid_utf8_bytes_as_hex_text() {
        // A lone byte, a truncated sequence after valid text, and a valid sequence between.
        let v = json_of(b"/a\xffb/\xc3\xa9\xe2\x82");
        assert_eq!(v["path"], "/a\\xffb/\u{e9}\\xe2\\x82");
    }

    #[test]
    fn refusals_by_the_access_rules_name_their_reason() {
        let e =
            Entry { status: 403, cache: "local", denied: Some("token_expired"), ..entry(b"/a.ts") };
        let mut s = Vec::new();
        json_line(&mut s, &e);
        let v: serde_json::Value = serde_json::from_slice(&s).expect("valid JSON");
        assert_eq!(v["denied"], "token_expired");
        let mut s = Vec::new();
        combined_line(&mut s, &e);
        assert!(text(s).ends_with(" total_ms=1.500 denied=token_expired\n"));
        let mut s = Vec::new();
        json_line(&mut s, &entry(b"/a.ts"));
        assert!(!text(s).contains("denied"), "no field on lines that were not refused");
    }

    #[test]
    fn combined_line_shape() {
        let mut s = Vec::new();
        combined_line(&mut s, &entry(b"/seg_1.ts"));
        assert_eq!(
            text(s),
            "127.0.0.1 - - [18/Nov/2026:11:06:40 +0000] \"GET /seg_1.ts HTTP/1.1\" 200 1234 \"-\" \
             \"player/1.0\" host=\"live.example.com\" cache=hit origin_ms=- total_ms=1.500\n"
        );
    }

    #[test]
    fn close_returns_once_every_handed_over_line_is_written() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("access.log");
        let log = AccessLog::open(p.clone(), Format::Json).unwrap();
        // `a` hands over a few batches (the queue holds 64, so none is dropped however slow
        // the writer thread is on a loaded machine).
        let a = LogBuffer::new(log.clone(), 16 * 1024);
        let b = LogBuffer::new(log.clone(), 1024 * 1024);
        for i in 0..1000 {
            a.log(&entry(format!("/a/{i}").as_bytes()));
            b.log(&entry(format!("/b/{i}").as_bytes()));
        }
        // `b` never filled: its lines reach the writer because it is dropped.
        drop((a, b));
        assert!(log.close(Duration::from_secs(30)));
        let t = std::fs::read_to_string(&p).unwrap();
        assert_eq!(t.lines().count(), 2000);
        assert_eq!(log.written_lines(), 2000);
        assert_eq!(log.dropped_lines(), 0);
        assert!(log.close(Duration::ZERO), "a second close is a no-op");
    }

    #[test]
    fn close_gives_up_on_a_stalled_writer() {
        use std::os::unix::fs::OpenOptionsExt;
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("fifo");
        crate::sys::mkfifo(&p).unwrap();
        // A reader that never reads: once the pipe buffer is full, the writer blocks.
        let _reader =
            OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(&p).unwrap();
        let log = AccessLog::open(p, Format::Json).unwrap();
        let buf = LogBuffer::new(log.clone(), 64 * 1024);
        let long = vec![b'a'; 900];
        for _ in 0..1_000 {
            buf.log(&entry(&long));
        }
        buf.flush();
        assert!(!log.close(Duration::from_millis(200)));
    }

    #[test]
    fn batches_reach_the_file_and_reopen_follows_a_rename() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("access.log");
        let log = AccessLog::open(p.clone(), Format::Json).unwrap();
        let buf = LogBuffer::new(log.clone(), 1024);
        buf.log(&entry(b"/one"));
        buf.flush();
        assert!(wait_for(&p, 1).contains("/one"));
        let rotated = dir.path().join("access.log.1");
        std::fs::rename(&p, &rotated).unwrap();
        log.reopen();
        // The reopen happens before the next batch is written.
        std::thread::sleep(Duration::from_millis(50));
        buf.log(&entry(b"/two"));
        buf.flush();
        let fresh = wait_for(&p, 1);
        assert!(fresh.contains("/two"), "new file has the new line: {fresh:?}");
        assert!(!std::fs::read_to_string(&rotated).unwrap().contains("/two"));
        assert_eq!(log.written_lines(), 2);
    }

    #[test]
    fn a_full_buffer_is_handed_over_without_flush() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.log");
        let log = AccessLog::open(p.clone(), Format::Combined).unwrap();
        let buf = LogBuffer::new(log, 1024);
        for _ in 0..20 {
            buf.log(&entry(b"/x"));
        }
        assert!(wait_for(&p, 5).lines().count() >= 5);
    }

    #[test]
    fn a_stalled_disk_drops_and_counts_lines_instead_of_blocking() {
        use std::os::unix::fs::OpenOptionsExt;
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("fifo");
        crate::sys::mkfifo(&p).unwrap();
        // A reader that never reads: once the pipe buffer is full, the writer blocks.
        let _reader =
            OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(&p).unwrap();
        let log = AccessLog::open(p, Format::Json).unwrap();
        let buf = LogBuffer::new(log.clone(), 1024);
        let long = vec![b'a'; 900];
        for _ in 0..5_000 {
            buf.log(&entry(&long));
        }
        assert!(log.dropped_lines() > 0, "lines are dropped, the worker goes on");
    }
}
