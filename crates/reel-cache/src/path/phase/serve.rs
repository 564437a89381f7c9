//! Answering a client: from a complete stored object (conditionals, ranges, HEAD, small
//! bodies from memory, sendfile or a cold stream), from an object still being filled, or
//! straight from an origin response that is not stored. Every answer from a stored
//! object starts with the one [`preamble`].

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

use bytes::Bytes;
use reel_http::{Method, Request, Response};
use reel_origin::OriginResponse;
use reel_store::{Filling, Hit};

use crate::path::answer::body_walk::{self, Whole};
use crate::path::answer::encode::{Encoder, Negotiated, VARY};
use crate::path::answer::pass_stream::{PassBuffered, stream_body};
use crate::path::answer::preamble::{Plan, Preamble, multipart, plan, preamble, unsatisfiable};
use crate::path::answer::stored::{
    LeasedRange, MetaCache, Prepared, stream_cold_hit, stream_filling, unix_now,
};
use crate::path::answer::tag::Tag;
use crate::path::answer::{Answer, StatusNames, chain};
use crate::path::worker::encoded::{Compress, Encodings};
use crate::path::worker::small::{SMALL_BODY, SmallBodies, small_body};
use crate::policy::range::{Available, ByteRange, RangeOutcome, content_range};

/// A response reel produced itself.
pub(in crate::path) fn local(status: u16) -> Response {
    Response::error(status).tagged(Tag::local())
}

/// What answering from the store uses of the worker.
#[derive(Clone, Copy)]
pub(in crate::path) struct Serve<'a> {
    /// Our `Cache-Status` entries.
    pub statuses: &'a StatusNames,
    /// This worker's decoded metadata (and its small-body budget).
    pub metas: &'a RefCell<MetaCache>,
    /// Small bodies read whole on arrival, shared by the workers.
    pub small: &'a SmallBodies,
    /// The site's compression (`[site.compress]`); `None` answers identity only. A body
    /// rewritten per viewer (a playlist carrying the viewer's token) must be answered
    /// through a `Serve` without it: its representations would be another viewer's.
    pub compress: Option<&'a Compress>,
    /// Compressed representations, shared by the workers.
    pub encodings: &'a Encodings,
    /// Their bound in bytes (`[cache] compressed_memory`).
    pub compressed_memory: usize,
}

