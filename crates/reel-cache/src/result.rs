//! How the cache answered a request ([`CacheResult`]): the outcome behind each response's
//! `Cache-Status`, the `cache` label of the request metrics and the `cache` field of the
//! access log. [`OUTCOMES`] is the table ops counts requests by.

use reel_ops::metrics::Outcomes;

/// How a request was answered with respect to the cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(usize)]
pub enum CacheResult {
    /// Served from a complete stored object.
    Hit = 0,
    /// Fetched from the origin (this request started the fetch).
    Miss = 1,
    /// Joined another request's in-flight origin fetch.
    Coalesced = 2,
    /// Stored but stale: revalidated with the origin.
    Revalidated = 3,
    /// Served stale (stale-while-revalidate or stale-if-error).
    Stale = 4,
    /// Not cacheable: passed through to the origin.
    Pass = 5,
    /// Answered by reel itself (health, errors, refusals).
    Local = 6,
}

/// The labels of [`CacheResult`], in index order (a metrics and access-log contract).
const LABELS: [&str; 7] = ["hit", "miss", "coalesced", "revalidated", "stale", "pass", "local"];

/// The outcome table for `reel_ops::metrics::WorkerMetrics`: labels by [`CacheResult::index`],
/// hits for the hit latency, hits and stale answers for the hit ratio.
pub static OUTCOMES: Outcomes = Outcomes {
    labels: &LABELS,
    hit: CacheResult::Hit as usize,
    from_cache: &[CacheResult::Hit as usize, CacheResult::Stale as usize],
};

impl CacheResult {
    /// Every variant, in index order.
    pub const ALL: [CacheResult; 7] = [
        CacheResult::Hit,
        CacheResult::Miss,
        CacheResult::Coalesced,
        CacheResult::Revalidated,
        CacheResult::Stale,
        CacheResult::Pass,
        CacheResult::Local,
    ];

    /// The index metrics record it by (its position in [`CacheResult::ALL`] and
    /// [`OUTCOMES`]).
    pub fn index(self) -> usize {
        self as usize
    }

    /// The label used in metrics and access logs.
    pub fn as_str(self) -> &'static str {
        LABELS[self.index()]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indexes_and_labels_agree() {
        for (i, r) in CacheResult::ALL.iter().enumerate() {
            assert_eq!(r.index(), i);
            assert_eq!(OUTCOMES.labels[i], r.as_str());
        }
        assert_eq!(CacheResult::Stale.as_str(), "stale");
        assert_eq!(OUTCOMES.labels[OUTCOMES.hit], "hit");
    }
}
