//! The single response-writing path of HTTP/1.x: a response's head encoded into the
//! request's buffer, then its body (in memory, a file range by `sendfile`, or a stream
//! with `Content-Length`, chunked or close-delimited framing) written by the connection's
//! [`Io`]. A body that cannot be completed aborts the connection mid-body.

use std::future::poll_fn;
use std::io;

use crate::bufs;
use crate::io::Io;
use crate::response::{
    Body, Chunk, EncodedHead, FileRange, Framing, HeadContext, Response, encode_head,
};

/// In-memory bodies up to this size are copied behind the head and sent with one
/// `send`; larger ones go out with one `writev`.
const COALESCE_LIMIT: usize = 16 * 1024;

/// Why a response could not be written whole.
pub(super) enum WriteFailure {
    /// The body could not be completed; the connection must close mid-body.
    Aborted,
    /// Socket write failed.
    Io(io::ErrorKind),
}

impl From<io::Error> for WriteFailure {
    fn from(e: io::Error) -> Self {
        WriteFailure::Io(e.kind())
    }
}

/// The single response-writing path. Returns the status sent and whether the
/// connection may stay open.
pub(super) async fn write_response(
    io: &mut Io,
    wbuf: &mut Vec<u8>,
    resp: Response,
    ctx: &HeadContext,
) -> (u16, Result<bool, WriteFailure>) {
    if wbuf.capacity() == 0 {
        *wbuf = bufs::take();
    }
    wbuf.clear();
    let head = encode_head(&resp, ctx, wbuf);
    let r = write_body(io, wbuf, resp.body, &head).await;
    (head.status, r.map(|()| !head.close))
}

async fn write_body(
    io: &mut Io,
    wbuf: &mut Vec<u8>,
    body: Body,
    head: &EncodedHead,
) -> Result<(), WriteFailure> {
    if head.framing == Framing::NoBody {
        io.write_all(wbuf, false).await?;
        return Ok(());
    }
    match body {
        Body::Empty => io.write_all(wbuf, false).await?,
        Body::Bytes(b) if b.len() <= COALESCE_LIMIT => {
            wbuf.extend_from_slice(&b);
            io.write_all(wbuf, false).await?;
        }
        Body::Bytes(b) => io.write_two(wbuf, &b).await?,
        Body::File(f) => match io.write_head_and_file(wbuf, &*f).await {
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
                tracing::warn!("file body shorter than its range; closing");
                return Err(WriteFailure::Aborted);
            }
            r => r?,
        },
        Body::Stream(mut s) => {
            io.write_all(wbuf, false).await?;
            let mut sent = 0u64;
            loop {
                let next = poll_fn(|cx| s.as_mut().poll_next(cx)).await;
                let chunk = match next {
                    None => break,
                    Some(Ok(c)) => c,
                    Some(Err(e)) => {
                        tracing::debug!(error = %e, "response stream failed; closing");
                        return Err(WriteFailure::Aborted);
                    }
                };
                let len = chunk.len();
                if len == 0 {
                    continue;
                }
                sent += len;
                match head.framing {
                    Framing::Length(n) if sent > n => {
                        tracing::warn!("response stream longer than its Content-Length");
                        return Err(WriteFailure::Aborted);
                    }
                    Framing::Chunked => {
                        let mut line = [0u8; 20];
                        let size = hex_line(len, &mut line);
                        match &chunk {
                            Chunk::Bytes(b) if b.len() <= COALESCE_LIMIT => {
                                wbuf.clear();
                                wbuf.extend_from_slice(size);
                                wbuf.extend_from_slice(b);
                                wbuf.extend_from_slice(b"\r\n");
                                io.write_all(wbuf, false).await?;
                            }
                            _ => {
                                io.write_all(size, true).await?;
                                write_chunk(io, chunk, true).await?;
                                io.write_all(b"\r\n", false).await?;
                            }
                        }
                    }
                    _ => write_chunk(io, chunk, false).await?,
                }
            }
            match head.framing {
                Framing::Length(n) if sent != n => {
                    tracing::warn!(sent, declared = n, "response stream ended short");
                    return Err(WriteFailure::Aborted);
                }
                Framing::Chunked => io.write_all(b"0\r\n\r\n", false).await?,
                _ => {}
            }
        }
    }
    Ok(())
}

async fn write_chunk(io: &mut Io, chunk: Chunk, more: bool) -> Result<(), WriteFailure> {
    match chunk {
        Chunk::Bytes(b) => io.write_all(&b, more).await?,
        Chunk::File(f) => send_file(io, &*f).await?,
    }
    Ok(())
}

async fn send_file(io: &mut Io, f: &dyn FileRange) -> Result<(), WriteFailure> {
    match io.send_file(f).await {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
            tracing::warn!("file body shorter than its range; closing");
            Err(WriteFailure::Aborted)
        }
        Err(e) => Err(e.into()),
    }
}

/// `chunk-size CRLF` in lowercase hex (RFC 9112 section 7.1).
fn hex_line(n: u64, buf: &mut [u8; 20]) -> &[u8] {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut digits = [0u8; 16];
    let mut i = digits.len();
    let mut v = n;
    loop {
        i -= 1;
        digits[i] = HEX[(v & 0xf) as usize];
        v >>= 4;
        if v == 0 {
            break;
        }
    }
    let len = digits.len() - i;
    buf[..len].copy_from_slice(&digits[i..]);
    buf[len..len + 2].copy_from_slice(b"\r\n");
    &buf[..len + 2]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_lines() {
        let mut b = [0u8; 20];
        assert_eq!(hex_line(0, &mut b), b"0\r\n");
        assert_eq!(hex_line(0x1a2b, &mut b), b"1a2b\r\n");
        assert_eq!(hex_line(u64::MAX, &mut b), b"ffffffffffffffff\r\n");
    }
}
