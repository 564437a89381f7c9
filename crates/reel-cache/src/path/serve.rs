//! Answering a client: from a complete stored object (conditionals, ranges, HEAD, small
//! bodies from memory, sendfile or a cold stream), from an object still being filled, or
//! straight from an origin response that is not stored.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

use bytes::Bytes;
use reel_http::{Method, Request, Response};
use reel_origin::OriginResponse;
use reel_store::Hit;

use super::answer::{Answer, StatusNames, chain};
use super::pass_stream::{PassBuffered, stream_body};
use super::respond::{
    LeasedRange, Prepared, ReqHeaders, stream_cold_hit, stream_filling, unix_now,
};
use super::worker::{WorkerCache, local};
use crate::policy::conditional::{self, Outcome, Validators};
use crate::policy::meta::StoredMeta;
use crate::policy::range::{
    Available, RangeOutcome, content_range, content_range_unsatisfied, parse_range,
};

/// Whole bodies up to this size are kept per worker in memory and sent with their head.
const SMALL_BODY: u64 = 16 * 1024;

impl WorkerCache {
    /// A complete stored object: conditionals, ranges, HEAD, then sendfile (or a stream
    /// when its pages are not resident).
    pub(super) async fn serve_hit(
        &self,
        req: &Request,
        hit: Rc<Hit>,
        prep: &Prepared,
        now: u64,
        ans: Answer,
    ) -> Response {
        let (t, cs) = (ans.tag(), self.statuses.get(ans.status));
        let status = prep.meta.status();
        let len = hit.body_len();
        let hdrs = ReqHeaders(req);
        let v = Validators::of(&prep.meta);
        match conditional::evaluate(req.method().as_str().as_bytes(), status, &hdrs, &v, now) {
            Outcome::Proceed => {}
            Outcome::NotModified => return not_modified(prep, now, &cs).tagged(t),
            Outcome::PreconditionFailed => return precondition_failed(prep, &cs).tagged(t),
        }
        let head = *req.method() == Method::Head;
        let (code, start, n, content_range) = match range_of(req, &prep.meta, status, len, head) {
            RangeOutcome::Partial { range, total } => {
                (206, range.start, range.len(), Some(content_range(range, total)))
            }
            RangeOutcome::Unsatisfiable { total } => {
                return prep
                    .head(416, now, &cs)
                    .header("content-range", content_range_unsatisfied(total))
                    .tagged(t);
            }
            RangeOutcome::Full | RangeOutcome::Wait => (status, 0, len, None),
        };
        let mut r = prep.head(code, now, &cs);
        if let Some(cr) = content_range {
            r = r.header("content-range", cr);
        }
        if head {
            return r.with_content_length(n).tagged(t);
        }
        if n == 0 {
            return r.tagged(t);
        }
        if code == 200 && n <= SMALL_BODY {
            // A small whole body (a playlist) leaves with its head in one send from a
            // per-worker copy, instead of send + sendfile: one syscall less per hit.
            if let Some(b) = prep.small_body() {
                return r.bytes(b).tagged(t);
            }
            if self.metas.borrow_mut().admit_small(n)
                && let Ok(b) = hit.read(0, n).await
            {
                prep.set_small_body(b.clone());
                return r.bytes(b).tagged(t);
            }
        }
        if prep.resident(&hit, start, n)
            && let Some(fr) = LeasedRange::of_hit(hit.clone(), start, n)
        {
            return r.file(fr).tagged(t);
        }
        r.stream(stream_cold_hit(hit, start, start + n), Some(n)).tagged(t)
    }

