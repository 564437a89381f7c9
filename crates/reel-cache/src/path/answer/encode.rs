//! Answering with a compressed representation of a stored text response (`[site.compress]`):
//! which representation a request gets ([`Negotiated`], by `Accept-Encoding`), the
//! representation itself (made once per object version and coding, `worker/encoded.rs`),
//! and the answer from it: its own strong `ETag` for conditionals, `Range` served on the
//! compressed bytes (one range; several get the whole representation, as RFC 9110 14.2
//! allows), HEAD with the fields of GET.
//!
//! Only whole stored objects are compressed, from a hit or from a fill whose body arrived
//! whole with the origin's response (`small.rs`); a fill still streaming, a slice or a
//! piece is answered identity. `Vary: Accept-Encoding` goes on every answer that could
//! have been compressed for another request.

use std::cell::RefCell;
use std::future::Future;
use std::sync::Arc;

use bytes::Bytes;
use reel_config::Coding;
use reel_http::{Method, Request, Response};

use super::preamble::{Plan, plan};
use super::stored::{MetaCache, Prepared, ReqHeaders};
use crate::path::worker::encoded::{Compress, Encodings, Rep, Slot};
use crate::policy::accept_encoding::choose;
use crate::policy::conditional::{self, Outcome, Validators};
use crate::policy::range::{content_range, content_range_unsatisfied, parse_range};

/// The `Vary` field line every answer that depends on `Accept-Encoding` carries.
pub(in crate::path) const VARY: &str = "Accept-Encoding";

/// How a request is answered from a stored response, as far as codings go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::path) enum Negotiated {
    /// Never compressed (the site does not compress, or not this response): as before.
    Plain,
    /// Identity, though another request could get it compressed: with `Vary`.
    Identity,
    /// In this coding, if its representation is made (else identity with `Vary`).
    Coded(Coding),
}

impl Negotiated {
    /// Whether an identity answer carries `Vary: Accept-Encoding`.
    pub(in crate::path) fn varies(self) -> bool {
        self != Negotiated::Plain
    }
}

/// What answering with compressed representations uses of the worker and the site.
#[derive(Clone, Copy)]
pub(in crate::path) struct Encoder<'a> {
    /// The site's compression; `None` answers identity only.
    pub compress: Option<&'a Compress>,
    /// The representations, shared by the workers.
    pub encodings: &'a Encodings,
    /// Their bound in bytes (`[cache] compressed_memory`).
    pub compressed_memory: usize,
    /// This worker's decoded metadata (its small-body budget holds its handles).
    pub metas: &'a RefCell<MetaCache>,
}

impl Encoder<'_> {
    /// How `req` is answered from `prep` (its status `status`, its body `n` bytes).
    pub(in crate::path) fn negotiate(
        &self,
        req: &Request,
        prep: &Prepared,
        status: u16,
        n: u64,
    ) -> Negotiated {
        let Some(cfg) = self.compress else { return Negotiated::Plain };
        if status != 200 || n < cfg.min_size || n > cfg.max_size || !prep.compressible(&cfg.types) {
            return Negotiated::Plain;
        }
        match choose(&ReqHeaders(req), &cfg.encodings) {
            Some(c) => Negotiated::Coded(c),
            None => Negotiated::Identity,
        }
    }

    /// The representation in `c` of the version whose metadata blob is `blob`: this
    /// worker's handle, the shared one (waiting for the request making it), or made now
    /// from `body` (the whole identity body). `None`: answer identity (compression did not
    /// make it smaller, or its body could not be read).
    pub(in crate::path) async fn representation(
        &self,
        prep: &Prepared,
        blob: &Bytes,
        c: Coding,
        body: impl Future<Output = Option<Bytes>>,
    ) -> Option<Arc<Rep>> {
        if let Some(r) = prep.encoded(c) {
            return Some(r);
        }
        let cfg = self.compress?;
        let slot = match self.encodings.get_or_make_waiting(blob, c).await {
            Ok(s) => s,
            Err(making) => {
                let b = body.await?;
                making.make(&b, &prep.raw, cfg, self.compressed_memory)
            }
        };
        let Slot::Ready(rep) = slot else { return None };
        if self.metas.borrow_mut().admit_small(rep.body.len() as u64) {
            prep.set_encoded(rep.clone());
        }
        Some(rep)
    }

    /// The answer to `req` from `rep`, a representation of `prep` (a 200): conditionals
    /// against its own `ETag`, then one range of its bytes, or all of them. `ours`: our
    /// `Cache-Status` entry; `tag`: the response's.
    pub(in crate::path) fn answer_encoded(
        &self,
        req: &Request,
        prep: &Prepared,
        rep: &Rep,
        now: u64,
        (ours, tag): (&Bytes, u64),
    ) -> Response {
        self.encodings.served(rep.coding);
        let hdrs = ReqHeaders(req);
        let v = Validators {
            etag: rep.etag.as_deref(),
            last_modified: prep.meta.last_modified(),
            date: Some(prep.meta.date()),
        };
        match conditional::evaluate(req.method().as_str().as_bytes(), 200, &hdrs, &v, now) {
            Outcome::Proceed => {}
            Outcome::NotModified => return not_modified(prep, rep, now, ours).tagged(tag),
            Outcome::PreconditionFailed => {
                let r = Response::error(412).header("cache-status", prep.cache_status(ours));
                return r.header("vary", VARY).tagged(tag);
            }
        }
        let len = rep.body.len() as u64;
        let head = *req.method() == Method::Head;
        if !head
            && let Some(range) = req.header("range")
            && conditional::if_range_holds(&hdrs, &v, now)
            && let Some(set) = parse_range(range)
        {
            match plan(&set, len) {
                Plan::Unsatisfiable => {
                    let r = prep.head_with(&rep.raw, 416, now, ours);
                    return r.header("content-range", content_range_unsatisfied(len)).tagged(tag);
                }
                Plan::Single(r) => {
                    let body = rep.body.slice(r.start as usize..(r.end + 1) as usize);
                    return prep
                        .head_with(&rep.raw, 206, now, ours)
                        .header("content-range", content_range(r, Some(len)))
                        .bytes(body)
                        .tagged(tag);
                }
                // Several ranges of a playlist: the whole representation (RFC 9110 14.2).
                Plan::Multi(_) => {}
            }
        }
        let r = prep.head_with(&rep.raw, 200, now, ours);
        if head { r.with_content_length(len) } else { r.bytes(rep.body.clone()) }.tagged(tag)
    }
}

/// A 304 for `rep` (RFC 9110 15.4.5): the stored fields a 304 carries, with the
/// representation's `ETag` and `Vary`.
fn not_modified(prep: &Prepared, rep: &Rep, now: u64, ours: &Bytes) -> Response {
    let mut r = prep.with_date(Response::new(304));
    for (n, v) in prep.meta.headers() {
        let keep =
            [&b"cache-control"[..], b"content-location", b"expires", b"vary", b"last-modified"]
                .iter()
                .any(|k| k.eq_ignore_ascii_case(n));
        if keep && let Ok(name) = std::str::from_utf8(n) {
            r = r.header(name.to_string(), Bytes::copy_from_slice(v));
        }
    }
    if let Some(e) = &rep.etag {
        r = r.header("etag", e.clone());
    }
    let age = prep.meta.current_age(now).as_secs();
    r.header("vary", VARY)
        .header("age", age.to_string())
        .header("cache-status", prep.cache_status(ours))
}
