//! Representations stored piecewise: what a sliced object (`slice`) and a partially stored
//! object (`partial`) share. A request's own copy of what its fetches need ([`Job`]), the
//! head it reads once ([`Head`]), how it got a piece ([`Got`]) or why it could not
//! ([`Lost`]), the source of pieces a response walks ([`Source`]), and the answer built
//! from them ([`answer::answer_from`]).

use std::net::SocketAddr;
use std::rc::Rc;
use std::time::Duration;

use http::header::RANGE;
use http::{HeaderMap, HeaderValue, uri::PathAndQuery};
use reel_http::Request;
use reel_origin::{OriginRequest, OriginResponse, Requester};
use reel_store::Filling;

use super::fetch::{Fetched, Revalidating, Viewer};
use super::fill::Part;
use super::inflight::Lead;
use super::parts::WorkerParts;
use super::pieces::Pieces;
use super::respond::Prepared;
use super::settings::Site;
use super::upstream::{Forward, Withheld, fill_request, key_omits_query};
use crate::key::CacheKey;
use crate::policy::cache_control::RequestCacheControl;
use crate::policy::conditional;
use crate::policy::range::ByteRange;

pub(super) mod answer;

/// An object's head as a request reads it.
#[derive(Clone)]
pub(super) struct Head {
    /// Its metadata, decoded once per worker.
    pub prep: Rc<Prepared>,
    /// The version of its slices or pieces.
    pub version: u64,
    /// The representation's length.
    pub total: u64,
}

/// How a request got a piece.
pub(super) enum Got {
    /// Stored complete when the request looked.
    Stored,
    /// Being fetched by another request (or read-ahead): its bytes as they arrive.
    Joined,
    /// Fetched by the request itself; the origin's time.
    Led(Option<Duration>),
}

/// Why a request could not get a piece of the version it holds.
pub(super) enum Lost {
    /// The origin has another version now (the head was replaced).
    Changed,
    /// The origin ignored `Range` and the whole object is being stored under the URL.
    Whole(Filling),
    /// The origin's answer was not stored and is not the piece.
    NotStored(Box<OriginResponse>),
    /// The origin failed: the status for the client.
    Failed(u16),
    /// The fetch being waited for took longer than `lock_timeout`.
    LockTimeout,
}

impl Lost {
    /// What went wrong, for the error that ends a response's body.
    pub(super) fn describe(&self) -> String {
        match self {
            Lost::Changed => "the object changed at the origin".into(),
            Lost::Whole(_) => "the origin ignored Range".into(),
            Lost::NotStored(r) => format!("unexpected origin answer {}", r.status),
            Lost::Failed(st) => format!("origin failed ({st})"),
            Lost::LockTimeout => "slice fetch took longer than lock_timeout".into(),
        }
    }
}

/// The pieces of one version of an object, as a response needs them.
pub(super) trait Source: Pieces {
    /// Whether the piece holding `pos` is stored.
    async fn has(&self, pos: u64) -> bool;
    /// Gets the piece holding `pos` (the response's first byte; the first range ends at
    /// `until`) before the response head is committed, keeping it for the walk.
    async fn prime(&mut self, pos: u64, until: u64) -> Result<Got, Lost>;
}

/// A request's own copy of what its piece fetches need, so its body task and read-ahead
/// outlive the handler's borrows.
pub(super) struct Job {
    /// The worker's parts.
    pub(super) worker: WorkerParts,
    /// The site served.
    pub(super) site: Site,
    key: CacheKey,
    pq: PathAndQuery,
    host: String,
    fill_headers: HeaderMap,
    viewer: Vec<(Vec<u8>, Vec<u8>)>,
    /// The request's cache directives.
    pub(super) cc: RequestCacheControl,
    partial_key: bool,
    /// The client connection (read-ahead is bounded per connection).
    pub(super) peer: SocketAddr,
}

impl Job {
    /// The job of `req` for `key` on `site`; `None` when its target cannot be keyed.
    pub(super) fn new(
        worker: WorkerParts,
        req: &Request,
        site: &Site,
        key: &CacheKey,
        cc: &RequestCacheControl,
    ) -> Option<Job> {
        let o = fill_request(req, key, Forward::Fill, None, &worker.fetch.settings)?;
        Some(Job {
            worker,
            site: site.clone(),
            key: key.clone(),
            pq: o.path_and_query,
            host: o.host,
            fill_headers: o.headers,
            viewer: req.headers().map(|(n, v)| (n.as_bytes().to_vec(), v.to_vec())).collect(),
            cc: cc.clone(),
            partial_key: key_omits_query(req, key),
            peer: req.peer(),
        })
    }

    /// The URL's cache key, as bytes.
    pub(super) fn primary(&self) -> &[u8] {
        self.key.as_bytes()
    }

    /// The one fetch-and-store step for bytes `range` stored as `part`; with `stale`, a
    /// conditional request revalidating that head (stored at that key).
    /// `own`: the node's own fetch (a refresh, a read-ahead), else the viewer's.
    pub(super) async fn fetch_part(
        &self,
        range: ByteRange,
        part: Part<'_>,
        stale: Option<(&Head, Vec<u8>)>,
        lead: Lead,
        own: bool,
    ) -> (Fetched, Option<Duration>) {
        let mut headers = self.fill_headers.clone();
        if let Ok(v) = HeaderValue::from_str(&format!("bytes={}-{}", range.start, range.end)) {
            headers.insert(RANGE, v);
        }
        if let Some((h, _)) = &stale {
            for (n, v) in conditional::revalidation_headers(&h.prep.meta) {
                if let Ok(v) = HeaderValue::from_bytes(&v) {
                    headers.insert(n, v);
                }
            }
        }
        let mut o = OriginRequest::get(self.pq.clone(), self.host.clone());
        o.headers = headers;
        if !own {
            o.from = Requester::Viewer(self.peer.ip());
        }
        let settings = &self.worker.fetch.settings;
        let withheld = Withheld { dropped: &settings.fill_drop_headers, per_viewer: false };
        let viewer = Viewer {
            headers: &self.viewer[..],
            cc: &self.cc,
            withheld,
            partial_key: self.partial_key,
            part: Some(part),
            admission: false,
        };
        let reval =
            stale.as_ref().map(|(h, key)| Revalidating { store_key: key, meta: &h.prep.meta });
        let fx = self.worker.fetch.fetcher(&self.site);
        fx.fetch_and_store(&self.key, o, viewer, reval, lead).await
    }
}
