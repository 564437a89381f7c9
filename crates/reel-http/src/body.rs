//! Request bodies: `Content-Length` and chunked (RFC 9112 sections 6 and 7.1), read on
//! demand by the handler from the connection's read buffer.

use std::time::Instant;

use bytes::{Buf, Bytes};

use crate::io::Io;
use crate::request::BodyFraming;

/// Longest accepted chunk-size line (size, extensions and CRLF). Longer lines, mostly
/// oversized chunk extensions, are rejected as malformed.
pub const MAX_CHUNK_LINE: usize = 4096;

/// Why a request body could not be read. After any error the connection closes; the
/// connection loop answers [`BodyError::TooLarge`] with 413, [`BodyError::Malformed`]
/// with 400 and [`BodyError::Timeout`] with 408, replacing the handler's response.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BodyError {
    /// The body exceeds `Limits::max_body_bytes`.
    #[error("request body exceeds the configured limit")]
    TooLarge,
    /// Invalid chunked framing.
    #[error("malformed chunked body: {0}")]
    Malformed(&'static str),
    /// No body bytes arrived within the idle timeout, or the whole body not within
    /// `Limits::body_timeout`.
    #[error("timed out reading the request body")]
    Timeout,
    /// The client closed the connection before the body was complete.
    #[error("connection closed before the request body was complete")]
    Incomplete,
    /// Socket error while reading.
    #[error("I/O error reading the request body: {0:?}")]
    Io(std::io::ErrorKind),
}

/// `total` from now, or far in the future when that overflows.
fn deadline_after(total: std::time::Duration) -> Instant {
    let now = Instant::now();
    now.checked_add(total).unwrap_or_else(|| now + std::time::Duration::from_secs(86_400 * 365))
}

/// `f`, waiting at most `stall` and not past `deadline`.
async fn timeout<F: std::future::Future>(
    stall: std::time::Duration,
    deadline: Instant,
    f: F,
) -> Result<F::Output, tokio::time::error::Elapsed> {
    let by = deadline.min(Instant::now().checked_add(stall).unwrap_or(deadline));
    tokio::time::timeout_at(by.into(), f).await
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum State {
    Done,
    Failed(BodyError),
    /// Raw bytes left: of a `Content-Length` body, or of the current chunk's data.
    Data {
        remaining: u64,
        chunked: bool,
    },
    ChunkSize,
    ChunkDataEnd,
    Trailers {
        seen: usize,
    },
}

/// The body of the request being handled. Read it with [`RequestBody::next_chunk`];
/// over HTTP/1.1 whatever the handler leaves unread is drained (small bodies) or causes
/// the connection to close (large ones) before the next request; over HTTP/2 the rest
/// of the stream is refused.
pub struct RequestBody<'a>(Inner<'a>);

