//! The HTTP sink: lines gathered into NDJSON bodies of at most `batch_lines` lines and
//! `batch_bytes` bytes, POSTed when full or `interval` after their first line (Vector's
//! `http` source, Loki's push endpoint behind a pipeline, Elasticsearch's bulk API through
//! an ingest shim), optionally gzipped, on a kept-alive HTTP/1.1 connection.
//!
//! A failed POST (no connection, a timeout, 408, 429 or 5xx) is tried again `retries`
//! times after 100 ms, 200 ms, 400 ms ...; then its lines are dropped and counted. Any
//! other answer drops them at once. Meanwhile the mailbox fills and workers drop further
//! batches: a collector that is down or stalled costs dropped lines, never a worker's time.

use std::io::{Read as _, Write as _};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use flate2::Compression;
use flate2::write::GzEncoder;

use crate::access_log::writer::{Batch, Out, SinkStats};

/// First pause before a retry; doubled for each further one.
const BACKOFF: Duration = Duration::from_millis(100);

/// Longest pause between retries.
const BACKOFF_MAX: Duration = Duration::from_secs(5);

/// Largest response head read from a collector.
const HEAD_MAX: usize = 16 * 1024;

/// A collector and how to POST to it.
#[derive(Debug, Clone, PartialEq)]
pub struct Collector {
    /// `host:port` to connect to.
    pub connect: String,
    /// The `Host` header.
    pub host: String,
    /// The request target.
    pub target: String,
    /// Gzip the body (`Content-Encoding: gzip`).
    pub gzip: bool,
    /// Lines per POST at most.
    pub batch_lines: u64,
    /// Bytes per POST (before gzip) at most.
    pub batch_bytes: usize,
    /// Longest a line waits before it is POSTed.
    pub interval: Duration,
    /// Attempts after a failed one.
    pub retries: u32,
    /// Connect, write and answer timeout.
    pub timeout: Duration,
}

/// Why a POST failed.
enum Failure {
    /// Worth another attempt.
    Retry(String),
    /// The collector refused the batch: another attempt would fare no better.
    Refused(String),
}

pub(super) struct HttpOut {
    name: String,
    c: Collector,
    pending: Vec<u8>,
    pending_lines: u64,
    since: Option<Instant>,
    conn: Option<TcpStream>,
}

impl HttpOut {
    pub(super) fn new(name: String, c: Collector) -> HttpOut {
        HttpOut { name, c, pending: Vec::new(), pending_lines: 0, since: None, conn: None }
    }

    /// POSTs what is pending, with the retries; `closing` makes one attempt only.
    fn post(&mut self, st: &SinkStats, closing: bool) {
        if self.pending.is_empty() {
            return;
        }
        let lines = std::mem::take(&mut self.pending_lines);
        self.since = None;
        let body = if self.c.gzip {
            let mut z =
                GzEncoder::new(Vec::with_capacity(self.pending.len() / 4), Compression::fast());
            // Writing into a Vec cannot fail.
            let _ = z.write_all(&self.pending);
            z.finish().unwrap_or_default()
        } else {
            std::mem::take(&mut self.pending)
        };
        self.pending.clear();
        let attempts = if closing { 1 } else { 1 + self.c.retries };
        let mut pause = BACKOFF;
        let mut why = String::new();
        for attempt in 0..attempts {
            if attempt > 0 {
                std::thread::sleep(pause);
                pause = (pause * 2).min(BACKOFF_MAX);
            }
            match self.send(&body) {
                Ok(()) => {
                    st.written.fetch_add(lines, Relaxed);
                    return;
                }
                Err(Failure::Retry(e)) => why = e,
                Err(Failure::Refused(e)) => {
                    why = e;
                    break;
                }
            }
        }
        st.failed(&self.name, lines, &why);
    }

