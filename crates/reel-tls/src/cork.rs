//! The socket under a handshake, read one TLS record at a time.
//!
//! After the handshake the record layer moves out of rustls (to the kernel or to
//! [`crate::record`]). Whatever rustls read past the client's last handshake record would
//! be lost with it, and the kernel cannot be handed bytes already taken off the socket.
//! So during the handshake reads stop at every record boundary: a header, then exactly the
//! rest of its record. A handshake costs a few more `read(2)` calls; its crypto costs far
//! more.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

use crate::record::HEADER;

/// A TCP stream that never hands out bytes past the end of the current TLS record.
#[derive(Debug)]
pub struct Corked {
    tcp: TcpStream,
    /// Bytes of the current record's header seen so far.
    header: [u8; HEADER],
    got: usize,
    /// Bytes of the current record's body still to come.
    body_left: usize,
}

impl Corked {
    /// Wraps an accepted socket.
    pub fn new(tcp: TcpStream) -> Corked {
        Corked { tcp, header: [0; HEADER], got: 0, body_left: 0 }
    }

    /// Whether the last record read was complete (a handshake that ended mid-record
    /// cannot hand its session over).
    pub fn at_boundary(&self) -> bool {
        self.got == 0 && self.body_left == 0
    }

    /// The socket back.
    pub fn into_tcp(self) -> TcpStream {
        self.tcp
    }

    /// The socket.
    pub fn get_ref(&self) -> &TcpStream {
        &self.tcp
    }
}

impl AsyncRead for Corked {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        if buf.remaining() == 0 {
            return Poll::Ready(Ok(()));
        }
        if this.body_left == 0 {
            // Read the header into our own array first, then hand it on: a short read
            // must not let the caller see a partial header followed by body bytes.
            while this.got < HEADER {
                let mut hb = ReadBuf::new(&mut this.header[this.got..]);
                std::task::ready!(Pin::new(&mut this.tcp).poll_read(cx, &mut hb))?;
                let n = hb.filled().len();
                if n == 0 {
                    // EOF: nothing more; a partial header is the caller's error to see.
                    if this.got > 0 {
                        let got = this.got;
                        this.got = 0;
                        buf.put_slice(&this.header[..got.min(buf.remaining())]);
                    }
                    return Poll::Ready(Ok(()));
                }
                this.got += n;
            }
            let take = buf.remaining().min(HEADER);
            if take < HEADER {
                // Too small to take a header whole; callers (rustls) never ask this.
                return Poll::Ready(Err(io::Error::new(io::ErrorKind::InvalidInput, "tiny read")));
            }
            buf.put_slice(&this.header);
            this.body_left = usize::from(u16::from_be_bytes([this.header[3], this.header[4]]));
            this.got = 0;
            return Poll::Ready(Ok(()));
        }
        let want = this.body_left.min(buf.remaining());
        // Initialised first (a handshake's few KiB), so the filled part can grow safely.
        let mut limited = ReadBuf::new(buf.initialize_unfilled_to(want));
        std::task::ready!(Pin::new(&mut this.tcp).poll_read(cx, &mut limited))?;
        let n = limited.filled().len();
        if n == 0 {
            return Poll::Ready(Ok(()));
        }
        buf.advance(n);
        this.body_left -= n;
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for Corked {
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
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.tcp).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.tcp).poll_shutdown(cx)
    }
}
