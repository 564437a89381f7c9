//! Strict HTTP/1.1 server codec and connection loop, HTTP/2 and HTTP/3 servers in front of the
//! same handler, and a `sendfile(2)` response path.
//!
//! # What this crate owns
//! Everything between an accepted connection and the application's [`Handler`]:
//! parsing request heads ([`Request`], on `httparse`), request bodies
//! ([`RequestBody`]), response serialization ([`encode_head`]), the HTTP/1.x connection
//! loop ([`serve_connection`] on a `TcpStream`, [`serve_parkable`] for a server that keeps
//! idle connections without a task, [`serve_stream`] on any byte stream such as TLS) with
//! keep-alive, pipelining, timeouts and draining, HTTP/2 ([`serve_h2`], after ALPN chose
//! `h2`), HTTP/3 ([`serve_h3`], on an established QUIC connection), and the per-worker
//! buffer pools ([`conn_buffers_lent`], [`PoolBuf`]). Of the other reel crates it depends
//! on `reel-tls` alone: TLS itself (handshakes, the record layer) is `reel-tls`'s, and
//! [`serve_session`] serves HTTP/1.1 or HTTP/2 over the session it hands over (kTLS, reel's
//! own record layer, or rustls).
//!
//! # Design
//! * **Thread per core.** [`serve_connection`] runs inside a tokio `current_thread`
//!   runtime + `LocalSet`; handlers and body streams need not be `Send`, per-worker
//!   state uses `Rc`.
//! * **Idle connections hold no buffers.** The read buffer, the response-head buffer and
//!   the request head's copy come from per-worker free lists when a request's bytes
//!   arrive and go back once its response is written and nothing more is buffered (see
//!   [`conn_buffers_lent`]); the handler's future lives in its own allocation only while
//!   it runs, so the connection's task stays small between requests.
//! * **One response path.** Heads are serialized into a buffer taken for the request (the
//!   `Date` value is formatted once per second per thread). A small in-memory body is
//!   appended to the head and leaves in one `send`; a large one in one `writev`. A file
//!   body leaves as `send(head, MSG_MORE)` followed by `sendfile(2)` loops straight from
//!   the page cache (no mmap, no read into user space). A streaming body ([`Body::Stream`])
//!   mixes memory and file chunks, with `Content-Length`, chunked (HTTP/1.1) or
//!   close-delimited (HTTP/1.0) framing. Over a byte stream (TLS) a file body cannot be
//!   sent by `sendfile`: it is read from the page cache (`preadv2(RWF_NOWAIT)`, cold pages
//!   through [`FileRange::read_cold`]) into the worker's [`PoolBuf`] buffers and written
//!   16 KiB at a time, so TLS sends full records. `EAGAIN` awaits writability; a peer reset
//!   (`EPIPE`/`ECONNRESET`, sent with `MSG_NOSIGNAL`) ends the connection cleanly. Note
//!   `sendfile(2)` and tokio's own writes can raise `SIGPIPE`: the process must ignore
//!   it (Rust binaries do by default).
//! * **No silently short bodies.** If a stream errors, ends short of, or overruns its
//!   declared length, or a file is shorter than its range, the connection is closed
//!   mid-body.
//! * **Strict parsing.** Request smuggling shapes are refused with 400 and a close
//!   (RFC 9112 sections 6.1, 6.3, 3.2): Content-Length together with
//!   Transfer-Encoding, more than one Content-Length (even equal, and lists such as
//!   `5, 5`), Content-Length other than `1*DIGIT` or overflowing `u64`,
//!   Transfer-Encoding not ending in exactly one `chunked` (`chunked, gzip`,
//!   `xchunked`, `chunked, chunked`), Transfer-Encoding on HTTP/1.0, obs-fold,
//!   whitespace before the colon, control bytes in names or values, a missing or
//!   repeated Host on HTTP/1.1, an invalid Host, absolute-form targets other than
//!   `http`/`https`, fragments in targets. A valid Transfer-Encoding list ending in
//!   `chunked` but with other codings before it (`gzip, chunked`) gets **501** (RFC 9112
//!   section 6.1: coding not understood). Bad chunk sizes, oversized chunk lines
//!   ([`MAX_CHUNK_LINE`]), bare LF or missing CRLF after chunk data give 400.
//!   Other refusals: request line over `max_request_line` → 414; header section over
//!   `max_header_bytes` or more than `max_headers` fields → 431; Content-Length over
//!   `max_body_bytes` → 413; an `Expect` other than `100-continue` → 417; an HTTP
//!   version other than 1.0/1.1 → 505. Unknown method tokens are accepted and reach the
//!   handler ([`Response::for_unsupported_method`] builds 405/501). Each refusal is
//!   reported to [`Handler::on_reject`] with the request line and the rule it broke
//!   ([`Refusal`]), so it can be logged like any answered request.
//! * **Interim responses.** A handler forwards 1xx responses (an origin's `103 Early
//!   Hints`) ahead of its final one with [`RequestBody::with_interims`]: written as they
//!   come while its work goes on, to HTTP/1.1 clients only (RFC 9110 section 15.2).
//! * **Keep-alive.** HTTP/1.1 keeps the connection unless `Connection: close`;
//!   HTTP/1.0 only with `Connection: keep-alive` (echoed back). Pipelined requests
//!   are answered in order. An unread `Content-Length` body of up to [`DRAIN_LIMIT`]
//!   bytes is discarded before the response is written; a larger one, an unread
//!   chunked body, or a body whose `100 Continue` was never sent closes the connection
//!   after the response (which then carries `Connection: close`). On drain, a request
//!   already received is still answered (with `Connection: close`). A handler whose
//!   [`Handler::keep_alive`] says `false` gets `Connection: close` on every response
//!   while idle connections stay open until their next request (a lame-duck server).
//! * **Timeouts.** `header_timeout` runs from the first byte of a head (slowloris →
//!   408 + close); `idle_timeout` closes idle keep-alive connections silently and also
//!   bounds stalled body reads and writes. After an error response the socket is
//!   half-closed and drained briefly before closing, so the kernel does not reset the
//!   response away.

