//! What HTTP/2 and HTTP/3 do alike with one request stream, around each protocol's own
//! sending: the answer to a refused head and its report ([`refusal`], [`report_refusal`]),
//! the codec's answer in place of the handler's after a failed request body
//! ([`final_response`], [`BodyError::status`]), and the report of an answered stream
//! ([`Answering`]).

use std::time::{Duration, Instant};

use bytes::Bytes;

use crate::body::BodyError;
use crate::client::Peer;
use crate::handler::{Handler, REFUSAL_EXCERPT, Refusal, Sent};
use crate::http2::head::{self, H2Head};
use crate::method::Method;
use crate::request::{HeadError, Request};
use crate::response::{Response, reason_phrase};
use crate::streams::Streams;

/// The head and body answering a head refused with `status`.
pub(crate) fn refusal(status: u16) -> (H2Head, Bytes) {
    let h = head::response_head(&Response::error(status), false);
    (h, Bytes::from_static(reason_phrase(status).as_bytes()))
}

/// Reports a refused head to the handler: `bytes` written for the refusal, `started`
/// when the stream's work began, `version` the protocol's name in the request line
/// (`"HTTP/2"`), the line HTTP/1.1 would have had (RFC 9113 section 8.3.1).
pub(crate) fn report_refusal<H: Handler>(
    handler: &H,
    peer: Peer,
    parts: &http::request::Parts,
    version: &str,
    e: &HeadError,
    bytes: u64,
    started: Instant,
) {
    let mut line = format!("{} {} {version}", parts.method, parts.uri).into_bytes();
    line.truncate(REFUSAL_EXCERPT);
    handler.on_reject(&Refusal {
        peer: peer.client,
        socket_peer: peer.socket,
        status: e.status,
        reason: e.reason,
        request_line: &line,
        bytes,
        elapsed: started.elapsed(),
    });
}

/// The response to send once the handler answered `resp`: its own, or, when the request
/// body failed (`failed`), the codec's refusal in its place (tag included: a local
/// answer, see [`BodyError::status`]). `None` when the failure leaves nothing to answer:
/// `reset` ends the stream, then the request is reported with nothing sent.
pub(crate) fn final_response<H: Handler>(
    handler: &H,
    req: &Request,
    failed: Option<&BodyError>,
    resp: Response,
    started: Instant,
    reset: impl FnOnce(),
) -> Option<Response> {
    let Some(err) = failed else { return Some(resp) };
    match err.status() {
        Some(status) => Some(Response::error(status)),
        None => {
            reset();
            handler.on_response(req, &Sent::nothing(started.elapsed(), resp.tag));
            None
        }
    }
}

/// A response whose head is being sent on a stream: what its report needs.
pub(crate) struct Answering {
    /// Status as sent.
    pub(crate) status: u16,
    /// Bytes sent so far (the head's, then the body's added).
    pub(crate) bytes: u64,
    tag: u64,
    first_byte: Duration,
    started: Instant,
}

impl Answering {
    /// The head of `resp` for `req` (the request's method decides whether a body follows),
    /// about to be sent: its first byte leaves now.
    pub(crate) fn head(resp: &Response, req: &Request, started: Instant) -> (H2Head, Answering) {
        let h = head::response_head(resp, *req.method() == Method::Head);
        let a = Answering {
            status: h.status,
            bytes: h.head_bytes,
            tag: resp.tag,
            first_byte: started.elapsed(),
            started,
        };
        (h, a)
    }

    /// Counts the answered request with its connection's and tells the handler what was
    /// sent.
    pub(crate) fn report<H: Handler>(self, handler: &H, streams: &Streams, req: &Request) {
        streams.requests.set(streams.requests.get() + 1);
        handler.on_response(
            req,
            &Sent {
                status: self.status,
                bytes: self.bytes,
                first_byte: Some(self.first_byte),
                total: self.started.elapsed(),
                tag: self.tag,
            },
        );
    }
}
