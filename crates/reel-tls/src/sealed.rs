//! A TLS session whose records reel seals and opens itself ([`crate::record`]), over the
//! TCP socket: the path when the kernel cannot take the keys.
//!
//! Two ways to write:
//! * as a byte stream ([`AsyncWrite`]): what is written is copied into a record buffer
//!   (from the worker's free list) and sealed there; the records leave together once the
//!   buffer holds [`bufs::OUT_RECORDS`] full ones, or at a flush (callers flush when they
//!   have nothing more to write right away, as the HTTP/2 codec and the HTTP/1.1 writer
//!   do); heads, small bodies and HTTP/2 frames go this way;
//! * in place ([`SealedStream::seal_in_place`]): the caller reads a file body straight
//!   into its own buffer at [`SealedStream::head_room`], has it sealed where it lies and
//!   writes the record to [`SealedStream::tcp`] itself, after [`AsyncWrite::poll_flush`]
//!   (records must leave in the order they were sealed). No copy of the body but the one
//!   from the page cache.
//!
//! Reads fill a received-record buffer, open each record in place and hand out its
//! plaintext; a connection holds no buffer while nothing is pending. A record that has
//! begun must be complete within the record timeout (the listener's `header_timeout`)
//! of its first byte: a client that stops inside a record cannot hold the buffer and the
//! connection until the idle timeout. At most [`MAX_EMPTY`] empty records in a row are
//! read (as rustls and BoringSSL do).
//!
//! Every refused record ends the connection with the alert that says why
//! (`bad_record_mac`, `record_overflow`, `unexpected_message`, `decode_error`), and every
//! other close of ours with `close_notify`, also when the stream is dropped without a
//! shutdown (best effort then: what the socket takes without waiting).
//!
//! Key updates (TLS 1.3, with rustls' key schedule, [`SealedStream::set_key_schedule`]):
//! a client's `KeyUpdate` updates the receiving keys, and when it asks for ours, we send
//! our own `KeyUpdate` (at once, also while we have nothing else to send) and seal with
//! the next keys after it. Our keys are updated the same way before their confidentiality
//! limit (AES-GCM, see [`crate::record::AES_GCM_LIMIT`]), when records are sealed or
//! flushed. A TLS 1.2 session (no key update exists) seals no more application data at
//! the limit: writes fail and the connection closes with `close_notify`.

use std::io::{self, IoSlice};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use rustls::kernel::KernelConnection;
use rustls::server::ServerConnectionData;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::time::{Instant, Sleep};

use crate::bufs::{self, Kind};
use crate::copy;
use crate::record::{
    DirectionKeys, MAX_PLAINTEXT, Opener, RecordError, Sealer, SessionKeys, Version, alert, content,
};
use crate::session::{CLOSE_NOTIFY, Refused, control, fatal};

/// Empty application-data records (and key updates) read in a row at most; one more is
/// `unexpected_message`.
pub const MAX_EMPTY: u8 = 32;

/// TLS 1.3 `KeyUpdate(update_not_requested)` (RFC 8446 section 4.6.3).
const KEY_UPDATE_NOT_REQUESTED: [u8; 5] = [24, 0, 0, 1, 0];

/// How long a begun record may take to arrive whole unless the acceptor says otherwise.
const RECORD_TIMEOUT: Duration = Duration::from_secs(10);

fn record_error(e: RecordError) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e)
}

/// A TLS session sealed in user space.
pub struct SealedStream {
    tcp: TcpStream,
    sealer: Sealer,
    opener: Opener,
    /// Received bytes, `[..filled]` of it: opened plaintext from `plain_start` to
    /// `plain_end`, then ciphertext from `raw_start`. Its length is its capacity (zeroed
    /// once when taken); no capacity when nothing is pending.
    rin: Vec<u8>,
    filled: usize,
    plain_start: usize,
    plain_end: usize,
    raw_start: usize,
    /// Sealed bytes not yet written, from `out_pos`.
    out: Vec<u8>,
    out_pos: usize,
    read_closed: bool,
    /// An alert (`close_notify` or a fatal one) was sealed: nothing follows it.
    notified: bool,
    tls13: bool,
    /// Empty application-data records read in a row.
    empty: u8,
    /// How long a begun record may take, and when the one in `rin` began (`None` when
    /// `rin` holds no partial record); its timer, kept once made.
    record_timeout: Duration,
    record_since: Option<Instant>,
    record_timer: Option<Pin<Box<Sleep>>>,
    /// When the first byte of the last record opened came, if it came in more than one
    /// read (for the caller's head timer; taken once).
    opened_since: Option<Instant>,
    /// rustls' key schedule of a TLS 1.3 session: the next traffic secrets at a key update.
    /// Boxed: an idle connection's future carries a pointer, not the schedule.
    schedule: Option<Box<KernelConnection<ServerConnectionData>>>,
    /// Our last record sealed was a `KeyUpdate` (several requests while we are silent get
    /// one answer).
    updated_silent: bool,
    /// A `KeyUpdate` sealed while reading waits in `out`: reading writes it too.
    update_unsent: bool,
}

