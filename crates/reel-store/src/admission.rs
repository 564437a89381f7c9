//! Admission: which fetched objects are worth writing into the store.
//!
//! [`Admission`] decides under an [`AdmissionPolicy`]; for `second-hit` it keeps a
//! *doorkeeper*: a Bloom-style bit array that remembers which keys missed recently. An
//! object is admitted when its key was seen before within the window; the first sighting
//! only sets its bits. Objects requested once and never again (one-hit wonders) then cost
//! no store write and evict nothing.
//!
//! Two generations of bits: lookups read both, insertions go to the current one. After
//! `window` distinct insertions the older generation is cleared and becomes the current
//! one, so a key is remembered for at least `window` and at most `2 × window` further
//! distinct keys, and memory stays fixed (about 2.5 bytes per key of the window). The
//! bits are atomics shared by every worker: no lock on the path of a miss. A false
//! positive only admits an object early; a thread stalled across a whole generation can at
//! worst lose a bit it set (the object is refused once more). Neither loses data.

use std::sync::OnceLock;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use crate::format;

/// Bits per key of the window: with [`HASHES`] probes, about 0.8 % false positives when
/// a generation is full.
const BITS_PER_KEY: u64 = 10;
/// Bit probes per key (double hashing over the key's xxh3-128).
const HASHES: u64 = 7;
/// The smallest window accepted; smaller ones are raised to it.
pub const MIN_WINDOW: u64 = 1024;
/// The largest window accepted (about 640 MiB of bits); larger ones are lowered to it.
pub const MAX_WINDOW: u64 = 1 << 28;

/// Which fetched objects are written into the store.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum AdmissionPolicy {
    /// Every storable response is stored the first time it is fetched.
    #[default]
    Always,
    /// A response is stored the second time its key misses within the window; the first
    /// fetch is served (and shared by concurrent requests) but not kept.
    SecondHit,
}

/// Counters of admission decisions.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AdmissionStats {
    /// Fetches whose response was stored by the policy's decision.
    pub admitted: u64,
    /// Fetches served but not stored: their key was seen for the first time in the window.
    pub rejected: u64,
    /// Generations rotated (each forgets keys older than the window).
    pub rotations: u64,
    /// Bytes of the doorkeeper's bits (both generations); fixed at construction.
    pub sketch_bytes: u64,
}

/// The admission doorkeeper, shared by every worker. The policy is passed with each
/// decision (it belongs to the reloadable settings); the bits are allocated the first time
/// `second-hit` is in force.
pub struct Admission {
    window: u64,
    keeper: OnceLock<Doorkeeper>,
    admitted: AtomicU64,
    rejected: AtomicU64,
}

/// The two generations of bits.
struct Doorkeeper {
    window: u64,
    /// Bits per generation (a multiple of 64).
    bits: u64,
    gens: [Box<[AtomicU64]>; 2],
    /// Index of the current generation in `gens`.
    current: AtomicUsize,
    /// Distinct keys inserted into the current generation.
    inserted: AtomicU64,
    rotating: AtomicBool,
    rotations: AtomicU64,
}

impl Admission {
    /// A doorkeeper remembering at least `window` distinct keys (clamped to
    /// [`MIN_WINDOW`]..=[`MAX_WINDOW`]). Allocates nothing yet.
    pub fn new(window: u64) -> Admission {
        Admission {
            window: window.clamp(MIN_WINDOW, MAX_WINDOW),
            keeper: OnceLock::new(),
            admitted: AtomicU64::new(0),
            rejected: AtomicU64::new(0),
        }
    }

    /// The window, in distinct keys, after clamping.
    pub fn window(&self) -> u64 {
        self.window
    }

