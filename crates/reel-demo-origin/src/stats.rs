//! Request counters ([`OriginStats`]): shared across threads as `Arc` atomics because the
//! test or benchmark that reads them runs on another thread than the server.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard};

use serde::{Deserialize, Serialize};

/// Distinct paths tracked in `by_path` (and targets in `requests_by_target`); requests for
/// further new ones only bump the overflow counter, so a crawler cannot grow the maps without
/// bound.
pub const MAX_TRACKED_PATHS: usize = 10_000;

/// What kind of resource a request asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PathClass {
    /// `/live/index.m3u8`, `/live/<stream>/index.m3u8`.
    LivePlaylist,
    /// `/live/seg_<msn>.ts`, `/live/<stream>/seg_<msn>.ts`.
    LiveSegment,
    /// `/live/seg_<msn>.part<p>.ts`, `/live/<stream>/seg_<msn>.part<p>.ts`.
    LivePart,
    /// `/vod/`, `/vod/index.json`.
    VodIndex,
    /// `/vod/<title>/index.m3u8`.
    VodPlaylist,
    /// `/vod/<title>/seg_<n>.ts`.
    VodSegment,
    /// `/obj/<bytes>`.
    Object,
    /// The peers-harness paths (`/live/playlist.m3u8`, `/live/part<N>.m4s`, `/vod/seg.ts`,
    /// `/vod/cat/seg_<NNN>.ts`).
    Fixed,
    /// `/healthz`.
    Health,
    /// Anything else (answered 404 or 405).
    Other,
}

impl PathClass {
    /// Every class, in the order of [`PathClass::name`]'s table.
    pub const ALL: [PathClass; 10] = [
        PathClass::LivePlaylist,
        PathClass::LiveSegment,
        PathClass::LivePart,
        PathClass::VodIndex,
        PathClass::VodPlaylist,
        PathClass::VodSegment,
        PathClass::Object,
        PathClass::Fixed,
        PathClass::Health,
        PathClass::Other,
    ];

    /// The key used in the stats JSON (`live_playlist`, `live_segment`, ...).
    pub fn name(self) -> &'static str {
        match self {
            PathClass::LivePlaylist => "live_playlist",
            PathClass::LiveSegment => "live_segment",
            PathClass::LivePart => "live_part",
            PathClass::VodIndex => "vod_index",
            PathClass::VodPlaylist => "vod_playlist",
            PathClass::VodSegment => "vod_segment",
            PathClass::Object => "object",
            PathClass::Fixed => "fixed",
            PathClass::Health => "health",
            PathClass::Other => "other",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// A point-in-time copy of the counters; also the body of `GET /__origin/stats`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatsSnapshot {
    /// Requests received (control paths under `/__origin/` excluded).
    pub total: u64,
    /// Requests by [`PathClass::name`]; every class is present.
    pub by_class: BTreeMap<String, u64>,
    /// Responses by status code.
    pub by_status: BTreeMap<u16, u64>,
    /// Requests by exact path (query excluded), up to [`MAX_TRACKED_PATHS`] paths.
    pub by_path: BTreeMap<String, u64>,
    /// Requests for paths beyond the tracked set.
    pub by_path_overflow: u64,
    /// Requests by request target, path and query (`/live/index.m3u8?_HLS_msn=7&_HLS_part=1`),
    /// up to [`MAX_TRACKED_PATHS`] targets: how many times the origin was asked for each
    /// LL-HLS playlist version and part.
    #[serde(default)]
    pub requests_by_target: BTreeMap<String, u64>,
    /// Requests for targets beyond the tracked set.
    #[serde(default)]
    pub requests_by_target_overflow: u64,
    /// Requests with a `Range` field, by path and value (`/obj/1000 bytes=0-99`), up to
    /// [`MAX_TRACKED_PATHS`] pairs: how many times each byte range was asked for.
    #[serde(default)]
    pub requests_by_range: BTreeMap<String, u64>,
    /// Range requests beyond the tracked set.
    #[serde(default)]
    pub requests_by_range_overflow: u64,
    /// Body bytes sent, all responses together (what a cache in front cost the origin).
    #[serde(default)]
    pub body_bytes: u64,
    /// `503`s injected by `error_rate` or `x-origin-fault: error`.
    pub injected_errors: u64,
    /// Bodies cut by `reset_rate` or `x-origin-fault: reset`.
    pub injected_resets: u64,
}

/// Live counters; clones share the same values.
#[derive(Debug, Clone, Default)]
pub struct OriginStats {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    total: AtomicU64,
    classes: [AtomicU64; PathClass::ALL.len()],
    status: Vec<AtomicU64>,
    paths: Mutex<HashMap<String, u64>>,
    path_overflow: AtomicU64,
    targets: Mutex<HashMap<String, u64>>,
    target_overflow: AtomicU64,
    ranges: Mutex<HashMap<String, u64>>,
    range_overflow: AtomicU64,
    body_bytes: AtomicU64,
    errors: AtomicU64,
    resets: AtomicU64,
}

impl Default for Inner {
    fn default() -> Self {
        Self {
            total: AtomicU64::new(0),
            classes: Default::default(),
            status: (0..600).map(|_| AtomicU64::new(0)).collect(),
            paths: Mutex::new(HashMap::new()),
            path_overflow: AtomicU64::new(0),
            targets: Mutex::new(HashMap::new()),
            target_overflow: AtomicU64::new(0),
            ranges: Mutex::new(HashMap::new()),
            range_overflow: AtomicU64::new(0),
            body_bytes: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            resets: AtomicU64::new(0),
        }
    }
}

/// Adds one to `key` in `map`, or to `overflow` when the map is full.
fn bump(
    map: &mut HashMap<String, u64>,
    key: &str,
    owned: impl FnOnce() -> String,
    overflow: &AtomicU64,
) {
    if let Some(n) = map.get_mut(key) {
        *n += 1;
    } else if map.len() < MAX_TRACKED_PATHS {
        map.insert(owned(), 1);
    } else {
        overflow.fetch_add(1, Relaxed);
    }
}

impl OriginStats {
    /// Fresh, zeroed counters.
    pub fn new() -> Self {
        Self::default()
    }

