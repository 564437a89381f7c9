//! Interim (1xx) responses written ahead of the final one (RFC 9110 section 15.2), such as
//! an origin's `103 Early Hints` (RFC 8297) that a proxy forwards while it waits for the
//! final response.
//!
//! A handler runs its work through [`RequestBody::with_interims`]; the interims it is given
//! meanwhile are written as they come, the work and the writes progressing together, so a
//! client slow to take an interim never holds the work up. Only HTTP/1.1 clients get them
//! (a server must not send a 1xx to an HTTP/1.0 client, RFC 9110 section 15.2); over
//! HTTP/2 they are not sent.

use std::future::{Future, poll_fn};
use std::pin::pin;
use std::task::Poll;

use bytes::Bytes;
use tokio::sync::mpsc::UnboundedReceiver;

use crate::body::RequestBody;
use crate::response::{HeaderName, is_generated, reason_phrase, valid_name, valid_value};

/// Most interim responses written for one request; more are dropped.
pub const MAX_INTERIMS: usize = 8;

/// An interim response: a 1xx status other than 100 (the codec's own answer to
/// `Expect: 100-continue`) and 101 (a protocol switch, never interim), with its fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Interim {
    /// The status, 102..=199.
    pub status: u16,
    /// Its fields. Framing fields and fields that are not valid are dropped.
    pub headers: Vec<(HeaderName, Bytes)>,
}

/// `HTTP/1.1 1xx Reason CRLF`, the valid non-framing fields and the empty line, into `out`
/// (cleared first). `false` when `i` is not an interim this codec sends.
pub(crate) fn encode_interim(i: &Interim, out: &mut Vec<u8>) -> bool {
    out.clear();
    if !(102..=199).contains(&i.status) {
        return false;
    }
    out.extend_from_slice(b"HTTP/1.1 ");
    out.extend_from_slice(itoa::Buffer::new().format(i.status).as_bytes());
    out.push(b' ');
    out.extend_from_slice(reason_phrase(i.status).as_bytes());
    out.extend_from_slice(b"\r\n");
    for (name, value) in &i.headers {
        if is_generated(name) || !valid_name(name) || !valid_value(value) {
            continue;
        }
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"\r\n");
    true
}

impl RequestBody<'_> {
    /// Runs `work` to completion while writing to the client, as they arrive, the interim
    /// responses `interims` yields: a proxy forwards an origin's 1xx ahead of the final
    /// response (RFC 9110 section 15.2). Over HTTP/1.0 and HTTP/2, or once a write failed,
    /// they are dropped, as are those past [`MAX_INTERIMS`].
    ///
    /// When `work` is done, an interim half written is completed and those already queued
    /// are written, so every interim received before the final response precedes it. Do
    /// not read the body inside `work`: the body and the interims share the connection.
    pub async fn with_interims<F: Future>(
        &mut self,
        interims: &mut UnboundedReceiver<Interim>,
        work: F,
    ) -> F::Output {
        let Some(io) = self.interim_io() else { return work.await };
        let mut work = pin!(work);
        let mut out = Vec::new();
        // Bytes of `out` written; `flushed`: written through a stream's buffer too.
        let (mut off, mut flushed, mut sent, mut broken) = (0usize, true, 0usize, false);
        let output = poll_fn(|cx| {
            while !broken {
                if off < out.len() {
                    match io.poll_write_some(cx, &out[off..]) {
                        Poll::Ready(Ok(0)) | Poll::Ready(Err(_)) => broken = true,
                        Poll::Ready(Ok(n)) => off += n,
                        Poll::Pending => break,
                    }
                } else if !flushed {
                    match io.poll_flush(cx) {
                        Poll::Ready(Ok(())) => flushed = true,
                        Poll::Ready(Err(_)) => broken = true,
                        Poll::Pending => break,
                    }
                } else if sent < MAX_INTERIMS {
                    match interims.poll_recv(cx) {
                        Poll::Ready(Some(i)) if encode_interim(&i, &mut out) => {
                            (off, flushed, sent) = (0, false, sent + 1);
                        }
                        Poll::Ready(Some(_)) => out.clear(),
                        Poll::Ready(None) | Poll::Pending => break,
                    }
                } else {
                    break;
                }
            }
            work.as_mut().poll(cx)
        })
        .await;
        if broken {
            return output;
        }
        if off < out.len() && io.write_all(&out[off..], false).await.is_err() {
            return output;
        }
        if !flushed && io.flush().await.is_err() {
            return output;
        }
        while sent < MAX_INTERIMS
            && let Ok(i) = interims.try_recv()
        {
            if encode_interim(&i, &mut out) {
                sent += 1;
                if io.write_all(&out, false).await.is_err() {
                    break;
                }
            }
        }
        output
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_early_hints_without_framing_or_invalid_fields() {
        let i = Interim {
            status: 103,
            headers: vec![
                ("link".into(), Bytes::from_static(b"</s.css>; rel=preload; as=style")),
                ("content-length".into(), Bytes::from_static(b"5")),
                ("bad name".into(), Bytes::from_static(b"x")),
                ("x-split".into(), Bytes::from_static(b"a\r\nb: c")),
            ],
        };
        let mut out = Vec::new();
        assert!(encode_interim(&i, &mut out));
        assert_eq!(
            out,
            b"HTTP/1.1 103 Early Hints\r\nlink: </s.css>; rel=preload; as=style\r\n\r\n"
        );
        for status in [100, 101, 200, 99] {
            assert!(!encode_interim(&Interim { status, headers: vec![] }, &mut out), "{status}");
            assert!(out.is_empty());
        }
    }
}
