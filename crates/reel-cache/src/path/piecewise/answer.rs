//! Answering a request from the pieces of one version: the preamble, HEAD, the range plan,
//! then the first piece before the response head is committed, and the walk of the rest.

use std::time::Duration;

use reel_http::{Method, Request, RequestBody, Response};
use reel_origin::OriginResponse;

use super::{Got, Head, Job, Lost, Source};
use crate::path::answer::Answer;
use crate::path::answer::body_walk;
use crate::path::answer::preamble::{Plan, Preamble, multipart, plan, preamble, unsatisfiable};
use crate::path::answer::stored::unix_now;
use crate::path::phase::serve::stream_origin;
use crate::policy::range::{ByteRange, RangeSet, content_range};

/// What a response from pieces sends.
enum Body {
    Whole,
    Single(ByteRange),
    Multi(crate::policy::multipart::Multipart),
}

/// Answers from `head`'s version, whose pieces `src` holds. `None`: the object changed at
/// the origin before anything was sent; go round with the new head.
pub(in crate::path) async fn answer_from<S: Source>(
    (req, body): (&Request, &mut RequestBody<'_>),
    job: &Job,
    head: &Head,
    ans: Answer,
    mut src: S,
) -> Option<Response> {
    let now = unix_now();
    let prep = head.prep.clone();
    let statuses = &job.worker.statuses;
    let (t, cs) = (ans.tag(), statuses.get(ans.status));
    let total = head.total;
    let ranges = match preamble(req, &prep, 200, now, &cs, t) {
        Preamble::Answered(r) => return Some(r),
        Preamble::Whole => None,
        Preamble::Ranges(set) => Some(set),
    };
    if *req.method() == Method::Head {
        return Some(prep.head(200, now, &cs).with_content_length(total).tagged(t));
    }
    let plan = match ranges.as_ref().map(|set| plan(set, total)) {
        None if total == 0 => return Some(prep.head(200, now, &cs).tagged(t)),
        None => Body::Whole,
        Some(Plan::Unsatisfiable) => {
            return Some(unsatisfiable(&prep, now, &cs, total).tagged(t));
        }
        Some(Plan::Single(r)) => Body::Single(r),
        Some(Plan::Multi(parts)) => Body::Multi(multipart(&prep, &parts, total, job.primary())),
    };
    let first = match &plan {
        Body::Whole => ByteRange { start: 0, end: total - 1 },
        Body::Single(r) => *r,
        Body::Multi(m) => m.parts()[0].range,
    };
    if job.cc.only_if_cached && !src.has(first.start).await {
        // RFC 9111 5.2.1.7.
        return Some(Answer::ONLY_IF_CACHED.on(Response::error(504), statuses));
    }
    let got = match src.prime(first.start, first.end).await {
        Ok(x) => x,
        Err(Lost::Changed) => return None,
        Err(Lost::Whole(f)) => {
            let w = &job.worker;
            let prep = w.reader().prepared(f.meta())?;
            return Some(w.serve().filling(req, f, prep, Answer::MISS_STORED).await);
        }
        Err(Lost::NotStored(resp)) => {
            return Some(not_stored((req, body), job, *resp, None).await);
        }
        Err(Lost::Failed(st)) => {
            return Some(Answer::ORIGIN_ERROR.on(Response::error(st), statuses));
        }
        Err(Lost::LockTimeout) => {
            let fw = job.worker.forwarder();
            return Some(fw.fetch_pass(req, body, &job.site, Answer::LOCK_TIMEOUT).await);
        }
    };
    let ans = match got {
        Got::Stored => ans,
        Got::Joined if ans.result == Answer::HIT.result => Answer::MISS_COLLAPSED,
        Got::Joined => ans,
        Got::Led(t) => Answer::MISS_STORED.after(t),
    };
    let (t, cs) = (ans.tag(), statuses.get(ans.status));
    let r = match plan {
        Body::Whole => {
            let all = ByteRange { start: 0, end: total - 1 };
            prep.head(200, now, &cs)
                .stream(body_walk::stream(src, body_walk::single(all)), Some(total))
        }
        Body::Single(r) => prep
            .head(206, now, &cs)
            .header("content-range", content_range(r, Some(total)))
            .stream(body_walk::stream(src, body_walk::single(r)), Some(r.len())),
        Body::Multi(m) => {
            let len = m.content_length();
            body_walk::multipart_head(&prep, now, &cs, &m)
                .stream(body_walk::stream(src, body_walk::multipart(&m)), Some(len))
        }
    };
    Some(r.tagged(t))
}

/// An origin answer to a piece request that was not stored: a 206 (of the piece, not of
/// what the client asked for) makes the client's own request pass; anything else (a 200
/// too large for the store, a 416, an error) goes to the client as it is.
pub(in crate::path) async fn not_stored(
    (req, body): (&Request, &mut RequestBody<'_>),
    job: &Job,
    resp: OriginResponse,
    t: Option<Duration>,
) -> Response {
    let status = resp.status.as_u16();
    if status == 206 || (status == 416 && req.header("range").is_none()) {
        drop(resp);
        let fw = job.worker.forwarder();
        return fw.fetch_pass(req, body, &job.site, Answer::MISS_NOT_STORED).await;
    }
    let ans = Answer::MISS_NOT_STORED.after(t);
    let w = &job.worker;
    stream_origin(req, resp, ans, &w.statuses, &w.fetch.shared.pass_buffered)
}

/// The first byte a request needs, before the length is known: its first explicit range
/// start (a suffix range needs the length: the object is learnt from slice 0).
pub(in crate::path) fn first_byte_hint(range: Option<&RangeSet>) -> u64 {
    use crate::policy::range::RangeSpec;
    match range.and_then(|r| r.specs().first()) {
        Some(RangeSpec::FromTo(f, _) | RangeSpec::From(f)) => *f,
        _ => 0,
    }
}

/// The first byte a request needs of an object of `total` bytes.
pub(in crate::path) fn first_byte(range: Option<&RangeSet>, total: u64) -> u64 {
    range.and_then(|r| r.parts(total).first().map(|p| p.start)).unwrap_or(0)
}