enum Inner<'a> {
    H1(H1Body<'a>),
    H2(H2Body<'a>),
    H3(H3Body<'a>),
}

impl<'a> RequestBody<'a> {
    pub(crate) fn new(
        io: &'a mut Io,
        framing: BodyFraming,
        expect_continue: bool,
        max: u64,
        max_trailers: usize,
        total: std::time::Duration,
    ) -> Self {
        let mut b = H1Body::new(io, framing, expect_continue, max, max_trailers);
        b.deadline = deadline_after(total);
        RequestBody(Inner::H1(b))
    }

    /// The body of an HTTP/2 request: the DATA frames of its stream (RFC 9113 section
    /// 8.1), at most `max` bytes, each read waiting at most `stall` and all of them at
    /// most `total`.
    pub(crate) fn h2(
        recv: &'a mut h2::RecvStream,
        max: u64,
        stall: std::time::Duration,
        total: std::time::Duration,
    ) -> Self {
        let progress = Framed::new(recv.is_end_stream(), max, stall, total);
        RequestBody(Inner::H2(H2Body { recv, progress }))
    }

    /// The body of an HTTP/3 request: the DATA frames of its stream (RFC 9114 section
    /// 4.1), at most `max` bytes, each read waiting at most `stall` and all of them at
    /// most `total`. `none`: the request has no body (the stream's rest is not read).
    /// `ahead`: the outcome of a first read already made (see [`h3_read`]).
    pub(crate) fn h3(
        recv: &'a mut crate::http3::H3Recv,
        none: bool,
        ahead: Option<Result<Option<Bytes>, BodyError>>,
        max: u64,
        stall: std::time::Duration,
        total: std::time::Duration,
    ) -> Self {
        let progress = Framed::new(none, max, stall, total);
        RequestBody(Inner::H3(H3Body { recv, ahead, progress }))
    }

    /// Whether the whole body has been read (always true for requests without one).
    pub fn is_complete(&self) -> bool {
        match &self.0 {
            Inner::H1(b) => b.state == State::Done,
            Inner::H2(H2Body { progress: p, .. }) | Inner::H3(H3Body { progress: p, .. }) => {
                p.state == FramedState::Done
            }
        }
    }

    /// Body bytes delivered so far.
    pub fn received(&self) -> u64 {
        match &self.0 {
            Inner::H1(b) => b.received,
            Inner::H2(H2Body { progress: p, .. }) | Inner::H3(H3Body { progress: p, .. }) => {
                p.received
            }
        }
    }

    /// The error the body failed with, if any.
    pub fn error(&self) -> Option<&BodyError> {
        match &self.0 {
            Inner::H1(b) => match &b.state {
                State::Failed(e) => Some(e),
                _ => None,
            },
            Inner::H2(H2Body { progress: p, .. }) | Inner::H3(H3Body { progress: p, .. }) => {
                match &p.state {
                    FramedState::Failed(e) => Some(e),
                    _ => None,
                }
            }
        }
    }

    /// Lets [`RequestBody::with_interims`] write interim responses (an HTTP/1.1 request).
    pub(crate) fn allow_interims(&mut self) {
        if let Inner::H1(b) = &mut self.0 {
            b.interims = true;
        }
    }

    /// The connection, when interim responses may be written on it.
    pub(crate) fn interim_io(&mut self) -> Option<&mut Io> {
        match &mut self.0 {
            Inner::H1(b) if b.interims => Some(&mut *b.io),
            _ => None,
        }
    }

    /// Whether a `100 Continue` is still owed (the client waits for it before sending).
    pub(crate) fn continue_pending(&self) -> bool {
        match &self.0 {
            Inner::H1(b) => b.continue_pending,
            Inner::H2(_) | Inner::H3(_) => false,
        }
    }

    /// Bytes of a `Content-Length` body not yet read, if that is the framing.
    pub(crate) fn length_remaining(&self) -> Option<u64> {
        match &self.0 {
            Inner::H1(b) => b.length_remaining(),
            Inner::H2(_) | Inner::H3(_) => None,
        }
    }

    /// The next piece of the body, `Ok(None)` at its end. Over HTTP/1.1 sends
    /// `100 Continue` first if the client asked for it (RFC 9110 section 10.1.1).
    pub async fn next_chunk(&mut self) -> Result<Option<Bytes>, BodyError> {
        match &mut self.0 {
            Inner::H1(b) => b.next_chunk().await,
            Inner::H2(b) => b.next_chunk().await,
            Inner::H3(b) => b.next_chunk().await,
        }
    }

    /// Reads and discards the rest of the body.
    pub async fn discard(&mut self) -> Result<u64, BodyError> {
        let mut n = 0;
        while let Some(c) = self.next_chunk().await? {
            n += c.len() as u64;
        }
        Ok(n)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum FramedState {
    Open,
    Done,
    Failed(BodyError),
}

/// Where a body delimited by its stream (HTTP/2, HTTP/3) stands: its state, the bytes
/// received against the limit, and the read timeouts.
struct Framed {
    state: FramedState,
    received: u64,
    max: u64,
    stall: std::time::Duration,
    deadline: Instant,
}

impl Framed {
    fn new(ended: bool, max: u64, stall: std::time::Duration, total: std::time::Duration) -> Self {
        let state = if ended { FramedState::Done } else { FramedState::Open };
        Framed { state, received: 0, max, stall, deadline: deadline_after(total) }
    }

    /// The answer without reading, once the body is over.
    fn settled(&self) -> Option<Result<Option<Bytes>, BodyError>> {
        match &self.state {
            FramedState::Open => None,
            FramedState::Done => Some(Ok(None)),
            FramedState::Failed(e) => Some(Err(e.clone())),
        }
    }

    /// Takes one read's outcome (`Ok(None)`: the stream ended): counts it against the
    /// limit and records the end or the failure.
    fn take(&mut self, r: Result<Option<Bytes>, BodyError>) -> Result<Option<Bytes>, BodyError> {
        let r = match r {
            Ok(Some(d)) => {
                self.received += d.len() as u64;
                if self.received > self.max { Err(BodyError::TooLarge) } else { Ok(Some(d)) }
            }
            other => other,
        };
        match &r {
            Ok(None) => self.state = FramedState::Done,
            Err(e) => self.state = FramedState::Failed(e.clone()),
            Ok(Some(_)) => {}
        }
        r
    }
}

struct H2Body<'a> {
    recv: &'a mut h2::RecvStream,
    progress: Framed,
}

impl H2Body<'_> {
    async fn next_chunk(&mut self) -> Result<Option<Bytes>, BodyError> {
        if let Some(r) = self.progress.settled() {
            return r;
        }
        let p = &self.progress;
        let r = match timeout(p.stall, p.deadline, self.recv.data()).await {
            Err(_) => Err(BodyError::Timeout),
            Ok(None) => Ok(None),
            Ok(Some(Err(e))) => {
                Err(e.get_io().map_or(BodyError::Incomplete, |io| BodyError::Io(io.kind())))
            }
            Ok(Some(Ok(data))) => {
                // Reading the bytes reopens the flow-control window for more.
                let _ = self.recv.flow_control().release_capacity(data.len());
                Ok(Some(data))
            }
        };
        self.progress.take(r)
    }
}

/// An HTTP/3 request stream's body.
struct H3Body<'a> {
    recv: &'a mut crate::http3::H3Recv,
    /// A read made before the body was handed over, returned first.
    ahead: Option<Result<Option<Bytes>, BodyError>>,
    progress: Framed,
}

impl H3Body<'_> {
    async fn next_chunk(&mut self) -> Result<Option<Bytes>, BodyError> {
        if let Some(r) = self.progress.settled() {
            return r;
        }
        if let Some(r) = self.ahead.take() {
            return self.progress.take(r);
        }
        let p = &self.progress;
        let r = match timeout(p.stall, p.deadline, h3_read(self.recv)).await {
            Err(_) => Err(BodyError::Timeout),
            Ok(r) => r,
        };
        self.progress.take(r)
    }
}

