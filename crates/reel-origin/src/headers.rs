//! Hop-by-hop header removal for requests and responses relayed through the edge.

use http::header::{self, HeaderMap, HeaderName};

/// Connection-specific fields an intermediary removes (RFC 9110 section 7.6.1): `Connection`
/// itself, every field it names, and `Proxy-Connection`, `Keep-Alive`, `TE`,
/// `Transfer-Encoding` and `Upgrade`. `Transfer-Encoding` goes because each hop frames the body
/// itself (RFC 9112 section 6.1).
pub fn strip_hop_by_hop(headers: &mut HeaderMap) {
    // Names listed in Connection (RFC 9110 section 7.6.1): comma-separated tokens, possibly
    // spread over several field lines.
    let listed: Vec<HeaderName> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|t| HeaderName::from_bytes(t.trim().as_bytes()).ok())
        .collect();
    for name in listed {
        headers.remove(name);
    }
    for name in [
        header::CONNECTION,
        HeaderName::from_static("proxy-connection"),
        HeaderName::from_static("keep-alive"),
        header::TE,
        header::TRANSFER_ENCODING,
        header::UPGRADE,
    ] {
        headers.remove(name);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    #[test]
    fn strips_listed_and_fixed() {
        let mut h = HeaderMap::new();
        h.append(header::CONNECTION, HeaderValue::from_static("keep-alive, X-Foo"));
        h.append(header::CONNECTION, HeaderValue::from_static("x-bar ,"));
        h.insert("x-foo", HeaderValue::from_static("1"));
        h.insert("x-bar", HeaderValue::from_static("1"));
        h.insert("keep-alive", HeaderValue::from_static("timeout=5"));
        h.insert(header::TE, HeaderValue::from_static("trailers"));
        h.insert(header::TRANSFER_ENCODING, HeaderValue::from_static("chunked"));
        h.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
        h.insert("proxy-connection", HeaderValue::from_static("close"));
        h.insert("x-keep", HeaderValue::from_static("yes"));
        h.insert(header::CONTENT_LENGTH, HeaderValue::from_static("3"));
        strip_hop_by_hop(&mut h);
        let names: Vec<_> = h.keys().map(|k| k.as_str()).collect();
        assert_eq!(names.len(), 2, "{names:?}");
        assert!(h.contains_key("x-keep"));
        assert!(h.contains_key(header::CONTENT_LENGTH));
    }
}
