//! An HLS playlist answer rewritten for one viewer so that every URI it lists carries the
//! viewer's token (`[site.token] propagate = "query"`, [`crate::tokenise`]). The stored
//! object is never changed: the body is read whole (stored, small or still filling, as any
//! answer carries it) and a new one is made per response.
//!
//! The rewritten answer carries its own `Content-Length`, no `ETag` (the stored one names
//! the stored bytes, not these) and no `Accept-Ranges` (a viewer whose token follows it is
//! always served a playlist whole: its `Range` was removed before the cache saw the
//! request). It carries one viewer's token, so `Cache-Control: private, no-store` replaces
//! the stored `Cache-Control` and `Expires`: a shared cache downstream must not hand it to
//! another viewer. It is served uncompressed: content coding must skip a body marked
//! [`REWRITTEN`].

use std::future::poll_fn;

use bytes::{Bytes, BytesMut};
use reel_http::{Body, Chunk, Method, Request, Response};

/// The longest playlist rewritten; a longer body (no real playlist) ends its answer as a
/// body that failed does.
const MAX_PLAYLIST: usize = 4 << 20;

/// A field on every rewritten answer's tag-free side: content coding leaves such a body
/// as it is (it is per viewer and already made), and tests can tell it was rewritten.
pub(in crate::path) const REWRITTEN: (&str, &str) = ("x-reel-token", "propagated");

/// The media types of HLS playlists (RFC 8216 4).
const PLAYLIST_TYPES: [&[u8]; 3] =
    [b"application/vnd.apple.mpegurl", b"audio/mpegurl", b"application/x-mpegurl"];

/// `resp` to `req` with `param=token` on every relative URI, when it is a whole HLS
/// playlist (200, a `.m3u8` path or a playlist media type, `#EXTM3U` first); otherwise as
/// it is.
pub(in crate::path) async fn playlist(
    mut resp: Response,
    req: &Request,
    param: &str,
    token: &str,
) -> Response {
    if resp.status != 200 || !(is_playlist_path(req.path()) || has_playlist_type(&resp)) {
        return resp;
    }
    strip_fields(&mut resp, describes_stored);
    if *req.method() == Method::Head {
        // No body to rewrite: no length rather than the stored body's.
        resp.content_length = None;
        return per_viewer(resp);
    }
    let Some(body) = whole(std::mem::take(&mut resp.body)).await else {
        // The body could not be read whole: end the response as a broken body does.
        return resp.stream(Failed, None);
    };
    let rewritten =
        std::str::from_utf8(&body).ok().and_then(|t| crate::tokenise::tokenise(t, param, token));
    match rewritten {
        Some(text) => per_viewer(resp.bytes(text)),
        None => resp.bytes(body),
    }
}

/// `resp`, rewritten for one viewer, marked so and kept out of shared caches.
fn per_viewer(mut resp: Response) -> Response {
    strip_fields(&mut resp, |n| {
        n.eq_ignore_ascii_case(b"cache-control") || n.eq_ignore_ascii_case(b"expires")
    });
    resp.header(REWRITTEN.0, REWRITTEN.1).header("cache-control", PRIVATE)
}

/// The `Cache-Control` of a rewritten answer.
const PRIVATE: &str = "private, no-store";

/// A body that fails at once: the connection closes rather than send a short answer.
struct Failed;

impl reel_http::BodyStream for Failed {
    fn poll_next(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<std::io::Result<Chunk>>> {
        std::task::Poll::Ready(Some(Err(std::io::Error::other("playlist body unreadable"))))
    }
}

/// Whether a path names an HLS playlist by its extension.
pub(in crate::path) fn is_playlist_path(path: &str) -> bool {
    path.len() >= 5 && path.as_bytes()[path.len() - 5..].eq_ignore_ascii_case(b".m3u8")
}

/// Whether the answer's `Content-Type` is an HLS playlist's.
fn has_playlist_type(resp: &Response) -> bool {
    let is = |v: &[u8]| {
        let v = v.trim_ascii();
        PLAYLIST_TYPES.iter().any(|t| v.len() >= t.len() && v[..t.len()].eq_ignore_ascii_case(t))
    };
    raw_lines(&resp.raw_headers).any(|(n, v)| n.eq_ignore_ascii_case(b"content-type") && is(v))
        || resp.headers.iter().any(|(n, v)| n.eq_ignore_ascii_case("content-type") && is(v))
}

/// The `name: value` lines of a pre-encoded header block.
fn raw_lines(block: &[u8]) -> impl Iterator<Item = (&[u8], &[u8])> {
    block.split(|&b| b == b'\n').filter_map(|l| {
        let i = l.iter().position(|&b| b == b':')?;
        Some((&l[..i], &l[i + 1..]))
    })
}

/// The fields that describe the stored bytes rather than this body.
fn describes_stored(name: &[u8]) -> bool {
    name.eq_ignore_ascii_case(b"etag") || name.eq_ignore_ascii_case(b"accept-ranges")
}

/// `resp` without the fields `drop` names.
fn strip_fields(resp: &mut Response, drop: impl Fn(&[u8]) -> bool) {
    if raw_lines(&resp.raw_headers).any(|(n, _)| drop(n)) {
        let mut kept = BytesMut::with_capacity(resp.raw_headers.len());
        for line in resp.raw_headers.split_inclusive(|&b| b == b'\n') {
            let name = line.iter().position(|&b| b == b':').map_or(line, |i| &line[..i]);
            if !drop(name) {
                kept.extend_from_slice(line);
            }
        }
        resp.raw_headers = kept.freeze();
    }
    resp.headers.retain(|(n, _)| !drop(n.as_bytes()));
}

/// The whole body, however it is carried; `None` when it cannot be read or is longer
/// than [`MAX_PLAYLIST`].
async fn whole(body: Body) -> Option<Bytes> {
    match body {
        Body::Empty => Some(Bytes::new()),
        Body::Bytes(b) => Some(b),
        Body::File(f) => {
            let len = usize::try_from(f.len()).ok().filter(|&n| n <= MAX_PLAYLIST)?;
            reel_http::pread_bytes(f.fd(), f.offset(), len).ok()
        }
        Body::Stream(mut s) => {
            let mut out = BytesMut::new();
            while let Some(chunk) = poll_fn(|cx| s.as_mut().poll_next(cx)).await {
                let bytes = match chunk.ok()? {
                    Chunk::Bytes(b) => b,
                    Chunk::File(f) => {
                        let len = usize::try_from(f.len()).ok()?;
                        reel_http::pread_bytes(f.fd(), f.offset(), len).ok()?
                    }
                };
                if out.len() + bytes.len() > MAX_PLAYLIST {
                    return None;
                }
                out.extend_from_slice(&bytes);
            }
            Some(out.freeze())
        }
    }
}
