//! What the LL-HLS playlists that passed through announced, shared by the workers
//! ([`Streams`]): per playlist URL (a *stream*), its latest preload hints, so a request
//! for a hinted part is known to block at the origin, and its prefetches in flight, so
//! prefetch has a bound per stream. At most [`MAX_STREAMS`] are tracked, the least
//! recently announced forgotten first.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::key::CacheKey;

/// Playlists tracked at most (each a few hundred bytes).
pub const MAX_STREAMS: usize = 4096;
/// Prefetches of one stream in flight at most, the hinted part's included.
pub const PREFETCH_PER_STREAM: usize = 4;
/// Hints remembered per stream: the latest and the one before, which is still being
/// produced while the next playlist version passes through.
const HINTS_KEPT: usize = 2;

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
pub(in crate::path) struct Permit {
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
    pub(in crate::path) fn announce(&self, stream: u64, hint: Option<Box<[u8]>>) {
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
    pub(in crate::path) fn start(self: &Arc<Self>, stream: u64) -> Option<Permit> {
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
pub(in crate::path) fn stream_of(key: &CacheKey) -> u64 {
    let b = key.as_bytes();
    let end = key.host().len() + key.path().len();
    xxhash_rust::xxh3::xxh3_64(&b[..end])
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
