//! A response's tag: how the cache answered it (the metrics' cache result), how long
//! the origin took, and why a request was refused, packed in the `u64` the codec hands
//! back to `on_response`.

use std::time::Duration;

use reel_access::DenyReason;

use crate::result::CacheResult;

/// Bits of the origin time (microseconds plus one: some nine years).
const TIME_BITS: u32 = 48;
const TIME_MASK: u64 = (1 << TIME_BITS) - 1;
/// Where the refusal reason (its index plus one) starts.
const DENIED_SHIFT: u32 = 8 + TIME_BITS;

/// Cache result in the low 8 bits (its index plus one: 0 is a response nobody tagged, one
/// the codec made itself such as a 408, and counts as local), origin time in microseconds
/// in the 48 above them, and the refusal reason of an access rule in the top 8.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tag(u64);

impl Tag {
    /// A tag for `result`, with the origin's time if it was asked.
    pub fn new(result: CacheResult, origin: Option<Duration>) -> Tag {
        let us = origin.map_or(0, |d| (d.as_micros() as u64).saturating_add(1).min(TIME_MASK));
        Tag((result as u64 + 1) | (us << 8))
    }

    /// A local answer refusing the request for `reason`.
    pub fn denied(reason: DenyReason) -> u64 {
        Tag::new(CacheResult::Local, None).0 | ((reason as u64 + 1) << DENIED_SHIFT)
    }

    /// Why the request was refused, if an access rule refused it.
    pub fn denied_reason(self) -> Option<DenyReason> {
        match (self.0 >> DENIED_SHIFT) as usize {
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
        match (self.0 >> 8) & TIME_MASK {
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
        assert_eq!(h.denied_reason(), None);
    }

    #[test]
    fn a_refusal_carries_its_reason_and_no_origin_time() {
        for r in DenyReason::ALL {
            let t = Tag::from_raw(Tag::denied(r));
            assert_eq!(t.denied_reason(), Some(r));
            assert_eq!(t.result(), CacheResult::Local);
            assert_eq!(t.origin_time(), None);
        }
        let long = Tag::new(CacheResult::Miss, Some(Duration::from_secs(400 * 86400 * 365)));
        assert_eq!(long.denied_reason(), None);
        assert!(long.origin_time().is_some());
    }
}
