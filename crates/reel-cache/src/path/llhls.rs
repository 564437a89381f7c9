//! Low-Latency HLS at the edge (draft-pantos-hls-rfc8216bis): blocking requests and
//! prefetch.
//!
//! - **Blocking requests**, a playlist reload with `_HLS_msn` (§6.2.5.2) or a request for
//!   the part a playlist hints (`EXT-X-PRELOAD-HINT`, §4.4.5.3), are held by the origin
//!   until the media exists. They coalesce like any miss, one origin request per key (the
//!   `_HLS_*` parameters always stay in the key, see [`crate::key`]), and every waiter is
//!   woken by the leader's response. Their wait is bounded by `[cache] blocking_timeout`
//!   instead of `lock_timeout` (followers) and the group's `first_byte_timeout` (the
//!   origin request). A blocking follower whose wait ends, or whose leader's fetch failed,
//!   answers 504 at once rather than fetch on its own: that would hold one more origin
//!   request for the same media.
//! - **Streams** ([`Streams`], shared by the workers): what the playlists that passed
//!   through announced, per playlist URL: its latest hints (so a request for one is known
//!   to block) and its prefetches in flight. At most [`MAX_STREAMS`] are tracked, the
//!   least recently announced forgotten first.
//! - **Prefetch** (`prefetch = "hinted"`): once a playlist fill from the origin is
//!   complete, its hinted part and then its listed parts not stored (newest first) are
//!   fetched at once through the one miss path, [`Fetcher::fetch_and_store`]: each only
//!   when no fetch of it is in flight (the in-flight map), at most
//!   [`PREFETCH_PER_STREAM`] per stream at a time, on everyone's behalf (without the
//!   viewer's credentials and cookies, as a background refresh).
//!
//! Every playlist fill is read once, on any site, so hinted parts are recognised: from
//! memory when it was small enough to be read whole on arrival (`small`), else from the
//! store once complete. Only prefetching sites fetch anything.

use std::collections::{HashMap, VecDeque};
use std::rc::Rc;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use http::HeaderMap;
use http::uri::PathAndQuery;
use reel_http::{Request, RequestBody, Response};
use reel_origin::{OriginRequest, WorkerClient};
use reel_store::{Filling, Lookup};

use super::answer::Answer;
use super::fetch::{Fetched, Fetcher, Forward, Viewer, Withheld, forward_headers};
use super::respond::Prepared;
use super::settings::{Prefetch, Settings, Site};
use super::shared::SharedCache;
use super::worker::WorkerCache;
use crate::hls;
use crate::key::{CacheKey, KeyConfig};
use crate::policy::HeaderLookup;
use crate::policy::cache_control::RequestCacheControl;
use crate::policy::freshness::PolicyConfig;

/// Playlists tracked at most (each a few hundred bytes).
pub const MAX_STREAMS: usize = 4096;
/// Prefetches of one stream in flight at most, the hinted part's included.
pub const PREFETCH_PER_STREAM: usize = 4;
/// Hints remembered per stream: the latest and the one before, which is still being
/// produced while the next playlist version passes through.
const HINTS_KEPT: usize = 2;
/// Playlists longer than this are not read for hints.
const MAX_PLAYLIST: u64 = 1 << 20;

/// What one playlist announced.
struct Stream {
    /// Store keys of its latest hinted parts, newest last.
    hints: VecDeque<Box<[u8]>>,
    /// Prefetches in flight.
    prefetching: usize,
    /// When a playlist version last passed through ([`Inner::tick`]).
    seen: u64,
}

#[derive(Default)]
struct Inner {
    /// Counts announcements: the order in which streams were last seen.
    tick: u64,
    streams: HashMap<u64, Stream>,
    /// Hinted part keys, to their stream.
    hinted: HashMap<Box<[u8]>, u64>,
}

/// The LL-HLS streams seen, shared by the workers. Its mutex is held for a map operation,
/// never across an await.
#[derive(Default)]
pub struct Streams {
    inner: Mutex<Inner>,
}