    fn paths(&self) -> MutexGuard<'_, HashMap<String, u64>> {
        // A panic while holding the lock cannot leave the map inconsistent (single insert).
        self.inner.paths.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn targets(&self) -> MutexGuard<'_, HashMap<String, u64>> {
        self.inner.targets.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Counts one request for `path` with `query` (the request target's parts).
    pub(crate) fn record_request(&self, class: PathClass, path: &str, query: Option<&str>) {
        self.inner.total.fetch_add(1, Relaxed);
        self.inner.classes[class.index()].fetch_add(1, Relaxed);
        bump(&mut self.paths(), path, || path.to_string(), &self.inner.path_overflow);
        let mut targets = self.targets();
        let overflow = &self.inner.target_overflow;
        match query {
            None => bump(&mut targets, path, || path.to_string(), overflow),
            Some(q) => {
                let key = format!("{path}?{q}");
                bump(&mut targets, &key, || key.clone(), overflow);
            }
        }
    }

    fn ranges(&self) -> MutexGuard<'_, HashMap<String, u64>> {
        self.inner.ranges.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Counts one request for `path` carrying `Range: range`.
    pub(crate) fn record_range(&self, path: &str, range: &str) {
        let key = format!("{path} {range}");
        bump(&mut self.ranges(), &key, || key.clone(), &self.inner.range_overflow);
    }

    /// Counts body bytes sent.
    pub(crate) fn record_body_bytes(&self, n: u64) {
        self.inner.body_bytes.fetch_add(n, Relaxed);
    }

    pub(crate) fn record_status(&self, status: u16) {
        if let Some(c) = self.inner.status.get(usize::from(status)) {
            c.fetch_add(1, Relaxed);
        }
    }

    pub(crate) fn record_error(&self) {
        self.inner.errors.fetch_add(1, Relaxed);
    }

    pub(crate) fn record_reset(&self) {
        self.inner.resets.fetch_add(1, Relaxed);
    }

    /// Requests received so far.
    pub fn total(&self) -> u64 {
        self.inner.total.load(Relaxed)
    }

    /// Requests of one class.
    pub fn class(&self, class: PathClass) -> u64 {
        self.inner.classes[class.index()].load(Relaxed)
    }

    /// Requests for one exact path (0 if untracked).
    pub fn path(&self, path: &str) -> u64 {
        self.paths().get(path).copied().unwrap_or(0)
    }

    /// Requests for one exact target, `path` or `path?query` (0 if untracked).
    pub fn target(&self, target: &str) -> u64 {
        self.targets().get(target).copied().unwrap_or(0)
    }

    /// Requests for `path` with `Range: range` (the field value as sent; 0 if untracked).
    pub fn range(&self, path: &str, range: &str) -> u64 {
        self.ranges().get(&format!("{path} {range}")).copied().unwrap_or(0)
    }

    /// Every `(path, range)` asked for, with its count.
    pub fn ranges_asked(&self) -> Vec<(String, String, u64)> {
        self.ranges()
            .iter()
            .filter_map(|(k, n)| k.split_once(' ').map(|(p, r)| (p.to_string(), r.to_string(), *n)))
            .collect()
    }

    /// Body bytes sent so far.
    pub fn body_bytes(&self) -> u64 {
        self.inner.body_bytes.load(Relaxed)
    }

    /// Responses sent with `status`.
    pub fn status(&self, status: u16) -> u64 {
        self.inner.status.get(usize::from(status)).map_or(0, |c| c.load(Relaxed))
    }

    /// Copies every counter.
    pub fn snapshot(&self) -> StatsSnapshot {
        let i = &self.inner;
        StatsSnapshot {
            total: i.total.load(Relaxed),
            by_class: PathClass::ALL
                .iter()
                .map(|c| (c.name().to_string(), i.classes[c.index()].load(Relaxed)))
                .collect(),
            by_status: i
                .status
                .iter()
                .enumerate()
                .filter_map(|(code, c)| {
                    let n = c.load(Relaxed);
                    (n > 0).then_some((code as u16, n))
                })
                .collect(),
            by_path: self.paths().iter().map(|(k, v)| (k.clone(), *v)).collect(),
            by_path_overflow: i.path_overflow.load(Relaxed),
            requests_by_target: self.targets().iter().map(|(k, v)| (k.clone(), *v)).collect(),
            requests_by_target_overflow: i.target_overflow.load(Relaxed),
            requests_by_range: self.ranges().iter().map(|(k, v)| (k.clone(), *v)).collect(),
            requests_by_range_overflow: i.range_overflow.load(Relaxed),
            body_bytes: i.body_bytes.load(Relaxed),
            injected_errors: i.errors.load(Relaxed),
            injected_resets: i.resets.load(Relaxed),
        }
    }

    /// Zeroes every counter.
    pub fn reset(&self) {
        let i = &self.inner;
        i.total.store(0, Relaxed);
        i.classes.iter().chain(i.status.iter()).for_each(|c| c.store(0, Relaxed));
        self.paths().clear();
        i.path_overflow.store(0, Relaxed);
        self.targets().clear();
        i.target_overflow.store(0, Relaxed);
        self.ranges().clear();
        i.range_overflow.store(0, Relaxed);
        i.body_bytes.store(0, Relaxed);
        i.errors.store(0, Relaxed);
        i.resets.store(0, Relaxed);
    }
}
