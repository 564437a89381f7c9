//! The one preamble of every answer from a stored representation (complete, filling, or
//! assembled from slices or pieces): preconditions first (RFC 9110 13.2.2), then whether
//! the request's `Range` applies (GET of a 200 whose `If-Range` holds, 14.2), and the plan
//! of ranges for a known length (one part, several, or none satisfiable).

use bytes::Bytes;
use reel_http::{Method, Request, Response};

use super::stored::{Prepared, ReqHeaders};
use crate::policy::HeaderLookup;
use crate::policy::conditional::{self, Outcome, Validators};
use crate::policy::multipart::{Multipart, fresh_boundary};
use crate::policy::range::{ByteRange, RangeSet, content_range_unsatisfied, parse_range};

/// What a request asks of a representation, once its preconditions are evaluated.
pub(in crate::path) enum Preamble {
    /// Answered already: 304 or 412.
    Answered(Response),
    /// The whole representation (HEAD included).
    Whole,
    /// The ranges of a GET whose `Range` applies.
    Ranges(RangeSet),
}

/// The ranges to send of a representation whose length is known.
pub(in crate::path) enum Plan {
    /// None is satisfiable: 416.
    Unsatisfiable,
    /// One part: a 206 with `Content-Range`.
    Single(ByteRange),
    /// Several: a `multipart/byteranges` 206.
    Multi(Vec<ByteRange>),
}

/// Evaluates `req`'s preconditions against `prep` (answered with `status`) and decides
/// whether its `Range` applies. A 304 or 412 carries `ours` (our `Cache-Status` entry) and
/// `tag`.
pub(in crate::path) fn preamble(
    req: &Request,
    prep: &Prepared,
    status: u16,
    now: u64,
    ours: &Bytes,
    tag: u64,
) -> Preamble {
    let hdrs = ReqHeaders(req);
    let v = Validators::of(&prep.meta);
    match conditional::evaluate(req.method().as_str().as_bytes(), status, &hdrs, &v, now) {
        Outcome::Proceed => {}
        Outcome::NotModified => {
            return Preamble::Answered(not_modified(prep, now, ours).tagged(tag));
        }
        Outcome::PreconditionFailed => {
            return Preamble::Answered(precondition_failed(prep, ours).tagged(tag));
        }
    }
    if *req.method() == Method::Head || status != 200 {
        return Preamble::Whole;
    }
    let Some(range) = req.header("range") else { return Preamble::Whole };
    if !conditional::if_range_holds(&hdrs, &v, now) {
        return Preamble::Whole;
    }
    parse_range(range).map_or(Preamble::Whole, Preamble::Ranges)
}

/// The plan of `set` for a representation of `total` bytes (RFC 9110 14.2).
pub(in crate::path) fn plan(set: &RangeSet, total: u64) -> Plan {
    let mut parts = set.parts(total);
    match parts.len() {
        0 => Plan::Unsatisfiable,
        1 => Plan::Single(parts.remove(0)),
        _ => Plan::Multi(parts),
    }
}

/// The framing of a `multipart/byteranges` body of `parts` of `prep`'s representation, with
/// a boundary drawn from `seed`.
pub(in crate::path) fn multipart(
    prep: &Prepared,
    parts: &[ByteRange],
    total: u64,
    seed: &[u8],
) -> Multipart {
    let ct = prep.meta.headers().get_first("content-type");
    Multipart::new(parts, total, ct, fresh_boundary(seed))
}

/// A 416 for a representation of `total` bytes (RFC 9110 15.5.17).
pub(in crate::path) fn unsatisfiable(
    prep: &Prepared,
    now: u64,
    ours: &Bytes,
    total: u64,
) -> Response {
    prep.head(416, now, ours).header("content-range", content_range_unsatisfied(total))
}

/// A 412 computed from a stored response (RFC 9110 13.1.1, 13.1.4), with the
/// `Cache-Status` of the cached answer it replaces.
fn precondition_failed(prep: &Prepared, ours: &Bytes) -> Response {
    Response::error(412).header("cache-status", prep.cache_status(ours))
}

/// A 304 from a stored response: the fields RFC 9110 15.4.5 asks for, `Date` the
/// stored one.
fn not_modified(prep: &Prepared, now: u64, ours: &Bytes) -> Response {
    let mut r = prep.with_date(Response::new(304));
    for (n, v) in prep.meta.headers() {
        let keep = [
            &b"cache-control"[..],
            b"content-location",
            b"etag",
            b"expires",
            b"vary",
            b"last-modified",
        ]
        .iter()
        .any(|k| k.eq_ignore_ascii_case(n));
        if keep && let Ok(name) = std::str::from_utf8(n) {
            r = r.header(name.to_string(), Bytes::copy_from_slice(v));
        }
    }
    let age = prep.meta.current_age(now).as_secs();
    r.header("age", age.to_string()).header("cache-status", prep.cache_status(ours))
}
