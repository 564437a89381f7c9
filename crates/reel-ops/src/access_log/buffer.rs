//! A worker's buffer: lines are sampled, formatted and gathered here, and handed to the
//! sinks when the buffer is full or the worker's timer flushes it.

use std::cell::{Cell, RefCell};
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;

use bytes::Bytes;

use super::fields::Layout;
use super::format::{combined_line, json_line};
use super::sample::Counts;
use super::writer::Batch;
use super::{AccessLog, Entry, Format};

/// A worker's buffer. Not shared: each worker thread owns one. Dropping it hands over
/// what it holds.
pub struct LogBuffer {
    log: Arc<AccessLog>,
    layout: Arc<Layout>,
    buf: RefCell<Vec<u8>>,
    lines: Cell<u64>,
    limit: usize,
    counts: Counts,
    sampled_out: Cell<u64>,
}

impl LogBuffer {
    /// A buffer handed to the writer whenever it holds `limit` bytes (and on
    /// [`LogBuffer::flush`]), writing every field and every line.
    pub fn new(log: Arc<AccessLog>, limit: usize) -> LogBuffer {
        LogBuffer::with_layout(log, limit, Arc::new(Layout::default()))
    }

    /// The same, with the fields and sampling of `layout`.
    pub fn with_layout(log: Arc<AccessLog>, limit: usize, layout: Arc<Layout>) -> LogBuffer {
        let limit = limit.max(1024);
        LogBuffer {
            log,
            layout,
            buf: RefCell::new(Vec::with_capacity(limit + 1024)),
            lines: Cell::new(0),
            limit,
            counts: Counts::default(),
            sampled_out: Cell::new(0),
        }
    }

    /// Formats one line into the buffer, unless sampling leaves it out; hands the buffer
    /// over when it is full.
    pub fn log(&self, e: &Entry<'_>) {
        if !self.layout.sample.keeps_all() && !self.counts.keep(&self.layout.sample, e.status) {
            self.sampled_out.set(self.sampled_out.get() + 1);
            return;
        }
        let full = {
            let mut b = self.buf.borrow_mut();
            match self.log.format {
                Format::Json => json_line(&mut b, e, &self.layout.fields),
                Format::Combined => combined_line(&mut b, e),
            }
            self.lines.set(self.lines.get() + 1);
            b.len() >= self.limit
        };
        if full {
            self.flush();
        }
    }

    /// Hands whatever is buffered to the sinks (called by a per-worker timer).
    pub fn flush(&self) {
        let skipped = self.sampled_out.replace(0);
        if skipped > 0 {
            self.log.sampled_out.fetch_add(skipped, Relaxed);
        }
        let mut b = self.buf.borrow_mut();
        if b.is_empty() {
            return;
        }
        let bytes = std::mem::replace(&mut *b, Vec::with_capacity(self.limit + 1024));
        let lines = self.lines.replace(0);
        self.log.submit(Batch { bytes: Bytes::from(bytes), lines });
    }
}

impl Drop for LogBuffer {
    fn drop(&mut self) {
        // Requests that finish while a worker drains log after its last timer flush.
        self.flush();
    }
}