/// One prefetch slot of a stream, given back on drop.
struct Permit {
    streams: Arc<Streams>,
    stream: u64,
}

impl Drop for Permit {
    fn drop(&mut self) {
        if let Some(s) = self.streams.lock().streams.get_mut(&self.stream) {
            s.prefetching = s.prefetching.saturating_sub(1);
        }
    }
}

impl Streams {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A poisoned map only means another thread panicked holding it; each operation
        // leaves it consistent.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether `key` (a store key) is a part a playlist currently hints.
    pub fn is_hinted(&self, key: &[u8]) -> bool {
        self.lock().hinted.contains_key(key)
    }

    /// Playlists tracked.
    pub fn len(&self) -> usize {
        self.lock().streams.len()
    }

    /// Whether no playlist is tracked.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Records a version of playlist `stream` that hints `hint`.
    fn announce(&self, stream: u64, hint: Option<Box<[u8]>>) {
        let mut g = self.lock();
        let inner = &mut *g;
        if !inner.streams.contains_key(&stream) && inner.streams.len() >= MAX_STREAMS {
            let oldest = inner.streams.iter().min_by_key(|(_, s)| s.seen).map(|(id, _)| *id);
            if let Some(s) = oldest.and_then(|id| inner.streams.remove(&id)) {
                for h in s.hints {
                    inner.hinted.remove(&h);
                }
            }
        }
        inner.tick += 1;
        let s = inner.streams.entry(stream).or_insert_with(|| Stream {
            hints: VecDeque::new(),
            prefetching: 0,
            seen: 0,
        });
        s.seen = inner.tick;
        let Some(hint) = hint else { return };
        if s.hints.back() == Some(&hint) {
            return;
        }
        if s.hints.len() >= HINTS_KEPT
            && let Some(old) = s.hints.pop_front()
            && inner.hinted.get(&old) == Some(&stream)
        {
            inner.hinted.remove(&old);
        }
        s.hints.push_back(hint.clone());
        inner.hinted.insert(hint, stream);
    }

    /// A prefetch slot of `stream`, if it has one free.
    fn start(self: &Arc<Self>, stream: u64) -> Option<Permit> {
        let mut g = self.lock();
        let s = g.streams.get_mut(&stream)?;
        if s.prefetching >= PREFETCH_PER_STREAM {
            return None;
        }
        s.prefetching += 1;
        Some(Permit { streams: self.clone(), stream })
    }
}

/// A playlist's stream: its key without the query (every `_HLS_*` version of one playlist
/// is one stream).
fn stream_of(key: &CacheKey) -> u64 {
    let b = key.as_bytes();
    let end = key.host().len() + key.path().len();
    xxhash_rust::xxh3::xxh3_64(&b[..end])
}

/// Whether a stored response is a playlist: `.m3u8` or an HLS media type (RFC 8216 §4).
fn is_playlist(key: &CacheKey, prep: &Prepared) -> bool {
    if prep.meta.status() != 200 {
        return false;
    }
    if key.path().ends_with(b".m3u8") {
        return true;
    }
    prep.meta.get_first("content-type").is_some_and(|ct| {
        let ct = ct.to_ascii_lowercase();
        ct.starts_with(b"application/vnd.apple.mpegurl") || ct.starts_with(b"audio/mpegurl")
    })
}

impl WorkerCache {
    /// Whether a request for `key` blocks at the origin (a module doc bullet).
    pub(super) fn blocking(&self, key: &CacheKey) -> bool {
        hls::is_blocking_reload(key.path_and_query())
            || self.shared.streams.is_hinted(key.as_bytes())
    }

    /// The first-byte bound of the origin request for `key`: `blocking_timeout` for a
    /// blocking request, else the group's (`None`).
    pub(super) fn first_byte_bound(&self, key: &CacheKey) -> Option<Duration> {
        self.blocking(key).then_some(self.settings.blocking_timeout)
    }