/// One read of an HTTP/3 request stream: the bytes of a DATA frame, `None` at the
/// stream's end.
pub(crate) async fn h3_read(recv: &mut crate::http3::H3Recv) -> Result<Option<Bytes>, BodyError> {
    match recv.recv_data().await {
        Ok(None) => Ok(None),
        Err(_) => Err(BodyError::Incomplete),
        Ok(Some(mut data)) => Ok(Some(data.copy_to_bytes(data.remaining()))),
    }
}

/// An HTTP/1.x body, read from the connection's buffer.
struct H1Body<'a> {
    io: &'a mut Io,
    state: State,
    received: u64,
    max: u64,
    max_trailers: usize,
    continue_pending: bool,
    /// Whether interim responses may be written (an HTTP/1.1 request).
    interims: bool,
    /// When the whole body must have arrived.
    deadline: Instant,
}

impl<'a> H1Body<'a> {
    fn new(
        io: &'a mut Io,
        framing: BodyFraming,
        expect_continue: bool,
        max: u64,
        max_trailers: usize,
    ) -> Self {
        let state = match framing {
            BodyFraming::None => State::Done,
            BodyFraming::Length(n) => State::Data { remaining: n, chunked: false },
            BodyFraming::Chunked => State::ChunkSize,
        };
        Self {
            io,
            continue_pending: expect_continue && state != State::Done,
            state,
            received: 0,
            max,
            max_trailers,
            interims: false,
            deadline: deadline_after(std::time::Duration::MAX),
        }
    }

    /// Bytes of a `Content-Length` body not yet read, if that is the framing.
    fn length_remaining(&self) -> Option<u64> {
        match self.state {
            State::Data { remaining, chunked: false } => Some(remaining),
            _ => None,
        }
    }

    async fn next_chunk(&mut self) -> Result<Option<Bytes>, BodyError> {
        let r = self.next_inner().await;
        if let Err(e) = &r {
            self.state = State::Failed(e.clone());
        }
        r
    }

    async fn fill(&mut self) -> Result<(), BodyError> {
        if self.continue_pending {
            self.continue_pending = false;
            self.io
                .write_all(b"HTTP/1.1 100 Continue\r\n\r\n", false)
                .await
                .map_err(|e| BodyError::Io(e.kind()))?;
        }
        match timeout(self.io.stall, self.deadline, self.io.read_more()).await {
            Err(_) => Err(BodyError::Timeout),
            Ok(Ok(0)) => Err(BodyError::Incomplete),
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => Err(BodyError::Io(e.kind())),
        }
    }

