//! The rebuild of an HTTP/2 or HTTP/3 request head as an HTTP/1.1 head
//! ([`reel_http::fuzzing::stream_head`]), from fields as the `h2` and `h3` crates hand
//! them over: pseudo-headers made into a method and a URI, names and values that the
//! `http` crate accepts.
//!
//! Input: a first byte (bit 0: HTTP/3, bit 1: the HEADERS frame ended the stream), then
//! one field a line (`:method: GET`, `:path: /a`, `cookie: a=1`).

use std::net::{Ipv4Addr, SocketAddr};

use http::header::{HeaderName, HeaderValue};
use http::uri::{Authority, PathAndQuery, Scheme};
use reel_http::{Limits, Request, Version};

use crate::fields;

/// Rebuilds and parses the head `data` describes.
pub fn run(data: &[u8]) {
    let Some((&flags, rest)) = data.split_first() else { return };
    let version = if flags & 1 == 0 { Version::Http2 } else { Version::Http3 };
    let end_stream = flags & 2 != 0;
    let Some(parts) = parts(rest) else { return };
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, 8443));
    let mut req = Request::new(addr, addr);
    let mut scratch = Vec::new();
    let limits = Limits::default();
    if reel_http::fuzzing::stream_head(&mut req, &parts, end_stream, &mut scratch, &limits, version)
        .is_ok()
    {
        assert_eq!(req.version(), version);
        assert_eq!(req.method().as_str(), parts.method.as_str(), "method");
        crate::http1_head::read_all(&req);
    }
}

/// The request head the fields make, as the `h2` crate builds it (`None` where it
/// refuses the stream: a malformed pseudo-header, a name or value `http` refuses).
fn parts(data: &[u8]) -> Option<http::request::Parts> {
    let mut req = http::Request::new(());
    let mut uri = http::uri::Parts::default();
    for (name, value) in fields::split(data) {
        match name {
            b":method" => *req.method_mut() = http::Method::from_bytes(value).ok()?,
            b":scheme" => uri.scheme = Some(Scheme::try_from(value).ok()?),
            b":authority" => uri.authority = Some(Authority::try_from(value).ok()?),
            b":path" => uri.path_and_query = Some(PathAndQuery::try_from(value).ok()?),
            _ if name.starts_with(b":") => return None,
            _ => {
                let n = HeaderName::from_bytes(name).ok()?;
                let v = HeaderValue::from_bytes(value).ok()?;
                req.headers_mut().append(n, v);
            }
        }
    }
    if uri.scheme.is_some() && uri.path_and_query.is_none() {
        uri.path_and_query = Some(PathAndQuery::from_static("/"));
    }
    *req.uri_mut() = http::Uri::from_parts(uri).ok()?;
    Some(req.into_parts().0)
}
