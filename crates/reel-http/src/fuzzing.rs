//! Entry points for the fuzz targets of `crates/reel-fuzz` (`docs/fuzzing.md`) into
//! crate-private code: the rebuild of an HTTP/2 or HTTP/3 request head as the HTTP/1.1
//! head the codec parses. Not an API: hidden, and only the fuzz targets call it.

use crate::http2::head;
use crate::limits::Limits;
use crate::request::{HeadError, Request, Version};

/// Fills `req` from the fields of an HTTP/2 or HTTP/3 (`version`) request head, as a
/// connection does after the `h2` or `h3` crate decoded them; `end_stream`: no body.
pub fn stream_head(
    req: &mut Request,
    parts: &http::request::Parts,
    end_stream: bool,
    scratch: &mut Vec<u8>,
    limits: &Limits,
    version: Version,
) -> Result<(), HeadError> {
    head::request_from_parts(req, parts, end_stream, scratch, limits, version)
}