    async fn next_inner(&mut self) -> Result<Option<Bytes>, BodyError> {
        loop {
            match self.state.clone() {
                State::Done => return Ok(None),
                State::Failed(e) => return Err(e),
                State::Data { remaining, chunked } => {
                    if self.io.rbuf.is_empty() {
                        self.fill().await?;
                    }
                    let n = remaining.min(self.io.rbuf.len() as u64);
                    let chunk = self.io.rbuf.split_to(n as usize).freeze();
                    self.received += n;
                    let left = remaining - n;
                    self.state = match (left, chunked) {
                        (0, false) => State::Done,
                        (0, true) => State::ChunkDataEnd,
                        (remaining, chunked) => State::Data { remaining, chunked },
                    };
                    return Ok(Some(chunk));
                }
                State::ChunkSize => {
                    let Some(line_end) = self.find_line(MAX_CHUNK_LINE).await? else {
                        continue;
                    };
                    let size = parse_chunk_size(&self.io.rbuf[..line_end])?;
                    self.io.rbuf.advance(line_end + 2);
                    if size == 0 {
                        self.state = State::Trailers { seen: 0 };
                    } else {
                        if self.received.saturating_add(size) > self.max {
                            return Err(BodyError::TooLarge);
                        }
                        self.state = State::Data { remaining: size, chunked: true };
                    }
                }
                State::ChunkDataEnd => {
                    if self.io.rbuf.len() < 2 {
                        self.fill().await?;
                        continue;
                    }
                    if &self.io.rbuf[..2] != b"\r\n" {
                        return Err(BodyError::Malformed("missing CRLF after chunk data"));
                    }
                    self.io.rbuf.advance(2);
                    self.state = State::ChunkSize;
                }
                State::Trailers { seen } => {
                    // The final empty line is always allowed on top of the trailer budget.
                    let budget = self.max_trailers.saturating_sub(seen) + 2;
                    let Some(line_end) = self.find_line(budget).await? else {
                        continue;
                    };
                    let line = &self.io.rbuf[..line_end];
                    if line.iter().any(|&b| b == b'\r' || b == 0) {
                        return Err(BodyError::Malformed("invalid trailer field"));
                    }
                    self.io.rbuf.advance(line_end + 2);
                    if line_end == 0 {
                        self.state = State::Done;
                        return Ok(None);
                    }
                    // Trailer fields are read and discarded: nothing in this server
                    // acts on them (RFC 9110 section 6.5.1 allows that).
                    self.state = State::Trailers { seen: seen + line_end + 2 };
                }
            }
        }
    }

    /// Position of the CRLF ending the next line in the buffer, reading more if needed
    /// (`Ok(None)` means "buffer refilled, try again"). Bare LF is rejected.
    async fn find_line(&mut self, max: usize) -> Result<Option<usize>, BodyError> {
        match memchr::memchr(b'\n', &self.io.rbuf) {
            Some(i) if i == 0 || self.io.rbuf[i - 1] != b'\r' => {
                Err(BodyError::Malformed("bare LF in chunked framing"))
            }
            Some(i) if i + 1 > max => Err(BodyError::Malformed("chunk line too long")),
            Some(i) => Ok(Some(i - 1)),
            None if self.io.rbuf.len() >= max => Err(BodyError::Malformed("chunk line too long")),
            None => {
                self.fill().await?;
                Ok(None)
            }
        }
    }
}

/// `chunk-size [ chunk-ext ]` without the CRLF (RFC 9112 section 7.1 and 7.1.1).
fn parse_chunk_size(line: &[u8]) -> Result<u64, BodyError> {
    let digits = line.iter().take_while(|b| b.is_ascii_hexdigit()).count();
    if digits == 0 {
        return Err(BodyError::Malformed("invalid chunk size"));
    }
    let mut size: u64 = 0;
    for &b in &line[..digits] {
        let d = match b {
            b'0'..=b'9' => b - b'0',
            b'a'..=b'f' => b - b'a' + 10,
            _ => b - b'A' + 10,
        };
        size = size
            .checked_mul(16)
            .and_then(|s| s.checked_add(u64::from(d)))
            .ok_or(BodyError::Malformed("chunk size overflow"))?;
    }
    let ext = &line[digits..];
    // chunk-ext = *( BWS ";" BWS chunk-ext-name [ BWS "=" BWS chunk-ext-val ] )
    let first = ext.iter().position(|&b| b != b' ' && b != b'\t');
    match first {
        None if ext.is_empty() => {}
        Some(i) if ext[i] == b';' => {
            if ext.iter().any(|&b| (b < 0x20 && b != b'\t') || b == 0x7f) {
                return Err(BodyError::Malformed("invalid chunk extension"));
            }
        }
        _ => return Err(BodyError::Malformed("invalid chunk size")),
    }
    Ok(size)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunk_size_grammar() {
        assert_eq!(parse_chunk_size(b"1a").unwrap(), 26);
        assert_eq!(parse_chunk_size(b"0").unwrap(), 0);
        assert_eq!(parse_chunk_size(b"5;name=val").unwrap(), 5);
        assert_eq!(parse_chunk_size(b"5 ; n").unwrap(), 5);
        for bad in [&b""[..], b"x", b"-1", b"+1", b"5 5", b"0x5", b"5;\x01", b"11111111111111111"] {
            assert!(parse_chunk_size(bad).is_err(), "{:?}", String::from_utf8_lossy(bad));
        }
    }
}