    fn send(&mut self, body: &[u8]) -> Result<(), Failure> {
        let mut conn = match self.conn.take() {
            Some(c) => c,
            None => self.connect().map_err(|e| Failure::Retry(format!("connect: {e}")))?,
        };
        let mut head = format!(
            "POST {} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/x-ndjson\r\nContent-Length: {}\r\n",
            self.c.target,
            self.c.host,
            body.len()
        );
        if self.c.gzip {
            head.push_str("Content-Encoding: gzip\r\n");
        }
        head.push_str("User-Agent: reel-access-log\r\n\r\n");
        conn.write_all(head.as_bytes())
            .and_then(|()| conn.write_all(body))
            .map_err(|e| Failure::Retry(format!("send: {e}")))?;
        let (status, keep) =
            read_answer(&mut conn).map_err(|e| Failure::Retry(format!("answer: {e}")))?;
        if keep {
            self.conn = Some(conn);
        }
        match status {
            200..=299 => Ok(()),
            408 | 429 | 500..=599 => Err(Failure::Retry(format!("collector answered {status}"))),
            s => Err(Failure::Refused(format!("collector answered {s}"))),
        }
    }

    fn connect(&self) -> std::io::Result<TcpStream> {
        let addr = self
            .c
            .connect
            .to_socket_addrs()?
            .next()
            .ok_or_else(|| std::io::Error::other("resolves to no address"))?;
        let s = TcpStream::connect_timeout(&addr, self.c.timeout)?;
        s.set_read_timeout(Some(self.c.timeout))?;
        s.set_write_timeout(Some(self.c.timeout))?;
        s.set_nodelay(true)?;
        Ok(s)
    }
}

/// Reads the collector's answer: its status, and whether the connection can carry the
/// next POST (a `Content-Length` body, read whole, and no `Connection: close`).
fn read_answer(conn: &mut TcpStream) -> std::io::Result<(u16, bool)> {
    let mut buf = vec![0u8; 4096];
    let mut len = 0;
    loop {
        if len == buf.len() {
            if buf.len() >= HEAD_MAX {
                return Err(std::io::Error::other("answer head too large"));
            }
            buf.resize(buf.len() * 2, 0);
        }
        let n = conn.read(buf.get_mut(len..).unwrap_or_default())?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        len += n;
        let mut headers = [httparse::EMPTY_HEADER; 32];
        let mut r = httparse::Response::new(&mut headers);
        let got = buf.get(..len).unwrap_or_default();
        match r.parse(got) {
            Ok(httparse::Status::Complete(head_len)) => {
                let status = r.code.unwrap_or(0);
                // 1xx answers are not expected (no Expect: 100-continue is sent).
                let mut length = None;
                let mut close = r.version == Some(0);
                for h in r.headers.iter() {
                    if h.name.eq_ignore_ascii_case("content-length") {
                        length = std::str::from_utf8(h.value)
                            .ok()
                            .and_then(|v| v.trim().parse::<usize>().ok());
                    } else if (h.name.eq_ignore_ascii_case("connection")
                        && h.value.eq_ignore_ascii_case(b"close"))
                        // A chunked body is not read: the connection is not reused.
                        || h.name.eq_ignore_ascii_case("transfer-encoding")
                    {
                        close = true;
                    }
                }
                let Some(length) = length else { return Ok((status, false)) };
                // Read and drop the body, so the connection is at the next answer.
                let mut left = length.saturating_sub(len - head_len);
                let mut sink = [0u8; 4096];
                while left > 0 {
                    let n = conn.read(sink.get_mut(..left.min(4096)).unwrap_or_default())?;
                    if n == 0 {
                        return Ok((status, false));
                    }
                    left -= n;
                }
                return Ok((status, !close));
            }
            Ok(httparse::Status::Partial) => {}
            Err(e) => return Err(std::io::Error::other(format!("bad answer: {e}"))),
        }
    }
}

impl Out for HttpOut {
    fn put(&mut self, b: &Batch, st: &SinkStats) {
        for line in b.bytes.split_inclusive(|&c| c == b'\n') {
            if !self.pending.is_empty() && self.pending.len() + line.len() > self.c.batch_bytes {
                self.post(st, false);
            }
            if self.pending.is_empty() {
                self.since = Some(Instant::now());
            }
            self.pending.extend_from_slice(line);
            self.pending_lines += 1;
            if self.pending_lines >= self.c.batch_lines || self.pending.len() >= self.c.batch_bytes
            {
                self.post(st, false);
            }
        }
    }

