//! `seek`: viewers playing one large file (a progressive MP4, a DASH on-demand
//! representation) by byte ranges, each from a random start point, as a player does after a
//! seek: the chunk up to the next chunk boundary at once, `startup` more back to back to
//! fill its buffer, then one chunk per chunk's play time at `rate` bytes/s. After `run`
//! (however the run went) it seeks again to another random point.
//!
//! It reports the time to first byte of the first chunk after each seek (what a viewer
//! waits for after seeking), that of the chunks after it, how many of those the cache did
//! not answer from its store (`Cache-Status` without `hit`, or `X-Cache` other than `HIT`:
//! a viewer that waited on the origin after its first chunk), the bytes received, and the
//! distinct bytes of the file the viewers asked for (the union of their ranges), which an
//! origin byte count is compared with.

use std::fmt;
use std::time::Duration;

use hdrhistogram::Histogram;
use rand::{Rng, SeedableRng};
use serde::Serialize;
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::client::{Body, build_get};
use crate::llhls::Tail;
use crate::scenario::{Client, Common, ScenarioError, account, check_count};
use crate::stats::{Report, Stats, hist, put};
use crate::target::Target;

/// `seek`: viewers playing a large file from random start points.
#[derive(Debug, Clone)]
pub struct SeekConfig {
    /// The file, e.g. `http://127.0.0.1:8080/obj/1073741824.mp4`.
    pub target: Target,
    /// Its length in bytes.
    pub size: u64,
    /// Number of viewers, one keep-alive connection each.
    pub viewers: usize,
    /// Bytes per request; chunk boundaries are multiples of it.
    pub chunk: u64,
    /// Play rate in bytes per second.
    pub rate: u64,
    /// Chunks fetched back to back after the first of a run.
    pub startup: u32,
    /// How long a viewer plays before it seeks again.
    pub run: Duration,
    /// RNG seed (viewer i uses seed + i).
    pub seed: u64,
    /// Duration, timeout, headers.
    pub common: Common,
}

/// What `seek` measures besides the common report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SeekFigures {
    /// Seeks (runs started).
    pub seeks: u64,
    /// Time to first byte of the first chunk after a seek, µs.
    pub seek_ttfb_us: Tail,
    /// Chunks after the first of a run.
    pub chunks_after_seek: u64,
    /// Of those, answers the cache said were not from its store.
    pub chunks_after_seek_not_stored: u64,
    /// Chunks after the startup burst, each asked for when playback reached it.
    pub paced_chunks: u64,
    /// Of those, answers the cache said were not from its store: playback waited on an
    /// origin fetch that read-ahead should have made earlier.
    pub paced_chunks_not_stored: u64,
    /// Time to first byte of the chunks after the first, µs.
    pub chunk_ttfb_us: Tail,
    /// Bytes of the file asked for, counted once however many viewers asked.
    pub distinct_bytes: u64,
    /// Bytes of the file asked for, all requests together.
    pub requested_bytes: u64,
}

/// The `seek` report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SeekReport {
    /// The common figures.
    #[serde(flatten)]
    pub base: Report,
    /// The seek figures.
    pub seek: SeekFigures,
}

/// One viewer's results.
struct Viewer {
    stats: Stats,
    seeks: u64,
    seek_ttfb: Histogram<u64>,
    chunk_ttfb: Histogram<u64>,
    after: u64,
    after_not_stored: u64,
    paced: u64,
    paced_not_stored: u64,
    ranges: Vec<(u64, u64)>,
}

fn us(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX).max(1)
}

/// Bytes in the union of inclusive ranges.
fn union_len(mut ranges: Vec<(u64, u64)>) -> u64 {
    ranges.sort_unstable();
    let mut total = 0;
    let mut cur: Option<(u64, u64)> = None;
    for (a, b) in ranges {
        cur = match cur {
            Some((ca, cb)) if a <= cb.saturating_add(1) => Some((ca, cb.max(b))),
            Some((ca, cb)) => {
                total += cb - ca + 1;
                Some((a, b))
            }
            None => Some((a, b)),
        };
    }
    total + cur.map_or(0, |(a, b)| b - a + 1)
}

