//! Request bodies sent to origins: empty, a buffer, or a stream fed by the caller.
//!
//! A streamed body must tell a finished upload from an abandoned one: with chunked framing the
//! origin would otherwise receive the terminating chunk and store a truncated body as complete.
//! [`BodySender::finish`] marks the end; dropping the sender without it aborts the request,
//! which makes hyper close the origin connection mid-body.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use tokio::sync::mpsc;

/// The body of an [`crate::OriginRequest`].
#[derive(Debug, Default)]
pub enum RequestBody {
    /// No body (GET, HEAD, ...).
    #[default]
    Empty,
    /// A complete body in memory; can be sent again on retry.
    Full(Bytes),
    /// A body streamed by the caller through a [`BodySender`]; cannot be sent twice.
    Stream(StreamBody),
}

impl RequestBody {
    /// A streamed body and the sender that feeds it; `capacity` chunks may be queued.
    pub fn channel(capacity: usize) -> (BodySender, RequestBody) {
        let (tx, rx) = mpsc::channel(capacity.max(1));
        let finished = Arc::new(AtomicBool::new(false));
        (
            BodySender { tx, finished: finished.clone() },
            RequestBody::Stream(StreamBody { rx, finished }),
        )
    }

    /// A copy for another attempt, or `None` for a stream.
    pub(crate) fn try_clone(&self) -> Option<RequestBody> {
        match self {
            RequestBody::Empty => Some(RequestBody::Empty),
            RequestBody::Full(b) => Some(RequestBody::Full(b.clone())),
            RequestBody::Stream(_) => None,
        }
    }

    pub(crate) fn is_stream(&self) -> bool {
        matches!(self, RequestBody::Stream(_))
    }
}

/// Receiving half of a streamed request body.
#[derive(Debug)]
pub struct StreamBody {
    rx: mpsc::Receiver<Bytes>,
    finished: Arc<AtomicBool>,
}

/// Feeds a streamed request body. Call [`finish`](Self::finish) after the last chunk; dropping
/// it unfinished aborts the origin request.
#[derive(Debug)]
pub struct BodySender {
    tx: mpsc::Sender<Bytes>,
    finished: Arc<AtomicBool>,
}

/// The origin request is gone (it failed or was dropped); the chunk was not sent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("origin request body is no longer being sent")]
pub struct BodyClosed;

impl BodySender {
    /// Queues one chunk, waiting while the queue is full (back-pressure from the origin).
    pub async fn send(&self, chunk: Bytes) -> Result<(), BodyClosed> {
        self.tx.send(chunk).await.map_err(|_| BodyClosed)
    }

    /// Marks the body complete and closes the stream.
    pub fn finish(self) {
        self.finished.store(true, Ordering::Release);
    }
}

/// A streamed body ended without [`BodySender::finish`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("request body aborted by the client")]
pub struct BodyAborted;

impl Body for RequestBody {
    type Data = Bytes;
    type Error = BodyAborted;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyAborted>>> {
        match self.get_mut() {
            RequestBody::Empty => Poll::Ready(None),
            RequestBody::Full(b) => {
                if b.is_empty() {
                    Poll::Ready(None)
                } else {
                    Poll::Ready(Some(Ok(Frame::data(std::mem::take(b)))))
                }
            }
            RequestBody::Stream(s) => match s.rx.poll_recv(cx) {
                Poll::Ready(Some(chunk)) => Poll::Ready(Some(Ok(Frame::data(chunk)))),
                // The sender stores `finished` before it is dropped, and the channel closing
                // happens after that drop, so Acquire here sees the flag.
                Poll::Ready(None) if s.finished.load(Ordering::Acquire) => Poll::Ready(None),
                Poll::Ready(None) => Poll::Ready(Some(Err(BodyAborted))),
                Poll::Pending => Poll::Pending,
            },
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            RequestBody::Empty => true,
            RequestBody::Full(b) => b.is_empty(),
            RequestBody::Stream(_) => false,
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            RequestBody::Empty => SizeHint::with_exact(0),
            RequestBody::Full(b) => SizeHint::with_exact(b.len() as u64),
            RequestBody::Stream(_) => SizeHint::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    #[tokio::test]
    async fn stream_finish_and_abort() {
        let (tx, mut body) = RequestBody::channel(4);
        tx.send(Bytes::from_static(b"ab")).await.unwrap();
        tx.finish();
        let f = body.frame().await.unwrap().unwrap();
        assert_eq!(f.into_data().unwrap(), "ab");
        assert!(body.frame().await.is_none());

        let (tx, mut body) = RequestBody::channel(4);
        drop(tx);
        assert!(matches!(body.frame().await, Some(Err(BodyAborted))));
    }

    #[tokio::test]
    async fn full_is_cloneable() {
        let body = RequestBody::Full(Bytes::from_static(b"xyz"));
        let mut copy = body.try_clone().unwrap();
        assert_eq!(copy.size_hint().exact(), Some(3));
        let f = copy.frame().await.unwrap().unwrap();
        assert_eq!(f.into_data().unwrap(), "xyz");
        assert!(copy.frame().await.is_none());
        assert!(RequestBody::channel(1).1.try_clone().is_none());
    }
}
