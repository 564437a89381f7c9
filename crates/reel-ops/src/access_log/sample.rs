//! Sampling per status class (`[access_log.sample]`): a fraction `r` of a class keeps the
//! first of every `round(1/r)` requests of that class, counted per worker. A counter rather
//! than a random draw: the same requests give the same lines, and a test can count them.

use std::cell::Cell;

/// 1 in how many requests of each class is logged (0 = none), for the classes 1xx to
/// 5xx; statuses outside them are always logged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sample {
    every: [u32; 5],
    /// Every class at 1: the one branch a log without sampling pays.
    all: bool,
}

impl Default for Sample {
    fn default() -> Self {
        Sample { every: [1; 5], all: true }
    }
}

impl Sample {
    /// From the fractions of the classes 1xx to 5xx (each 0 to 1).
    pub fn from_fractions(fractions: [f64; 5]) -> Sample {
        let every = fractions.map(|r| {
            if r.is_nan() || r <= 0.0 {
                0
            } else {
                // A fraction under 1/u32::MAX rounds to "nearly never", not to "never".
                (1.0 / r.min(1.0)).round().min(f64::from(u32::MAX)) as u32
            }
        });
        Sample { every, all: every == [1; 5] }
    }

    /// True when every request is logged (the default): no counting at all.
    pub fn keeps_all(&self) -> bool {
        self.all
    }

    fn every(&self, status: u16) -> Option<u32> {
        let class = usize::from(status / 100).checked_sub(1)?;
        self.every.get(class).copied()
    }
}

/// A worker's counts of the requests of each class seen so far.
#[derive(Debug, Default)]
pub(crate) struct Counts {
    seen: [Cell<u32>; 5],
}

impl Counts {
    /// Whether the line of a request answered `status` is kept.
    pub(crate) fn keep(&self, sample: &Sample, status: u16) -> bool {
        let Some(n) = sample.every(status) else { return true };
        let class = usize::from(status / 100 - 1);
        match n {
            0 => false,
            1 => true,
            n => {
                let Some(c) = self.seen.get(class) else { return true };
                let i = c.get();
                c.set(if i + 1 >= n { 0 } else { i + 1 });
                i == 0
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_in_n_per_class() {
        let s = Sample::from_fractions([1.0, 0.01, 0.5, 1.0, 0.0]);
        let c = Counts::default();
        let kept = |status| (0..1000).filter(|_| c.keep(&s, status)).count();
        assert_eq!(kept(200), 10);
        assert_eq!(kept(304), 500);
        assert_eq!(kept(404), 1000);
        assert_eq!(kept(503), 0);
        assert_eq!(kept(101), 1000);
        assert_eq!(kept(0), 1000, "a status outside the classes is kept");
        assert_eq!(kept(600), 1000);
        let c = Counts::default();
        assert!(c.keep(&s, 200), "the first of a class is kept");
        assert!(!c.keep(&s, 200));
        assert!(Sample::default().keeps_all() && !s.keeps_all());
        assert_eq!(Sample::from_fractions([0.3; 5]).every, [3; 5]);
    }
}