/// Runs the seek scenario.
pub async fn run_seek(cfg: &SeekConfig) -> Result<SeekReport, ScenarioError> {
    cfg.common.check_h1()?;
    check_count(cfg.viewers, "viewers must be 1..=1000000")?;
    if cfg.chunk == 0 || cfg.size == 0 || cfg.rate == 0 {
        return Err(ScenarioError::Invalid("size, chunk and rate must be > 0"));
    }
    if cfg.run.is_zero() {
        return Err(ScenarioError::Invalid("run must be > 0"));
    }
    let start = Instant::now();
    let deadline = start + cfg.common.duration;
    let mut set = JoinSet::new();
    for v in 0..cfg.viewers {
        let cfg = cfg.clone();
        set.spawn(async move { viewer(&cfg, v, deadline).await });
    }
    let hard = deadline + cfg.common.timeout + Duration::from_secs(1);
    let mut stats = Stats::new();
    let (mut seek_ttfb, mut chunk_ttfb) = (hist(), hist());
    let (mut seeks, mut after, mut after_not_stored) = (0, 0, 0);
    let (mut paced, mut paced_not_stored) = (0, 0);
    let mut ranges = Vec::new();
    loop {
        match tokio::time::timeout_at(hard, set.join_next()).await {
            Ok(Some(Ok(v))) => {
                stats.merge(&v.stats);
                let _ = seek_ttfb.add(&v.seek_ttfb);
                let _ = chunk_ttfb.add(&v.chunk_ttfb);
                seeks += v.seeks;
                after += v.after;
                after_not_stored += v.after_not_stored;
                paced += v.paced;
                paced_not_stored += v.paced_not_stored;
                ranges.extend(v.ranges);
            }
            Ok(Some(Err(_))) => {}
            Ok(None) => break,
            Err(_) => {
                set.abort_all();
                break;
            }
        }
    }
    let requested_bytes = ranges.iter().map(|(a, b)| b - a + 1).sum();
    let base = stats.report("seek", &cfg.target.url(), cfg.viewers, start.elapsed());
    Ok(SeekReport {
        base,
        seek: SeekFigures {
            seeks,
            seek_ttfb_us: Tail::of(&seek_ttfb),
            chunks_after_seek: after,
            chunks_after_seek_not_stored: after_not_stored,
            paced_chunks: paced,
            paced_chunks_not_stored: paced_not_stored,
            chunk_ttfb_us: Tail::of(&chunk_ttfb),
            distinct_bytes: union_len(ranges),
            requested_bytes,
        },
    })
}

async fn viewer(cfg: &SeekConfig, v: usize, deadline: Instant) -> Viewer {
    let mut rng = rand::rngs::StdRng::seed_from_u64(cfg.seed.wrapping_add(v as u64));
    let mut out = Viewer {
        stats: Stats::new(),
        seeks: 0,
        seek_ttfb: hist(),
        chunk_ttfb: hist(),
        after: 0,
        after_not_stored: 0,
        paced: 0,
        paced_not_stored: 0,
        ranges: Vec::new(),
    };
    let mut client = Client::new(cfg.target.endpoint(), cfg.common.timeout);
    if let Err(kind) = client.connect().await {
        out.stats.error(kind);
    }
    let per_chunk = Duration::from_secs_f64(cfg.chunk as f64 / cfg.rate as f64);
    while Instant::now() < deadline {
        let run_start = Instant::now();
        let run_end = (run_start + cfg.run).min(deadline);
        let mut pos = rng.random_range(0..cfg.size);
        out.seeks += 1;
        let mut i = 0u32;
        while pos < cfg.size {
            // Chunk 0 and `startup` more at once, then one per chunk's play time.
            let due = run_start + per_chunk * i.saturating_sub(cfg.startup);
            if due >= run_end {
                break;
            }
            tokio::time::sleep_until(due).await;
            let end = ((pos / cfg.chunk + 1) * cfg.chunk).min(cfg.size) - 1;
            let mut headers = cfg.common.headers.clone();
            headers.push(format!("Range: bytes={pos}-{end}"));
            let req = build_get(&cfg.target.host_header, &cfg.target.path, &headers);
            let t = Instant::now();
            let res = client.get(&req, Body::Discard).await;
            account(&mut out.stats, t, &res).await;
            let Ok(r) = res else { break };
            if r.status != 206 && r.status != 200 {
                break;
            }
            out.ranges.push((pos, end));
            let ttfb = us(r.first_byte.saturating_duration_since(t.into_std()));
            if i == 0 {
                put(&mut out.seek_ttfb, ttfb);
            } else {
                put(&mut out.chunk_ttfb, ttfb);
                out.after += 1;
                let stored = r.from_cache == Some(true);
                out.after_not_stored += u64::from(!stored);
                if i > cfg.startup {
                    out.paced += 1;
                    out.paced_not_stored += u64::from(!stored);
                }
            }
            pos = end + 1;
            i += 1;
        }
        // The viewer watches what it fetched until the run is over, and only then seeks:
        // a run cut short (the end of the file, a failure, the deadline) never turns into
        // a burst of seeks.
        tokio::time::sleep_until(run_end).await;
    }
    out
}

impl fmt::Display for SeekReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.base)?;
        let s = &self.seek;
        let ms = |us: u64| format!("{:.3} ms", us as f64 / 1000.0);
        let tail = |t: &Tail| format!("p50 {}  p99 {}  max {}", ms(t.p50), ms(t.p99), ms(t.max));
        writeln!(f, "seeks         {}; first chunk ttfb {}", s.seeks, tail(&s.seek_ttfb_us))?;
        writeln!(
            f,
            "after a seek  {} chunks, {} not from the store; ttfb {}",
            s.chunks_after_seek,
            s.chunks_after_seek_not_stored,
            tail(&s.chunk_ttfb_us)
        )?;
        writeln!(
            f,
            "paced         {} chunks after the startup burst, {} not from the store",
            s.paced_chunks, s.paced_chunks_not_stored
        )?;
        writeln!(f, "file bytes    {} asked for, {} distinct", s.requested_bytes, s.distinct_bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn union_counts_overlaps_once() {
        assert_eq!(union_len(vec![]), 0);
        assert_eq!(union_len(vec![(0, 9), (5, 14), (20, 20), (15, 19)]), 21);
        assert_eq!(union_len(vec![(10, 19), (0, 4)]), 15);
    }
}
