//! Zipf-distributed title popularity for the VOD scenario: rank k (1-based) is
//! picked with probability proportional to 1 / k^s, by binary search over a
//! precomputed cumulative distribution.

use rand::Rng;

/// A sampler over ranks `0..n` (0 = most popular).
#[derive(Debug, Clone)]
pub struct Zipf {
    cdf: Vec<f64>,
}

impl Zipf {
    /// `n` items with exponent `s` (0 = uniform, ~1 = typical video catalog). `n` of 0 is treated as 1.
    pub fn new(n: usize, s: f64) -> Self {
        let n = n.max(1);
        let s = if s.is_finite() { s.max(0.0) } else { 1.0 };
        let mut cdf = Vec::with_capacity(n);
        let mut acc = 0.0;
        for k in 1..=n {
            acc += 1.0 / (k as f64).powf(s);
            cdf.push(acc);
        }
        for c in &mut cdf {
            *c /= acc;
        }
        Self { cdf }
    }

    /// Number of items.
    pub fn len(&self) -> usize {
        self.cdf.len()
    }

    /// Always false (at least one item).
    pub fn is_empty(&self) -> bool {
        self.cdf.is_empty()
    }

    /// Draws a rank in `0..len()`.
    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> usize {
        let u: f64 = rng.random();
        self.cdf.partition_point(|&c| c < u).min(self.cdf.len() - 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn frequencies_follow_zipf() {
        let z = Zipf::new(10, 1.0);
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let mut counts = [0u32; 10];
        for _ in 0..100_000 {
            counts[z.sample(&mut rng)] += 1;
        }
        // H(10) = 2.929: rank 1 gets 34.1 %, rank 2 17.1 %, rank 10 3.4 %.
        let f = |i: usize| counts[i] as f64 / 100_000.0;
        assert!((f(0) - 0.341).abs() < 0.01, "{}", f(0));
        assert!((f(1) - 0.171).abs() < 0.01, "{}", f(1));
        assert!((f(9) - 0.034).abs() < 0.005, "{}", f(9));
    }

    #[test]
    fn uniform_and_degenerate() {
        let z = Zipf::new(4, 0.0);
        let mut rng = rand::rngs::StdRng::seed_from_u64(1);
        let mut counts = [0u32; 4];
        for _ in 0..40_000 {
            counts[z.sample(&mut rng)] += 1;
        }
        assert!(counts.iter().all(|&c| (9_000..11_000).contains(&c)));
        let one = Zipf::new(0, 1.0);
        assert_eq!(one.len(), 1);
        assert_eq!(one.sample(&mut rng), 0);
    }
}
