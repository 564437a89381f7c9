//! Per-connection socket state: the read buffer and the write primitives of the single
//! response-writing path (plain sends, vectored sends, `MSG_MORE` heads, `sendfile`).
//!
//! Writes go through `TcpStream::try_io`, so a write costs one syscall while the socket
//! is writable and falls back to awaiting readiness only on `EAGAIN`. A write that makes
//! no progress for `stall` (the idle timeout) fails with `TimedOut`.

use std::io::{self, IoSlice};
use std::os::fd::AsRawFd;
use std::time::Duration;

use bytes::BytesMut;
use tokio::io::Interest;
use tokio::net::TcpStream;

use crate::response::FileRange;
use crate::sys;

/// Largest single `sendfile` request; the kernel caps one call near 2 GiB anyway.
const SENDFILE_MAX: u64 = 1 << 30;
/// Read granularity of the per-connection buffer.
const READ_CHUNK: usize = 8 * 1024;

pub(crate) struct Io {
    pub(crate) stream: TcpStream,
    pub(crate) rbuf: BytesMut,
    pub(crate) stall: Duration,
    pub(crate) bytes_read: u64,
    pub(crate) bytes_written: u64,
}

fn timed_out() -> io::Error {
    io::Error::new(io::ErrorKind::TimedOut, "peer made no progress")
}

impl Io {
    pub(crate) fn new(stream: TcpStream, stall: Duration) -> Self {
        Self {
            stream,
            rbuf: BytesMut::with_capacity(READ_CHUNK),
            stall,
            bytes_read: 0,
            bytes_written: 0,
        }
    }

    /// Reads more bytes into `rbuf`; `Ok(0)` is EOF. Cancel-safe.
    pub(crate) async fn read_more(&mut self) -> io::Result<usize> {
        if self.rbuf.capacity() - self.rbuf.len() < READ_CHUNK / 4 {
            self.rbuf.reserve(READ_CHUNK);
        }
        loop {
            self.stream.readable().await?;
            let spare = self.rbuf.capacity() - self.rbuf.len();
            match self.stream.try_read_buf(&mut self.rbuf) {
                Ok(n) => {
                    self.bytes_read += n as u64;
                    if n > 0 && n < spare {
                        // A short read drained the socket. Forget read readiness now so
                        // the next wait goes straight to epoll instead of costing a
                        // read(2) that returns EAGAIN. No wakeup is lost: data arriving
                        // later raises a fresh edge-triggered event, and tokio ignores
                        // the clear if the reactor saw an event since our read.
                        let _ = self.stream.try_io(Interest::READABLE, || {
                            Err::<(), _>(io::ErrorKind::WouldBlock.into())
                        });
                    }
                    return Ok(n);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// Reads whatever is already in the socket without waiting; `WouldBlock` when
    /// nothing is, `Ok(0)` at EOF.
    pub(crate) fn try_read_now(&mut self) -> io::Result<usize> {
        if self.rbuf.capacity() - self.rbuf.len() < READ_CHUNK / 4 {
            self.rbuf.reserve(READ_CHUNK);
        }
        let n = self.stream.try_read_buf(&mut self.rbuf)?;
        self.bytes_read += n as u64;
        Ok(n)
    }

    async fn wait_writable(&self) -> io::Result<()> {
        tokio::time::timeout(self.stall, self.stream.writable()).await.map_err(|_| timed_out())?
    }

    /// Sends all of `buf`; with `more`, tells the kernel more data follows (`MSG_MORE`).
    pub(crate) async fn write_all(&mut self, mut buf: &[u8], more: bool) -> io::Result<()> {
        let fd = self.stream.as_raw_fd();
        while !buf.is_empty() {
            match self.stream.try_io(Interest::WRITABLE, || sys::send(fd, buf, more)) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => {
                    buf = &buf[n..];
                    self.bytes_written += n as u64;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.wait_writable().await?,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Sends `a` then `b` with `writev`, handling partial writes.
    pub(crate) async fn write_two(&mut self, a: &[u8], b: &[u8]) -> io::Result<()> {
        let total = a.len() + b.len();
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
            match self.stream.try_write_vectored(iov) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => {
                    done += n;
                    self.bytes_written += n as u64;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.wait_writable().await?,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Sends the whole file region with `sendfile(2)`. A file shorter than the region
    /// fails with `UnexpectedEof` (the caller closes the connection).
    pub(crate) async fn send_file(&mut self, range: &dyn FileRange) -> io::Result<()> {
        let sock = self.stream.as_raw_fd();
        let file = range.fd();
        let mut off = range.offset();
        let end = off
            .checked_add(range.len())
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "file range overflows"))?;
        while off < end {
            let count = (end - off).min(SENDFILE_MAX) as usize;
            match self
                .stream
                .try_io(Interest::WRITABLE, || sys::sendfile(sock, file, &mut off, count))
            {
                Ok(0) => {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "file shorter than the declared range",
                    ));
                }
                Ok(n) => self.bytes_written += n as u64,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.wait_writable().await?,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}
