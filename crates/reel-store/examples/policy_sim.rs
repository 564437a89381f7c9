//! Hit-ratio simulation of the store's eviction policy under a Zipf workload:
//! whole-volume FIFO, whole-volume FIFO with second chance (what the store does:
//! objects read since written are re-appended, up to half a volume per reclaim), and
//! object-level LRU as the reference. Unit-size objects; every miss is admitted.
//!
//! Usage: `policy_sim [OBJECTS] [REQUESTS] [CACHE_PERCENT] [VOLUMES]`
//! (defaults 100000 2000000 10 16).

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};

use rand::{Rng, SeedableRng};

fn arg(i: usize, default: u64) -> u64 {
    std::env::args().nth(i).and_then(|a| a.parse().ok()).unwrap_or(default)
}

/// Zipf sampler over `0..n` by inverse CDF.
struct Zipf(Vec<f64>);

impl Zipf {
    fn new(n: usize, s: f64) -> Zipf {
        let mut c = Vec::with_capacity(n);
        let mut acc = 0.0;
        for k in 1..=n {
            acc += 1.0 / (k as f64).powf(s);
            c.push(acc);
        }
        for v in &mut c {
            *v /= acc;
        }
        Zipf(c)
    }
    fn sample(&self, r: &mut impl Rng) -> u32 {
        let u: f64 = r.random();
        self.0.partition_point(|&c| c < u) as u32
    }
}

/// Volume log: `second_chance` re-appends objects read since they were written.
struct VolumeLog {
    per_vol: usize,
    vols: usize,
    sealed: VecDeque<Vec<u32>>,
    active: Vec<u32>,
    loc: HashMap<u32, bool>, // present -> accessed
    second_chance: bool,
}

impl VolumeLog {
    fn new(capacity: usize, vols: usize, second_chance: bool) -> Self {
        VolumeLog {
            per_vol: capacity / vols,
            vols,
            sealed: VecDeque::new(),
            active: Vec::new(),
            loc: HashMap::new(),
            second_chance,
        }
    }

    fn get(&mut self, k: u32) -> bool {
        match self.loc.get_mut(&k) {
            Some(a) => {
                *a = true;
                true
            }
            None => {
                self.put(k);
                false
            }
        }
    }

    fn put(&mut self, k: u32) {
        if self.active.len() == self.per_vol {
            self.sealed.push_back(std::mem::take(&mut self.active));
            if self.sealed.len() == self.vols {
                self.reclaim();
            }
        }
        self.active.push(k);
        self.loc.insert(k, false);
    }

    fn reclaim(&mut self) {
        let Some(victim) = self.sealed.pop_front() else { return };
        let mut budget = self.per_vol / 2;
        for k in victim {
            let accessed = self.loc.get(&k).copied().unwrap_or(false);
            if self.second_chance && accessed && budget > 0 && self.active.len() < self.per_vol {
                budget -= 1;
                self.active.push(k);
                self.loc.insert(k, false);
            } else {
                self.loc.remove(&k);
            }
        }
    }
}

struct Lru {
    cap: usize,
    tick: u64,
    at: HashMap<u32, u64>,
    order: BTreeMap<u64, u32>,
}

impl Lru {
    fn get(&mut self, k: u32) -> bool {
        self.tick += 1;
        let hit = if let Some(t) = self.at.insert(k, self.tick) {
            self.order.remove(&t);
            true
        } else {
            false
        };
        self.order.insert(self.tick, k);
        if self.at.len() > self.cap
            && let Some((_, old)) = self.order.pop_first()
        {
            self.at.remove(&old);
        }
        hit
    }
}

fn main() {
    let n = arg(1, 100_000) as usize;
    let reqs = arg(2, 2_000_000);
    let cap = n * arg(3, 10) as usize / 100;
    let vols = arg(4, 16) as usize;
    println!("objects {n}, requests {reqs}, cache {cap} objects in {vols} volumes");
    println!("| Zipf s | FIFO (volumes) | FIFO + second chance (store) | LRU (objects) |");
    println!("|---|---|---|---|");
    for s in [0.6, 0.8, 1.0, 1.2] {
        let z = Zipf::new(n, s);
        let mut rng = rand::rngs::StdRng::seed_from_u64(42);
        let mut fifo = VolumeLog::new(cap, vols, false);
        let mut sc = VolumeLog::new(cap, vols, true);
        let mut lru = Lru { cap, tick: 0, at: HashMap::new(), order: BTreeMap::new() };
        let (mut hf, mut hs, mut hl) = (0u64, 0u64, 0u64);
        let mut seen = HashSet::new();
        for i in 0..reqs {
            // Shuffle ranks so popularity is not correlated with object id.
            let k = z.sample(&mut rng).wrapping_mul(2_654_435_761);
            let warm = i >= reqs / 10;
            hf += u64::from(fifo.get(k) && warm);
            hs += u64::from(sc.get(k) && warm);
            hl += u64::from(lru.get(k) && warm);
            seen.insert(k);
        }
        let m = (reqs - reqs / 10) as f64;
        println!(
            "| {s} | {:.1}% | {:.1}% | {:.1}% |",
            100.0 * hf as f64 / m,
            100.0 * hs as f64 / m,
            100.0 * hl as f64 / m
        );
    }
}
