//! A response's tag: how the cache answered it (the metrics' cache result) and how long
//! the origin took, packed in the `u64` the codec hands back to `on_response`.

use std::time::Duration;

use crate::result::CacheResult;

/// Cache result in the low 8 bits, origin time in microseconds above them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tag(u64);

impl Tag {
    /// A tag for `result`, with the origin's time if it was asked.
    pub fn new(result: CacheResult, origin: Option<Duration>) -> Tag {
        let us = origin.map_or(0, |d| (d.as_micros() as u64).saturating_add(1).min(u64::MAX >> 8));
        Tag(result as u64 | (us << 8))
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
        CacheResult::ALL.get((self.0 & 0xff) as usize).copied().unwrap_or(CacheResult::Local)
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
        assert_eq!(
            Tag::new(CacheResult::Miss, Some(Duration::ZERO)).origin_time(),
            Some(Duration::ZERO)
        );
        assert_eq!(Tag::from_raw(0xff).result(), CacheResult::Local);
    }
}