    /// Decides, under `policy`, for one origin fetch of `key` whose response may be stored:
    /// true to store it. Under `second-hit` this records the sighting, so call it once per
    /// fetch.
    pub fn admit(&self, policy: AdmissionPolicy, key: &[u8]) -> bool {
        match policy {
            AdmissionPolicy::Always => true,
            AdmissionPolicy::SecondHit => {
                let keeper = self.keeper.get_or_init(|| Doorkeeper::new(self.window));
                let seen = keeper.record(format::key_hash(key));
                let counter = if seen { &self.admitted } else { &self.rejected };
                counter.fetch_add(1, Relaxed);
                seen
            }
        }
    }

    /// Counters so far.
    pub fn stats(&self) -> AdmissionStats {
        let k = self.keeper.get();
        AdmissionStats {
            admitted: self.admitted.load(Relaxed),
            rejected: self.rejected.load(Relaxed),
            rotations: k.map_or(0, |k| k.rotations.load(Relaxed)),
            sketch_bytes: k.map_or(0, |k| k.bits / 8 * 2),
        }
    }
}

impl Doorkeeper {
    fn new(window: u64) -> Doorkeeper {
        let bits = (window * BITS_PER_KEY).div_ceil(64) * 64;
        let words = (bits / 64) as usize;
        let generation = || (0..words).map(|_| AtomicU64::new(0)).collect::<Box<[_]>>();
        Doorkeeper {
            window,
            bits,
            gens: [generation(), generation()],
            current: AtomicUsize::new(0),
            inserted: AtomicU64::new(0),
            rotating: AtomicBool::new(false),
            rotations: AtomicU64::new(0),
        }
    }

    /// Records a sighting of the key hashed `h`; returns whether it was seen before within
    /// the window. A key found only in the older generation is copied into the current
    /// one, so a key that keeps coming back is never forgotten.
    fn record(&self, h: u128) -> bool {
        let cur = self.current.load(Ordering::Acquire) & 1;
        let (now, old) = (&self.gens[cur], &self.gens[cur ^ 1]);
        if self.contains(now, h) {
            return true;
        }
        let seen = self.contains(old, h);
        let mut new = false;
        for bit in self.probes(h) {
            let mask = 1u64 << (bit % 64);
            new |= now[(bit / 64) as usize].fetch_or(mask, Relaxed) & mask == 0;
        }
        // Only keys that set a bit count: a racing insertion of the same key counts once.
        if new && self.inserted.fetch_add(1, Relaxed) + 1 >= self.window {
            self.rotate(cur);
        }
        seen
    }

    fn contains(&self, g: &[AtomicU64], h: u128) -> bool {
        self.probes(h).all(|bit| g[(bit / 64) as usize].load(Relaxed) & (1 << (bit % 64)) != 0)
    }

    /// The bit positions of the key hashed `h` (Kirsch–Mitzenmacher double hashing).
    fn probes(&self, h: u128) -> impl Iterator<Item = u64> + use<> {
        let (a, b) = (h as u64, ((h >> 64) as u64) | 1);
        let bits = self.bits;
        (0..HASHES).map(move |i| a.wrapping_add(i.wrapping_mul(b)) % bits)
    }

    /// Clears the older generation and makes it the current one; one thread does it.
    fn rotate(&self, cur: usize) {
        if self.rotating.swap(true, Ordering::Acquire) {
            return;
        }
        if self.current.load(Ordering::Acquire) & 1 == cur {
            // Cleared before it becomes current: insertions only go to the current one,
            // so nothing inserted since the last rotation is lost.
            for w in self.gens[cur ^ 1].iter() {
                w.store(0, Relaxed);
            }
            self.inserted.store(0, Relaxed);
            self.current.store(cur ^ 1, Ordering::Release);
            self.rotations.fetch_add(1, Relaxed);
        }
        self.rotating.store(false, Ordering::Release);
    }
}

impl std::fmt::Debug for Admission {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Admission")
            .field("window", &self.window)
            .field("stats", &self.stats())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: AdmissionPolicy = AdmissionPolicy::SecondHit;

    fn key(i: u64) -> Vec<u8> {
        format!("GET http://example.test/seg_{i}.ts").into_bytes()
    }

