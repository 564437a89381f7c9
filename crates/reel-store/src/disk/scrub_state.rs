//! The scrub's state in a store ([`Scrub`]): its rate and token bucket ([`Bucket`]),
//! where the pass stands ([`Cursor`], the object being checked), and its counters. The
//! disk holds it; `scrub` walks the volumes with it.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use crate::StoreStats;

/// The bucket holds at most this many seconds of the rate: a step that took long, or a
/// maintenance pass that came late, is made up for, but never by more than this.
pub(super) const BURST_SECS: u128 = 2;

/// The scrub's state in a store: its rate, where the pass stands, and its counters.
#[derive(Default)]
pub(super) struct Scrub {
    /// Bytes per second; 0 = off.
    pub(super) rate: AtomicU64,
    pub(super) cursor: Mutex<Cursor>,
    pub(super) bucket: Mutex<Bucket>,
    pub(super) bytes: AtomicU64,
    pub(super) objects: AtomicU64,
    pub(super) corrupt: AtomicU64,
    pub(super) passes: AtomicU64,
}

impl Scrub {
    pub(super) fn new(rate: u64) -> Scrub {
        Scrub { rate: AtomicU64::new(rate), ..Scrub::default() }
    }

    /// The scrub's counters; every other field is zero.
    pub(super) fn stats(&self) -> StoreStats {
        StoreStats {
            scrub_bytes: self.bytes.load(Ordering::Relaxed),
            scrub_objects: self.objects.load(Ordering::Relaxed),
            scrub_corrupt: self.corrupt.load(Ordering::Relaxed),
            scrub_passes: self.passes.load(Ordering::Relaxed),
            ..StoreStats::default()
        }
    }
}

/// Where the pass stands.
#[derive(Default)]
pub(super) struct Cursor {
    /// The next volume to walk.
    pub(super) next_vol: u32,
    /// The volume being walked (index, incarnation).
    pub(super) vol: Option<(u32, u64)>,
    /// Its objects still to check, in record order: (record offset, key hash).
    pub(super) todo: VecDeque<(u64, u64)>,
    /// The object being checked, when a step ran out of budget inside it.
    pub(super) cur: Option<Partial>,
    /// The read buffer, reused (at most `scrub::CHUNK` bytes).
    pub(super) buf: Vec<u8>,
}

/// An object being checked.
pub(super) struct Partial {
    pub(super) rec_off: u64,
    pub(super) hash: u64,
    /// Known once the record header checked out, with the key it holds.
    pub(super) record: Option<Record>,
    pub(super) key: Option<Box<[u8]>>,
    /// Body bytes checked so far, and their CRC.
    pub(super) done: u64,
    pub(super) crc: u32,
}

#[derive(Clone, Copy)]
pub(super) struct Record {
    pub(super) body_off: u64,
    pub(super) body_len: u64,
    pub(super) header_crc: u32,
}

/// A token bucket in bytes.
#[derive(Default)]
pub(super) struct Bucket {
    pub(super) tokens: i128,
    pub(super) last: Option<Instant>,
}

impl Bucket {
    /// Adds what `rate` earned since the last call (at most [`BURST_SECS`] of it) and
    /// returns the bytes that may be read now. A rate of 0 empties the bucket.
    pub(super) fn refill(&mut self, rate: u64, now: Instant) -> u64 {
        let elapsed = self.last.map_or(0, |l| now.saturating_duration_since(l).as_nanos());
        self.last = Some(now);
        let rate = u128::from(rate);
        if rate == 0 {
            self.tokens = 0;
            return 0;
        }
        let earned = (elapsed.saturating_mul(rate) / 1_000_000_000).min(BURST_SECS * rate);
        let cap = (BURST_SECS * rate).min(i128::MAX as u128) as i128;
        self.tokens = self.tokens.saturating_add(earned as i128).min(cap);
        u64::try_from(self.tokens.max(0)).unwrap_or(u64::MAX)
    }

    /// Takes `n` bytes read; a step that read a little more than its budget is paid for
    /// by the next refills.
    pub(super) fn spend(&mut self, n: u64) {
        self.tokens = self.tokens.saturating_sub(i128::from(n));
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn the_bucket_earns_the_rate_and_caps_the_burst() {
        let t0 = Instant::now();
        let mut b = Bucket::default();
        assert_eq!(b.refill(1000, t0), 0, "nothing earned before the first refill");
        assert_eq!(b.refill(1000, t0 + Duration::from_millis(500)), 500);
        b.spend(700);
        // 200 in debt: paid back from the next second's earnings.
        assert_eq!(b.refill(1000, t0 + Duration::from_millis(1500)), 800);
        b.spend(800);
        assert_eq!(b.refill(1000, t0 + Duration::from_secs(60)), 2000, "capped at 2 s");
        assert_eq!(b.refill(0, t0 + Duration::from_secs(61)), 0, "off empties it");
        assert_eq!(b.refill(1000, t0 + Duration::from_secs(62)), 1000);
        assert_eq!(b.refill(u64::MAX, t0 + Duration::from_secs(1000)), u64::MAX);
    }
}
