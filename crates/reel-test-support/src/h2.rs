//! HTTP/2 clients for tests.
//!
//! * [`client`] and [`exchange`]: a well-behaved client (the `h2` crate) that sends a
//!   request and reads its whole response as a [`Reply`].
//! * [`RawH2`]: a hand-written client (RFC 9113) for tests that misbehave on purpose: it
//!   writes whatever frames a test asks for, in whatever order and batching, and reads the
//!   server's frames back undecoded. HPACK is limited to the static table and literals
//!   ([`get_block`]); nothing else of the protocol is kept.

use std::io;
use std::time::Duration;

use bytes::Bytes;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// Frame type DATA (RFC 9113 section 6.1).
pub const DATA: u8 = 0x0;
/// Frame type HEADERS (section 6.2).
pub const HEADERS: u8 = 0x1;
/// Frame type RST_STREAM (section 6.4).
pub const RST_STREAM: u8 = 0x3;
/// Frame type SETTINGS (section 6.5).
pub const SETTINGS: u8 = 0x4;
/// Frame type PING (section 6.7).
pub const PING: u8 = 0x6;
/// Frame type GOAWAY (section 6.8).
pub const GOAWAY: u8 = 0x7;
/// Frame type WINDOW_UPDATE (section 6.9).
pub const WINDOW_UPDATE: u8 = 0x8;
/// Frame type CONTINUATION (section 6.10).
pub const CONTINUATION: u8 = 0x9;

/// Flag END_STREAM (DATA, HEADERS).
pub const END_STREAM: u8 = 0x1;
/// Flag ACK (SETTINGS, PING).
pub const ACK: u8 = 0x1;
/// Flag END_HEADERS (HEADERS, CONTINUATION).
pub const END_HEADERS: u8 = 0x4;

/// Error code CANCEL (section 7).
pub const CANCEL: u32 = 0x8;
/// Error code ENHANCE_YOUR_CALM (section 7): the peer is abusive.
pub const ENHANCE_YOUR_CALM: u32 = 0xb;

/// How long [`RawH2::read`] waits for a byte before it gives up on the connection.
const SILENCE: Duration = Duration::from_secs(20);

/// A whole response, as [`exchange`] read it.
#[derive(Debug)]
pub struct Reply {
    /// Status code.
    pub status: u16,
    /// Header fields.
    pub headers: http::HeaderMap,
    /// The body.
    pub body: Vec<u8>,
}

impl Reply {
    /// The `Cache-Status` field (RFC 9211), or "" without one.
    pub fn cache_status(&self) -> &str {
        self.headers.get("cache-status").and_then(|v| v.to_str().ok()).unwrap_or("")
    }
}

/// An `h2` client connection over `io` (TLS with ALPN `h2`, usually); the connection is
/// driven by a task spawned on the current runtime. Panics if the handshake fails.
pub async fn client<S>(io: S) -> ::h2::client::SendRequest<Bytes>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (send, conn) = ::h2::client::handshake(io).await.expect("h2 handshake");
    tokio::spawn(async move {
        let _ = conn.await;
    });
    send
}

/// Sends `request` on a new stream, with `body` if there is one (the stream ends with the
/// head otherwise), and reads the whole response, returning flow-control capacity as the
/// body arrives.
pub async fn exchange(
    send: &::h2::client::SendRequest<Bytes>,
    request: http::Request<()>,
    body: Option<&[u8]>,
) -> Result<Reply, ::h2::Error> {
    let mut send = send.clone().ready().await?;
    let (response, mut stream) = send.send_request(request, body.is_none())?;
    if let Some(b) = body {
        stream.send_data(Bytes::copy_from_slice(b), true)?;
    }
    let (parts, mut recv) = response.await?.into_parts();
    let mut body = Vec::new();
    while let Some(chunk) = recv.data().await {
        let chunk = chunk?;
        let _ = recv.flow_control().release_capacity(chunk.len());
        body.extend_from_slice(&chunk);
    }
    Ok(Reply { status: parts.status.as_u16(), headers: parts.headers, body })
}

/// One frame as received.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    /// Frame type.
    pub kind: u8,
    /// Flags.
    pub flags: u8,
    /// Stream identifier (the reserved bit cleared).
    pub stream: u32,
    /// Payload, as sent.
    pub payload: Vec<u8>,
}