impl std::fmt::Debug for SealedStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SealedStream").field("tx_seq", &self.sealer.seq()).finish()
    }
}

impl SealedStream {
    /// A session over `tcp` with `keys`; `early` is plaintext rustls already received.
    /// `None` if ring lacks the cipher.
    pub fn new(tcp: TcpStream, keys: &SessionKeys, early: Vec<u8>) -> Option<SealedStream> {
        let mut s = SealedStream {
            tcp,
            sealer: Sealer::new(keys)?,
            opener: Opener::new(keys)?,
            rin: Vec::new(),
            filled: 0,
            plain_start: 0,
            plain_end: 0,
            raw_start: 0,
            out: Vec::new(),
            out_pos: 0,
            read_closed: false,
            notified: false,
            tls13: keys.version == Version::Tls13,
            empty: 0,
            record_timeout: RECORD_TIMEOUT,
            record_since: None,
            record_timer: None,
            opened_since: None,
            schedule: None,
            updated_silent: false,
            update_unsent: false,
        };
        if !early.is_empty() {
            s.plain_end = early.len();
            s.raw_start = early.len();
            s.filled = early.len();
            s.rin = early;
        }
        Some(s)
    }

    /// How long a record may take to arrive whole once its first byte did.
    pub fn set_record_timeout(&mut self, d: Duration) {
        self.record_timeout = d;
    }

    /// Gives the session rustls' key schedule: a TLS 1.3 client's `KeyUpdate` then updates
    /// the keys (the session goes on), and the sealer updates its own before their
    /// confidentiality limit. Without it a client's `KeyUpdate` ends the session.
    pub fn set_key_schedule(&mut self, schedule: KernelConnection<ServerConnectionData>) {
        if self.tls13 {
            self.schedule = Some(Box::new(schedule));
        }
    }

    /// Lowers the sealer's confidentiality limit to `records` (tests reach it without 2^24
    /// records).
    #[cfg(feature = "testing")]
    pub fn set_seal_limit(&mut self, records: u64) {
        self.sealer.set_limit(records);
    }

    /// The socket, for writing records sealed in place.
    pub fn tcp(&self) -> &TcpStream {
        &self.tcp
    }

    /// Bytes a record needs before its payload.
    pub fn head_room(&self) -> usize {
        self.sealer.head_room()
    }

    /// Bytes a record needs after its payload.
    pub fn tail_room(&self) -> usize {
        self.sealer.tail_room()
    }

    /// When the first byte of the last record opened arrived, if the record took more
    /// than one read to arrive (`None`: it came at once); taken once. An HTTP/1.1 head's
    /// timer starts there: with the first ciphertext byte, not the first plaintext one.
    pub fn take_record_since(&mut self) -> Option<std::time::Instant> {
        self.opened_since.take().map(Instant::into_std)
    }

    /// Whether a flush has something to do before records are sealed in place: records
    /// written as a stream are pending, or the keys are due for an update (the update's
    /// record must leave before records sealed with the next keys).
    pub fn needs_flush(&self) -> bool {
        self.out_pos < self.out.len() || self.update_due()
    }

    /// Seals an application-data record whose `len`-byte payload lies at
    /// `rec[head_room()..]`; returns the record's length. Refused while records written
    /// as a stream are still pending (flush first).
    pub fn seal_in_place(&mut self, rec: &mut [u8], len: usize) -> io::Result<usize> {
        if self.out_pos < self.out.len() {
            return Err(io::Error::other("sealed records still pending; flush first"));
        }
        self.updated_silent = false;
        self.sealer.seal(content::APPLICATION_DATA, rec, len).map_err(record_error)
    }

    /// Hands out opened plaintext, if any.
    fn take_plain(&mut self, buf: &mut ReadBuf<'_>) -> bool {
        if self.plain_start == self.plain_end {
            return false;
        }
        let n = (self.plain_end - self.plain_start).min(buf.remaining());
        buf.put_slice(&self.rin[self.plain_start..self.plain_start + n]);
        self.plain_start += n;
        true
    }

