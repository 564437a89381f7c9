//! How the cache answered a response, as one value: the cache result that metrics and the
//! access log count, the `Cache-Status` the client is told (RFC 9211), and how long the
//! origin took when it was asked.

use std::time::Duration;

use crate::result::CacheResult;
use bytes::Bytes;
use reel_http::Response;

use super::tag::Tag;

/// A response's cache result, `Cache-Status` value and origin time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Answer {
    /// What metrics and the access log count.
    pub result: CacheResult,
    /// The `Cache-Status` field value (RFC 9211).
    pub cache_status: &'static [u8],
    /// The origin's time, if it was asked.
    pub origin_time: Option<Duration>,
}

const fn answer(result: CacheResult, cache_status: &'static [u8]) -> Answer {
    Answer { result, cache_status, origin_time: None }
}

impl Answer {
    /// Fresh stored object.
    pub const HIT: Answer = answer(CacheResult::Hit, b"reel; hit");
    /// Stale stored object the request accepts (`max-stale`).
    pub const HIT_STALE: Answer = answer(CacheResult::Stale, b"reel; hit; detail=stale");
    /// Stale stored object within stale-while-revalidate (RFC 5861 3).
    pub const HIT_SWR: Answer =
        answer(CacheResult::Stale, b"reel; hit; detail=stale-while-revalidate");
    /// Stale stored object because the origin failed (RFC 5861 4).
    pub const STALE_IF_ERROR: Answer =
        answer(CacheResult::Stale, b"reel; fwd=stale; detail=stale-if-error");
    /// This request's origin fetch, stored while it streams.
    pub const MISS_STORED: Answer = answer(CacheResult::Miss, b"reel; fwd=miss; stored");
    /// Another request's fetch in progress, streamed from the store.
    pub const MISS_COLLAPSED: Answer = answer(CacheResult::Coalesced, b"reel; fwd=miss; collapsed");
    /// This request's origin fetch, not storable (or refused by the store).
    pub const MISS_NOT_STORED: Answer =
        answer(CacheResult::Miss, b"reel; fwd=miss; detail=not-storable");
    /// Fetched on its own because the leader's response could not be shared.
    pub const PASS_NOT_STORED: Answer =
        answer(CacheResult::Pass, b"reel; fwd=miss; detail=not-storable");
    /// Fetched on its own, uncached, after waiting `lock_timeout` for another request's
    /// fetch of the same object.
    pub const LOCK_TIMEOUT: Answer =
        answer(CacheResult::Pass, b"reel; fwd=miss; detail=lock-timeout");
    /// An LL-HLS blocking request whose media did not arrive within `blocking_timeout`.
    pub const BLOCKING_TIMEOUT: Answer =
        answer(CacheResult::Coalesced, b"reel; fwd=miss; detail=blocking-timeout");
    /// The origin failed this request's fetch.
    pub const ORIGIN_ERROR: Answer =
        answer(CacheResult::Miss, b"reel; fwd=miss; detail=origin-error");
    /// Revalidated: the origin answered 304 and the stored object was freshened.
    pub const REVALIDATED: Answer =
        answer(CacheResult::Revalidated, b"reel; fwd=stale; fwd-status=304");
    /// Revalidated: the origin sent a new representation, stored while it streams.
    pub const REFRESHED: Answer = answer(CacheResult::Revalidated, b"reel; fwd=stale; stored");
    /// Forwarded because the request said `no-store`.
    pub const FWD_REQUEST: Answer = answer(CacheResult::Pass, b"reel; fwd=request");
    /// Forwarded because of the method.
    pub const FWD_METHOD: Answer = answer(CacheResult::Pass, b"reel; fwd=method");
    /// `only-if-cached` and nothing usable stored (RFC 9111 5.2.1.7).
    pub const ONLY_IF_CACHED: Answer = answer(CacheResult::Local, b"reel; detail=only-if-cached");

    /// The same answer, with the origin's time.
    pub fn after(self, origin_time: Option<Duration>) -> Answer {
        Answer { origin_time, ..self }
    }

    /// The same answer, counted as `result`.
    pub fn counted_as(self, result: CacheResult) -> Answer {
        Answer { result, ..self }
    }

    /// The tag the codec hands back to `on_response`.
    pub fn tag(self) -> u64 {
        Tag::new(self.result, self.origin_time).raw()
    }

    /// The `Cache-Status` field value.
    pub fn cache_status(self) -> Bytes {
        Bytes::from_static(self.cache_status)
    }

    /// Adds `Cache-Status` to `r` and tags it.
    pub fn on(self, r: Response) -> Response {
        r.header("cache-status", self.cache_status()).tagged(self.tag())
    }
}
