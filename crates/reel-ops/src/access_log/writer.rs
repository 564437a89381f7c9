//! One thread per sink and its bounded mailbox: workers hand batches over with a
//! non-blocking `try_send` and never wait; a full mailbox drops the batch and counts its
//! lines against the sink. A sink's memory is thus at most [`QUEUE_BATCHES`] batches of
//! one worker buffer each (shared with the other sinks), plus what the sink itself holds.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TrySendError, sync_channel};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;

/// Batches a sink's mailbox holds before workers start dropping lines.
pub(crate) const QUEUE_BATCHES: usize = 64;

/// Longest a sink thread sleeps without looking at its reopen flag and its timers.
const IDLE: Duration = Duration::from_millis(500);

/// Write failures of one sink are logged at most this often.
const ERROR_LOG_EVERY: Duration = Duration::from_secs(10);

/// Lines handed over together: whole lines, each ending in `\n`.
#[derive(Clone)]
pub(crate) struct Batch {
    pub(crate) bytes: Bytes,
    pub(crate) lines: u64,
}

/// What a sink thread receives, in order.
enum Msg {
    /// Lines to ship.
    Lines(Batch),
    /// Wakes an idle sink (so a reopen happens promptly).
    Wake,
    /// Everything before it is shipped: flush and exit.
    Close,
}

/// The counts of one sink, shared by its thread, the workers and `/metrics`.
#[derive(Default)]
pub(crate) struct SinkStats {
    pub(crate) written: AtomicU64,
    pub(crate) dropped: AtomicU64,
    pub(crate) errors: AtomicU64,
    /// When lines were last dropped, in seconds since the epoch (0: never).
    pub(crate) last_drop: AtomicU64,
    /// The last delivery failure, for `/healthz` details.
    last_error: Mutex<Option<(Instant, String)>>,
}

impl SinkStats {
    /// Lines that will never reach the sink.
    pub(crate) fn dropped(&self, lines: u64) {
        self.dropped.fetch_add(lines, Relaxed);
        let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
        self.last_drop.store(now, Relaxed);
    }

    /// A failed delivery: counted, its lines dropped, logged at most every 10 s.
    pub(crate) fn failed(&self, sink: &str, lines: u64, error: &str) {
        self.errors.fetch_add(1, Relaxed);
        self.dropped(lines);
        let Ok(mut last) = self.last_error.lock() else { return };
        let now = Instant::now();
        let log = last.as_ref().is_none_or(|(t, _)| now.duration_since(*t) > ERROR_LOG_EVERY);
        if log {
            tracing::error!(sink, error, "access log delivery failed; lines dropped");
        }
        let at = match &*last {
            Some((t, _)) if !log => *t,
            _ => now,
        };
        *last = Some((at, error.to_owned()));
    }

    /// The last delivery failure, if any.
    pub(crate) fn last_error(&self) -> Option<String> {
        self.last_error.lock().ok().and_then(|l| l.as_ref().map(|(_, e)| e.clone()))
    }
}

/// What a sink does with the lines its thread receives.
pub(crate) trait Out: Send + 'static {
    /// Ships (or starts to gather) one batch, counting into `st`.
    fn put(&mut self, b: &Batch, st: &SinkStats);
    /// Ships what is due; everything when `closing`.
    fn flush(&mut self, _closing: bool, _st: &SinkStats) {}
    /// How long until [`Out::flush`] has something due, if anything is waiting.
    fn due(&self) -> Option<Duration> {
        None
    }
    /// Opens the destination again (SIGUSR1).
    fn reopen(&mut self) {}
}

/// A sink's mailbox, counts and thread.
pub(crate) struct SinkHandle {
    pub(crate) name: String,
    pub(crate) kind: &'static str,
    tx: SyncSender<Msg>,
    pub(crate) stats: Arc<SinkStats>,
    reopen: Arc<AtomicBool>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl SinkHandle {
    /// Starts the thread of `out`.
    pub(crate) fn spawn(
        name: String,
        kind: &'static str,
        out: Box<dyn Out>,
    ) -> std::io::Result<SinkHandle> {
        let (tx, rx) = sync_channel(QUEUE_BATCHES);
        let stats = Arc::new(SinkStats::default());
        let reopen = Arc::new(AtomicBool::new(false));
        let (st, flag, label) = (stats.clone(), reopen.clone(), name.clone());
        let thread = std::thread::Builder::new()
            .name("reel-accesslog".into())
            .spawn(move || run(rx, out, &st, &flag, &label))?;
        Ok(SinkHandle { name, kind, tx, stats, reopen, thread: Mutex::new(Some(thread)) })
    }

    /// Hands a batch over, or drops and counts it when the mailbox is full.
    pub(crate) fn offer(&self, b: Batch) {
        match self.tx.try_send(Msg::Lines(b)) {
            Ok(()) => {}
            Err(TrySendError::Full(m)) | Err(TrySendError::Disconnected(m)) => {
                if let Msg::Lines(b) = m {
                    self.stats.dropped(b.lines);
                }
            }
        }
    }

    /// Asks the thread to reopen its destination before its next write.
    pub(crate) fn reopen(&self) {
        self.reopen.store(true, Relaxed);
        let _ = self.tx.try_send(Msg::Wake);
    }

    /// Queues the close behind every batch handed over; `false` if the mailbox stayed full
    /// until `deadline`.
    pub(crate) fn send_close(&self, deadline: Instant) -> bool {
        let mut msg = Msg::Close;
        loop {
            match self.tx.try_send(msg) {
                Ok(()) | Err(TrySendError::Disconnected(_)) => return true,
                Err(TrySendError::Full(m)) if Instant::now() < deadline => {
                    msg = m;
                    std::thread::sleep(Duration::from_millis(5));
                }
                Err(TrySendError::Full(_)) => return false,
            }
        }
    }

    /// Joins the thread once it has finished; `false` if it had not by `deadline` (it is
    /// then left behind).
    pub(crate) fn join(&self, deadline: Instant) -> bool {
        let Some(t) = self.thread.lock().ok().and_then(|mut t| t.take()) else { return true };
        while !t.is_finished() {
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        t.join().is_ok()
    }

    /// Whether the thread is still to be joined.
    pub(crate) fn running(&self) -> bool {
        self.thread.lock().is_ok_and(|t| t.is_some())
    }
}

fn run(rx: Receiver<Msg>, mut out: Box<dyn Out>, st: &SinkStats, reopen: &AtomicBool, name: &str) {
    loop {
        let wait = out.due().map_or(IDLE, |d| d.min(IDLE));
        let msg = match rx.recv_timeout(wait) {
            Ok(m) => Some(m),
            Err(RecvTimeoutError::Timeout) => None,
            Err(RecvTimeoutError::Disconnected) => Some(Msg::Close),
        };
        if reopen.swap(false, Relaxed) {
            tracing::debug!(sink = name, "access log sink reopens");
            out.reopen();
        }
        match msg {
            Some(Msg::Lines(b)) if !b.bytes.is_empty() => out.put(&b, st),
            Some(Msg::Close) => {
                out.flush(true, st);
                return;
            }
            _ => {}
        }
        out.flush(false, st);
    }
}
