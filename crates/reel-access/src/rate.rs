//! Request-rate limits: one GCRA (generic cell rate algorithm) limiter per site, shared by
//! every worker, so a client whose connections land on several workers has one budget.
//!
//! A client is its token's identity when the caller passes one, else its address: an IPv4
//! address, or the /64 an IPv6 address is in (one subscriber's whole prefix is one client,
//! so rotating through a /64 buys nothing). Each key keeps one number, its theoretical
//! arrival time (TAT); a request is admitted while the TAT stays within `burst` intervals
//! of now. The keys are spread over [`SHARDS`] mutex-guarded maps, locked for one hash
//! probe. Memory is bounded: each shard holds at most its share of `max_clients` keys, and a
//! new key in a full shard evicts the shard's oldest (first inserted); an evicted key
//! whose budget was still in use is counted ([`RateLimiter::evictions`]).

use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasher, BuildHasherDefault, Hasher, RandomState};
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::rules::canonical;

/// How many maps the keys are spread over.
pub const SHARDS: usize = 64;

/// A site's limit: the sustained rate and the burst a client may spend at once.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RateSpec {
    /// Requests per second, sustained.
    pub rate: f64,
    /// Requests a client that was idle may make at once (at least 1).
    pub burst: u32,
    /// Most clients tracked at once (at least [`SHARDS`]).
    pub max_clients: usize,
}

/// The keys are hashes already (seeded per process): the maps use them as they are.
#[derive(Default)]
struct Identity(u64);

impl Hasher for Identity {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8) | u64::from(b);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

/// One shard: TAT per key (nanoseconds since the limiter's epoch) and the keys in the order
/// they were inserted (the same keys as the map, so the oldest is at the front).
#[derive(Default)]
struct Shard {
    tat: HashMap<u64, u64, BuildHasherDefault<Identity>>,
    order: VecDeque<u64>,
}

/// Cache-line aligned, so workers locking neighbouring shards do not share a line.
#[repr(align(64))]
#[derive(Default)]
struct Padded(Mutex<Shard>);

/// A shared GCRA limiter (see the module doc).
pub struct RateLimiter {
    spec: RateSpec,
    /// Nanoseconds between two requests at the sustained rate (at least 1).
    interval: u64,
    /// How far ahead of now a key's TAT may be after an admitted request.
    tolerance: u64,
    per_shard: usize,
    shards: Box<[Padded]>,
    seed: RandomState,
    epoch: Instant,
    evictions: AtomicU64,
}

impl std::fmt::Debug for RateLimiter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RateLimiter").field("spec", &self.spec).finish_non_exhaustive()
    }
}

impl RateLimiter {
    /// A limiter for `spec` (a `rate` that is not positive is taken as the smallest one).
    pub fn new(spec: RateSpec) -> RateLimiter {
        let interval = if spec.rate.is_finite() && spec.rate > 0.0 {
            ((1e9 / spec.rate) as u64).max(1)
        } else {
            u64::MAX / 4
        };
        let burst = u64::from(spec.burst.max(1));
        RateLimiter {
            spec,
            interval,
            tolerance: interval.saturating_mul(burst),
            per_shard: (spec.max_clients / SHARDS).max(1),
            shards: (0..SHARDS).map(|_| Padded::default()).collect(),
            seed: RandomState::new(),
            epoch: Instant::now(),
            evictions: AtomicU64::new(0),
        }
    }

    /// What it was built for.
    pub fn spec(&self) -> RateSpec {
        self.spec
    }

    /// Admits one request of the client at `ip` (or of `token`, when given) at `now`, or
    /// says how long until it would be admitted.
    pub fn check(&self, ip: IpAddr, token: Option<&[u8]>, now: Instant) -> Result<(), Duration> {
        let key = self.key(ip, token);
        let now = u64::try_from(now.saturating_duration_since(self.epoch).as_nanos())
            .unwrap_or(u64::MAX / 2);
        // Bits the maps do not use (they take the low bits for the bucket, the top 7 for
        // the control byte), so keys of one shard still spread over its map.
        let shard = &self.shards[(key >> 32) as usize % SHARDS].0;
        let mut s = shard.lock().unwrap_or_else(PoisonError::into_inner);
        let tat = s.tat.get(&key).copied();
        let next = tat.unwrap_or(now).max(now).saturating_add(self.interval);
        if next - now > self.tolerance {
            return Err(Duration::from_nanos(next - now - self.tolerance));
        }
        match s.tat.get_mut(&key) {
            Some(t) => *t = next,
            None => {
                if s.order.len() >= self.per_shard
                    && let Some(old) = s.order.pop_front()
                    && let Some(old_tat) = s.tat.remove(&old)
                    && old_tat > now
                {
                    self.evictions.fetch_add(1, Relaxed);
                }
                s.tat.insert(key, next);
                s.order.push_back(key);
            }
        }
        Ok(())
    }

    /// Keys evicted to make room while their budget was still in use (their client gets a
    /// fresh budget: the price of bounded memory under an address flood).
    pub fn evictions(&self) -> u64 {
        self.evictions.load(Relaxed)
    }

    /// Clients tracked now (the shards' sizes, summed).
    pub fn tracked(&self) -> usize {
        self.shards
            .iter()
            .map(|p| p.0.lock().unwrap_or_else(PoisonError::into_inner).order.len())
            .sum()
    }