    fn flush(&mut self, closing: bool, st: &SinkStats) {
        if closing || self.since.is_some_and(|t| t.elapsed() >= self.c.interval) {
            self.post(st, closing);
        }
    }

    fn due(&self) -> Option<Duration> {
        self.since.map(|t| self.c.interval.saturating_sub(t.elapsed()))
    }
}

#[cfg(test)]
mod tests {
    use std::io::{BufRead, BufReader};
    use std::net::TcpListener;
    use std::sync::atomic::Ordering::Relaxed;

    use bytes::Bytes;

    use super::*;

    fn collector(addr: &str) -> Collector {
        Collector {
            connect: addr.to_owned(),
            host: addr.to_owned(),
            target: "/in".into(),
            gzip: false,
            batch_lines: 2,
            batch_bytes: 1 << 20,
            interval: Duration::from_secs(60),
            retries: 2,
            timeout: Duration::from_secs(5),
        }
    }

    /// A collector answering the statuses in turn, one per POST, on one connection; returns
    /// its address and, once it has answered them all, the bodies it got.
    fn answering(statuses: &'static [u16]) -> (String, std::thread::JoinHandle<Vec<String>>) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap().to_string();
        let t = std::thread::spawn(move || {
            let (s, _) = l.accept().unwrap();
            let mut w = s.try_clone().unwrap();
            let mut r = BufReader::new(s);
            let mut bodies = Vec::new();
            for status in statuses {
                let mut len = 0;
                loop {
                    let mut line = String::new();
                    r.read_line(&mut line).unwrap();
                    if line == "\r\n" {
                        break;
                    }
                    if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                        len = v.trim().parse().unwrap();
                    }
                }
                let mut body = vec![0; len];
                r.read_exact(&mut body).unwrap();
                bodies.push(String::from_utf8(body).unwrap());
                write!(w, "HTTP/1.1 {status} X\r\nContent-Length: 2\r\n\r\nok").unwrap();
            }
            bodies
        });
        (addr, t)
    }

    #[test]
    fn a_failed_post_is_retried_on_the_kept_connection_then_counted() {
        let (addr, t) = answering(&[503, 204]);
        let mut out = HttpOut::new("c".into(), collector(&addr));
        let st = SinkStats::default();
        out.put(
            &Batch { bytes: Bytes::from_static(b"{\"a\":1}\n{\"a\":2}\n{\"a\":3}\n"), lines: 3 },
            &st,
        );
        // Two lines made a batch (batch_lines = 2): 503, then 204 on the retry.
        assert_eq!(t.join().unwrap(), ["{\"a\":1}\n{\"a\":2}\n", "{\"a\":1}\n{\"a\":2}\n"]);
        assert_eq!((st.written.load(Relaxed), st.dropped.load(Relaxed)), (2, 0));
        assert!(out.due().is_some(), "the third line waits for the interval");
    }

    #[test]
    fn a_refused_batch_is_not_retried_and_a_dead_collector_costs_its_lines() {
        let (addr, t) = answering(&[400]);
        let mut out = HttpOut::new("c".into(), collector(&addr));
        let st = SinkStats::default();
        out.put(&Batch { bytes: Bytes::from_static(b"{}\n{}\n"), lines: 2 }, &st);
        assert_eq!(t.join().unwrap().len(), 1, "400: one attempt");
        assert_eq!((st.dropped.load(Relaxed), st.errors.load(Relaxed)), (2, 1));
        let closed = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().to_string();
        let mut c = collector(&closed);
        c.retries = 1;
        let mut out = HttpOut::new("dead".into(), c);
        let st = SinkStats::default();
        out.put(&Batch { bytes: Bytes::from_static(b"{}\n"), lines: 1 }, &st);
        out.flush(true, &st);
        assert_eq!((st.written.load(Relaxed), st.dropped.load(Relaxed)), (0, 1));
        assert!(
            st.last_error().is_some_and(|e| e.starts_with("connect:")),
            "{:?}",
            st.last_error()
        );
    }
}