    /// Opens the next complete record in `rin`, if there is one (`Ok(false)` when more
    /// bytes are needed). A control record ends the reading side.
    fn open_next(&mut self) -> Result<bool, Refused> {
        let raw = &mut self.rin[self.raw_start..self.filled];
        let refused = |e: RecordError| Refused { alert: Some(e.alert()), error: record_error(e) };
        let Some(_) = self.opener.record_len(raw).map_err(refused)? else { return Ok(false) };
        let o = self.opener.open(raw).map_err(refused)?;
        let (start, end) = (self.raw_start + o.start, self.raw_start + o.end);
        self.raw_start += o.consumed;
        self.opened_since = self.record_since.take();
        if o.typ == content::HANDSHAKE && self.schedule.is_some() {
            self.key_update(start, end)?;
            return Ok(true);
        }
        if o.typ == content::APPLICATION_DATA {
            if start == end {
                self.empty += 1;
                if self.empty > MAX_EMPTY {
                    return Err(refused(RecordError::Unexpected));
                }
            } else {
                self.empty = 0;
            }
            self.plain_start = start;
            self.plain_end = end;
            return Ok(true);
        }
        self.read_closed = true;
        control(self.tls13, o.typ, &self.rin[start..end])?;
        Ok(true)
    }

    /// A TLS 1.3 handshake record after the handshake, with a key schedule: a `KeyUpdate`
    /// (alone in its record, RFC 8446 section 5.1) updates the receiving keys and, when
    /// the client asks, ours after our own `KeyUpdate`; anything else is refused. Counted
    /// with the empty records: a flood of updates is refused like one of those.
    fn key_update(&mut self, start: usize, end: usize) -> Result<(), Refused> {
        let refused = |e: RecordError| Refused { alert: Some(e.alert()), error: record_error(e) };
        let requested = match self.rin[start..end] {
            [24, 0, 0, 1, r @ (0 | 1)] => r == 1,
            [24, 0, 0, 1, _] => {
                return Err(Refused {
                    alert: Some(alert::ILLEGAL_PARAMETER),
                    error: record_error(RecordError::Unexpected),
                });
            }
            [24, ..] => {
                return Err(Refused {
                    alert: Some(alert::DECODE_ERROR),
                    error: record_error(RecordError::Malformed),
                });
            }
            _ => {
                return Err(refused(RecordError::Unexpected));
            }
        };
        self.empty += 1;
        if self.empty > MAX_EMPTY {
            return Err(refused(RecordError::Unexpected));
        }
        let next = self.schedule.as_mut().map(|k| k.update_rx_secret());
        let keys = match next {
            Some(Ok((seq, secrets))) => DirectionKeys::from_rustls(seq, &secrets),
            _ => None,
        };
        if keys.and_then(|k| self.opener.rekey(&k)).is_none() {
            return Err(refused(RecordError::SequenceExhausted));
        }
        if requested && !self.updated_silent {
            self.update_tx()
                .map_err(|error| Refused { alert: Some(alert::INTERNAL_ERROR), error })?;
            self.update_unsent = true;
        }
        Ok(())
    }

    /// Seals our `KeyUpdate` with the current keys, then takes the next ones: every record
    /// sealed after it uses them.
    fn update_tx(&mut self) -> io::Result<()> {
        let (head, tail) = (self.sealer.head_room(), self.sealer.tail_room());
        if self.out.capacity() == 0 {
            self.out = bufs::take(Kind::Out);
        }
        let at = self.out.len();
        let len = KEY_UPDATE_NOT_REQUESTED.len();
        self.out.resize(at + head + len + tail, 0);
        self.out[at + head..at + head + len].copy_from_slice(&KEY_UPDATE_NOT_REQUESTED);
        match self.sealer.seal(content::HANDSHAKE, &mut self.out[at..], len) {
            Ok(n) => self.out.truncate(at + n),
            Err(e) => {
                self.out.truncate(at);
                return Err(record_error(e));
            }
        }
        let next = self.schedule.as_mut().map(|k| k.update_tx_secret());
        let keys = match next {
            Some(Ok((seq, secrets))) => DirectionKeys::from_rustls(seq, &secrets),
            _ => None,
        };
        keys.and_then(|k| self.sealer.rekey(&k))
            .ok_or_else(|| io::Error::other("no next TLS traffic secret"))?;
        self.updated_silent = true;
        Ok(())
    }

