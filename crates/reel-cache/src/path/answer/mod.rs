//! Building answers: how the cache answered a response ([`Answer`]), and below, the
//! response's [`tag`], the `preamble` of conditionals and ranges every answer from a stored
//! representation starts with, the responses built from stored objects ([`stored`]) and
//! from their compressed representations (`encode`), bodies walked piece by piece
//! (`body_walk`), an origin body streamed to its one client ([`pass_stream`]), and the
//! per-site edits every response of a site leaves with ([`edits`]: CORS, header rules,
//! and the CTA-5006 fields of [`cmsd`]).
//!
//! [`Answer`] is how the cache answered a response, as one value: the cache result that metrics and
//! the access log count, the `Cache-Status` entry the client is told (RFC 9211), and how long the
//! origin took when it was asked.
//!
//! The entries carry this node's configured name, so they are rendered once per worker and
//! config generation ([`StatusNames`]): a hit clones a pre-rendered value, it formats and
//! allocates nothing. The entries of the caches before us (a shield's) are kept and ours is
//! added after them ([`chain`]).

use std::time::Duration;

use crate::result::CacheResult;
use bytes::Bytes;
use reel_http::Response;

use tag::Tag;

pub(super) mod body_walk;
pub mod cmsd;
pub mod edits;
pub(super) mod encode;
pub mod pass_stream;
pub(super) mod preamble;
pub mod stored;
pub mod tag;
pub(super) mod tokenised;

/// What our `Cache-Status` entry says, after the cache's name (RFC 9211 2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Status {
    Hit,
    HitStale,
    HitSwr,
    StaleIfError,
    MissStored,
    MissCollapsed,
    NotStorable,
    NotAdmitted,
    LockTimeout,
    BlockingTimeout,
    OriginError,
    Revalidated,
    Refreshed,
    FwdRequest,
    FwdMethod,
    OnlyIfCached,
}

impl Status {
    const ALL: [Status; 16] = [
        Status::Hit,
        Status::HitStale,
        Status::HitSwr,
        Status::StaleIfError,
        Status::MissStored,
        Status::MissCollapsed,
        Status::NotStorable,
        Status::NotAdmitted,
        Status::LockTimeout,
        Status::BlockingTimeout,
        Status::OriginError,
        Status::Revalidated,
        Status::Refreshed,
        Status::FwdRequest,
        Status::FwdMethod,
        Status::OnlyIfCached,
    ];

    /// The entry's parameters (RFC 9211 2.1-2.8).
    fn params(self) -> &'static str {
        match self {
            Status::Hit => "hit",
            Status::HitStale => "hit; detail=stale",
            Status::HitSwr => "hit; detail=stale-while-revalidate",
            Status::StaleIfError => "fwd=stale; detail=stale-if-error",
            Status::MissStored => "fwd=miss; stored",
            Status::MissCollapsed => "fwd=miss; collapsed",
            Status::NotStorable => "fwd=miss; detail=not-storable",
            Status::NotAdmitted => "fwd=miss; detail=not-admitted",
            Status::LockTimeout => "fwd=miss; detail=lock-timeout",
            Status::BlockingTimeout => "fwd=miss; detail=blocking-timeout",
            Status::OriginError => "fwd=miss; detail=origin-error",
            Status::Revalidated => "fwd=stale; fwd-status=304",
            Status::Refreshed => "fwd=stale; stored",
            Status::FwdRequest => "fwd=request",
            Status::FwdMethod => "fwd=method",
            Status::OnlyIfCached => "detail=only-if-cached",
        }
    }
}

/// Our `Cache-Status` entries with this node's name, rendered once per worker and config
/// generation. Per worker, so that cloning one on a hit touches no cache line that another
/// core writes.
#[derive(Debug, Clone)]
pub(super) struct StatusNames {
    rendered: [Bytes; Status::ALL.len()],
}

impl StatusNames {
    /// The entries of the cache named `name`.
    pub(super) fn new(name: &str) -> StatusNames {
        StatusNames {
            rendered: Status::ALL.map(|s| Bytes::from(format!("{name}; {}", s.params()))),
        }
    }

    /// Our entry for `s`.
    pub(super) fn get(&self, s: Status) -> Bytes {
        self.rendered[s as usize].clone()
    }
}

/// `upstream` (the `Cache-Status` field lines of the caches before us, in order) with
/// `ours` after them, as one field value.
pub(super) fn chain<'a>(upstream: impl IntoIterator<Item = &'a [u8]>, ours: &[u8]) -> Bytes {
    let mut v = Vec::new();
    for line in upstream {
        let line = line.trim_ascii();
        if !line.is_empty() {
            v.extend_from_slice(line);
            v.extend_from_slice(b", ");
        }
    }
    v.extend_from_slice(ours);
    Bytes::from(v)
}

/// A response's cache result, `Cache-Status` entry and origin time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Answer {
    /// What metrics and the access log count.
    pub result: CacheResult,
    /// Our `Cache-Status` entry (RFC 9211).
    pub status: Status,
    /// The origin's time, if it was asked.
    pub origin_time: Option<Duration>,
}

