//! The response body ([`OriginBody`]): static bytes or generated content, optionally paced
//! (slow streaming), optionally released on a schedule (a live part sent as it is produced,
//! with no known length, so hyper frames it chunked) and optionally cut midway (a reset after
//! a partial body).

use std::collections::VecDeque;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http_body::{Frame, SizeHint};
use tokio::time::{Instant, Sleep};

use crate::content::fill;
use crate::stats::OriginStats;

/// Chunk size when not paced: large enough that generation cost per frame is amortised.
const CHUNK: u64 = 64 << 10;
/// Pause between the last bytes before a cut and the abort, so hyper flushes what was
/// already produced and the client really sees a partial body rather than nothing.
const CUT_FLUSH: Duration = Duration::from_millis(50);

/// Where body bytes come from.
#[derive(Debug, Clone)]
pub(crate) enum Source {
    /// A prebuilt body (playlists, JSON).
    Bytes(Bytes),
    /// Generated with [`fill`] from this content key.
    Gen(u64),
}

/// The error that aborts a deliberately cut body; hyper then closes the connection.
#[derive(Debug, thiserror::Error)]
#[error("body cut by fault injection")]
pub struct BodyCut;

/// The body type of every response the simulator sends.
#[derive(Debug)]
pub struct OriginBody {
    source: Source,
    pos: u64,
    end: u64,
    first: u64,
    chunk: u64,
    cut_at: Option<u64>,
    pace: Option<Duration>,
    started: Option<Instant>,
    sleep: Option<Pin<Box<Sleep>>>,
    cutting: bool,
    /// `(when, up to)`: bytes below `up to` may not leave before `when`.
    schedule: VecDeque<(Instant, u64)>,
    /// Where the bytes sent are counted.
    counted: Option<OriginStats>,
}

impl OriginBody {
    /// An empty body (HEAD, 304, 204).
    pub(crate) fn empty() -> Self {
        Self::new(Source::Bytes(Bytes::new()), 0, 0)
    }

    /// A whole static body.
    pub(crate) fn bytes(b: impl Into<Bytes>) -> Self {
        let b = b.into();
        let len = b.len() as u64;
        Self::new(Source::Bytes(b), 0, len)
    }

    /// The bytes `[start, end)` of `source`.
    pub(crate) fn new(source: Source, start: u64, end: u64) -> Self {
        Self {
            source,
            pos: start,
            end,
            first: start,
            chunk: CHUNK,
            cut_at: None,
            pace: None,
            started: None,
            sleep: None,
            cutting: false,
            schedule: VecDeque::new(),
            counted: None,
        }
    }

    /// Counts the bytes this body sends in `stats`.
    pub(crate) fn counted(mut self, stats: &OriginStats) -> Self {
        self.counted = Some(stats.clone());
        self
    }

    /// Releases the body in steps: the bytes before each `up to` offset (relative to the
    /// body start, increasing) leave at their instant, and the length is not announced.
    pub(crate) fn scheduled(mut self, steps: impl IntoIterator<Item = (Instant, u64)>) -> Self {
        self.schedule = steps.into_iter().map(|(at, upto)| (at, self.first + upto)).collect();
        self
    }

    /// Spreads the body over `total` from the first poll (the first chunk goes at once).
    pub(crate) fn paced(mut self, total: Duration) -> Self {
        if !total.is_zero() {
            let len = self.end - self.first;
            self.chunk = (len / 64).clamp(256, CHUNK);
            self.pace = Some(total);
        }
        self
    }

    /// Stops after `n` bytes of this body and aborts the connection.
    pub(crate) fn cut_after(mut self, n: u64) -> Self {
        self.cut_at = Some(self.first + n);
        self
    }

    fn produce(&self, n: u64) -> Bytes {
        match &self.source {
            Source::Bytes(b) => b.slice(self.pos as usize..(self.pos + n) as usize),
            Source::Gen(key) => {
                let mut buf = BytesMut::zeroed(n as usize);
                fill(*key, self.pos, &mut buf);
                buf.freeze()
            }
        }
    }
}

impl http_body::Body for OriginBody {
    type Data = Bytes;
    type Error = BodyCut;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyCut>>> {
        let this = &mut *self;
        loop {
            if let Some(sleep) = this.sleep.as_mut() {
                ready!(sleep.as_mut().poll(cx));
                this.sleep = None;
                if this.cutting {
                    return Poll::Ready(Some(Err(BodyCut)));
                }
            }
            if this.pos >= this.end {
                return Poll::Ready(None);
            }
            if this.cut_at.is_some_and(|c| this.pos >= c) {
                this.cutting = true;
                this.sleep = Some(Box::pin(tokio::time::sleep(CUT_FLUSH)));
                continue;
            }
            let now = Instant::now();
            // The next scheduled step, once the bytes before it are out, is not a limit.
            while this.schedule.front().is_some_and(|&(_, upto)| this.pos >= upto) {
                this.schedule.pop_front();
            }
            let mut limit = this.end;
            if let Some(&(at, upto)) = this.schedule.front() {
                if at > now {
                    this.sleep = Some(Box::pin(tokio::time::sleep_until(at)));
                    continue;
                }
                // Everything due by now may go, up to the first step still in the future.
                limit = this
                    .schedule
                    .iter()
                    .take_while(|&&(at, _)| at <= now)
                    .last()
                    .map_or(upto, |&(_, u)| u)
                    .min(this.end);
            }
            let started = *this.started.get_or_insert(now);
            if let Some(total) = this.pace {
                let done = (this.pos - this.first) as f64 / (this.end - this.first) as f64;
                let due = started + total.mul_f64(done);
                if due > now {
                    this.sleep = Some(Box::pin(tokio::time::sleep_until(due)));
                    continue;
                }
            }
            let mut n = this.chunk.min(limit - this.pos);
            if let Some(c) = this.cut_at {
                n = n.min(c - this.pos);
            }
            let data = this.produce(n);
            this.pos += n;
            if let Some(s) = &this.counted {
                s.record_body_bytes(n);
            }
            return Poll::Ready(Some(Ok(Frame::data(data))));
        }
    }

    fn is_end_stream(&self) -> bool {
        self.pos >= self.end && self.cut_at.is_none()
    }

    fn size_hint(&self) -> SizeHint {
        if self.schedule.is_empty() {
            SizeHint::with_exact(self.end.saturating_sub(self.pos))
        } else {
            SizeHint::default()
        }
    }
}
