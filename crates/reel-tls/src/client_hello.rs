//! What rustls does not say about a ClientHello: whether its server name (SNI) was an IP
//! address.
//!
//! RFC 6066 section 3 allows only DNS names in `host_name`, yet some clients send the
//! address they connect to. rustls accepts such a ClientHello as one without a server name
//! (and logs a warning per handshake, which the binary turns down), so
//! `ClientHello::server_name()` is `None` both for no SNI and for an address. To count
//! these clients, the acceptor reads the ClientHello through [`Recorded`], which keeps a
//! copy of the bytes, and parses them with [`sni_is_ip_address`] only when rustls reported
//! no server name.

use std::borrow::Cow;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use rustls::pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// At most this many bytes are kept: two full TLS records, far more than a ClientHello
/// takes (a few hundred bytes to 2 KiB). A longer one is not inspected.
pub(crate) const MAX_RECORDED: usize = 2 * (5 + 16_384);

/// TLS record content type `handshake` (RFC 8446 section 5.1).
const HANDSHAKE: u8 = 22;
/// Handshake message type `client_hello` (RFC 8446 section 4).
const CLIENT_HELLO: u8 = 1;
/// Extension type `server_name` (RFC 6066 section 3).
const SERVER_NAME: u16 = 0;
/// `NameType` `host_name` (RFC 6066 section 3).
const HOST_NAME: u8 = 0;

/// A transport that keeps a copy of the first bytes read from it (up to
/// [`MAX_RECORDED`]).
#[derive(Debug)]
pub(crate) struct Recorded<IO> {
    io: IO,
    bytes: Vec<u8>,
}

impl<IO> Recorded<IO> {
    pub(crate) fn new(io: IO) -> Recorded<IO> {
        Recorded { io, bytes: Vec::new() }
    }

    /// The transport, and the bytes read from it so far.
    pub(crate) fn into_parts(self) -> (IO, Vec<u8>) {
        (self.io, self.bytes)
    }
}

impl<IO: AsyncRead + Unpin> AsyncRead for Recorded<IO> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let r = Pin::new(&mut this.io).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = r {
            let new = buf.filled().get(before..).unwrap_or_default();
            let room = MAX_RECORDED.saturating_sub(this.bytes.len());
            this.bytes.extend_from_slice(new.get(..room).unwrap_or(new));
        }
        r
    }
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for Recorded<IO> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}

/// Whether the ClientHello at the start of `records` (TLS records as read from the wire)
/// names an IP address in its `server_name` extension, judged as rustls judges it. `false`
/// for no extension, a DNS name, and for anything truncated or malformed.
pub(crate) fn sni_is_ip_address(records: &[u8]) -> bool {
    host_name(&handshake_message(records))
        .is_some_and(|name| matches!(ServerName::try_from(name), Ok(ServerName::IpAddress(_))))
}

/// The first handshake message's bytes, reassembled from the handshake records it spans
/// (RFC 8446 section 5.1 lets a ClientHello be split over several); borrowed when it fits
/// in the first record. Stops at the first record of another type.
fn handshake_message(records: &[u8]) -> Cow<'_, [u8]> {
    let mut r = Reader(records);
    let mut out: Cow<'_, [u8]> = Cow::Borrowed(&[]);
    while let Some(&[kind, _, _, hi, lo]) = r.array::<5>() {
        let Some(fragment) = r.take(usize::from(u16::from_be_bytes([hi, lo]))) else { break };
        if kind != HANDSHAKE {
            break;
        }
        if out.is_empty() {
            out = Cow::Borrowed(fragment);
        } else {
            out.to_mut().extend_from_slice(fragment);
        }
        let need = Reader(&out).skip(1).and_then(|mut m| m.u24()).map(|n| n + 4);
        if need.is_some_and(|n| out.len() >= n) {
            break;
        }
    }
    out
}

/// The first `host_name` of a ClientHello's `server_name` extension (RFC 8446 section 4.1.2,
/// RFC 6066 section 3).
fn host_name(message: &[u8]) -> Option<&[u8]> {
    let mut m = Reader(message);
    if m.u8()? != CLIENT_HELLO {
        return None;
    }
    let len = m.u24()?;
    let mut hello = Reader(m.take(len)?);
    // legacy_version, random, legacy_session_id, cipher_suites, legacy_compression_methods.
    hello.take(2 + 32)?;
    hello.vec8()?;
    hello.vec16()?;
    hello.vec8()?;
    let mut extensions = Reader(hello.vec16()?);
    while !extensions.0.is_empty() {
        let kind = extensions.u16()?;
        let data = extensions.vec16()?;
        if kind == SERVER_NAME {
            let mut names = Reader(Reader(data).vec16()?);
            return (names.u8()? == HOST_NAME).then(|| names.vec16()).flatten();
        }
    }
    None
}

/// Big-endian fields off the front of a byte slice; `None` when too few bytes are left.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let (head, rest) = self.0.split_at_checked(n)?;
        self.0 = rest;
        Some(head)
    }

    fn array<const N: usize>(&mut self) -> Option<&'a [u8; N]> {
        let (head, rest) = self.0.split_first_chunk::<N>()?;
        self.0 = rest;
        Some(head)
    }

    fn skip(mut self, n: usize) -> Option<Self> {
        self.take(n).map(|_| self)
    }

    fn u8(&mut self) -> Option<u8> {
        self.array::<1>().map(|&[b]| b)
    }

    fn u16(&mut self) -> Option<u16> {
        self.array::<2>().map(|&b| u16::from_be_bytes(b))
    }

    fn u24(&mut self) -> Option<usize> {
        self.array::<3>()
            .map(|&[a, b, c]| usize::from(a) << 16 | usize::from(b) << 8 | usize::from(c))
    }

    /// An opaque vector with a one-byte length.
    fn vec8(&mut self) -> Option<&'a [u8]> {
        let n = self.u8()?;
        self.take(usize::from(n))
    }

    /// An opaque vector with a two-byte length.
    fn vec16(&mut self) -> Option<&'a [u8]> {
        let n = self.u16()?;
        self.take(usize::from(n))
    }
}

#[cfg(test)]
mod tests;