    /// How long a follower of a fetch of `key` waits, from now.
    pub(super) fn follow_bound(&self, blocking: bool) -> Duration {
        if blocking { self.settings.blocking_timeout } else { self.settings.lock_timeout }
    }

    /// A follower waited its bound: a blocking request answers 504 (its media did not
    /// appear in time), any other fetches on its own, uncached.
    pub(super) async fn waited_out(
        &self,
        req: &Request,
        body: &mut RequestBody<'_>,
        site: &Site,
        blocking: bool,
    ) -> Response {
        if blocking {
            return Answer::BLOCKING_TIMEOUT.on(Response::error(504), &self.statuses);
        }
        self.fetch_pass(req, body, site, Answer::LOCK_TIMEOUT).await
    }

    /// A fill from the origin just started for `key`: when it is a playlist, read it once
    /// complete, record its hint, and with `prefetch = "hinted"` fetch the parts it
    /// announces. `req` is the request the fill is for; the prefetches send its fields as
    /// a background refresh does.
    pub(super) fn watch_playlist(
        &self,
        req: &Request,
        site: &Site,
        key: &CacheKey,
        fill: &Filling,
        prep: &Prepared,
    ) {
        if !is_playlist(key, prep) || fill.expected_len().is_some_and(|l| l > MAX_PLAYLIST) {
            return;
        }
        // Small playlists were read whole on arrival (`small`); others are read back from
        // the store once complete.
        let known = self.shared.small.get(fill.meta());
        let fill = match known {
            Some(_) => None,
            None => match self.shared.store.lookup(fill.key()) {
                Some(Lookup::Filling(f)) => Some(f),
                _ => return,
            },
        };
        let context = (site.prefetch == Prefetch::Hinted).then(|| {
            let dropped = &self.settings.fill_drop_headers;
            Rc::new(Context {
                shared: self.shared.clone(),
                settings: self.settings.clone(),
                client: self.client.clone(),
                group: site.group.clone(),
                policy: site.policy.clone(),
                headers: forward_headers(req, Forward::SharedFill, dropped, &self.settings.node),
                viewer: req.headers().map(|(n, v)| (n.as_bytes().to_vec(), v.to_vec())).collect(),
            })
        });
        let streams = self.shared.streams.clone();
        let (key, key_cfg) = (key.clone(), site.key.clone());
        tokio::task::spawn_local(async move {
            let body = match (known, fill) {
                (Some(b), _) => b,
                (None, Some(mut fill)) => {
                    let Ok(st) = fill.wait_for(u64::MAX).await else { return };
                    let Some(len) = st.final_len.filter(|&l| l <= MAX_PLAYLIST) else { return };
                    let Ok(body) = fill.read(0, len).await else { return };
                    body
                }
                (None, None) => return,
            };
            let Ok(text) = std::str::from_utf8(&body) else { return };
            let Some(ann) = hls::announced(text) else { return };
            let part_key = |uri: &str| {
                let target = hls::resolve(key.path(), key.host(), uri)?;
                let k = CacheKey::build(key.host(), target.as_bytes(), &key_cfg).ok()?;
                Some((k, target))
            };
            let hint = ann.hint.and_then(part_key);
            let stream = stream_of(&key);
            streams.announce(stream, hint.as_ref().map(|(k, _)| k.as_bytes().into()));
            let Some(cx) = context else { return };
            let listed = ann.parts.iter().rev().filter_map(|u| part_key(u));
            let hinted = hint.iter().map(|(k, _)| k.clone()).collect::<Vec<_>>();
            for (part, target) in hint.into_iter().chain(listed) {
                if cx.shared.store.contains(part.as_bytes()) {
                    continue;
                }
                let Some(permit) = streams.start(stream) else { break };
                let Some(lead) = cx.shared.inflight.try_lead(part.as_bytes()) else { continue };
                let blocking = hinted.contains(&part);
                tokio::task::spawn_local(prefetch_part(
                    cx.clone(),
                    part,
                    target,
                    lead,
                    permit,
                    blocking,
                ));
            }
        });
    }
}

