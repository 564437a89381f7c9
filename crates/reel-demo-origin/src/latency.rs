//! Production-shaped latency: a percentile table sampled by inverse CDF, and the small
//! lock-free random source every fault and latency decision draws from.
//!
//! Principal types: [`LatencyTable`] (validated table, pure sampling) and [`SplitMix`].

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::config::ConfigError;

/// The default table, milliseconds by percentile, measured on a production API gateway:
/// p50 33 ms, p75 44, p90 72, p99 166, p99.9 2470, p99.99 6050, max 123000.
/// An implicit `(0.0, 0.0)` point starts the curve.
pub const DEFAULT_LATENCY_TABLE: &[(f64, f64)] = &[
    (50.0, 33.0),
    (75.0, 44.0),
    (90.0, 72.0),
    (99.0, 166.0),
    (99.9, 2470.0),
    (99.99, 6050.0),
    (100.0, 123_000.0),
];

/// A validated latency distribution: `(percentile in [0, 100], milliseconds)` points,
/// percentiles strictly increasing, milliseconds non-decreasing.
///
/// Sampling is inverse-CDF with linear interpolation between neighbouring points. If the
/// first point is above percentile 0, `(0, 0 ms)` is prepended; above the last point (when
/// it is below 100) the last value is returned.
#[derive(Debug, Clone, PartialEq)]
pub struct LatencyTable {
    points: Vec<(f64, f64)>,
}

impl LatencyTable {
    /// Validates `points` and builds the table; every problem is reported.
    pub fn new(points: &[(f64, f64)]) -> Result<Self, ConfigError> {
        let mut problems = Vec::new();
        if points.is_empty() {
            problems.push("latency_table: needs at least one (percentile, ms) point".to_string());
        }
        for (i, &(p, ms)) in points.iter().enumerate() {
            if !(p.is_finite() && (0.0..=100.0).contains(&p)) {
                problems.push(format!("latency_table[{i}]: percentile {p} is not within [0, 100]"));
            }
            if !(ms.is_finite() && ms >= 0.0) {
                problems.push(format!("latency_table[{i}]: {ms} ms is not a finite value >= 0"));
            }
            if i > 0 {
                let (pp, pms) = points[i - 1];
                if p <= pp {
                    problems.push(format!(
                        "latency_table[{i}]: percentile {p} is not above the previous {pp}"
                    ));
                }
                if ms < pms {
                    problems.push(format!(
                        "latency_table[{i}]: {ms} ms is below the previous {pms} ms"
                    ));
                }
            }
        }
        if !problems.is_empty() {
            return Err(ConfigError { problems });
        }
        let mut v = Vec::with_capacity(points.len() + 1);
        if points[0].0 > 0.0 {
            v.push((0.0, 0.0));
        }
        v.extend_from_slice(points);
        Ok(Self { points: v })
    }

    /// The default production table ([`DEFAULT_LATENCY_TABLE`]).
    pub fn production() -> Self {
        Self::new(DEFAULT_LATENCY_TABLE).unwrap_or(Self { points: vec![(0.0, 0.0)] })
    }

    /// Milliseconds at quantile `u` in `[0, 1]` (values outside are clamped). Pure.
    pub fn quantile_ms(&self, u: f64) -> f64 {
        let pct = if u.is_nan() { 0.0 } else { u.clamp(0.0, 1.0) * 100.0 };
        let pts = &self.points;
        // Points are few (under ten); a linear scan beats a binary search here.
        let mut prev = pts[0];
        if pct <= prev.0 {
            return prev.1;
        }
        for &cur in &pts[1..] {
            if pct <= cur.0 {
                let frac = (pct - prev.0) / (cur.0 - prev.0);
                return prev.1 + frac * (cur.1 - prev.1);
            }
            prev = cur;
        }
        prev.1
    }

    /// The delay for a uniform draw `u` in `[0, 1)`, scaled by `scale` (0 disables). Pure.
    pub fn sample(&self, u: f64, scale: f64) -> Duration {
        if scale <= 0.0 || !scale.is_finite() {
            return Duration::ZERO;
        }
        let ms = self.quantile_ms(u) * scale;
        Duration::from_secs_f64((ms / 1000.0).clamp(0.0, 86_400.0))
    }
}

