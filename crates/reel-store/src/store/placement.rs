//! Where a key lives: weighted rendezvous hashing over the disks in service.
//!
//! Every disk gets a score from the key's hash and the disk's seed (a hash of its
//! path); the key lives on the disk with the highest score. Weighted by size: with
//! weights `w`, the score is `w / -ln(u)` for a uniform `u` in (0, 1], so each disk
//! receives its share of keys in proportion to its size. A disk that leaves moves only
//! its own keys (each to the disk that scored next), and one that comes back takes back
//! only those. With equal weights the order of `u` is the order of the scores, and the
//! logarithm is skipped.

/// A disk's seed: a hash of its configured path.
pub(super) fn seed(path: &std::path::Path) -> u64 {
    xxhash_rust::xxh3::xxh3_64(path.as_os_str().as_encoded_bytes())
}

/// The key's uniform draw for the disk with `seed` (splitmix64 finalizer over both).
pub(super) fn draw(h: u128, seed: u64) -> u64 {
    let mut x = (h as u64) ^ ((h >> 64) as u64).rotate_left(29) ^ seed;
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// The weighted score of a draw.
pub(super) fn weighted(draw: u64, weight: f64) -> f64 {
    // (0, 1]: never 0, whose logarithm is -inf.
    let u = ((draw >> 11) + 1) as f64 / (1u64 << 53) as f64;
    let l = -u.ln();
    if l <= 0.0 { f64::INFINITY } else { weight / l }
}

/// Index of the best of `disks` (weight, seed, in service) for `h`; `None` if none is
/// in service. `equal`: all weights are equal. The reference the tests check shares
/// with; `Store::place` makes the same choice in one pass over its slots.
#[cfg(test)]
pub(super) fn best(h: u128, disks: &[(f64, u64, bool)], equal: bool) -> Option<usize> {
    let mut best: Option<(usize, f64, u64)> = None;
    for (i, &(w, seed, up)) in disks.iter().enumerate() {
        if !up {
            continue;
        }
        let d = draw(h, seed);
        let s = if equal { 0.0 } else { weighted(d, w) };
        let better = match best {
            None => true,
            Some((_, bs, bd)) => {
                if equal {
                    d > bd
                } else {
                    s > bs
                }
            }
        };
        if better {
            best = Some((i, s, d));
        }
    }
    best.map(|(i, _, _)| i)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(n: u64) -> impl Iterator<Item = u128> {
        (0..n).map(|i| xxhash_rust::xxh3::xxh3_128(&i.to_le_bytes()))
    }

    #[test]
    fn shares_follow_the_weights_and_a_lost_disk_moves_only_its_keys() {
        let disks = [
            (1.0, seed("/a".as_ref()), true),
            (2.0, seed("/b".as_ref()), true),
            (1.0, seed("/c".as_ref()), true),
        ];
        let n = 40_000;
        let mut count = [0u64; 3];
        let before: Vec<usize> = keys(n).map(|h| best(h, &disks, false).unwrap()).collect();
        for &i in &before {
            count[i] += 1;
        }
        // 1 : 2 : 1, within 3 %.
        for (i, share) in [(0, 0.25), (1, 0.5), (2, 0.25)] {
            let got = count[i] as f64 / n as f64;
            assert!((got - share).abs() < 0.03, "disk {i}: {got} of the keys, expected {share}");
        }
        let mut down = disks;
        down[1].2 = false;
        for (h, &was) in keys(n).zip(&before) {
            let now = best(h, &down, false).unwrap();
            if was != 1 {
                assert_eq!(now, was, "a key not on the lost disk moved");
            } else {
                assert_ne!(now, 1);
            }
        }
        assert_eq!(best(1, &[(1.0, 1, false)], true), None);
    }

    #[test]
    fn equal_weights_take_the_shortcut_and_agree_with_the_scores() {
        let disks: Vec<(f64, u64, bool)> =
            (0..5).map(|i| (1.0, seed(format!("/d{i}").as_ref()), true)).collect();
        let mut count = [0u64; 5];
        for h in keys(20_000) {
            let e = best(h, &disks, true).unwrap();
            assert_eq!(Some(e), best(h, &disks, false));
            count[e] += 1;
        }
        assert!(count.iter().all(|&c| (3_600..=4_400).contains(&c)), "{count:?}");
    }
}
