//! A response's tag: how the cache answered it (the metrics' cache result) and how long
//! the origin took, packed in the `u64` the codec hands back to `on_response`.

use std::time::Duration;

use crate::result::CacheResult;

/// Cache result in the low 8 bits (its index plus one: 0 is a response nobody tagged, one
/// the codec made itself such as a 408, and counts as local), origin time in microseconds
/// above them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tag(u64);

impl Tag {
    /// A tag for `result`, with the origin's time if it was asked.
    pub fn new(result: CacheResult, origin: Option<Duration>) -> Tag {
        let us = origin.map_or(0, |d| (d.as_micros() as u64).saturating_add(1).min(u64::MAX >> 8));
        Tag((result as u64 + 1) | (us << 8))
    }

    /// A response reel produced itself.
    pub fn local() -> u64 {
        Tag::new(CacheResult::Local, None).raw()
    }

    /// From the codec's value.
    pub fn from_raw(v: u64) -> Tag {
        Tag(v)
    }

    /// The packed value.
    pub fn raw(self) -> u64 {
        self.0
    }

    /// The cache result.
    pub fn result(self) -> CacheResult {
        match (self.0 & 0xff) as usize {
            0 => CacheResult::Local,
            i => CacheResult::ALL.get(i - 1).copied().unwrap_or(CacheResult::Local),
        }
    }

    /// The origin's time, if it was asked.
    pub fn origin_time(self) -> Option<Duration> {
        match self.0 >> 8 {
            0 => None,
            us => Some(Duration::from_micros(us - 1)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrip() {
        let t = Tag::new(CacheResult::Coalesced, Some(Duration::from_micros(1234)));
        let back = Tag::from_raw(t.raw());
        assert_eq!(back.result(), CacheResult::Coalesced);
        assert_eq!(back.origin_time(), Some(Duration::from_micros(1234)));
        let h = Tag::from_raw(Tag::new(CacheResult::Hit, None).raw());
        assert_eq!(h.result(), CacheResult::Hit);
        assert_eq!(h.origin_time(), None);
        for r in CacheResult::ALL {
            assert_eq!(Tag::from_raw(Tag::new(r, None).raw()).result(), r);
        }
        // A response nobody tagged (the codec's own 408, 413, ...) is local, never a hit.
        assert_eq!(Tag::from_raw(0).result(), CacheResult::Local);
        assert_eq!(
            Tag::new(CacheResult::Miss, Some(Duration::ZERO)).origin_time(),
            Some(Duration::ZERO)
        );
        assert_eq!(Tag::from_raw(0xff).result(), CacheResult::Local);
    }
}
