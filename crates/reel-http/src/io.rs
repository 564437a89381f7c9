//! Per-connection socket state: the read buffer and the write primitives of the single
//! response-writing path, over one of two transports.
//!
//! The read buffer comes from the worker's free list (see `bufs`) when bytes are there to
//! read and goes back once it is empty between requests: on TCP a connection waits for
//! readability with no buffer, so an idle keep-alive connection holds none. (A byte stream
//! is read through its own poll, so a TLS connection keeps one while it waits.)
//!
//! * **Plain TCP** ([`Transport::Tcp`]): writes go through `TcpStream::try_io`, so a write
//!   costs one syscall while the socket is writable and falls back to awaiting readiness
//!   only on `EAGAIN`; file bodies leave by `sendfile(2)` from the page cache.
//! * **A byte stream** ([`Transport::Stream`], e.g. TLS over TCP): the bytes must pass
//!   through user space to be encrypted, so file bodies are read (page cache first, see
//!   `fileread`) into pooled 16 KiB buffers and each buffer is written whole: with TLS
//!   every full buffer becomes one full 16 KiB record. A response head is packed into the
//!   first buffer of its file body, so the head does not cost a record of its own.
//!
//! * **Kernel TLS** ([`Transport::Ktls`]): the kernel seals what is written, so writes
//!   are those of plain TCP, file bodies included (`sendfile(2)`, no copy in user space);
//!   reads learn each record's type (`recvmsg(2)`) and, like TCP, hold no buffer while
//!   they wait.
//! * **TLS sealed by reel** ([`Transport::Sealed`]): a byte stream for heads and memory
//!   bodies (copied into records); a file body is read from the page cache into a pooled
//!   buffer at the record's payload offset, sealed in place and written: one copy of each
//!   body byte, where a TLS library makes two.
//!
//! A write that makes no progress for `stall` (the idle timeout) fails with `TimedOut`.

use std::future::poll_fn;
use std::io::{self, IoSlice};
use std::os::fd::AsFd;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use bytes::BytesMut;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, Interest, ReadBuf};
use tokio::net::TcpStream;

use reel_tls::{KtlsStream, SealedStream};

use crate::bufs::{self, READ_SIZE};
use crate::fileread;
use crate::pool::{BUF_SIZE, PoolBuf};
use crate::response::FileRange;
use crate::sys;

/// Largest single `sendfile` request; the kernel caps one call near 2 GiB anyway.
const SENDFILE_MAX: u64 = 1 << 30;

/// A bidirectional byte stream other than a plain TCP socket (TLS, a test pipe).
pub trait ByteStream: AsyncRead + AsyncWrite + Unpin {}
impl<T: AsyncRead + AsyncWrite + Unpin> ByteStream for T {}

/// The transport of a connection whose socket was taken out ([`Io::take_tcp`]): a
/// zero-sized stand-in (its box allocates nothing) that reads EOF and refuses writes.
struct Gone;