    /// An object still being written: conditionals and ranges against what is known, then
    /// a stream that follows the fill.
    // `fill` is not shared yet while this function waits on it, so its borrows cannot clash.
    #[allow(clippy::await_holding_refcell_ref)]
    pub(super) async fn serve_filling(
        &self,
        req: &Request,
        fill: reel_store::Filling,
        prep: Rc<Prepared>,
        ans: Answer,
    ) -> Response {
        let (t, cs) = (ans.tag(), self.statuses.get(ans.status));
        let now = unix_now();
        let status = prep.meta.status();
        let hdrs = ReqHeaders(req);
        let v = Validators::of(&prep.meta);
        match conditional::evaluate(req.method().as_str().as_bytes(), status, &hdrs, &v, now) {
            Outcome::Proceed => {}
            Outcome::NotModified => return not_modified(&prep, now, &cs).tagged(t),
            Outcome::PreconditionFailed => return precondition_failed(&prep, &cs).tagged(t),
        }
        let fill = Rc::new(RefCell::new(fill));
        let total = fill.borrow().expected_len();
        let head = *req.method() == Method::Head;
        let range = match (head, status, req.header("range")) {
            (false, 200, Some(r)) if conditional::if_range_holds(&hdrs, &v) => parse_range(r),
            _ => None,
        };
        if let Some(set) = range {
            // A range is answered as soon as its bytes exist (RFC 9110 14.2, 15.3.7).
            loop {
                let st = match fill.borrow().status() {
                    Ok(s) => s,
                    Err(_) => return local(502),
                };
                let avail = match st.final_len {
                    Some(l) => Available::Complete(l),
                    None => Available::Filling { available: st.available, total },
                };
                match set.resolve(avail) {
                    RangeOutcome::Partial { range, total } => {
                        let r = prep
                            .head(206, now, &cs)
                            .header("content-range", content_range(range, total))
                            .stream(
                                stream_filling(fill, range.start, Some(range.end + 1)),
                                Some(range.len()),
                            );
                        return r.tagged(t);
                    }
                    RangeOutcome::Unsatisfiable { total } => {
                        return prep
                            .head(416, now, &cs)
                            .header("content-range", content_range_unsatisfied(total))
                            .tagged(t);
                    }
                    RangeOutcome::Full => break,
                    RangeOutcome::Wait => {
                        let next = st.available + 1;
                        let res = fill.borrow_mut().wait_for(next).await;
                        if res.is_err() {
                            return local(502);
                        }
                    }
                }
            }
        }
        let r = prep.head(status, now, &cs);
        if head {
            let len = match total {
                Some(l) => l,
                None => {
                    let res = fill.borrow_mut().wait_for(u64::MAX).await;
                    match res.ok().and_then(|s| s.final_len) {
                        Some(l) => l,
                        None => return local(502),
                    }
                }
            };
            return r.with_content_length(len).tagged(t);
        }
        r.stream(stream_filling(fill, 0, total), total).tagged(t)
    }
}

/// The Range a GET of a complete object asks for, if it applies (RFC 9110 14.2, 13.1.5).
fn range_of(req: &Request, meta: &StoredMeta, status: u16, len: u64, head: bool) -> RangeOutcome {
    if head || status != 200 {
        return RangeOutcome::Full;
    }
    let Some(v) = req.header("range") else { return RangeOutcome::Full };
    if !conditional::if_range_holds(&ReqHeaders(req), &Validators::of(meta)) {
        return RangeOutcome::Full;
    }
    match parse_range(v) {
        Some(set) => set.resolve(Available::Complete(len)),
        None => RangeOutcome::Full,
    }
}

/// A 412 computed from a stored response (RFC 9110 13.1.1, 13.1.4), with the
/// `Cache-Status` of the cached answer it replaces.
fn precondition_failed(prep: &Prepared, cs: &Bytes) -> Response {
    Response::error(412).header("cache-status", prep.cache_status(cs))
}

/// A 304 from a stored response: the fields RFC 9110 15.4.5 asks for, `Date` the
/// stored one.
fn not_modified(prep: &Prepared, now: u64, cs: &Bytes) -> Response {
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
    r.header("age", age.to_string()).header("cache-status", prep.cache_status(cs))
}

/// Streams an origin response to the client as it arrives, its `Cache-Status` entries
/// (a parent's) followed by ours.
pub(super) fn stream_origin(
    req: &Request,
    resp: OriginResponse,
    ans: Answer,
    names: &StatusNames,
    gauge: &Arc<PassBuffered>,
) -> Response {
    let mut r = Response::new(resp.status.as_u16());
    for (n, v) in resp.headers.iter() {
        // The origin's Date goes along (RFC 9110 6.6.1); the codec frames the body.
        if n == http::header::CONTENT_LENGTH || n.as_str() == "cache-status" {
            continue;
        }
        r = r.header(n.as_str().to_string(), Bytes::copy_from_slice(v.as_bytes()));
    }
    let upstream = resp.headers.get_all("cache-status");
    r = if upstream.iter().next().is_some() {
        let ours = names.get(ans.status);
        r.header("cache-status", chain(upstream.iter().map(|v| v.as_bytes()), &ours))
            .tagged(ans.tag())
    } else {
        ans.on(r, names)
    };
    let len = resp.body.content_length();
    let no_body = *req.method() == Method::Head || matches!(resp.status.as_u16(), 204 | 304);
    if no_body {
        if let Some(l) = len {
            r = r.with_content_length(l);
        }
        return r;
    }
    r.stream(stream_body(resp, gauge.clone()), len)
}
