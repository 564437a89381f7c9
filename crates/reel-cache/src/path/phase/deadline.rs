//! How long the cache path waits, in one place: a follower for its leader
//! (`[cache] lock_timeout`), an LL-HLS blocking request in all (`blocking_timeout`), the
//! origin's first byte of a blocking request, and a fill from its origin request to the
//! end of its body (`fill_timeout`).
//!
//! A *blocking* request is held by the origin until its media exists: a playlist reload
//! with `_HLS_msn` (LL-HLS §6.2.5.2) or a request for the part a playlist hints
//! (`EXT-X-PRELOAD-HINT`, §4.4.5.3; the hints are in [`Streams`]). Its whole wait, leader
//! and followers alike, is bounded by `blocking_timeout` from its arrival; every other
//! follower waits `lock_timeout` per round.

use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use reel_ops::metrics::WorkerMetrics;
use tokio::time::Instant;

use super::inflight::{Follow, State};
use crate::hls;
use crate::key::CacheKey;
use crate::path::worker::hints::Streams;
use crate::path::worker::settings::Settings;

/// Whether a request for `key` blocks at the origin (see the module doc).
pub(in crate::path) fn is_blocking(streams: &Streams, key: &CacheKey) -> bool {
    hls::is_blocking_reload(key.path_and_query()) || streams.is_hinted(key.as_bytes())
}

/// The waits of one request for one key.
#[derive(Debug, Clone, Copy)]
pub(in crate::path) struct Wait {
    /// Whether the request blocks at the origin.
    pub blocking: bool,
    /// A blocking request's deadline for all its waits.
    deadline: Instant,
    lock_timeout: Duration,
    blocking_timeout: Duration,
}

impl Wait {
    /// The waits of a request for `key` arriving now.
    pub(in crate::path) fn new(settings: &Settings, streams: &Streams, key: &CacheKey) -> Wait {
        Wait::of(settings, is_blocking(streams, key))
    }

    /// The waits of a request arriving now, blocking or not.
    pub(in crate::path) fn of(settings: &Settings, blocking: bool) -> Wait {
        let bound = if blocking { settings.blocking_timeout } else { settings.lock_timeout };
        Wait {
            blocking,
            deadline: Instant::now() + bound,
            lock_timeout: settings.lock_timeout,
            blocking_timeout: settings.blocking_timeout,
        }
    }

    /// Until when the next wait for a leader may last: the blocking deadline, or
    /// `lock_timeout` from now (as pingora's cache lock, per round).
    pub(in crate::path) fn until(&self) -> Instant {
        if self.blocking { self.deadline } else { Instant::now() + self.lock_timeout }
    }

    /// The first-byte bound of this request's origin request: `blocking_timeout` for a
    /// blocking request, else the group's (`None`).
    pub(in crate::path) fn first_byte(&self) -> Option<Duration> {
        self.blocking.then_some(self.blocking_timeout)
    }
}

/// The first-byte bound of an origin request that blocks (or not), as [`Wait::first_byte`].
pub(in crate::path) fn first_byte(settings: &Settings, blocking: bool) -> Option<Duration> {
    blocking.then_some(settings.blocking_timeout)
}

/// When a fill whose origin request was sent at `t0` must have ended (`fill_timeout`).
pub(in crate::path) fn fill_deadline(settings: &Settings, t0: std::time::Instant) -> Instant {
    let far = t0 + Duration::from_secs(86_400 * 365);
    Instant::from_std(t0.checked_add(settings.fill_timeout).map_or(far, |d| d.min(far)))
}

/// Waits for the leader of a fetch, counted as a coalesced waiter, until `until`: `None`
/// when the leader's origin has not answered by then. `to_end`: wait for the end of the
/// leader's fill too, not only its response ([`Follow::wait_done`]).
pub(in crate::path) async fn follow(
    f: Follow,
    m: &WorkerMetrics,
    until: Instant,
    to_end: bool,
) -> Option<State> {
    m.coalesced_waiters.fetch_add(1, Relaxed);
    let s = if to_end {
        tokio::time::timeout_at(until, f.wait_done()).await.ok()
    } else {
        tokio::time::timeout_at(until, f.wait()).await.ok()
    };
    m.coalesced_waiters.fetch_sub(1, Relaxed);
    s
}

/// Waits `lock_timeout` for the leader of a fetch of one slice or piece: `None` when its
/// origin has not answered by then.
pub(in crate::path) async fn follow_part(f: Follow, settings: &Settings) -> Option<State> {
    tokio::time::timeout(settings.lock_timeout, f.wait()).await.ok()
}