    #[test]
    fn always_admits_and_records_nothing() {
        let a = Admission::new(0);
        let always = AdmissionPolicy::Always;
        assert!(a.admit(always, b"k") && a.admit(always, b"k"));
        assert_eq!(a.stats(), AdmissionStats::default(), "no bits allocated, nothing counted");
        assert_eq!(a.window(), MIN_WINDOW, "a window below the minimum is raised");
    }

    #[test]
    fn the_second_sighting_within_the_window_is_admitted() {
        let w = 10_000;
        let a = Admission::new(w);
        let mut early = 0;
        for i in 0..w {
            // A false positive may admit a first sighting; never more than a few.
            early += u64::from(a.admit(SECOND, &key(i)));
        }
        assert!(early < w / 50, "{early} first sightings admitted");
        // No false negative: every key of the window is remembered, whether the
        // generations rotated meanwhile or not.
        for i in 0..w {
            assert!(a.admit(SECOND, &key(i)), "key {i} forgotten within the window");
        }
        let st = a.stats();
        assert_eq!(st.admitted + st.rejected, 2 * w);
        assert_eq!(st.rejected, w - early);
    }

    #[test]
    fn a_key_seen_once_is_forgotten_after_two_windows() {
        let w = 4096;
        let a = Admission::new(w);
        let old: Vec<_> = (0..200).map(|i| key(1_000_000 + i)).collect();
        for k in &old {
            a.admit(SECOND, k);
        }
        for i in 0..2 * w + 1 {
            a.admit(SECOND, &key(i));
        }
        assert!(a.stats().rotations >= 2, "{:?}", a.stats());
        let remembered = old.iter().filter(|k| a.admit(SECOND, k)).count();
        // Only false positives of the bits set since: about 1 %.
        assert!(remembered < 10, "{remembered} of 200 old keys still admitted");
    }

    #[test]
    fn a_key_that_keeps_coming_back_is_never_forgotten() {
        let w = 2048;
        let a = Admission::new(w);
        a.admit(SECOND, b"popular");
        for round in 0..10u64 {
            for i in 0..w / 2 {
                a.admit(SECOND, &key(round * w + i));
            }
            assert!(a.admit(SECOND, b"popular"), "forgotten in round {round}");
        }
    }

    #[test]
    fn memory_is_fixed_by_the_window() {
        let a = Admission::new(100_000);
        a.admit(SECOND, b"first");
        let before = a.stats().sketch_bytes;
        assert_eq!(before, 2 * 100_000 * BITS_PER_KEY / 8);
        for i in 0..500_000 {
            a.admit(SECOND, &key(i));
        }
        assert_eq!(a.stats().sketch_bytes, before, "no growth with the keys seen");
        let big = Admission::new(u64::MAX);
        assert_eq!(big.window(), MAX_WINDOW, "a window above the maximum is lowered");
    }

    #[test]
    fn the_policy_changes_live_and_keeps_what_was_seen() {
        let a = Admission::new(0);
        assert!(!a.admit(SECOND, b"x"));
        assert!(a.admit(AdmissionPolicy::Always, b"y"), "always admits a first sighting");
        assert!(a.admit(SECOND, b"x"), "seen before the change");
        assert!(!a.admit(SECOND, b"y"), "not recorded while always was in force");
    }

    #[test]
    fn threads_share_the_doorkeeper() {
        let a = std::sync::Arc::new(Admission::new(50_000));
        let ts: Vec<_> = (0..4u64)
            .map(|t| {
                let a = a.clone();
                std::thread::spawn(move || {
                    for i in 0..5_000 {
                        a.admit(SECOND, &key(t * 10_000 + i));
                    }
                })
            })
            .collect();
        for t in ts {
            t.join().unwrap();
        }
        for t in 0..4u64 {
            for i in (0..5_000).step_by(97) {
                assert!(a.admit(SECOND, &key(t * 10_000 + i)), "thread {t} key {i}");
            }
        }
    }
}