    /// Whether our keys are due for an update (TLS 1.3 with a key schedule only; other
    /// sessions end at the limit).
    fn update_due(&self) -> bool {
        self.schedule.is_some() && self.sealer.update_due()
    }

    /// Ends the connection for `r`: its alert is sealed (nothing is sealed after it) and
    /// sent as far as the socket takes it now; reading is over.
    fn refuse(&mut self, cx: &mut Context<'_>, r: Refused) -> io::Error {
        self.read_closed = true;
        self.plain_start = self.plain_end;
        if let Some(a) = r.alert
            && !self.notified
            && self.seal_from(content::ALERT, &[IoSlice::new(&fatal(a))]).is_ok_and(|n| n > 0)
        {
            self.notified = true;
            let _ = self.poll_drain(cx);
        }
        self.release_in();
        r.error
    }

    /// Whether the partial record in `rin` is past its time; arms the timer otherwise.
    fn record_late(&mut self, cx: &mut Context<'_>) -> bool {
        let since = *self.record_since.get_or_insert_with(Instant::now);
        let deadline = since + self.record_timeout;
        match &mut self.record_timer {
            Some(t) => {
                if t.deadline() != deadline {
                    t.as_mut().reset(deadline);
                }
            }
            None => self.record_timer = Some(Box::pin(tokio::time::sleep_until(deadline))),
        }
        self.record_timer.as_mut().is_some_and(|t| t.as_mut().poll(cx).is_ready())
    }

    /// Moves unread ciphertext to the front; gives the buffer back when nothing is left.
    fn compact(&mut self) {
        let rest = self.filled - self.raw_start;
        if rest == 0 {
            self.release_in();
            self.record_since = None;
        } else if self.raw_start > 0 {
            self.rin.copy_within(self.raw_start..self.filled, 0);
            self.filled = rest;
        }
        self.raw_start = 0;
        self.plain_start = 0;
        self.plain_end = 0;
    }

    fn release_in(&mut self) {
        if self.rin.capacity() > 0 {
            bufs::give(Kind::In, std::mem::take(&mut self.rin));
        }
        self.filled = 0;
    }

    /// Writes pending sealed bytes; `Ready(Ok)` once none are left. Our keys are updated
    /// here when due, so that records sealed in place (after a flush) never meet the limit.
    fn poll_drain(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.out_pos == self.out.len() && !self.notified && self.update_due() {
            self.update_tx()?;
        }
        while self.out_pos < self.out.len() {
            let n = std::task::ready!(
                Pin::new(&mut self.tcp).poll_write(cx, &self.out[self.out_pos..])
            )?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.out_pos += n;
        }
        if self.out.capacity() > 0 {
            bufs::give(Kind::Out, std::mem::take(&mut self.out));
        }
        self.out_pos = 0;
        self.update_unsent = false;
        Poll::Ready(Ok(()))
    }