    /// The key of a request: its token, or its address (IPv6 by /64), hashed with this
    /// process's seed, so keys cannot be chosen to collide.
    fn key(&self, ip: IpAddr, token: Option<&[u8]>) -> u64 {
        let mut h = self.seed.build_hasher();
        match (token, canonical(ip)) {
            (Some(t), _) => {
                h.write_u8(b't');
                h.write(t);
            }
            (None, IpAddr::V4(v4)) => {
                h.write_u8(4);
                h.write_u32(u32::from(v4));
            }
            (None, IpAddr::V6(v6)) => {
                h.write_u8(6);
                h.write_u64((u128::from(v6) >> 64) as u64);
            }
        }
        h.finish()
    }
}

/// Seconds for `Retry-After`: `wait` rounded up, at least 1.
pub fn retry_after_secs(wait: Duration) -> u64 {
    let s = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
    s.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lim(rate: f64, burst: u32, max_clients: usize) -> RateLimiter {
        RateLimiter::new(RateSpec { rate, burst, max_clients })
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn a_burst_is_admitted_then_the_sustained_rate() {
        let l = lim(10.0, 5, 1000);
        let t0 = Instant::now();
        let a = ip("192.0.2.1");
        for i in 0..5 {
            assert_eq!(l.check(a, None, t0), Ok(()), "request {i} of the burst");
        }
        let wait = l.check(a, None, t0).unwrap_err();
        assert_eq!(wait, Duration::from_millis(100));
        assert_eq!(retry_after_secs(wait), 1);
        // One interval later, one more; not two.
        let t1 = t0 + Duration::from_millis(100);
        assert_eq!(l.check(a, None, t1), Ok(()));
        assert!(l.check(a, None, t1).is_err());
        // Idle long enough, the whole burst again.
        let t2 = t1 + Duration::from_secs(1);
        for _ in 0..5 {
            assert_eq!(l.check(a, None, t2), Ok(()));
        }
        assert!(l.check(a, None, t2).is_err());
    }

    #[test]
    fn refused_requests_do_not_spend_budget() {
        let l = lim(1.0, 1, 1000);
        let t0 = Instant::now();
        let a = ip("192.0.2.1");
        assert!(l.check(a, None, t0).is_ok());
        for _ in 0..100 {
            assert!(l.check(a, None, t0).is_err());
        }
        assert!(l.check(a, None, t0 + Duration::from_secs(1)).is_ok());
    }

    #[test]
    fn clients_have_their_own_budgets_ipv6_by_64_and_tokens_by_identity() {
        let l = lim(1.0, 1, 1000);
        let t0 = Instant::now();
        assert!(l.check(ip("192.0.2.1"), None, t0).is_ok());
        assert!(l.check(ip("192.0.2.1"), None, t0).is_err());
        assert!(l.check(ip("192.0.2.2"), None, t0).is_ok());
        // An IPv4-mapped address is the IPv4 client.
        assert!(l.check(ip("::ffff:192.0.2.2"), None, t0).is_err());
        // One /64 is one client.
        assert!(l.check(ip("2001:db8:1:2::1"), None, t0).is_ok());
        assert!(l.check(ip("2001:db8:1:2:ffff::9"), None, t0).is_err());
        assert!(l.check(ip("2001:db8:1:3::1"), None, t0).is_ok());
        // A token is its own client, whatever the address.
        assert!(l.check(ip("192.0.2.1"), Some(b"viewer-a"), t0).is_ok());
        assert!(l.check(ip("192.0.2.9"), Some(b"viewer-a"), t0).is_err());
        assert!(l.check(ip("192.0.2.1"), Some(b"viewer-b"), t0).is_ok());
    }

    #[test]
    fn a_flood_of_addresses_stays_bounded_and_evicts_the_oldest() {
        let l = lim(1.0, 1, SHARDS * 4);
        let t0 = Instant::now();
        for i in 0..100_000u32 {
            let a = IpAddr::V4((0x0a00_0000 + i).into());
            assert!(l.check(a, None, t0).is_ok());
        }
        assert!(l.tracked() <= SHARDS * 4, "{} tracked", l.tracked());
        assert!(l.evictions() >= 100_000 - (SHARDS as u64) * 4);
        // The newest keys are still tracked: their budget is spent.
        assert!(l.check(IpAddr::V4((0x0a00_0000 + 99_999u32).into()), None, t0).is_err());
        // Idle keys evicted later are not counted: their budget was whole again.
        let l = lim(1000.0, 1, SHARDS);
        for i in 0..(SHARDS as u32 * 8) {
            let a = IpAddr::V4((0x0a00_0000 + i).into());
            assert!(l.check(a, None, t0 + Duration::from_secs(u64::from(i))).is_ok());
        }
        assert_eq!(l.evictions(), 0);
    }

    #[test]
    fn workers_on_several_threads_share_one_budget() {
        let l = std::sync::Arc::new(lim(0.001, 50, 1000));
        let t0 = Instant::now();
        let admitted: usize = std::thread::scope(|s| {
            let hs: Vec<_> = (0..4)
                .map(|_| {
                    let l = l.clone();
                    s.spawn(move || {
                        (0..100).filter(|_| l.check(ip("192.0.2.1"), None, t0).is_ok()).count()
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).sum()
        });
        assert_eq!(admitted, 50);
    }

    #[test]
    fn retry_after_rounds_up_to_whole_seconds() {
        assert_eq!(retry_after_secs(Duration::ZERO), 1);
        assert_eq!(retry_after_secs(Duration::from_millis(1)), 1);
        assert_eq!(retry_after_secs(Duration::from_millis(1001)), 2);
        assert_eq!(retry_after_secs(Duration::from_secs(3)), 3);
        let slow = lim(0.25, 1, 1000);
        let t0 = Instant::now();
        assert!(slow.check(ip("192.0.2.1"), None, t0).is_ok());
        assert_eq!(retry_after_secs(slow.check(ip("192.0.2.1"), None, t0).unwrap_err()), 4);
    }
}
