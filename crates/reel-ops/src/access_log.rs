//! The access log: one line per request, formatted on the worker into a per-worker buffer
//! and written in batches by a writer thread that workers never wait for.
//!
//! A worker hands a full buffer to the writer with a non-blocking `try_send` on a bounded
//! channel; when the disk is slow and the channel is full, the batch is dropped and its
//! lines are counted (`reel_access_log_dropped_lines_total`) rather than stalling requests.
//! SIGUSR1 (logrotate's convention) sets a flag that makes the writer reopen the file
//! before its next write.

use std::cell::RefCell;
use std::fmt::Write as _;
use std::fs::{File, OpenOptions};
use std::io::Write as _;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TrySendError, sync_channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

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
    /// The client's address.
    pub client: SocketAddr,
    /// The request method.
    pub method: &'a str,
    /// The Host header (empty if none).
    pub host: &'a [u8],
    /// The request target (path and query).
    pub target: &'a [u8],
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
}

/// The process-wide access log: the writer thread's mailbox and counters.
pub struct AccessLog {
    tx: SyncSender<Batch>,
    format: Format,
    reopen: Arc<AtomicBool>,
    dropped_lines: AtomicU64,
    written_lines: Arc<AtomicU64>,
    write_errors: Arc<AtomicU64>,
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
        std::thread::Builder::new()
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
        }))
    }

    /// Asks the writer to reopen the file before its next write (SIGUSR1).
    pub fn reopen(&self) {
        self.reopen.store(true, Relaxed);
        // Wake the writer so an idle log reopens promptly.
        let _ = self.tx.try_send(Batch { bytes: Vec::new(), lines: 0 });
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

    /// The line format.
    pub fn format(&self) -> Format {
        self.format
    }

    fn submit(&self, batch: Batch) {
        match self.tx.try_send(batch) {
            Ok(()) => {}
            Err(TrySendError::Full(b)) | Err(TrySendError::Disconnected(b)) => {
                self.dropped_lines.fetch_add(b.lines, Relaxed);
            }
        }
    }
}

/// A worker's buffer. Not shared: each worker thread owns one.
pub struct LogBuffer {
    log: Arc<AccessLog>,
    buf: RefCell<Vec<u8>>,
    lines: std::cell::Cell<u64>,
    limit: usize,
    scratch: RefCell<String>,
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
            scratch: RefCell::new(String::with_capacity(512)),
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
            b.extend_from_slice(s.as_bytes());
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
    rx: Receiver<Batch>,
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
            let batch = match self.rx.recv_timeout(Duration::from_millis(500)) {
                Ok(b) => Some(b),
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
            let Some(b) = batch else { continue };
            if b.bytes.is_empty() {
                continue;
            }
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

fn json_str(s: &mut String, b: &[u8]) {
    s.push('"');
    for &c in b {
        match c {
            b'"' => s.push_str("\\\""),
            b'\\' => s.push_str("\\\\"),
            0x20..=0x7e => s.push(c as char),
            _ => {
                let _ = write!(s, "\\u{:04x}", c);
            }
        }
    }
    s.push('"');
}

fn json_line(s: &mut String, e: &Entry<'_>) {
    s.push_str("{\"time\":\"");
    rfc3339(s, e.time);
    let _ = write!(s, "\",\"client\":\"{}\",\"method\":", e.client.ip());
    json_str(s, e.method.as_bytes());
    s.push_str(",\"host\":");
    json_str(s, e.host);
    s.push_str(",\"path\":");
    json_str(s, e.target);
    let _ = write!(s, ",\"status\":{},\"bytes\":{},\"cache\":\"{}\"", e.status, e.bytes, e.cache);
    match e.origin_time {
        Some(d) => {
            let _ = write!(s, ",\"origin_ms\":{:.3}", d.as_secs_f64() * 1000.0);
        }
        None => s.push_str(",\"origin_ms\":null"),
    }
    let _ = write!(s, ",\"total_ms\":{:.3},\"ua\":", e.total_time.as_secs_f64() * 1000.0);
    json_str(s, e.user_agent);
    s.push_str("}\n");
}

fn quoted(s: &mut String, b: &[u8]) {
    for &c in b {
        match c {
            b'"' | b'\\' => {
                let _ = write!(s, "\\x{:02x}", c);
            }
            0x20..=0x7e => s.push(c as char),
            _ => {
                let _ = write!(s, "\\x{:02x}", c);
            }
        }
    }
}

fn combined_line(s: &mut String, e: &Entry<'_>) {
    let _ = write!(s, "{} - - [", e.client.ip());
    clf_time(s, e.time);
    let _ = write!(s, "] \"{} ", e.method);
    quoted(s, e.target);
    let _ = write!(s, " HTTP/1.1\" {} {} \"-\" \"", e.status, e.bytes);
    quoted(s, e.user_agent);
    s.push_str("\" host=\"");
    quoted(s, e.host);
    let _ = write!(s, "\" cache={}", e.cache);
    match e.origin_time {
        Some(d) => {
            let _ = write!(s, " origin_ms={:.3}", d.as_secs_f64() * 1000.0);
        }
        None => s.push_str(" origin_ms=-"),
    }
    let _ = writeln!(s, " total_ms={:.3}", e.total_time.as_secs_f64() * 1000.0);
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

fn rfc3339(s: &mut String, t: SystemTime) {
    let (y, mo, d, h, mi, se, ms) = civil(t);
    let _ = write!(s, "{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{se:02}.{ms:03}Z");
}

fn clf_time(s: &mut String, t: SystemTime) {
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
            method: "GET",
            host: b"live.example.com",
            target: path,
            status: 200,
            bytes: 1234,
            cache: "hit",
            origin_time: None,
            total_time: Duration::from_micros(1500),
            user_agent: b"player/1.0",
        }
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

    #[test]
    fn dates_format_in_utc() {
        let mut s = String::new();
        rfc3339(&mut s, UNIX_EPOCH + Duration::from_millis(951_782_400_500));
        assert_eq!(s, "2000-02-29T00:00:00.500Z");
        s.clear();
        clf_time(&mut s, UNIX_EPOCH + Duration::from_secs(1_795_000_000));
        assert_eq!(s, "18/Nov/2026:11:06:40 +0000");
    }

    #[test]
    fn json_lines_are_valid_json_even_with_hostile_bytes() {
        let mut s = String::new();
        json_line(&mut s, &entry(b"/a\"b\\c\x01\xff"));
        let v: serde_json::Value = serde_json::from_str(s.trim_end()).unwrap();
        assert_eq!(v["path"], "/a\"b\\c\u{1}\u{ff}");
        assert_eq!(v["status"], 200);
        assert_eq!(v["cache"], "hit");
        assert_eq!(v["time"], "2026-11-18T11:06:40.123Z");
    }

    #[test]
    fn combined_line_shape() {
        let mut s = String::new();
        combined_line(&mut s, &entry(b"/seg_1.ts"));
        assert_eq!(
            s,
            "127.0.0.1 - - [18/Nov/2026:11:06:40 +0000] \"GET /seg_1.ts HTTP/1.1\" 200 1234 \"-\" \
             \"player/1.0\" host=\"live.example.com\" cache=hit origin_ms=- total_ms=1.500\n"
        );
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
        let c = std::ffi::CString::new(p.to_str().unwrap()).unwrap();
        // SAFETY: c is a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
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