    /// Seals `typ` records from `bufs` (at most [`bufs::OUT_RECORDS`]) into `out`; the
    /// plaintext bytes taken.
    fn seal_from(&mut self, typ: u8, data: &[IoSlice<'_>]) -> io::Result<usize> {
        if self.out.capacity() == 0 {
            self.out = bufs::take(Kind::Out);
        }
        let (head, tail) = (self.sealer.head_room(), self.sealer.tail_room());
        let mut taken = 0;
        let mut slices = data.iter().map(|s| &s[..]).filter(|s| !s.is_empty()).peekable();
        let mut cur: &[u8] = slices.next().unwrap_or(&[]);
        for _ in 0..bufs::OUT_RECORDS {
            if cur.is_empty() || self.out.len() + head + MAX_PLAINTEXT + tail > bufs::OUT_SIZE {
                break;
            }
            if typ == content::APPLICATION_DATA {
                if self.update_due() {
                    self.update_tx()?;
                }
                self.updated_silent = false;
            }
            let at = self.out.len();
            self.out.resize(at + head, 0);
            let mut len = 0;
            while len < MAX_PLAINTEXT && !cur.is_empty() {
                let n = cur.len().min(MAX_PLAINTEXT - len);
                copy::extend(&mut self.out, &cur[..n]);
                cur = &cur[n..];
                len += n;
                if cur.is_empty() {
                    cur = slices.next().unwrap_or(&[]);
                }
            }
            self.out.resize(at + head + len + tail, 0);
            let n = match self.sealer.seal(typ, &mut self.out[at..], len) {
                Ok(n) => n,
                Err(e) => {
                    // Nothing of the refused record stays; what was sealed before it goes.
                    self.out.truncate(at);
                    if taken > 0 {
                        break;
                    }
                    return Err(record_error(e));
                }
            };
            self.out.truncate(at + n);
            taken += len;
        }
        Ok(taken)
    }

    /// Whether `out` has no room for another full record.
    fn out_full(&self) -> bool {
        let room = self.sealer.head_room() + MAX_PLAINTEXT + self.sealer.tail_room();
        self.out.len() + room > bufs::OUT_SIZE
    }

    /// Sends `close_notify` once, then pending bytes.
    fn poll_close_notify(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        std::task::ready!(self.poll_drain(cx))?;
        if !self.notified {
            self.seal_from(content::ALERT, &[IoSlice::new(&CLOSE_NOTIFY)])?;
            self.notified = true;
        }
        self.poll_drain(cx)
    }
}

impl AsyncRead for SealedStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        if this.update_unsent {
            // Our answer to a client's KeyUpdate leaves without waiting for a write of ours.
            if let Poll::Ready(Err(e)) = this.poll_drain(cx) {
                return Poll::Ready(Err(e));
            }
        }
        loop {
            if this.take_plain(buf) {
                return Poll::Ready(Ok(()));
            }
            if this.read_closed {
                return Poll::Ready(Ok(()));
            }
            if this.raw_start < this.filled {
                match this.open_next() {
                    Ok(true) => continue,
                    Ok(false) => {}
                    Err(r) => return Poll::Ready(Err(this.refuse(cx, r))),
                }
            }
            this.compact();
            if this.rin.capacity() == 0 {
                this.rin = bufs::take(Kind::In);
            }
            if this.rin.len() < this.rin.capacity() {
                let cap = this.rin.capacity();
                this.rin.resize(cap, 0);
            }
            let mut rb = ReadBuf::new(&mut this.rin[this.filled..]);
            let r = Pin::new(&mut this.tcp).poll_read(cx, &mut rb);
            let n = rb.filled().len();
            this.filled += n;
            match r {
                Poll::Pending => {
                    if this.filled == 0 {
                        this.release_in();
                    } else if this.record_late(cx) {
                        this.read_closed = true;
                        this.release_in();
                        return Poll::Ready(Err(io::Error::new(
                            io::ErrorKind::TimedOut,
                            "TLS record incomplete at the record timeout",
                        )));
                    }
                    return Poll::Pending;
                }
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Ready(Ok(())) if n == 0 => {
                    if this.filled == 0 {
                        return Poll::Ready(Ok(()));
                    }
                    return Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "connection closed inside a TLS record",
                    )));
                }
                Poll::Ready(Ok(())) => {}
            }
        }
    }
}

impl AsyncWrite for SealedStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.poll_write_vectored(cx, &[IoSlice::new(buf)])
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        if data.iter().all(|s| s.is_empty()) {
            return Poll::Ready(Ok(0));
        }
        // Records wait in `out` until it has no room for another full one, or a flush:
        // an HTTP/2 connection writes frame by frame, and four records then leave in one
        // write(2) instead of four.
        if this.out_full() {
            std::task::ready!(this.poll_drain(cx))?;
        }
        let taken = this.seal_from(content::APPLICATION_DATA, data)?;
        if this.out_full() {
            // The bytes are committed (sealed with their sequence numbers): what the
            // socket does not take now leaves at the next write or flush.
            if let Poll::Ready(Err(e)) = this.poll_drain(cx) {
                return Poll::Ready(Err(e));
            }
        }
        Poll::Ready(Ok(taken))
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.poll_drain(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        std::task::ready!(self.poll_close_notify(cx))?;
        Pin::new(&mut self.tcp).poll_shutdown(cx)
    }
}

impl Drop for SealedStream {
    /// A close without a shutdown still says `close_notify` (after what is pending), as
    /// far as the socket takes it without waiting.
    fn drop(&mut self) {
        self.release_in();
        if !self.notified
            && self.seal_from(content::ALERT, &[IoSlice::new(&CLOSE_NOTIFY)]).is_ok_and(|n| n > 0)
        {
            self.notified = true;
        }
        while self.out_pos < self.out.len() {
            match self.tcp.try_write(&self.out[self.out_pos..]) {
                Ok(n) if n > 0 => self.out_pos += n,
                _ => break,
            }
        }
        if self.out.capacity() > 0 {
            bufs::give(Kind::Out, std::mem::take(&mut self.out));
        }
    }
}
