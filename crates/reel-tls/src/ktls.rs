//! Kernel TLS: handing a session's keys to the kernel (`TCP_ULP "tls"`, `TLS_TX`,
//! `TLS_RX`), and the stream over such a socket.
//!
//! After [`install`] the socket carries plaintext for the application: `send(2)`,
//! `writev(2)` and `sendfile(2)` become records sealed by the kernel, so a file body goes
//! from the page cache to the NIC with no copy in user space, exactly as on plain TCP.
//! Reads return application data; any other record (an alert, a post-handshake message)
//! is read with `recvmsg(2)` and its content type, and handled by [`crate::session`].
//!
//! The keys go TX first: a kernel that refuses the cipher refuses it there, before any
//! state changed, and the connection goes on in user space. A kernel that took TX but
//! refuses RX (none since Linux 4.17) cannot go back; that connection is closed.

use std::io;
use std::mem::MaybeUninit;
use std::os::fd::AsFd;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, Interest, ReadBuf};
use tokio::net::TcpStream;

use crate::record::{SessionKeys, Version, content};
use crate::session::{CLOSE_NOTIFY, control, fatal};
use crate::sys::{self, Dir};

/// Why a session could not go to the kernel.
#[derive(Debug)]
pub enum InstallError {
    /// The kernel refused the ULP or the TX keys (no module, cipher not supported): the
    /// socket is unchanged and can go on in user space.
    Refused(io::Error),
    /// TX went to the kernel, RX did not: the connection cannot continue.
    Broken(io::Error),
}

/// Hands `keys` to the kernel.
pub fn install(tcp: &TcpStream, keys: &SessionKeys) -> Result<(), InstallError> {
    let fd = tcp.as_fd();
    sys::set_ulp(fd).map_err(InstallError::Refused)?;
    sys::set_keys(fd, Dir::Tx, keys.version, &keys.tx).map_err(InstallError::Refused)?;
    sys::set_keys(fd, Dir::Rx, keys.version, &keys.rx).map_err(InstallError::Broken)
}

/// A TCP socket whose kernel seals and opens the TLS records.
#[derive(Debug)]
pub struct KtlsStream {
    tcp: TcpStream,
    /// Plaintext opened by rustls before the handover, read first.
    early: Vec<u8>,
    read_closed: bool,
    /// An alert (`close_notify` or a fatal one) was sent: nothing follows it.
    notified: bool,
    tls13: bool,
}

impl KtlsStream {
    /// Wraps a socket after [`install`] of a `version` session.
    pub fn new(tcp: TcpStream, version: Version) -> KtlsStream {
        KtlsStream::with_early(tcp, version, Vec::new())
    }

    /// Wraps a socket after [`install`] of a `version` session, with plaintext already
    /// received.
    pub fn with_early(tcp: TcpStream, version: Version, early: Vec<u8>) -> KtlsStream {
        KtlsStream {
            tcp,
            early,
            read_closed: false,
            notified: false,
            tls13: version == Version::Tls13,
        }
    }

    /// The socket: plaintext written to it leaves as records (`send`, `sendfile`).
    pub fn tcp(&self) -> &TcpStream {
        &self.tcp
    }

    /// Reads application data into `buf` (not yet initialised; on `Ok(n)` its first `n`
    /// bytes are) without waiting: `Ok(0)` at the end of the stream (FIN, `close_notify`
    /// or a client's key update), `WouldBlock` when nothing is there.
    pub fn try_read_uninit(&mut self, buf: &mut [MaybeUninit<u8>]) -> io::Result<usize> {
        if !self.early.is_empty() {
            let n = self.early.len().min(buf.len());
            for (d, s) in buf.iter_mut().zip(self.early.drain(..n)) {
                d.write(s);
            }
            return Ok(n);
        }
        if self.read_closed || buf.is_empty() {
            return Ok(0);
        }
        let fd = self.tcp.as_fd();
        let r = self.tcp.try_io(Interest::READABLE, || sys::recv_record(fd, buf))?;
        self.received(r)
    }

    /// [`KtlsStream::try_read_uninit`] into an initialised buffer.
    pub fn try_read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if !self.early.is_empty() {
            let n = self.early.len().min(buf.len());
            buf[..n].copy_from_slice(&self.early[..n]);
            self.early.drain(..n);
            return Ok(n);
        }
        if self.read_closed || buf.is_empty() {
            return Ok(0);
        }
        let fd = self.tcp.as_fd();
        let r = self.tcp.try_io(Interest::READABLE, || sys::recv_record_init(fd, buf))?;
        self.received(r)
    }

    fn received(&mut self, r: sys::Received) -> io::Result<usize> {
        if r.typ == content::APPLICATION_DATA || r.n == 0 {
            return Ok(r.n);
        }
        self.read_closed = true;
        if let Err(refused) = control(self.tls13, r.typ, &r.head[..r.n.min(r.head.len())]) {
            if let Some(a) = refused.alert
                && !self.notified
            {
                // Best effort: the error is what the caller learns either way.
                let fd = self.tcp.as_fd();
                let sent = self
                    .tcp
                    .try_io(Interest::WRITABLE, || sys::send_record(fd, content::ALERT, &fatal(a)));
                self.notified = sent.is_ok();
            }
            return Err(refused.error);
        }
        Ok(0)
    }

    /// Waits until [`KtlsStream::try_read`] may have something.
    pub fn poll_read_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if !self.early.is_empty() || self.read_closed {
            return Poll::Ready(Ok(()));
        }
        self.tcp.poll_read_ready(cx)
    }

    /// Sends `close_notify` (once); `WouldBlock` if the socket is full.
    fn try_close_notify(&mut self) -> io::Result<()> {
        if self.notified {
            return Ok(());
        }
        let fd = self.tcp.as_fd();
        self.tcp
            .try_io(Interest::WRITABLE, || sys::send_record(fd, content::ALERT, &CLOSE_NOTIFY))?;
        self.notified = true;
        Ok(())
    }

    /// Sends `close_notify`, waiting for room at most as long as the caller waits.
    pub fn poll_close_notify(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        loop {
            match self.try_close_notify() {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    std::task::ready!(self.tcp.poll_write_ready(cx))?
                }
                r => return Poll::Ready(r),
            }
        }
    }
}

impl Drop for KtlsStream {
    /// A close without a shutdown still says `close_notify`, if the socket takes it now.
    fn drop(&mut self) {
        let _ = self.try_close_notify();
    }
}

impl AsyncRead for KtlsStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        loop {
            std::task::ready!(self.poll_read_ready(cx))?;
            let dst = buf.initialize_unfilled();
            match self.try_read(dst) {
                Ok(n) => {
                    buf.advance(n);
                    return Poll::Ready(Ok(()));
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }
}

impl AsyncWrite for KtlsStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.tcp).poll_write(cx, buf)
    }
    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.tcp).poll_write_vectored(cx, bufs)
    }
    fn is_write_vectored(&self) -> bool {
        true
    }
    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        std::task::ready!(self.poll_close_notify(cx))?;
        Pin::new(&mut self.tcp).poll_shutdown(cx)
    }
}
