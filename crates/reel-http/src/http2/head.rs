//! Translating heads between HTTP/2 fields and the codec's types (RFC 9113 section 8.3).
//!
//! A request's fields are written out as an HTTP/1.1 head (`:method :path`, `host` from
//! `:authority`, separate `cookie` fields joined into one with "; " as RFC 9113 section
//! 8.2.3 says, the other fields as they came) and parsed by the same strict parser as
//! HTTP/1.1, so both protocols reach the handler with the same [`Request`] and the same
//! limits and validation. A response's generated and connection-specific fields are
//! dropped (RFC 9113 section 8.2.2), `date` and `content-length` are generated.

use bytes::Bytes;
use http::header::{CONTENT_LENGTH, DATE, HeaderName, HeaderValue};

use crate::date::append_date;
use crate::limits::Limits;
use crate::request::{BodyFraming, HeadError, HeadStatus, Request, Version};
use crate::response::{Body, Response, is_date, is_generated, valid_name, valid_value};

/// Fills `req` from an HTTP/2 or HTTP/3 (`version`) request head. `end_stream`: the
/// HEADERS frame ended the stream (no body). `scratch` is reused for the rewritten head.
pub(crate) fn request_from_parts(
    req: &mut Request,
    parts: &http::request::Parts,
    end_stream: bool,
    scratch: &mut Vec<u8>,
    limits: &Limits,
    version: Version,
) -> Result<(), HeadError> {
    scratch.clear();
    scratch.extend_from_slice(parts.method.as_str().as_bytes());
    scratch.push(b' ');
    let authority = parts.uri.authority().map(|a| a.as_str());
    match parts.uri.path_and_query() {
        Some(pq) => scratch.extend_from_slice(pq.as_str().as_bytes()),
        // CONNECT carries only :authority (RFC 9113 section 8.5).
        None => scratch.extend_from_slice(authority.unwrap_or("").as_bytes()),
    }
    scratch.extend_from_slice(b" HTTP/1.1\r\n");
    if let Some(a) = authority {
        scratch.extend_from_slice(b"host: ");
        scratch.extend_from_slice(a.as_bytes());
        scratch.extend_from_slice(b"\r\n");
    }
    let mut cookie_written = false;
    for (name, value) in &parts.headers {
        // :authority replaces Host (RFC 9113 section 8.3.1).
        if authority.is_some() && name == http::header::HOST {
            continue;
        }
        // A client may split its cookie into several fields (RFC 9113 section 8.2.3); an
        // HTTP/1.1 request has one (RFC 6265 section 5.4), so every consumer, the origin
        // included, sees them joined in one field.
        if name == http::header::COOKIE {
            if !cookie_written {
                cookie_written = true;
                write_cookie(scratch, &parts.headers);
            }
            continue;
        }
        scratch.extend_from_slice(name.as_str().as_bytes());
        scratch.extend_from_slice(b": ");
        scratch.extend_from_slice(value.as_bytes());
        scratch.extend_from_slice(b"\r\n");
    }
    scratch.extend_from_slice(b"\r\n");
    match req.parse_head(scratch, limits)? {
        HeadStatus::Complete(_) => {}
        HeadStatus::Partial => {
            return Err(HeadError { status: 400, reason: "incomplete request head" });
        }
    }
    let framing = match (end_stream, req.body_framing()) {
        (true, _) => BodyFraming::None,
        (false, BodyFraming::None) => BodyFraming::Chunked,
        (false, f) => f,
    };
    req.set_stream_version(version, framing);
    Ok(())
}

/// Writes one `cookie` line holding every non-empty `cookie` field of `headers`, in
/// order, joined with "; " (RFC 9113 section 8.2.3); nothing when all are empty.
fn write_cookie(scratch: &mut Vec<u8>, headers: &http::HeaderMap) {
    let mut values = headers.get_all(http::header::COOKIE).iter().filter(|v| !v.is_empty());
    let Some(first) = values.next() else { return };
    scratch.extend_from_slice(b"cookie: ");
    scratch.extend_from_slice(first.as_bytes());
    for v in values {
        scratch.extend_from_slice(b"; ");
        scratch.extend_from_slice(v.as_bytes());
    }
    scratch.extend_from_slice(b"\r\n");
}

/// An HTTP/2 response head and how its body is delimited.
pub(crate) struct H2Head {
    pub(crate) head: http::Response<()>,
    /// Status actually sent.
    pub(crate) status: u16,
    /// Whether DATA frames follow the HEADERS frame.
    pub(crate) has_body: bool,
    /// The declared body length (`content-length`), when known.
    pub(crate) length: Option<u64>,
    /// Approximate size of the head (for byte counts in logs).
    pub(crate) head_bytes: u64,
}