impl Serve<'_> {
    /// A complete stored object: the preamble, then HEAD, a small body from memory,
    /// sendfile, or a stream when its pages are not resident.
    pub(in crate::path) async fn hit(
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
        let neg = self.encoder().negotiate(req, prep, status, len);
        if let Negotiated::Coded(c) = neg {
            let body = async {
                match self.small_body(prep, hit.meta(), len) {
                    Some(b) => Some(b),
                    None => hit.read(0, len).await.ok(),
                }
            };
            if let Some(rep) = self.encoder().representation(prep, hit.meta(), c, body).await {
                return self.encoder().answer_encoded(req, prep, &rep, now, (&cs, t));
            }
        }
        let vary = |r: Response| if neg.varies() { r.header("vary", VARY) } else { r };
        let (code, start, n, content_range) = match preamble(req, prep, status, now, &cs, t) {
            Preamble::Answered(r) => return vary(r),
            Preamble::Whole => (status, 0, len, None),
            Preamble::Ranges(set) => match plan(&set, len) {
                Plan::Unsatisfiable => return vary(unsatisfiable(prep, now, &cs, len)).tagged(t),
                Plan::Single(r) => (206, r.start, r.len(), Some(content_range(r, Some(len)))),
                Plan::Multi(parts) => {
                    let seed = len.to_le_bytes();
                    let src = Whole::hit(hit);
                    return multipart_answer(prep, now, (ans, &cs), &parts, len, &seed, src);
                }
            },
        };
        let mut r = vary(prep.head(code, now, &cs));
        if let Some(cr) = content_range {
            r = r.header("content-range", cr);
        }
        if *req.method() == Method::Head {
            return r.with_content_length(n).tagged(t);
        }
        if n == 0 {
            return r.tagged(t);
        }
        if code == 200 && n <= SMALL_BODY {
            // A small whole body (a playlist) leaves with its head in one send from a
            // per-worker copy, instead of send + sendfile: one syscall less per hit.
            if let Some(b) = self.small_body(prep, hit.meta(), n) {
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

    /// An object still being written: the preamble against what is known, then a stream
    /// that follows the fill. A range is answered as soon as its bytes exist (RFC 9110
    /// 14.2, 15.3.7).
    // `fill` is not shared yet while this function waits on it, so its borrows cannot clash.
    #[allow(clippy::await_holding_refcell_ref)]
    pub(in crate::path) async fn filling(
        &self,
        req: &Request,
        fill: Filling,
        prep: Rc<Prepared>,
        ans: Answer,
    ) -> Response {
        let (t, cs) = (ans.tag(), self.statuses.get(ans.status));
        let now = unix_now();
        let status = prep.meta.status();
        // Whole in memory (`small`): compressed like a hit. Otherwise identity while it fills.
        let whole = fill
            .expected_len()
            .filter(|&n| n <= SMALL_BODY)
            .and_then(|n| Some((n, self.small_body(&prep, fill.meta(), n)?)));
        // A body still streaming is answered identity, with `Vary` if it will not be once
        // stored (a length not known yet is taken as compressible).
        let n = fill.expected_len().or(self.compress.map(|c| c.min_size)).unwrap_or(0);
        let neg = self.encoder().negotiate(req, &prep, status, n);
        if let (Negotiated::Coded(c), Some((_, b))) = (neg, &whole) {
            let body = std::future::ready(Some(b.clone()));
            if let Some(rep) = self.encoder().representation(&prep, fill.meta(), c, body).await {
                return self.encoder().answer_encoded(req, &prep, &rep, now, (&cs, t));
            }
        }
        let vary = |r: Response| if neg.varies() { r.header("vary", VARY) } else { r };
        let ranges = match preamble(req, &prep, status, now, &cs, t) {
            Preamble::Answered(r) => return vary(r),
            Preamble::Whole => None,
            Preamble::Ranges(set) => Some(set),
        };
        let head = *req.method() == Method::Head;
        if req.header("range").is_none()
            && let Some(n) = fill.expected_len().filter(|&n| n <= SMALL_BODY)
            && let Some(b) = self.small_body(&prep, fill.meta(), n)
        {
            // The whole body came with the origin's response (`small`): one send, however
            // many requests the fill released at once.
            let r = vary(prep.head(status, now, &cs));
            return if head { r.with_content_length(n) } else { r.bytes(b) }.tagged(t);
        }
        let fill = Rc::new(RefCell::new(fill));
        let total = fill.borrow().expected_len();
        if let Some(set) = ranges {
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
                        let r = vary(prep.head(206, now, &cs))
                            .header("content-range", content_range(range, total))
                            .stream(
                                stream_filling(fill, range.start, Some(range.end + 1)),
                                Some(range.len()),
                            );
                        return r.tagged(t);
                    }
                    RangeOutcome::Unsatisfiable { total } => {
                        return unsatisfiable(&prep, now, &cs, total).tagged(t);
                    }
                    RangeOutcome::Multipart { total } => {
                        let src = Whole::filling(fill, total);
                        let (parts, seed) = (set.parts(total), total.to_le_bytes());
                        return multipart_answer(&prep, now, (ans, &cs), &parts, total, &seed, src);
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
        let r = vary(prep.head(status, now, &cs));
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

    /// Answering with compressed representations.
    fn encoder(&self) -> Encoder<'_> {
        Encoder {
            compress: self.compress,
            encodings: self.encodings,
            compressed_memory: self.compressed_memory,
            metas: self.metas,
        }
    }

    /// The whole body of the object version `blob` names, if it is held in memory.
    pub(in crate::path) fn small_body(
        &self,
        prep: &Prepared,
        blob: &Bytes,
        n: u64,
    ) -> Option<Bytes> {
        small_body(prep, blob, n, self.small, self.metas)
    }
}

/// A `multipart/byteranges` 206 of `parts` of the representation `src` holds.
fn multipart_answer(
    prep: &Prepared,
    now: u64,
    (ans, cs): (Answer, &Bytes),
    parts: &[ByteRange],
    total: u64,
    seed: &[u8],
    src: Whole,
) -> Response {
    let m = multipart(prep, parts, total, seed);
    let len = m.content_length();
    body_walk::multipart_head(prep, now, cs, &m)
        .stream(body_walk::stream(src, body_walk::multipart(&m)), Some(len))
        .tagged(ans.tag())
}

/// Streams an origin response to the client as it arrives, its `Cache-Status` entries
/// (a parent's) followed by ours.
pub(in crate::path) fn stream_origin(
    req: &Request,
    resp: OriginResponse,
    ans: Answer,
    names: &StatusNames,
    gauge: &Arc<PassBuffered>,
) -> Response {
    let mut r = Response::new(resp.status.as_u16());
    for (n, v) in resp.headers.iter() {
        // The origin's Date goes along (RFC 9110 6.6.1); the codec frames the body. The
        // origin's Alt-Svc names the origin's services, not this node's.
        if n == http::header::CONTENT_LENGTH
            || n.as_str() == "cache-status"
            || n == http::header::ALT_SVC
        {
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