impl AsyncRead for Gone {
    fn poll_read(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        _: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for Gone {
    fn poll_write(self: Pin<&mut Self>, _: &mut Context<'_>, _: &[u8]) -> Poll<io::Result<usize>> {
        Poll::Ready(Err(io::ErrorKind::NotConnected.into()))
    }
    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

pub(crate) enum Transport {
    Tcp(TcpStream),
    Ktls(Box<KtlsStream>),
    Sealed(Box<SealedStream>),
    Stream(Box<dyn ByteStream>),
}

impl Transport {
    /// The socket plain writes and `sendfile` go to: TCP, or a kTLS socket.
    fn socket(&self) -> Option<&TcpStream> {
        match self {
            Transport::Tcp(s) => Some(s),
            Transport::Ktls(k) => Some(k.tcp()),
            _ => None,
        }
    }

    /// The byte stream, for a transport that is one.
    fn stream(&mut self) -> Option<&mut dyn ByteStream> {
        match self {
            Transport::Sealed(s) => Some(&mut **s),
            Transport::Stream(s) => Some(&mut **s),
            _ => None,
        }
    }
}

pub(crate) struct Io {
    pub(crate) transport: Transport,
    pub(crate) rbuf: BytesMut,
    pub(crate) stall: Duration,
    pub(crate) bytes_read: u64,
    pub(crate) bytes_written: u64,
}

/// Makes room for a read in `rbuf`: a buffer from the free list when it holds none, more
/// room when it is nearly full (a head larger than one buffer).
fn make_room(rbuf: &mut BytesMut) {
    if rbuf.capacity() == 0 {
        *rbuf = bufs::take();
    }
    if rbuf.capacity() - rbuf.len() < READ_SIZE / 4 {
        rbuf.reserve(READ_SIZE);
    }
}

impl Drop for Io {
    fn drop(&mut self) {
        if self.rbuf.capacity() > 0 {
            bufs::give(std::mem::take(&mut self.rbuf));
        }
    }
}

/// One `poll_read` of a byte stream into the spare capacity of `rbuf`; the bytes read.
/// A reader that answers with a buffer of its own instead of the one it was given (safe
/// code may replace the `ReadBuf`) is an `InvalidData` error: its bytes are not in `rbuf`.
fn poll_stream_read(
    s: &mut dyn ByteStream,
    rbuf: &mut BytesMut,
    cx: &mut Context<'_>,
) -> Poll<io::Result<usize>> {
    let spare = rbuf.spare_capacity_mut();
    let (start, room) = (spare.as_ptr().cast::<u8>(), spare.len());
    let mut rb = ReadBuf::uninit(spare);
    std::task::ready!(Pin::new(s).poll_read(cx, &mut rb))?;
    let filled = rb.filled();
    // As tokio_util's `poll_read_buf` checks, but an error rather than a panic.
    if filled.as_ptr() != start || filled.len() > room {
        return Poll::Ready(Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "the reader replaced the buffer it was given",
        )));
    }
    let n = filled.len();
    // SAFETY: `rb` still reads into the spare capacity (same start, checked above) and
    // tracks what `poll_read` filled: the first `n` bytes of it, `n` at most its length.
    unsafe { rbuf.set_len(rbuf.len() + n) };
    Poll::Ready(Ok(n))
}

/// Sends all of `buf` on a socket: `send(2)` while it takes bytes, waiting for
/// writability (at most `stall` each time) when it is full.
async fn send_all(
    s: &TcpStream,
    mut buf: &[u8],
    more: bool,
    stall: Duration,
    written: &mut u64,
) -> io::Result<()> {
    let fd = s.as_fd();
    while !buf.is_empty() {
        match s.try_io(Interest::WRITABLE, || sys::send(fd, buf, more)) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => {
                buf = &buf[n..];
                *written += n as u64;
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Io::wait_writable(s, stall).await?,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Records sealed in place per `writev(2)` on a session reel seals.
const SEAL_BATCH: usize = 4;

/// Sends every byte of `parts`, in order, with vectored writes, waiting for writability (at
/// most `stall` each time) when the socket is full.
async fn send_all_vectored(
    s: &TcpStream,
    parts: &[&[u8]],
    stall: Duration,
    written: &mut u64,
) -> io::Result<()> {
    let (mut at, mut skip) = (0usize, 0usize);
    while at < parts.len() {
        if parts[at].len() == skip {
            at += 1;
            skip = 0;
            continue;
        }
        let mut iov = [IoSlice::new(&[]); SEAL_BATCH];
        let mut k = 0;
        for (i, p) in parts[at..].iter().enumerate().take(SEAL_BATCH) {
            iov[k] = IoSlice::new(if i == 0 { &p[skip..] } else { p });
            k += 1;
        }
        match s.try_write_vectored(&iov[..k]) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(mut n) => {
                *written += n as u64;
                while n > 0 && at < parts.len() {
                    let left = parts[at].len() - skip;
                    if n >= left {
                        n -= left;
                        at += 1;
                        skip = 0;
                    } else {
                        skip += n;
                        n = 0;
                    }
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Io::wait_writable(s, stall).await?,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// One non-blocking read of a kTLS socket into the spare capacity of `rbuf`.
fn ktls_read_into(k: &mut KtlsStream, rbuf: &mut BytesMut) -> io::Result<usize> {
    let spare = rbuf.spare_capacity_mut();
    let n = k.try_read_uninit(spare)?;
    // SAFETY: `try_read_uninit` initialised the first `n` bytes of the spare capacity and
    // never returns more than its length.
    unsafe { rbuf.set_len(rbuf.len() + n) };
    Ok(n)
}

/// [`Io::poll_read`] on a kTLS socket: like TCP, no buffer is taken before the socket is
/// readable.
fn poll_ktls_read(
    k: &mut KtlsStream,
    rbuf: &mut BytesMut,
    bytes_read: &mut u64,
    cx: &mut Context<'_>,
) -> Poll<io::Result<usize>> {
    loop {
        std::task::ready!(k.poll_read_ready(cx))?;
        make_room(rbuf);
        match ktls_read_into(k, rbuf) {
            Ok(n) => {
                *bytes_read += n as u64;
                return Poll::Ready(Ok(n));
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                if rbuf.is_empty() {
                    bufs::give(std::mem::take(rbuf));
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Poll::Ready(Err(e)),
        }
    }
}

/// What a byte stream can hand over right now: one poll with a no-op waker.
fn stream_read_now(s: &mut dyn ByteStream, rbuf: &mut BytesMut) -> io::Result<usize> {
    let mut cx = Context::from_waker(Waker::noop());
    match poll_stream_read(s, rbuf, &mut cx) {
        Poll::Ready(r) => r,
        Poll::Pending => Err(io::ErrorKind::WouldBlock.into()),
    }
}

fn timed_out() -> io::Error {
    io::Error::new(io::ErrorKind::TimedOut, "peer made no progress")
}

impl Io {
    pub(crate) fn new(transport: Transport, stall: Duration) -> Self {
        Self { transport, rbuf: BytesMut::new(), stall, bytes_read: 0, bytes_written: 0 }
    }

    /// Takes the TCP socket out (for a connection handed back idle); `None` for a byte
    /// stream. The connection has no transport afterwards: reads see EOF, writes fail.
    /// When the first ciphertext byte of the last TLS record opened arrived, if reel seals
    /// this connection's records and the record took more than one read; taken once.
    pub(crate) fn take_record_since(&mut self) -> Option<std::time::Instant> {
        match &mut self.transport {
            Transport::Sealed(s) => s.take_record_since(),
            _ => None,
        }
    }

    pub(crate) fn take_tcp(&mut self) -> Option<TcpStream> {
        match std::mem::replace(&mut self.transport, Transport::Stream(Box::new(Gone))) {
            Transport::Tcp(s) => Some(s),
            other => {
                self.transport = other;
                None
            }
        }
    }

    fn reserve(&mut self) {
        make_room(&mut self.rbuf);
    }

    /// Gives the read buffer back to the free list if it holds no unread byte.
    pub(crate) fn release_rbuf(&mut self) {
        if self.rbuf.is_empty() && self.rbuf.capacity() > 0 {
            bufs::give(std::mem::take(&mut self.rbuf));
        }
    }

    /// Reads more bytes into `rbuf`; `Ok(0)` is EOF. Cancel-safe. On TCP no buffer is held
    /// while waiting unless `rbuf` already holds unread bytes.
    pub(crate) async fn read_more(&mut self) -> io::Result<usize> {
        std::future::poll_fn(|cx| self.poll_read(cx)).await
    }

    /// The poll form of [`Io::read_more`], also the wait of an idle connection: it needs no
    /// future of its own (the waker is kept by the socket's registration), and on TCP no
    /// buffer is taken before the socket is readable.
    pub(crate) fn poll_read(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<usize>> {
        if let Some(s) = self.transport.stream() {
            make_room(&mut self.rbuf);
            let r = poll_stream_read(s, &mut self.rbuf, cx);
            if let Poll::Ready(Ok(n)) = r {
                self.bytes_read += n as u64;
            }
            return r;
        }
        let s = match &mut self.transport {
            Transport::Tcp(s) => s,
            Transport::Ktls(k) => {
                return poll_ktls_read(k, &mut self.rbuf, &mut self.bytes_read, cx);
            }
            _ => return Poll::Ready(Err(io::ErrorKind::NotConnected.into())),
        };
        loop {
            std::task::ready!(s.poll_read_ready(cx))?;
            make_room(&mut self.rbuf);
            let spare = self.rbuf.capacity() - self.rbuf.len();
            match s.try_read_buf(&mut self.rbuf) {
                Ok(n) => {
                    self.bytes_read += n as u64;
                    if n > 0 && n < spare {
                        // A short read drained the socket. Forget read readiness now so
                        // the next wait goes straight to epoll instead of costing a
                        // read(2) that returns EAGAIN. No wakeup is lost: data arriving
                        // later raises a fresh edge-triggered event, and tokio ignores
                        // the clear if the reactor saw an event since our read.
                        let _ = s.try_io(Interest::READABLE, || {
                            Err::<(), _>(io::ErrorKind::WouldBlock.into())
                        });
                    }
                    return Poll::Ready(Ok(n));
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    // Stale readiness, now cleared: the next poll registers the waker.
                    if self.rbuf.is_empty() {
                        bufs::give(std::mem::take(&mut self.rbuf));
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }

    /// Reads whatever is already available without waiting; `WouldBlock` when nothing
    /// is, `Ok(0)` at EOF.
    pub(crate) fn try_read_now(&mut self) -> io::Result<usize> {
        self.reserve();
        let n = match &mut self.transport {
            Transport::Tcp(s) => match s.try_read_buf(&mut self.rbuf) {
                Ok(n) => n,
                Err(e) => {
                    self.release_rbuf();
                    return Err(e);
                }
            },
            Transport::Ktls(k) => match ktls_read_into(k, &mut self.rbuf) {
                Ok(n) => n,
                Err(e) => {
                    self.release_rbuf();
                    return Err(e);
                }
            },
            Transport::Sealed(s) => stream_read_now(&mut **s, &mut self.rbuf)?,
            Transport::Stream(s) => stream_read_now(&mut **s, &mut self.rbuf)?,
        };
        self.bytes_read += n as u64;
        Ok(n)
    }

    async fn wait_writable(s: &TcpStream, stall: Duration) -> io::Result<()> {
        tokio::time::timeout(stall, s.writable()).await.map_err(|_| timed_out())?
    }

    /// Sends all of `buf`; with `more`, more data follows at once (`MSG_MORE` on TCP; no
    /// flush on a stream).
    pub(crate) async fn write_all(&mut self, buf: &[u8], more: bool) -> io::Result<()> {
        let stall = self.stall;
        if let Some(s) = self.transport.stream() {
            tokio::time::timeout(stall, s.write_all(buf)).await.map_err(|_| timed_out())??;
            if !more {
                tokio::time::timeout(stall, s.flush()).await.map_err(|_| timed_out())??;
            }
            self.bytes_written += buf.len() as u64;
            return Ok(());
        }
        let s =
            self.transport.socket().ok_or_else(|| io::Error::from(io::ErrorKind::NotConnected))?;
        send_all(s, buf, more, stall, &mut self.bytes_written).await
    }

    /// Sends `a` then `b` with one vectored write where possible (`writev` on TCP; on a
    /// TLS stream the two are cut into full records together), handling partial writes.
    pub(crate) async fn write_two(&mut self, a: &[u8], b: &[u8]) -> io::Result<()> {
        let total = a.len() + b.len();
        let stall = self.stall;
        let mut done = 0usize;
        while done < total {
            let slices;
            let iov: &[IoSlice<'_>] = if done < a.len() {
                slices = [IoSlice::new(&a[done..]), IoSlice::new(b)];
                &slices
            } else {
                slices = [IoSlice::new(&b[done - a.len()..]), IoSlice::new(&[])];
                &slices[..1]
            };
            let r = match self.transport.stream() {
                None => match self.transport.socket() {
                    Some(s) => s.try_write_vectored(iov),
                    None => Err(io::ErrorKind::NotConnected.into()),
                },
                Some(s) => tokio::time::timeout(stall, s.write_vectored(iov))
                    .await
                    .map_err(|_| timed_out())?,
            };
            match r {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => {
                    done += n;
                    self.bytes_written += n as u64;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    if let Some(s) = self.transport.socket() {
                        Self::wait_writable(s, stall).await?
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        if let Some(s) = self.transport.stream() {
            tokio::time::timeout(stall, s.flush()).await.map_err(|_| timed_out())??;
        }
        Ok(())
    }

    /// Sends `head` followed by the whole file region. A file shorter than the region
    /// fails with `UnexpectedEof` (the caller closes the connection).
    pub(crate) async fn write_head_and_file(
        &mut self,
        head: &[u8],
        range: &dyn FileRange,
    ) -> io::Result<()> {
        match self.transport {
            Transport::Tcp(_) | Transport::Ktls(_) => {
                self.write_all(head, true).await?;
                self.send_file(range).await
            }
            Transport::Sealed(_) | Transport::Stream(_) => self.stream_file(head, range).await,
        }
    }

    /// Sends the whole file region (after whatever was written before).
    pub(crate) async fn send_file(&mut self, range: &dyn FileRange) -> io::Result<()> {
        let Some(s) = self.transport.socket() else {
            return self.stream_file(&[], range).await;
        };
        let sock = s.as_fd();
        let file = range.fd();
        let mut off = range.offset();
        let end = off
            .checked_add(range.len())
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "file range overflows"))?;
        while off < end {
            let count = (end - off).min(SENDFILE_MAX) as usize;
            match s.try_io(Interest::WRITABLE, || sys::sendfile(sock, file, &mut off, count)) {
                Ok(0) => {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "file shorter than the declared range",
                    ));
                }
                Ok(n) => self.bytes_written += n as u64,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    Self::wait_writable(s, self.stall).await?
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// The stream path of a file body: `prefix` (a response head, possibly empty) and the
    /// region, in pooled [`BUF_SIZE`] pieces, each written whole. Large prefixes go first
    /// on their own.
    async fn stream_file(&mut self, mut prefix: &[u8], range: &dyn FileRange) -> io::Result<()> {
        if prefix.len() >= BUF_SIZE / 2 {
            self.write_all(prefix, true).await?;
            prefix = &[];
        }
        let mut off = range.offset();
        let end = off
            .checked_add(range.len())
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "file range overflows"))?;
        loop {
            // Bounded like a write: a pool held by clients that stopped reading fails this
            // response rather than stalling it for ever.
            let Some(mut buf) = PoolBuf::acquire_within(self.stall).await else {
                return Err(io::Error::new(io::ErrorKind::TimedOut, "no body buffer came free"));
            };
            if let Transport::Sealed(_) = self.transport {
                drop(buf);
                return self.sealed_file(prefix, range, off, end).await;
            }
            let space = buf.space();
            space[..prefix.len()].copy_from_slice(prefix);
            let n = ((end - off) as usize).min(space.len() - prefix.len());
            fileread::read_exact(range, off, &mut space[prefix.len()..prefix.len() + n]).await?;
            let len = prefix.len() + n;
            buf.set_len(len);
            off += n as u64;
            prefix = &[];
            // Flushed every time: the stream then holds no earlier bytes when the next
            // buffer comes, so TLS takes the buffer whole and it leaves as one record.
            self.write_all(buf.data(), false).await?;
            if off >= end {
                return Ok(());
            }
        }
    }

    /// The file body of a session whose records reel seals: each record's payload is read
    /// from the page cache into a pooled buffer between the room for its header and its
    /// tag, sealed there, and [`SEAL_BATCH`] records leave per `writev(2)`.
    async fn sealed_file(
        &mut self,
        mut prefix: &[u8],
        range: &dyn FileRange,
        mut off: u64,
        end: u64,
    ) -> io::Result<()> {
        // Records written as a stream leave first: records go out in the order sealed.
        self.flush().await?;
        // At least one record: a head with an empty body still leaves.
        while off < end || !prefix.is_empty() {
            // So does the key update a session makes when its keys are due.
            if let Transport::Sealed(s) = &self.transport
                && s.needs_flush()
            {
                self.flush().await?;
            }
            let mut batch: [Option<PoolBuf>; SEAL_BATCH] = [None, None, None, None];
            for slot in &mut batch {
                if off >= end && prefix.is_empty() {
                    break;
                }
                let Some(mut buf) = PoolBuf::acquire_within(self.stall).await else {
                    return Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        "no body buffer came free",
                    ));
                };
                let Transport::Sealed(s) = &mut self.transport else {
                    return Err(io::ErrorKind::NotConnected.into());
                };
                let head = s.head_room();
                debug_assert!(head + s.tail_room() <= crate::pool::RECORD_ROOM);
                let n = ((end - off) as usize).min(BUF_SIZE - prefix.len());
                let body = &mut buf.record_space()[head..head + prefix.len() + n];
                body[..prefix.len()].copy_from_slice(prefix);
                fileread::read_exact(range, off, &mut body[prefix.len()..]).await?;
                let Transport::Sealed(s) = &mut self.transport else {
                    return Err(io::ErrorKind::NotConnected.into());
                };
                let rec = s.seal_in_place(buf.record_space(), prefix.len() + n)?;
                buf.set_len(rec);
                off += n as u64;
                prefix = &[];
                *slot = Some(buf);
            }
            let Transport::Sealed(s) = &self.transport else {
                return Err(io::ErrorKind::NotConnected.into());
            };
            let mut parts: [&[u8]; SEAL_BATCH] = [&[]; SEAL_BATCH];
            for (p, b) in parts.iter_mut().zip(&batch) {
                *p = b.as_ref().map_or(&[][..], PoolBuf::data);
            }
            send_all_vectored(s.tcp(), &parts, self.stall, &mut self.bytes_written).await?;
        }
        Ok(())
    }

    /// The poll form of a write, for what is written while a handler works (interim
    /// responses): writes some of `buf` (at least one byte) or registers for writability.
    pub(crate) fn poll_write_some(
        &mut self,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let r = match &mut self.transport {
            Transport::Tcp(s) => Pin::new(s).poll_write(cx, buf),
            Transport::Ktls(k) => Pin::new(&mut **k).poll_write(cx, buf),
            Transport::Sealed(s) => Pin::new(&mut **s).poll_write(cx, buf),
            Transport::Stream(s) => Pin::new(&mut **s).poll_write(cx, buf),
        };
        if let Poll::Ready(Ok(n)) = r {
            self.bytes_written += n as u64;
        }
        r
    }

    /// Pushes out what a stream buffered (TLS records); nothing to do on TCP.
    pub(crate) fn poll_flush(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.transport.stream() {
            None => Poll::Ready(Ok(())),
            Some(s) => Pin::new(s).poll_flush(cx),
        }
    }

    /// [`Io::poll_flush`] as a future, waiting at most the stall timeout.
    pub(crate) async fn flush(&mut self) -> io::Result<()> {
        let stall = self.stall;
        tokio::time::timeout(stall, poll_fn(|cx| self.poll_flush(cx)))
            .await
            .map_err(|_| timed_out())?
    }

    /// Half-closes the sending side (TLS: `close_notify`, then TCP FIN).
    pub(crate) async fn shutdown(&mut self) -> io::Result<()> {
        let stall = self.stall;
        match &mut self.transport {
            Transport::Tcp(s) => s.shutdown().await,
            Transport::Ktls(k) => {
                tokio::time::timeout(stall, k.shutdown()).await.map_err(|_| timed_out())?
            }
            Transport::Sealed(s) => {
                tokio::time::timeout(stall, s.shutdown()).await.map_err(|_| timed_out())?
            }
            Transport::Stream(s) => {
                tokio::time::timeout(stall, s.shutdown()).await.map_err(|_| timed_out())?
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reader that answers with a `ReadBuf` of its own instead of filling the one it
    /// was given (a safe `AsyncRead` may do so): what it claims to have read is not in
    /// the connection's buffer.
    struct Swapper;

    impl AsyncRead for Swapper {
        fn poll_read(
            self: Pin<&mut Self>,
            _cx: &mut Context<'_>,
            buf: &mut ReadBuf<'_>,
        ) -> Poll<io::Result<()>> {
            let own: &'static mut [u8] = Box::leak(vec![7u8; 16].into_boxed_slice());
            let mut other = ReadBuf::new(own);
            other.advance(16);
            *buf = other;
            Poll::Ready(Ok(()))
        }
    }

    impl AsyncWrite for Swapper {
        fn poll_write(
            self: Pin<&mut Self>,
            _: &mut Context<'_>,
            b: &[u8],
        ) -> Poll<io::Result<usize>> {
            Poll::Ready(Ok(b.len()))
        }
        fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
        fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
    }

    #[test]
    fn a_reader_that_swaps_the_buffer_is_an_error() {
        let mut rbuf = BytesMut::with_capacity(64);
        let mut cx = Context::from_waker(Waker::noop());
        let got = poll_stream_read(&mut Swapper, &mut rbuf, &mut cx);
        let Poll::Ready(Err(e)) = got else { panic!("expected an error, got {got:?}") };
        assert_eq!(e.kind(), io::ErrorKind::InvalidData, "{e}");
        assert!(rbuf.is_empty(), "{} bytes taken as read", rbuf.len());
        // A reader that fills the buffer it was given is read as before.
        let (mut a, mut b) = tokio::io::duplex(64);
        let mut rbuf = BytesMut::with_capacity(64);
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        rt.block_on(async {
            b.write_all(b"hello").await.unwrap();
            let n = poll_fn(|cx| poll_stream_read(&mut a, &mut rbuf, cx)).await.unwrap();
            assert_eq!((n, &rbuf[..]), (5, &b"hello"[..]));
        });
    }
}
