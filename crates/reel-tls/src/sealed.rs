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
//! plaintext; a connection holds no buffer while nothing is pending.

use std::io::{self, IoSlice};
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

use crate::bufs::{self, Kind};
use crate::copy;
use crate::record::{MAX_PLAINTEXT, Opener, RecordError, Sealer, SessionKeys, content};
use crate::session::{CLOSE_NOTIFY, control};

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
    notified: bool,
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
        };
        if !early.is_empty() {
            s.plain_end = early.len();
            s.raw_start = early.len();
            s.filled = early.len();
            s.rin = early;
        }
        Some(s)
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

    /// Seals an application-data record whose `len`-byte payload lies at
    /// `rec[head_room()..]`; returns the record's length. Refused while records written
    /// as a stream are still pending (flush first).
    pub fn seal_in_place(&mut self, rec: &mut [u8], len: usize) -> io::Result<usize> {
        if self.out_pos < self.out.len() {
            return Err(io::Error::other("sealed records still pending; flush first"));
        }
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
    fn open_next(&mut self) -> io::Result<bool> {
        let raw = &mut self.rin[self.raw_start..self.filled];
        let Some(_) = Opener::record_len(raw).map_err(record_error)? else { return Ok(false) };
        let o = self.opener.open(raw).map_err(record_error)?;
        let (start, end) = (self.raw_start + o.start, self.raw_start + o.end);
        self.raw_start += o.consumed;
        if o.typ == content::APPLICATION_DATA {
            self.plain_start = start;
            self.plain_end = end;
            return Ok(true);
        }
        self.read_closed = true;
        control(o.typ, &self.rin[start..end])?;
        Ok(true)
    }

    /// Moves unread ciphertext to the front; gives the buffer back when nothing is left.
    fn compact(&mut self) {
        let rest = self.filled - self.raw_start;
        if rest == 0 {
            self.release_in();
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

    /// Writes pending sealed bytes; `Ready(Ok)` once none are left.
    fn poll_drain(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
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
            let n = self.sealer.seal(typ, &mut self.out[at..], len).map_err(record_error)?;
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
        loop {
            if this.take_plain(buf) {
                return Poll::Ready(Ok(()));
            }
            if this.read_closed {
                return Poll::Ready(Ok(()));
            }
            if this.raw_start < this.filled && this.open_next()? {
                continue;
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
    fn drop(&mut self) {
        self.release_in();
        if self.out.capacity() > 0 {
            bufs::give(Kind::Out, std::mem::take(&mut self.out));
        }
    }
}