/// SplitMix64 (Steele, Lea, Flood 2014) over an atomic counter: every draw is one
/// `fetch_add`, so connections on any runtime thread share one seeded sequence without a lock.
#[derive(Debug)]
pub struct SplitMix {
    state: AtomicU64,
}

const GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;

/// The SplitMix64 finaliser: a bijective 64-bit mix, also used to derive content bytes.
pub fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl SplitMix {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> Self {
        Self { state: AtomicU64::new(seed) }
    }

    /// The next 64 random bits.
    pub fn next_u64(&self) -> u64 {
        mix64(self.state.fetch_add(GAMMA, Ordering::Relaxed).wrapping_add(GAMMA))
    }

    /// A uniform value in `[0, 1)` with 53 bits of precision.
    pub fn next_f64(&self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// True with probability `p` (`p <= 0` never, `p >= 1` always).
    pub fn chance(&self, p: f64) -> bool {
        if p <= 0.0 {
            return false;
        }
        p >= 1.0 || self.next_f64() < p
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sorted_samples(table: &LatencyTable, n: usize, scale: f64) -> Vec<f64> {
        let rng = SplitMix::new(42);
        let mut v: Vec<f64> =
            (0..n).map(|_| table.sample(rng.next_f64(), scale).as_secs_f64() * 1000.0).collect();
        v.sort_by(f64::total_cmp);
        v
    }

    fn q(v: &[f64], p: f64) -> f64 {
        v[((v.len() as f64 * p) as usize).min(v.len() - 1)]
    }

    #[test]
    fn sampled_distribution_matches_the_production_table() {
        let t = LatencyTable::production();
        let v = sorted_samples(&t, 100_000, 1.0);
        for &(p, ms, tol) in
            &[(0.50, 33.0, 0.03), (0.75, 44.0, 0.03), (0.90, 72.0, 0.05), (0.99, 166.0, 0.10)]
        {
            let got = q(&v, p);
            assert!((got - ms).abs() <= ms * tol, "p{p}: got {got} ms, want {ms} ms");
        }
        // Tail: p99.9 sits between the p99 and p99.99 points with this sample size.
        let tail = q(&v, 0.999);
        assert!((1000.0..=4000.0).contains(&tail), "p99.9 {tail}");
        assert!(v[v.len() - 1] <= 123_000.0);
        assert!(v[0] >= 0.0);
    }

    #[test]
    fn scale_multiplies_and_zero_disables() {
        let t = LatencyTable::production();
        let half = sorted_samples(&t, 100_000, 0.5);
        let med = q(&half, 0.5);
        assert!((med - 16.5).abs() < 1.0, "median at scale 0.5: {med}");
        assert_eq!(t.sample(0.9999, 0.0), Duration::ZERO);
    }

    #[test]
    fn quantile_interpolates_linearly_between_points() {
        let t = LatencyTable::new(&[(50.0, 10.0), (100.0, 20.0)]).unwrap();
        assert_eq!(t.quantile_ms(0.0), 0.0);
        assert!((t.quantile_ms(0.25) - 5.0).abs() < 1e-9);
        assert!((t.quantile_ms(0.5) - 10.0).abs() < 1e-9);
        assert!((t.quantile_ms(0.75) - 15.0).abs() < 1e-9);
        assert!((t.quantile_ms(1.0) - 20.0).abs() < 1e-9);
        assert!((t.quantile_ms(7.0) - 20.0).abs() < 1e-9);
        let floor = LatencyTable::new(&[(0.0, 5.0), (100.0, 5.0)]).unwrap();
        assert_eq!(floor.quantile_ms(0.3), 5.0);
    }

    #[test]
    fn invalid_tables_report_every_problem() {
        let e = LatencyTable::new(&[(50.0, 10.0), (40.0, 5.0), (120.0, f64::NAN)]).unwrap_err();
        assert_eq!(e.problems.len(), 4, "{e}");
        assert!(LatencyTable::new(&[]).is_err());
    }

    #[test]
    fn chance_extremes_and_rough_rate() {
        let r = SplitMix::new(1);
        assert!((0..1000).all(|_| !r.chance(0.0)));
        assert!((0..1000).all(|_| r.chance(1.0)));
        let hits = (0..100_000).filter(|_| r.chance(0.25)).count();
        assert!((23_000..27_000).contains(&hits), "{hits}");
    }
}
