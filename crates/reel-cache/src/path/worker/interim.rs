//! Interim (1xx) responses from the origin, such as `103 Early Hints`, forwarded to the
//! client waiting for the answer (RFC 9110 section 15.2: a proxy forwards them), never
//! stored: only a final response is. The origin client hands each one to a sink as it
//! arrives; the codec writes them from the receiving end while the fetch goes on
//! ([`RequestBody::with_interims`](reel_http::RequestBody::with_interims)).

use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::Bytes;
use reel_http::{Interim, MAX_INTERIMS};
use reel_origin::{InterimResponse, InterimSink};
use tokio::sync::mpsc::{UnboundedReceiver, unbounded_channel};

/// A sink for one origin request and the receiver its interims come out of. At most
/// [`MAX_INTERIMS`] are passed on, so an origin sending a stream of 1xx cannot fill memory
/// while the client is slow to take them.
pub(in crate::path) fn channel() -> (InterimSink, UnboundedReceiver<Interim>) {
    let (tx, rx) = unbounded_channel();
    let passed = AtomicUsize::new(0);
    let sink = InterimSink::new(move |r: InterimResponse| {
        if passed.fetch_add(1, Ordering::Relaxed) >= MAX_INTERIMS {
            return;
        }
        let headers = r
            .headers
            .iter()
            .map(|(n, v)| (n.as_str().to_owned().into(), Bytes::copy_from_slice(v.as_bytes())))
            .collect();
        let _ = tx.send(Interim { status: r.status.as_u16(), headers });
    });
    (sink, rx)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passes_fields_and_caps_the_count() {
        let (sink, mut rx) = channel();
        let mut headers = http::HeaderMap::new();
        headers.insert("link", http::HeaderValue::from_static("</a.css>; rel=preload"));
        for _ in 0..MAX_INTERIMS + 3 {
            let r =
                InterimResponse { status: http::StatusCode::EARLY_HINTS, headers: headers.clone() };
            sink.call(r);
        }
        let mut n = 0;
        while let Ok(i) = rx.try_recv() {
            assert_eq!(i.status, 103);
            assert_eq!(
                i.headers,
                vec![("link".into(), Bytes::from_static(b"</a.css>; rel=preload"))]
            );
            n += 1;
        }
        assert_eq!(n, MAX_INTERIMS);
    }
}
