//! A response's tag: how the cache answered it (the metrics' cache result), how long
//! the origin took and, for a refusal, why, packed in the `u64` the codec hands back to
//! `on_response`.

use std::time::Duration;

use reel_access::DenyReason;

use crate::result::CacheResult;

/// Cache result in the low 8 bits (its index plus one: 0 is a response nobody tagged, one
/// the codec made itself such as a 408, and counts as local), origin time in microseconds
/// plus one in the 48 bits above them, and in the top 8 bits the refusal reason's index
/// plus one (0: not a refusal).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tag(u64);

impl Tag {
    /// A tag for `result`, with the origin's time if it was asked.
    pub fn new(result: CacheResult, origin: Option<Duration>) -> Tag {
        let us = origin.map_or(0, |d| (d.as_micros() as u64).saturating_add(1).min(ORIGIN_MAX));
        Tag((result as u64 + 1) | (us << 8))
    }

    /// A refusal reel answered itself, for `reason`.
    pub fn denied(reason: DenyReason) -> u64 {
        Tag::local() | ((reason as u64 + 1) << 56)
    }

    /// Why the request was refused, if it was.
    pub fn denied_reason(self) -> Option<DenyReason> {
        match (self.0 >> 56) as usize {
            0 => None,
            i => DenyReason::ALL.get(i - 1).copied(),
        }
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
        match (self.0 >> 8) & ORIGIN_MAX {
            0 => None,
            us => Some(Duration::from_micros(us - 1)),
        }
    }
}

/// The largest origin time the tag holds, in microseconds plus one (about 8.9 years).
const ORIGIN_MAX: u64 = (1 << 48) - 1;

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
        assert_eq!(back.denied_reason(), None);
        for r in DenyReason::ALL {
            let d = Tag::from_raw(Tag::denied(r));
            assert_eq!(
                (d.result(), d.denied_reason(), d.origin_time()),
                (CacheResult::Local, Some(r), None)
            );
        }
        let slow = Tag::new(CacheResult::Miss, Some(Duration::from_secs(u64::MAX / 2)));
        assert_eq!(
            Tag::from_raw(slow.raw()).denied_reason(),
            None,
            "a long origin time is no refusal"
        );
    }
}
