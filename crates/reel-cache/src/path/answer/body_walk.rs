//! The body walk: bodies assembled from pieces of a representation: the slices of a sliced object,
//! or the one stored object of a whole representation, sent as a single range or as the parts of a
//! `multipart/byteranges` body.
//!
//! A body is a list of [`Segment`]s (literal bytes such as part headers, and byte ranges of
//! the representation). A small task on the worker walks them; for each range it asks its
//! [`Pieces`] source for the piece holding the next byte (a complete stored object, one
//! still being filled, or, when the store refused it, the origin's response itself) and
//! forwards that piece's bytes: file ranges for `sendfile` when resident, reads through the
//! store otherwise, the fill as it grows. The channel to the codec holds two chunks, so
//! the task only asks for the next piece once the client has taken the previous bytes: a
//! viewer that stops reading stops the walk (and with it read-ahead, which the slice
//! source starts as the walk enters a slice). An error closes the connection instead of
//! ending the body short.

use std::cell::RefCell;
use std::io;
use std::rc::Rc;

use bytes::Bytes;
use reel_http::{Chunk, Response};
use reel_origin::OriginResponse;
use reel_store::{Filling, Hit};
use tokio::sync::mpsc;

use super::stored::{LeasedRange, Prepared, stream_cold_hit, stream_filling};
use crate::policy::multipart::Multipart;
use crate::policy::range::ByteRange;

/// Where the bytes of one piece are.
pub(in crate::path) enum PieceData {
    /// A complete stored object.
    Hit(Rc<Hit>),
    /// A stored object still being written.
    Filling(Rc<RefCell<Filling>>),
    /// An origin response the store did not take, read once: its body starts at the
    /// piece's start.
    Origin(Box<OriginResponse>),
}

/// One piece of a representation: `len` bytes from `start`.
pub(in crate::path) struct Piece {
    /// Its bytes.
    pub data: PieceData,
    /// Offset of its first byte in the representation.
    pub start: u64,
    /// Its length.
    pub len: u64,
}

/// The pieces of one representation.
pub(in crate::path) trait Pieces: 'static {
    /// The piece holding byte `pos`, fetching it if need be; the body goes on to byte
    /// `until` (inclusive) of this range. An error ends the response (the connection
    /// closes).
    async fn piece_at(&mut self, pos: u64, until: u64) -> Result<Piece, String>;
}

/// What a body is made of, in order.
pub(in crate::path) enum Segment {
    /// Bytes sent as they are (multipart delimiters and part headers).
    Bytes(Bytes),
    /// Bytes of the representation.
    Range(ByteRange),
}

/// The segments of a single range.
pub(in crate::path) fn single(range: ByteRange) -> Vec<Segment> {
    vec![Segment::Range(range)]
}

/// The segments of a multipart body.
pub(in crate::path) fn multipart(m: &Multipart) -> Vec<Segment> {
    let mut v = Vec::with_capacity(m.parts().len() * 2 + 1);
    for p in m.parts() {
        v.push(Segment::Bytes(p.head.clone()));
        v.push(Segment::Range(p.range));
    }
    v.push(Segment::Bytes(m.closing().clone()));
    v
}

/// The head of a `multipart/byteranges` 206 from stored metadata: the stored fields but
/// the representation's `Content-Type` (each part carries it), the multipart one instead,
/// with the stored `Date`, `Age` and `Cache-Status`: the stored entries, then `ours`
/// (RFC 9110 14.6, 15.3.7.2).
pub(in crate::path) fn multipart_head(
    prep: &Prepared,
    now: u64,
    ours: &Bytes,
    m: &Multipart,
) -> Response {
    // The part headers carry each part's type and range; the whole carries the multipart type.
    let own = |n: &[u8]| {
        n.eq_ignore_ascii_case(b"content-type") || n.eq_ignore_ascii_case(b"content-range")
    };
    let mut r = prep.with_date(Response::new(206));
    for (n, v) in prep.meta.headers() {
        if !super::stored::replayed(n) || own(n) {
            continue;
        }
        if let Ok(name) = std::str::from_utf8(n) {
            r = r.header(name.to_string(), Bytes::copy_from_slice(v));
        }
    }
    let age = prep.meta.current_age(now).as_secs();
    r.header("content-type", m.content_type())
        .header("age", age.to_string())
        .header("cache-status", prep.cache_status(ours))
}

/// A whole stored object as the one piece of its representation.
pub(in crate::path) struct Whole {
    data: Rc<WholeData>,
    len: u64,
}

enum WholeData {
    Hit(Rc<Hit>),
    Filling(Rc<RefCell<Filling>>),
}