/// What a prefetch uses of the worker and of the request whose playlist announced it.
struct Context {
    shared: Arc<SharedCache>,
    settings: Arc<Settings>,
    client: WorkerClient,
    group: String,
    policy: PolicyConfig,
    /// The origin request's fields: the playlist request's, as a shared fill sends them.
    headers: HeaderMap,
    /// The playlist request's fields, for the storability rules and the Vary key.
    viewer: Vec<(Vec<u8>, Vec<u8>)>,
}

/// Fetches and stores one announced part, holding its stream's slot until the fill ends.
async fn prefetch_part(
    cx: Rc<Context>,
    key: CacheKey,
    target: String,
    lead: super::inflight::Lead,
    _permit: Permit,
    blocking: bool,
) {
    let Some(pq) = crate::key::origin_target(target.as_bytes())
        .ok()
        .and_then(|t| PathAndQuery::try_from(t).ok())
    else {
        return;
    };
    let mut oreq = OriginRequest::get(pq, String::from_utf8_lossy(key.host()));
    oreq.headers = cx.headers.clone();
    oreq.first_byte_timeout = blocking.then_some(cx.settings.blocking_timeout);
    let partial_key = CacheKey::build(key.host(), target.as_bytes(), &KeyConfig::default())
        .map_or(true, |full| full != key);
    let fx = Fetcher {
        shared: &cx.shared,
        settings: &cx.settings,
        policy: &cx.policy,
        client: &cx.client,
        group: &cx.group,
    };
    let withheld = Withheld { dropped: &cx.settings.fill_drop_headers, per_viewer: true };
    let cc = RequestCacheControl::default();
    let viewer = Viewer { headers: &cx.viewer, cc: &cc, withheld, partial_key, part: None };
    if let (Fetched::Filling(mut fill), _) =
        fx.fetch_and_store(&key, oreq, viewer, None, lead).await
    {
        // The slot is held while the origin sends the part.
        let _ = fill.wait_for(u64::MAX).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(pq: &str) -> Box<[u8]> {
        format!("h{pq}").into_bytes().into()
    }

    #[test]
    fn streams_remember_the_latest_hints_and_bound_prefetches() {
        let s = Arc::new(Streams::default());
        s.announce(1, Some(key("/p0.ts")));
        s.announce(1, Some(key("/p0.ts")));
        s.announce(1, Some(key("/p1.ts")));
        assert!(s.is_hinted(&key("/p0.ts")) && s.is_hinted(&key("/p1.ts")));
        s.announce(1, Some(key("/p2.ts")));
        assert!(!s.is_hinted(&key("/p0.ts")), "only the latest two hints are kept");
        assert!(s.is_hinted(&key("/p2.ts")));
        s.announce(2, None);
        assert_eq!(s.len(), 2);

        let permits: Vec<Permit> = (0..PREFETCH_PER_STREAM).map_while(|_| s.start(1)).collect();
        assert_eq!(permits.len(), PREFETCH_PER_STREAM);
        assert!(s.start(1).is_none(), "bounded per stream");
        assert!(s.start(2).is_some(), "another stream has its own slots");
        assert!(s.start(3).is_none(), "an unknown stream prefetches nothing");
        drop(permits);
        assert!(s.start(1).is_some(), "slots come back");
    }

    #[test]
    fn the_least_recently_announced_stream_is_forgotten_first() {
        let s = Streams::default();
        for i in 0..MAX_STREAMS as u64 {
            s.announce(i, Some(key(&format!("/{i}.ts"))));
        }
        s.announce(0, None);
        s.announce(u64::MAX, Some(key("/new.ts")));
        assert_eq!(s.len(), MAX_STREAMS);
        assert!(s.is_hinted(&key("/0.ts")), "stream 0 was refreshed");
        assert!(!s.is_hinted(&key("/1.ts")), "stream 1 was the oldest");
        assert!(s.is_hinted(&key("/new.ts")));
    }
}
