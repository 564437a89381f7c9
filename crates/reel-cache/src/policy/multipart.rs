//! `multipart/byteranges` framing (RFC 9110 14.6, RFC 2046 5.1.1): the boundary, the
//! header lines in front of each part and the closing delimiter, so a several-range answer
//! can be streamed part by part with its exact `Content-Length` known up front.
//!
//! Which ranges become parts, in which order, is [`RangeSet::parts`]; this module only
//! frames them. The body is
//!
//! ```text
//! --B CRLF Content-Type: t CRLF Content-Range: bytes a-b/T CRLF CRLF <bytes a..=b>
//! CRLF --B CRLF ...                                                  <next part>
//! CRLF --B-- CRLF
//! ```
//!
//! The boundary is `reel-` and 16 hexadecimal digits drawn per response: a fixed string
//! could occur in a stored body and end a part early (RFC 2046 5.1.1 asks for one that
//! does not occur in the data).
//!
//! [`RangeSet::parts`]: super::range::RangeSet::parts

use std::hash::BuildHasher;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::{BufMut, Bytes, BytesMut};

use super::range::{ByteRange, content_range};

/// One part: its range and the delimiter and header lines sent before its bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Part {
    /// The bytes of the representation this part carries.
    pub range: ByteRange,
    /// Delimiter line and part header section, up to and including the empty line.
    pub head: Bytes,
}

/// A framed `multipart/byteranges` body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Multipart {
    boundary: String,
    parts: Vec<Part>,
    closing: Bytes,
}

/// A boundary no other response of this process uses: a hash of a key drawn once per
/// process, a counter and `seed` (callers pass something of the response, such as its
/// key). No clock: a body's framing never depends on the time.
pub fn fresh_boundary(seed: &[u8]) -> String {
    static CALLS: AtomicU64 = AtomicU64::new(0);
    static KEY: OnceLock<u64> = OnceLock::new();
    // std's RandomState is keyed from the OS's random source once per process.
    let key = *KEY.get_or_init(|| std::hash::RandomState::new().hash_one(std::process::id()));
    let n = CALLS.fetch_add(1, Ordering::Relaxed);
    let h = xxhash_rust::xxh3::xxh3_64_with_seed(seed, key ^ n.rotate_left(40));
    format!("reel-{h:016x}")
}

impl Multipart {
    /// Frames `ranges` (non-empty) of a representation of `total` bytes whose media type
    /// is `content_type` (each part names it, RFC 9110 14.6), with `boundary`.
    pub fn new(
        ranges: &[ByteRange],
        total: u64,
        content_type: Option<&[u8]>,
        boundary: String,
    ) -> Multipart {
        let parts = ranges
            .iter()
            .enumerate()
            .map(|(i, &range)| {
                let mut h = BytesMut::with_capacity(boundary.len() + 96);
                if i > 0 {
                    h.put_slice(b"\r\n");
                }
                h.put_slice(b"--");
                h.put_slice(boundary.as_bytes());
                h.put_slice(b"\r\n");
                if let Some(ct) = content_type {
                    h.put_slice(b"Content-Type: ");
                    h.put_slice(ct);
                    h.put_slice(b"\r\n");
                }
                h.put_slice(b"Content-Range: ");
                h.put_slice(content_range(range, Some(total)).as_bytes());
                h.put_slice(b"\r\n\r\n");
                Part { range, head: h.freeze() }
            })
            .collect();
        let closing = Bytes::from(format!("\r\n--{boundary}--\r\n"));
        Multipart { boundary, parts, closing }
    }

    /// The response's `Content-Type` value.
    pub fn content_type(&self) -> String {
        format!("multipart/byteranges; boundary={}", self.boundary)
    }

    /// The parts, in the order they are sent.
    pub fn parts(&self) -> &[Part] {
        &self.parts
    }

    /// The closing delimiter, sent after the last part.
    pub fn closing(&self) -> &Bytes {
        &self.closing
    }

    /// The length of the whole body: every part's head and bytes, and the closing line.
    pub fn content_length(&self) -> u64 {
        let parts: u64 = self.parts.iter().map(|p| p.head.len() as u64 + p.range.len()).sum();
        parts + self.closing.len() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(start: u64, end: u64) -> ByteRange {
        ByteRange { start, end }
    }

    #[test]
    fn a_body_frames_every_part_and_its_length_is_exact() {
        let m = Multipart::new(&[r(0, 3), r(8, 9)], 10, Some(b"video/mp4"), "B".into());
        assert_eq!(m.content_type(), "multipart/byteranges; boundary=B");
        let data = b"0123456789";
        let mut body = Vec::new();
        for p in m.parts() {
            body.extend_from_slice(&p.head);
            body.extend_from_slice(&data[p.range.start as usize..=p.range.end as usize]);
        }
        body.extend_from_slice(m.closing());
        let want = "--B\r\nContent-Type: video/mp4\r\nContent-Range: bytes 0-3/10\r\n\r\n0123\
                    \r\n--B\r\nContent-Type: video/mp4\r\nContent-Range: bytes 8-9/10\r\n\r\n89\
                    \r\n--B--\r\n";
        assert_eq!(String::from_utf8(body.clone()).unwrap(), want);
        assert_eq!(m.content_length(), body.len() as u64);
        // Without a media type, the parts carry Content-Range only.
        let m = Multipart::new(&[r(1, 1)], 10, None, "B".into());
        assert_eq!(&m.parts()[0].head[..], b"--B\r\nContent-Range: bytes 1-1/10\r\n\r\n");
    }

    /// Fuzzing (`crates/reel-fuzz`, target `range`): the parts of a representation near
    /// 2^64 bytes (a length an origin announces) framed into a body whose length overflowed.
    #[test]
    fn a_body_of_a_representation_near_2_64_bytes_has_a_length() {
        use crate::policy::range::{MULTIPART_ROOM, parse_range};
        let set = parse_range(b"bytes=0-1,3-4,172-").unwrap();
        for total in [u64::MAX, u64::MAX - 1000, 1 << 63, u64::MAX - MULTIPART_ROOM] {
            let parts = set.parts(total);
            if parts.len() < 2 {
                // Answered as a single range, without framing.
                assert_eq!(parts, [r(0, total - 1)], "{total}");
                continue;
            }
            let m = Multipart::new(&parts, total, Some(b"video/mp4"), fresh_boundary(b"k"));
            let bytes: u64 = parts.iter().map(|r| r.len()).sum();
            assert!(m.content_length() > bytes, "{total}: {parts:?}");
        }
    }

    #[test]
    fn boundaries_differ_per_response() {
        let a = fresh_boundary(b"k");
        assert!(a.starts_with("reel-") && a.len() == 21, "{a}");
        assert_ne!(a, fresh_boundary(b"k"));
    }
}