/// The bytes of one frame: the 9-byte header and `payload` (section 4.1).
pub fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    assert!(payload.len() < 1 << 24, "a frame payload has a 24-bit length");
    let mut f = Vec::with_capacity(9 + payload.len());
    f.extend_from_slice(&(payload.len() as u32).to_be_bytes()[1..]);
    f.extend_from_slice(&[kind, flags]);
    f.extend_from_slice(&stream.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// The HPACK header block of `GET https://{authority}{path}`: `:method` and `:scheme`
/// from the static table, `:authority` and `:path` as literals without indexing and
/// without Huffman coding (RFC 7541 section 6.2.2), so no dynamic state is involved.
pub fn get_block(authority: &str, path: &str) -> Vec<u8> {
    let mut b = vec![0x82, 0x87];
    for (name_index, value) in [(0x01, authority), (0x04, path)] {
        assert!(value.len() < 0x7f, "a one-byte HPACK length: {value:?}");
        b.extend_from_slice(&[name_index, value.len() as u8]);
        b.extend_from_slice(value.as_bytes());
    }
    b
}

/// [`get_block`] followed by `fields`, each a literal without indexing with a literal
/// name (RFC 7541 section 6.2.2): lower-case names, values under 127 bytes.
pub fn get_block_with(authority: &str, path: &str, fields: &[(&str, &str)]) -> Vec<u8> {
    let mut b = get_block(authority, path);
    for (name, value) in fields {
        assert!(name.len() < 0x7f && value.len() < 0x7f, "one-byte HPACK lengths");
        b.extend_from_slice(&[0x00, name.len() as u8]);
        b.extend_from_slice(name.as_bytes());
        b.push(value.len() as u8);
        b.extend_from_slice(value.as_bytes());
    }
    b
}

/// A raw HTTP/2 client connection over `io` (a TLS stream with ALPN `h2`, usually).
#[derive(Debug)]
pub struct RawH2<S> {
    io: S,
    /// Bytes received and not yet returned as frames.
    buf: Vec<u8>,
}

impl<S: AsyncRead + AsyncWrite + Unpin> RawH2<S> {
    /// Sends the connection preface and an empty SETTINGS, reads up to the server's
    /// SETTINGS and acknowledges them (section 3.4). Panics if the server sends none.
    pub async fn handshake(io: S) -> RawH2<S> {
        let mut raw = RawH2 { io, buf: Vec::new() };
        raw.write(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n").await.expect("write the preface");
        raw.send(SETTINGS, 0, 0, &[]).await;
        loop {
            let f = raw.read().await.expect("the server's SETTINGS");
            if f.kind == SETTINGS && f.flags & ACK == 0 {
                break;
            }
        }
        raw.send(SETTINGS, ACK, 0, &[]).await;
        raw
    }

    /// Raises the stream windows (SETTINGS_INITIAL_WINDOW_SIZE) and the connection
    /// window to the largest allowed (section 6.9), so the server is limited only by the
    /// connection itself; the frames the server then sends show its own order.
    pub async fn open_windows(&mut self) {
        let max = 0x7fff_ffffu32;
        let mut settings = vec![0x00, 0x04];
        settings.extend_from_slice(&max.to_be_bytes());
        self.send(SETTINGS, 0, 0, &settings).await;
        self.send(WINDOW_UPDATE, 0, 0, &(max - 65_535).to_be_bytes()).await;
    }

    /// Writes one frame. A write error is ignored: a server that closed the connection
    /// shows in what [`RawH2::read`] returns.
    pub async fn send(&mut self, kind: u8, flags: u8, stream: u32, payload: &[u8]) {
        let _ = self.write(&frame(kind, flags, stream, payload)).await;
    }

    /// Writes `bytes` as they are (several frames in one write, or a broken frame).
    pub async fn write(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.io.write_all(bytes).await
    }

    /// The next frame; `None` at the end of the connection, on a read error, or after
    /// 20 s without a byte.
    pub async fn read(&mut self) -> Option<Frame> {
        loop {
            if self.buf.len() >= 9 {
                let b = &self.buf;
                let len = u32::from_be_bytes([0, b[0], b[1], b[2]]) as usize;
                if b.len() >= 9 + len {
                    let f = Frame {
                        kind: b[3],
                        flags: b[4],
                        stream: u32::from_be_bytes([b[5], b[6], b[7], b[8]]) & 0x7fff_ffff,
                        payload: b[9..9 + len].to_vec(),
                    };
                    self.buf.drain(..9 + len);
                    return Some(f);
                }
            }
            let mut tmp = [0u8; 65536];
            match tokio::time::timeout(SILENCE, self.io.read(&mut tmp)).await {
                Ok(Ok(n)) if n > 0 => self.buf.extend_from_slice(&tmp[..n]),
                _ => return None,
            }
        }
    }

    /// Reads until a GOAWAY and returns its error code; `None` if the connection ended
    /// (or fell silent) without one. Frames before it are dropped.
    pub async fn goaway(&mut self) -> Option<u32> {
        while let Some(f) = self.read().await {
            if f.kind == GOAWAY {
                let p = &f.payload;
                return Some(u32::from_be_bytes([p[4], p[5], p[6], p[7]]));
            }
        }
        None
    }

    /// Reads until the server resets `stream` and returns the RST_STREAM's error code;
    /// `None` if the connection ended (or fell silent) first. Frames before it are
    /// dropped.
    pub async fn reset_of(&mut self, stream: u32) -> Option<u32> {
        while let Some(f) = self.read().await {
            if f.kind == RST_STREAM && f.stream == stream {
                let p = &f.payload;
                return Some(u32::from_be_bytes([p[0], p[1], p[2], p[3]]));
            }
        }
        None
    }
}