const fn answer(result: CacheResult, status: Status) -> Answer {
    Answer { result, status, origin_time: None }
}

impl Answer {
    /// Fresh stored object.
    pub(super) const HIT: Answer = answer(CacheResult::Hit, Status::Hit);
    /// Stale stored object the request accepts (`max-stale`).
    pub(super) const HIT_STALE: Answer = answer(CacheResult::Stale, Status::HitStale);
    /// Stale stored object within stale-while-revalidate (RFC 5861 3).
    pub(super) const HIT_SWR: Answer = answer(CacheResult::Stale, Status::HitSwr);
    /// Stale stored object because the origin failed (RFC 5861 4).
    pub(super) const STALE_IF_ERROR: Answer = answer(CacheResult::Stale, Status::StaleIfError);
    /// This request's origin fetch, stored while it streams.
    pub(super) const MISS_STORED: Answer = answer(CacheResult::Miss, Status::MissStored);
    /// Another request's fetch in progress, streamed from the store.
    pub(super) const MISS_COLLAPSED: Answer = answer(CacheResult::Coalesced, Status::MissCollapsed);
    /// This request's origin fetch, not storable (or refused by the store).
    pub(super) const MISS_NOT_STORED: Answer = answer(CacheResult::Miss, Status::NotStorable);
    /// Fetched for this request and shared with concurrent ones, not stored: the admission
    /// policy (`second-hit`) saw the object for the first time.
    pub(super) const MISS_NOT_ADMITTED: Answer = answer(CacheResult::Miss, Status::NotAdmitted);
    /// Fetched on its own because the leader's response could not be shared.
    pub(super) const PASS_NOT_STORED: Answer = answer(CacheResult::Pass, Status::NotStorable);
    /// Fetched on its own, uncached, after waiting `lock_timeout` for another request's
    /// fetch of the same object.
    pub(super) const LOCK_TIMEOUT: Answer = answer(CacheResult::Pass, Status::LockTimeout);
    /// An LL-HLS blocking request whose media did not arrive within `blocking_timeout`.
    pub(super) const BLOCKING_TIMEOUT: Answer =
        answer(CacheResult::Coalesced, Status::BlockingTimeout);
    /// The origin failed this request's fetch.
    pub(super) const ORIGIN_ERROR: Answer = answer(CacheResult::Miss, Status::OriginError);
    /// Revalidated: the origin answered 304 and the stored object was freshened.
    pub(super) const REVALIDATED: Answer = answer(CacheResult::Revalidated, Status::Revalidated);
    /// Revalidated: the origin sent a new representation, stored while it streams.
    pub(super) const REFRESHED: Answer = answer(CacheResult::Revalidated, Status::Refreshed);
    /// Forwarded because the request said `no-store`.
    pub(super) const FWD_REQUEST: Answer = answer(CacheResult::Pass, Status::FwdRequest);
    /// Forwarded because of the method.
    pub(super) const FWD_METHOD: Answer = answer(CacheResult::Pass, Status::FwdMethod);
    /// `only-if-cached` and nothing usable stored (RFC 9111 5.2.1.7).
    pub(super) const ONLY_IF_CACHED: Answer = answer(CacheResult::Local, Status::OnlyIfCached);

    /// The same answer, with the origin's time.
    pub(super) fn after(self, origin_time: Option<Duration>) -> Answer {
        Answer { origin_time, ..self }
    }

    /// The same answer, counted as `result`.
    pub(super) fn counted_as(self, result: CacheResult) -> Answer {
        Answer { result, ..self }
    }

    /// The tag the codec hands back to `on_response`.
    pub(super) fn tag(self) -> u64 {
        Tag::new(self.result, self.origin_time).raw()
    }

    /// Adds our `Cache-Status` entry (named by `names`) to `r`, which has none from
    /// upstream, and tags it.
    pub(super) fn on(self, r: Response, names: &StatusNames) -> Response {
        r.header("cache-status", names.get(self.status)).tagged(self.tag())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_carry_the_configured_name() {
        let n = StatusNames::new("reel-edge");
        assert_eq!(&n.get(Status::Hit)[..], b"reel-edge; hit");
        assert_eq!(&n.get(Answer::MISS_STORED.status)[..], b"reel-edge; fwd=miss; stored");
        assert_eq!(&n.get(Status::OnlyIfCached)[..], b"reel-edge; detail=only-if-cached");
        for (i, s) in Status::ALL.iter().enumerate() {
            assert_eq!(*s as usize, i, "ALL is in declaration order");
        }
        // The same value each time, not a new rendering.
        assert_eq!(n.get(Status::Hit).as_ptr(), n.get(Status::Hit).as_ptr());
    }

    #[test]
    fn upstream_entries_come_first() {
        let ours = b"edge; hit";
        assert_eq!(&chain([], ours)[..], b"edge; hit");
        let up: [&[u8]; 2] = [b"origin-cache; hit ", b"shield; fwd=miss; stored"];
        assert_eq!(
            &chain(up, ours)[..],
            b"origin-cache; hit, shield; fwd=miss; stored, edge; hit".as_slice()
        );
    }
}
