//! Rendezvous (highest random weight) hashing: which host of a tier owns a key.
//!
//! Every host gets a score per key, `-w / ln(h)` with `h` a hash of (key, host) mapped
//! uniformly into the open interval (0, 1) and `w` the host's weight (Schindelhauer and
//! Schomaker's weighted form of Thaler and Ravishankar's HRW). The host with the highest
//! score owns the key, and the descending order of scores is the fallback order. A host's
//! expected share is its weight over the sum of weights; removing a host moves exactly the
//! keys it owned, each to its next-ranked host; adding one takes only keys from others.
//!
//! Scores depend only on the key and the host's address text, so every node configured with
//! the same addresses ranks the same way: edges agree on which parent owns a key without
//! talking to each other. The hashes are xxh3, fixed by its specification.

use xxhash_rust::xxh3::xxh3_64;

/// The key a rendezvous group hashes to pick a host: the request's cache key, so that one
/// object always goes to the same parent.
///
/// Build it with [`Affinity::of`] over the normalised cache key bytes on every node (the
/// ranking must agree across nodes) and pass it to [`crate::WorkerClient::send_keyed`]; the
/// cache's fill path must do so for a shield tier to own each object exactly once. Requests
/// sent without one ([`crate::WorkerClient::send`]) hash their path and query, which agrees
/// with the key as long as the origin target is the normalised one and one site uses the
/// group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Affinity(u64);

impl Affinity {
    /// The affinity of `key` (for example the cache key's bytes).
    pub fn of(key: &[u8]) -> Self {
        Self(xxh3_64(key))
    }

    /// An affinity from a 64-bit hash the caller already has. Every node must derive it the
    /// same way.
    pub fn from_hash(hash: u64) -> Self {
        Self(hash)
    }

    /// The 64-bit value.
    pub fn get(self) -> u64 {
        self.0
    }
}

/// A host's identity in the ranking.
pub(crate) fn host_id(addr: &str) -> u64 {
    xxh3_64(addr.as_bytes())
}

/// MurmurHash3's 64-bit finaliser: a bijection whose every output bit depends on every input
/// bit.
fn fmix64(mut k: u64) -> u64 {
    k ^= k >> 33;
    k = k.wrapping_mul(0xff51_afd7_ed55_8ccd);
    k ^= k >> 33;
    k = k.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    k ^ (k >> 33)
}

/// The score of host `id` with `weight` for `key`; higher wins.
pub(crate) fn score(key: Affinity, id: u64, weight: u32) -> f64 {
    let h = fmix64(fmix64(key.0) ^ id);
    // 53 random bits, centred in their interval: never 0 or 1, so ln is finite and negative.
    let u = ((h >> 11) as f64 + 0.5) / (1u64 << 53) as f64;
    -f64::from(weight) / u.ln()
}

/// Indices of `hosts` (`(id, weight)`) from the owner of `key` down.
pub(crate) fn rank(key: Affinity, hosts: impl Iterator<Item = (u64, u32)>) -> Vec<usize> {
    let mut scored: Vec<(f64, usize)> =
        hosts.enumerate().map(|(i, (id, w))| (score(key, id, w), i)).collect();
    // Ties (practically impossible) break by position, so the order is total and stable.
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    scored.into_iter().map(|(_, i)| i).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEYS: usize = 30_000;

    fn key(i: usize) -> Affinity {
        Affinity::of(format!("video.example.com/live/seg-{i}.ts").as_bytes())
    }

    fn owners(addrs: &[&str], weights: &[u32]) -> Vec<usize> {
        (0..KEYS)
            .map(|i| {
                let hosts = addrs.iter().zip(weights).map(|(a, &w)| (host_id(a), w));
                rank(key(i), hosts)[0]
            })
            .collect()
    }

    fn counts(owners: &[usize], n: usize) -> Vec<usize> {
        let mut c = vec![0; n];
        for &o in owners {
            c[o] += 1;
        }
        c
    }

    const PARENTS: [&str; 3] = ["10.0.0.1:8080", "10.0.0.2:8080", "10.0.0.3:8080"];

    #[test]
    fn even_spread_within_ten_percent() {
        let c = counts(&owners(&PARENTS, &[1, 1, 1]), 3);
        for n in &c {
            assert!((9_000..=11_000).contains(n), "{c:?}");
        }
    }

    #[test]
    fn weights_are_respected() {
        // Shares 1/4, 1/2, 1/4: 7,500, 15,000, 7,500 keys, each within 10 %.
        let c = counts(&owners(&PARENTS, &[1, 2, 1]), 3);
        for (n, want) in c.iter().zip([7_500.0, 15_000.0, 7_500.0]) {
            assert!((*n as f64 - want).abs() <= want * 0.1, "{c:?}");
        }
        let c = counts(&owners(&PARENTS, &[5, 1, 1]), 3);
        assert!(c[0] > 3 * (c[1] + c[2]) / 2, "{c:?}");
    }

    #[test]
    fn removing_a_host_moves_exactly_its_keys() {
        let before = owners(&PARENTS, &[1, 1, 1]);
        let two = [PARENTS[0], PARENTS[2]];
        let after = owners(&two, &[1, 1]);
        let mut moved = 0;
        for (b, a) in before.iter().zip(&after) {
            let a_addr = two[*a];
            if *b == 1 {
                moved += 1;
            } else {
                assert_eq!(a_addr, PARENTS[*b], "a key of a remaining host moved");
            }
        }
        assert_eq!(moved, before.iter().filter(|&&b| b == 1).count());
        // The removed host's keys go to their second choice.
        for i in (0..KEYS).filter(|&i| before[i] == 1) {
            let full = rank(key(i), PARENTS.iter().map(|a| (host_id(a), 1)));
            assert_eq!(two[after[i]], PARENTS[full[1]]);
        }
    }

    #[test]
    fn ranking_is_a_stable_permutation() {
        let hosts = || PARENTS.iter().map(|a| (host_id(a), 1));
        let r = rank(key(7), hosts());
        let mut sorted = r.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, vec![0, 1, 2]);
        assert_eq!(rank(key(7), hosts()), r);
        // Independent of the listing order.
        let rev: Vec<_> = PARENTS.iter().rev().map(|a| (host_id(a), 1)).collect();
        let r_rev = rank(key(7), rev.into_iter());
        assert_eq!(PARENTS[r[0]], PARENTS[2 - r_rev[0]]);
    }
}
