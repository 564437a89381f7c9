//! A response's tag: how the cache answered it (the metrics' cache result), how long
//! the origin took, which site answered it (the `site` label of the per-site metrics) and
//! why a request was refused, packed in the `u64` the codec hands back to `on_response`.

use std::time::Duration;

use reel_access::DenyReason;

use crate::result::CacheResult;

/// Bits of the origin time (microseconds plus one: 19 hours, longer saturates).
const TIME_BITS: u32 = 36;
const TIME_MASK: u64 = (1 << TIME_BITS) - 1;
/// Where the site's metrics id starts, and its bits.
const SITE_SHIFT: u32 = 8 + TIME_BITS;
const SITE_BITS: u32 = 12;
/// The largest site id a tag carries; larger ones are carried as this one.
pub const MAX_SITE_ID: u16 = (1 << SITE_BITS) - 1;
/// Where the refusal reason (its index plus one) starts.
const DENIED_SHIFT: u32 = SITE_SHIFT + SITE_BITS;

/// Cache result in the low 8 bits (its index plus one: 0 is a response nobody tagged, one
/// the codec made itself such as a 408, and counts as local), origin time in microseconds
/// in the 36 above them, the site's metrics id in the 12 above those (0: no site), and the
/// refusal reason of an access rule in the top 8.
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

    /// `raw` (a tag's packed value) with the site's metrics id `site` (0: none), which
    /// replaces any it had; ids past [`MAX_SITE_ID`] are carried as it.
    pub fn with_site(raw: u64, site: u16) -> u64 {
        let site = u64::from(site.min(MAX_SITE_ID));
        (raw & !(u64::from(MAX_SITE_ID) << SITE_SHIFT)) | (site << SITE_SHIFT)
    }

    /// The site's metrics id (0: the response belongs to no site).
    pub fn site(self) -> u16 {
        ((self.0 >> SITE_SHIFT) & u64::from(MAX_SITE_ID)) as u16
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
        assert_eq!(h.site(), 0);
    }

    #[test]
    fn the_site_leaves_the_other_fields_alone() {
        let t = Tag::new(CacheResult::Miss, Some(Duration::from_secs(3600)));
        for r in DenyReason::ALL {
            let raw = Tag::with_site(t.raw() | Tag::denied(r), 7);
            let back = Tag::from_raw(raw);
            assert_eq!(back.site(), 7);
            assert_eq!(back.denied_reason(), Some(r));
            assert_eq!(back.origin_time(), Some(Duration::from_secs(3600)));
            assert_eq!(Tag::from_raw(Tag::with_site(raw, 2)).site(), 2, "replaced");
        }
        assert_eq!(Tag::from_raw(Tag::with_site(0, u16::MAX)).site(), MAX_SITE_ID);
        assert_eq!(Tag::from_raw(Tag::with_site(0, u16::MAX)).result(), CacheResult::Local);
        // An origin time past 19 hours saturates; it never spills into the site.
        let long = Tag::new(CacheResult::Miss, Some(Duration::from_secs(30 * 86400)));
        assert_eq!(long.site(), 0);
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
        assert_eq!(long.site(), 0);
        assert!(long.origin_time().is_some());
    }
}