#![deny(unsafe_code)]
#![deny(unsafe_op_in_unsafe_fn)]

mod body;
mod bufs;
mod client;
mod date;
mod exchange;
mod fileread;
#[doc(hidden)]
pub mod fuzzing;
#[allow(unsafe_code)]
mod gone;
mod handler;
mod http1;
mod http2;
mod http3;
mod interim;
#[allow(unsafe_code)]
mod io;
mod limits;
mod method;
mod pool;
mod request;
mod response;
mod shares;
mod streams;
#[allow(unsafe_code)]
mod sys;

pub use body::{BodyError, MAX_CHUNK_LINE, RequestBody};
pub use bufs::{FREE_MAX, lent as conn_buffers_lent};
pub use client::{Peer, TrustedProxies, forwarded_client};
pub use handler::{CloseReason, ConnOutcome, Handler, REFUSAL_EXCERPT, Refusal, Sent};
pub use http1::{
    DRAIN_LIMIT, Parked, Served, serve_connection, serve_parkable, serve_session, serve_stream,
};
pub use http2::{H2Settings, serve_h2};
pub use http3::{H3Chunk, H3Settings, serve_h3};
pub use interim::{Interim, MAX_INTERIMS};
pub use io::ByteStream;
pub use limits::{Limits, MAX_HEADERS_CAP};
pub use method::Method;
pub use pool::{BUF_SIZE, CLIENT_BUFFERS, POOL_BUFFERS, PoolBuf, client_budget};
pub use request::{BodyFraming, HeadError, HeadStatus, Request, Version};
pub use response::{
    Body, BodyStream, Chunk, ColdRead, EncodedHead, FileRange, Framing, HeadContext, HeaderName,
    Response, encode_head, pread_bytes, reason_phrase,
};
pub use shares::Shares;