impl Whole {
    /// A complete object of `len` bytes.
    pub(in crate::path) fn hit(hit: Rc<Hit>) -> Whole {
        let len = hit.body_len();
        Whole { data: Rc::new(WholeData::Hit(hit)), len }
    }

    /// An object being filled whose final length is `len`.
    pub(in crate::path) fn filling(f: Rc<RefCell<Filling>>, len: u64) -> Whole {
        Whole { data: Rc::new(WholeData::Filling(f)), len }
    }
}

impl Pieces for Whole {
    async fn piece_at(&mut self, _pos: u64, _until: u64) -> Result<Piece, String> {
        let data = match &*self.data {
            WholeData::Hit(h) => PieceData::Hit(h.clone()),
            WholeData::Filling(f) => PieceData::Filling(f.clone()),
        };
        Ok(Piece { data, start: 0, len: self.len })
    }
}

/// Streams `segments` of the representation `src` holds.
pub(in crate::path) fn stream<P: Pieces>(
    mut src: P,
    segments: Vec<Segment>,
) -> mpsc::Receiver<io::Result<Chunk>> {
    // Two chunks in hand at most: the walk (and the read-ahead it starts) stays within a
    // slice or two of what the client has taken.
    let (tx, rx) = mpsc::channel(2);
    tokio::task::spawn_local(async move {
        for seg in segments {
            let range = match seg {
                Segment::Bytes(b) => {
                    if tx.send(Ok(Chunk::Bytes(b))).await.is_err() {
                        return;
                    }
                    continue;
                }
                Segment::Range(r) => r,
            };
            let mut pos = range.start;
            while pos <= range.end {
                let piece = match src.piece_at(pos, range.end).await {
                    Ok(p) if p.start <= pos && pos - p.start < p.len => p,
                    Ok(_) => {
                        let _ =
                            tx.send(Err(io::Error::other("piece does not hold the byte"))).await;
                        return;
                    }
                    Err(e) => {
                        let _ = tx.send(Err(io::Error::other(e))).await;
                        return;
                    }
                };
                let to = range.end.saturating_add(1).min(piece.start.saturating_add(piece.len));
                if !forward(piece.data, pos - piece.start, to - piece.start, &tx).await {
                    return;
                }
                pos = to;
            }
        }
    });
    rx
}

/// Sends bytes `from..to` of a piece; false when the body cannot go on (the client left or
/// an error was sent).
async fn forward(
    data: PieceData,
    from: u64,
    to: u64,
    tx: &mpsc::Sender<io::Result<Chunk>>,
) -> bool {
    match data {
        PieceData::Hit(hit) => {
            if hit.is_resident(from, to - from)
                && let Some(r) = LeasedRange::of_hit(hit.clone(), from, to - from)
            {
                return tx.send(Ok(Chunk::File(Box::new(r)))).await.is_ok();
            }
            relay(stream_cold_hit(hit, from, to), to - from, tx).await
        }
        PieceData::Filling(f) => relay(stream_filling(f, from, Some(to)), to - from, tx).await,
        PieceData::Origin(resp) => relay_origin(*resp, from, to, tx).await,
    }
}

/// Relays a stream of `want` bytes; a stream that ends short is an error.
async fn relay(
    mut rx: mpsc::Receiver<io::Result<Chunk>>,
    want: u64,
    tx: &mpsc::Sender<io::Result<Chunk>>,
) -> bool {
    let mut got = 0;
    while let Some(c) = rx.recv().await {
        let failed = c.is_err();
        if let Ok(c) = &c {
            got += c.len();
        }
        if tx.send(c).await.is_err() || failed {
            return false;
        }
    }
    if got < want {
        let _ = tx.send(Err(io::Error::other("stored piece ended short"))).await;
        return false;
    }
    true
}

/// Relays bytes `from..to` of an origin body.
async fn relay_origin(
    mut resp: OriginResponse,
    from: u64,
    to: u64,
    tx: &mpsc::Sender<io::Result<Chunk>>,
) -> bool {
    let mut at = 0u64;
    while at < to {
        let chunk = match resp.next_chunk().await {
            Ok(Some(c)) => c,
            Ok(None) => break,
            Err(e) => {
                let _ = tx.send(Err(io::Error::other(e.to_string()))).await;
                return false;
            }
        };
        let (start, end) = (at, at + chunk.len() as u64);
        at = end;
        if end <= from {
            continue;
        }
        let a = from.saturating_sub(start) as usize;
        let b = (to.min(end) - start) as usize;
        if tx.send(Ok(Chunk::Bytes(chunk.slice(a..b)))).await.is_err() {
            return false;
        }
    }
    if at < to {
        let _ = tx.send(Err(io::Error::other("origin body ended short"))).await;
        return false;
    }
    true
}