/// Builds the HTTP/2 head of `resp` (same status and length rules as HTTP/1.1,
/// `encode_head`). Invalid and connection-specific fields are dropped.
pub(crate) fn response_head(resp: &Response, head_request: bool) -> H2Head {
    let status = if (200..=999).contains(&resp.status) { resp.status } else { 500 };
    let known_len = match &resp.body {
        Body::Empty => resp.content_length.filter(|_| head_request || status == 304),
        Body::Bytes(b) => Some(b.len() as u64),
        Body::File(f) => Some(f.len()),
        Body::Stream(_) => resp.content_length,
    };
    let (has_body, cl) = if status == 204 {
        (false, None)
    } else if status == 304 || head_request {
        (false, known_len)
    } else {
        match (&resp.body, known_len) {
            (Body::Empty, _) => (false, Some(0)),
            (_, n) => (n != Some(0), n),
        }
    };
    let mut head = http::Response::new(());
    *head.status_mut() = http::StatusCode::from_u16(status).unwrap_or(http::StatusCode::OK);
    let mut bytes = 9u64;
    let h = head.headers_mut();
    // A date the handler supplies (e.g. the origin's) replaces the generated one, as in
    // HTTP/1.1 (`encode_head`); never two.
    let supplied = resp.headers.iter().find(|(n, v)| is_date(n) && !v.is_empty() && valid_value(v));
    let date = match supplied {
        Some((_, v)) => HeaderValue::from_maybe_shared(v.clone()).ok(),
        None => {
            let mut d = Vec::with_capacity(32);
            append_date(&mut d);
            HeaderValue::from_bytes(&d).ok()
        }
    };
    if let Some(v) = date {
        bytes += 4 + v.len() as u64;
        h.insert(DATE, v);
    }
    if let Some(n) = cl {
        let mut num = itoa::Buffer::new();
        if let Ok(v) = HeaderValue::from_str(num.format(n)) {
            bytes += 14 + v.len() as u64;
            h.insert(CONTENT_LENGTH, v);
        }
    }
    let mut add = |name: &[u8], value: Bytes| {
        let Ok(n) = std::str::from_utf8(name) else { return };
        if is_generated(n)
            || is_date(n)
            || is_connection_specific(n)
            || !valid_name(n)
            || !valid_value(&value)
        {
            tracing::debug!(field = %n, "dropping field from an HTTP/2 response");
            return;
        }
        let (Ok(n), Ok(v)) = (HeaderName::from_bytes(name), HeaderValue::from_maybe_shared(value))
        else {
            return;
        };
        bytes += (n.as_str().len() + v.len()) as u64;
        h.append(n, v);
    };
    let raw = &resp.raw_headers;
    let mut at = 0;
    while let Some(nl) = memchr::memchr(b'\n', &raw[at..]) {
        let line = &raw[at..at + nl];
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if let Some(colon) = memchr::memchr(b':', line) {
            let vstart = at + colon + 1;
            let vend = at + line.len();
            let value = raw.slice(vstart..vend);
            let trimmed = value.slice(value.iter().take_while(|b| **b == b' ').count()..);
            add(&line[..colon], trimmed);
        }
        at += nl + 1;
    }
    for (name, value) in &resp.headers {
        add(name.as_bytes(), value.clone());
    }
    H2Head { head, status, has_body, length: cl, head_bytes: bytes }
}

