//! Origin responses whose framing is ambiguous (RFC 9112 6.3): what reaches the client is
//! one well-framed message, never the origin's conflicting fields.

use crate::client::get;
use crate::origin::Route;

/// An origin response with both `Content-Length` and `Transfer-Encoding: chunked` is
/// read as chunked and its `Content-Length` dropped (RFC 9112 6.3 rule 3); the client got
/// `content-length: 3` and no body.
#[test]
fn content_length_with_transfer_encoding_is_read_as_chunked() {
    let (o, s) = crate::setup();
    for (path, cc) in [("/clte-stored", "max-age=600"), ("/clte-pass", "no-store")] {
        let mut r = Route::ok("hello, world", &[("cache-control", cc), ("content-length", "3")]);
        r.chunked = true;
        r.pieces = 3;
        o.route(path, r);
        for _ in 0..2 {
            let resp = get(&s, path, &[]);
            assert_eq!(resp.status, 200, "{path}");
            assert!(resp.complete, "{path}: framed completely");
            assert_eq!(resp.body, b"hello, world", "{path}");
            assert_ne!(resp.header("content-length"), Some("3"), "{path}");
        }
    }
    assert_eq!(o.count("/clte-stored"), 1, "the chunked body was stored whole");
}