/// Fields HTTP/2 forbids (RFC 9113 section 8.2.2) beyond those the codec generates.
fn is_connection_specific(name: &str) -> bool {
    ["upgrade", "proxy-connection", "te"].iter().any(|g| name.eq_ignore_ascii_case(g))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(uri: &str, fields: &[(&str, &str)]) -> http::request::Parts {
        let mut b = http::Request::builder().method("GET").uri(uri);
        for (n, v) in fields {
            b = b.header(*n, *v);
        }
        b.body(()).unwrap().into_parts().0
    }

    #[test]
    fn requests_become_strictly_parsed_heads() {
        let addr = "127.0.0.1:1".parse().unwrap();
        let mut req = Request::new(addr, addr);
        let mut scratch = Vec::new();
        let limits = Limits::default();
        let p = parts(
            "https://cdn.test:8443/live/seg.ts?x=1",
            &[("host", "other"), ("range", "bytes=0-9")],
        );
        request_from_parts(&mut req, &p, true, &mut scratch, &limits, Version::Http2).unwrap();
        assert_eq!(
            (req.host(), req.path(), req.query()),
            (Some("cdn.test:8443"), "/live/seg.ts", Some("x=1"))
        );
        assert_eq!(req.header("range"), Some(&b"bytes=0-9"[..]));
        assert_eq!(req.headers().filter(|(n, _)| *n == "host").count(), 1);
        assert_eq!(req.version(), crate::Version::Http2);
        assert_eq!(req.body_framing(), BodyFraming::None);
        // A body without content-length: delimited by the stream.
        request_from_parts(&mut req, &p, false, &mut scratch, &limits, Version::Http2).unwrap();
        assert_eq!(req.body_framing(), BodyFraming::Chunked);
        let p = parts("https://cdn.test/up", &[("content-length", "5")]);
        request_from_parts(&mut req, &p, false, &mut scratch, &limits, Version::Http2).unwrap();
        assert_eq!(req.body_framing(), BodyFraming::Length(5));
        // The same limits and refusals as HTTP/1.1.
        let p = parts("https://cdn.test/up", &[("content-length", "5"), ("content-length", "6")]);
        assert_eq!(
            request_from_parts(&mut req, &p, false, &mut scratch, &limits, Version::Http2)
                .unwrap_err()
                .status,
            400
        );
        let long = format!("https://cdn.test/{}", "a".repeat(9000));
        assert_eq!(
            request_from_parts(
                &mut req,
                &parts(&long, &[]),
                true,
                &mut scratch,
                &limits,
                Version::Http2
            )
            .unwrap_err()
            .status,
            414
        );
        let p = parts("/no-authority", &[]);
        assert_eq!(
            request_from_parts(&mut req, &p, true, &mut scratch, &limits, Version::Http2)
                .unwrap_err()
                .status,
            400
        );
    }

    /// RFC 9113 8.2.3: separate `cookie` fields are one field to every consumer, joined
    /// with "; ", where the first one was.
    #[test]
    fn split_cookie_fields_become_one() {
        let addr = "127.0.0.1:1".parse().unwrap();
        let mut req = Request::new(addr, addr);
        let mut scratch = Vec::new();
        let limits = Limits::default();
        let fields = [("cookie", "a=1"), ("x-a", "1"), ("cookie", "b=2"), ("cookie", "c=3")];
        request_from_parts(
            &mut req,
            &parts("https://cdn.test/", &fields),
            true,
            &mut scratch,
            &limits,
            Version::Http2,
        )
        .unwrap();
        let cookies: Vec<&[u8]> = req
            .headers()
            .filter(|(n, _)| n.eq_ignore_ascii_case("cookie"))
            .map(|(_, v)| v)
            .collect();
        assert_eq!(cookies, [&b"a=1; b=2; c=3"[..]]);
        assert_eq!(req.header("x-a"), Some(&b"1"[..]));
        let one = [("cookie", "a=1")];
        request_from_parts(
            &mut req,
            &parts("https://cdn.test/", &one),
            true,
            &mut scratch,
            &limits,
            Version::Http2,
        )
        .unwrap();
        assert_eq!(req.header("cookie"), Some(&b"a=1"[..]));
    }

    #[test]
    fn response_heads_drop_connection_fields_and_keep_stored_ones() {
        let r = Response::new(200)
            .raw_headers(Bytes::from_static(
                b"etag: \"v1\"\r\nconnection: keep-alive\r\ncache-control: max-age=60\r\n",
            ))
            .header("cache-status", "reel; hit")
            .header("upgrade", "h2c")
            .header("transfer-encoding", "chunked")
            .bytes("hello");
        let h = response_head(&r, false);
        let f = h.head.headers();
        assert_eq!(f.get("etag").unwrap(), "\"v1\"");
        assert_eq!(f.get("cache-control").unwrap(), "max-age=60");
        assert_eq!(f.get("cache-status").unwrap(), "reel; hit");
        assert_eq!(f.get("content-length").unwrap(), "5");
        assert!(f.get("date").is_some());
        let d = "Sun, 06 Nov 1994 08:49:37 GMT";
        for gone in ["connection", "upgrade", "transfer-encoding"] {
            assert!(f.get(gone).is_none(), "{gone}");
        }
        let hd = response_head(&Response::new(200).header("Date", d).bytes("x"), false);
        assert_eq!(hd.head.headers().get_all("date").iter().collect::<Vec<_>>(), [d]);
        assert!(h.has_body && h.length == Some(5) && h.status == 200);
        let h = response_head(&Response::new(200).with_content_length(42), true);
        assert!(!h.has_body && h.head.headers().get("content-length").unwrap() == "42");
        let h = response_head(&Response::new(304).with_content_length(42), false);
        assert!(!h.has_body && h.status == 304);
        let h = response_head(&Response::new(204).bytes("x"), false);
        assert!(!h.has_body && h.head.headers().get("content-length").is_none());
        let h = response_head(&Response::new(100), false);
        assert_eq!(h.status, 500);
    }
}
