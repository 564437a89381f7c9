//! `llhls`: viewers that follow a Low-Latency HLS stream as a player does
//! (draft-pantos-hls-rfc8216bis §6.3): each holds a blocking playlist reload for the next
//! part (`_HLS_msn`/`_HLS_part`, plus `_HLS_skip=YES` when the server offers delta updates)
//! and, at the same time, a request for the part the playlist hints (EXT-X-PRELOAD-HINT),
//! each on its own keep-alive connection. When a playlist lists parts the viewer has not got
//! (it fell behind the live edge), it fetches them before going on.
//!
//! It measures the latency the path to the viewer adds: arrival minus the origin's
//! `x-origin-release-ms`, for whole playlists and for the first body bytes of parts, over
//! the responses the viewer was already waiting for when they were released (a viewer
//! joining mid-part asks after the release; that wait is its own, not the path's). After
//! the run it reads the origin's `requests_by_target` (`/__origin/stats`) for the parts and
//! playlist versions the viewers asked for: an edge that coalesces sends one request each.

use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use hdrhistogram::Histogram;
use serde::Serialize;
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::client::{Body, Coding, Conn, Response, build_get};
use crate::playlist::{self, MediaPlaylist, Part};
use crate::scenario::{Client, Common, RETRY_PAUSE, ScenarioError, account, check_count};
use crate::stats::{ErrorKind, Report, Stats, hist, put};
use crate::target::Target;

/// `llhls`: viewers following a live LL-HLS playlist.
#[derive(Debug, Clone)]
pub struct LlhlsConfig {
    /// The media playlist, e.g. `http://127.0.0.1:8080/live/index.m3u8`.
    pub playlist: Target,
    /// Number of viewers (two keep-alive connections each).
    pub viewers: usize,
    /// The origin whose `/__origin/stats` counts requests by target (the demo origin);
    /// `None` skips the origin figures.
    pub origin: Option<Target>,
    /// Duration, timeout, headers.
    pub common: Common,
}

/// Latency percentiles in µs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Tail {
    /// Samples.
    pub count: u64,
    /// Median.
    pub p50: u64,
    /// 99th percentile.
    pub p99: u64,
    /// 99.9th percentile.
    pub p999: u64,
    /// Largest.
    pub max: u64,
}

impl Tail {
    pub(crate) fn of(h: &Histogram<u64>) -> Self {
        if h.is_empty() {
            return Self::default();
        }
        Self {
            count: h.len(),
            p50: h.value_at_quantile(0.5),
            p99: h.value_at_quantile(0.99),
            p999: h.value_at_quantile(0.999),
            max: h.max(),
        }
    }
}

/// A [`Tail`] for the parts of one index within their segments.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct IndexTail {
    /// The part's index in its segment, from 0.
    pub index: u64,
    /// Its latencies.
    pub tail: Tail,
}

/// Origin requests per distinct target of one kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct PerTarget {
    /// Distinct targets the viewers asked for.
    pub distinct: u64,
    /// Origin requests for them, summed.
    pub requests: u64,
    /// Fewest origin requests for one target.
    pub min: u64,
    /// Most origin requests for one target.
    pub max: u64,
    /// `requests / distinct`.
    pub mean: f64,
}

impl PerTarget {
    fn of<'a>(targets: impl Iterator<Item = &'a String>, counts: &BTreeMap<String, u64>) -> Self {
        let mut p = Self { min: u64::MAX, ..Self::default() };
        for t in targets {
            let n = counts.get(t).copied().unwrap_or(0);
            p.distinct += 1;
            p.requests += n;
            p.min = p.min.min(n);
            p.max = p.max.max(n);
        }
        if p.distinct == 0 {
            p.min = 0;
        } else {
            p.mean = p.requests as f64 / p.distinct as f64;
        }
        p
    }
}

/// What the origin saw, from its `requests_by_target`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct OriginLoad {
    /// Per part the viewers fetched.
    pub per_part: PerTarget,
    /// Per playlist version (blocking reload target) the viewers asked for.
    pub per_playlist_version: PerTarget,
}

/// The LL-HLS figures of a run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LlhlsFigures {
    /// Parts fetched completely (hinted and caught up).
    pub parts: u64,
    /// Blocking playlist reloads answered with a playlist.
    pub playlists_blocking: u64,
    /// Of those, delta updates (`EXT-X-SKIP`).
    pub playlists_delta: u64,
    /// Of those, compressed ones (`Content-Encoding`), decoded before use.
    pub playlists_compressed: u64,
    /// Playlist arrival minus its release at the origin, µs.
    pub playlist_latency_us: Tail,
    /// First body byte of a hinted part minus its release at the origin, µs.
    pub part_first_byte_latency_us: Tail,
    /// Last body byte of a hinted part minus its release at the origin (the part's start:
    /// the origin streams a part as it is produced), µs, by the part's index in its segment.
    /// Parts of equal duration should arrive alike whatever their index.
    pub part_last_byte_by_index_us: Vec<IndexTail>,
    /// Responses without a usable `x-origin-release-ms` (not counted in the tails).
    pub without_release: u64,
    /// Responses asked for after their release, e.g. on joining (not counted in the tails).
    pub asked_after_release: u64,
    /// Viewers that at least once found parts listed they had not fetched.
    pub viewers_fell_behind: u64,
    /// Parts fetched to catch up.
    pub parts_caught_up: u64,
    /// Origin requests per target; `None` without an origin or when its stats failed.
    pub origin: Option<OriginLoad>,
    /// Why the origin figures are missing, when they are.
    pub origin_error: Option<String>,
}

/// The whole report: the usual figures and the LL-HLS ones.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LlhlsReport {
    /// Requests, bytes, latency and errors of all requests.
    #[serde(flatten)]
    pub base: Report,
    /// The LL-HLS figures.
    pub llhls: LlhlsFigures,
}

/// Unix time of monotonic instants, from one reading of both clocks.
#[derive(Debug, Clone, Copy)]
struct UnixClock {
    at: std::time::Instant,
    unix_us: u64,
}

impl UnixClock {
    fn now() -> Self {
        let unix_us =
            SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_micros() as u64);
        Self { at: std::time::Instant::now(), unix_us }
    }

    /// Unix µs of `t`.
    fn unix_us(&self, t: std::time::Instant) -> u64 {
        if t >= self.at {
            self.unix_us + t.duration_since(self.at).as_micros() as u64
        } else {
            self.unix_us.saturating_sub(self.at.duration_since(t).as_micros() as u64)
        }
    }

    /// Where a response sent at `sent`, arrived at `arrival_us` (Unix µs) and released at
    /// `release_ms` goes.
    fn sample(&self, sent: Instant, arrival_us: u64, release_ms: Option<u64>) -> Sample {
        let Some(release_us) = release_ms.map(|ms| ms.saturating_mul(1000)) else {
            return Sample::NoRelease;
        };
        // The origin's ms are truncated: a request within the release's ms was waiting.
        if self.unix_us(sent.into_std()) > release_us + 1000 {
            return Sample::Late;
        }
        Sample::Latency(arrival_us.saturating_sub(release_us).max(1))
    }
}

/// Where one response's latency goes.
enum Sample {
    /// µs from release to arrival (at least 1: an arrival that reads before the release,
    /// whose ms the origin truncated, was immediate).
    Latency(u64),
    /// Asked for after its release.
    Late,
    /// No release time.
    NoRelease,
}

/// One viewer's results.
struct Viewer {
    stats: Stats,
    playlist_latency: Histogram<u64>,
    part_latency: Histogram<u64>,
    part_last_by_index: BTreeMap<u64, Histogram<u64>>,
    parts: u64,
    blocking: u64,
    delta: u64,
    compressed: u64,
    without_release: u64,
    late: u64,
    fell_behind: bool,
    caught_up: u64,
    part_paths: HashSet<String>,
    playlist_targets: HashSet<String>,
}

impl Viewer {
    fn new() -> Self {
        Self {
            stats: Stats::new(),
            playlist_latency: hist(),
            part_latency: hist(),
            part_last_by_index: BTreeMap::new(),
            parts: 0,
            blocking: 0,
            delta: 0,
            compressed: 0,
            without_release: 0,
            late: 0,
            fell_behind: false,
            caught_up: 0,
            part_paths: HashSet::new(),
            playlist_targets: HashSet::new(),
        }
    }

    /// Samples `r`, which arrived at `arrival` by this task's clock or at `kernel_us` (Unix
    /// µs) by the kernel's, which wins: the task may read it well after it arrived.
    fn sample(
        &mut self,
        clock: &UnixClock,
        sent: Instant,
        (arrival, kernel_us): (std::time::Instant, Option<u64>),
        r: &Response,
        part: bool,
    ) {
        let arrival_us = kernel_us.unwrap_or_else(|| clock.unix_us(arrival));
        match clock.sample(sent, arrival_us, r.release_ms) {
            Sample::Latency(us) if part => put(&mut self.part_latency, us),
            Sample::Latency(us) => put(&mut self.playlist_latency, us),
            Sample::Late => self.late += 1,
            Sample::NoRelease => self.without_release += 1,
        }
    }
}

fn parse(text: &[u8], target: &Target, path: &str) -> Option<MediaPlaylist> {
    let s = std::str::from_utf8(text).ok()?;
    playlist::parse(s, path, &target.host_header).ok()
}

/// `text` decoded as its `Content-Encoding` says (a viewer that sent `Accept-Encoding` gets
/// compressed playlists); false when it does not decode. A compressed body is decoded on the
/// blocking pool: each player decodes on its own device, and 1000 decodes in a row on the
/// one thread that reads every viewer's sockets would delay the reads of the parts released
/// at the same moment (and with them the latencies measured).
async fn decode(text: &mut Vec<u8>, coding: Coding) -> bool {
    if coding == Coding::Identity {
        return true;
    }
    let body = std::mem::take(text);
    let decoded =
        tokio::task::spawn_blocking(move || coding.decode(&body).map(std::borrow::Cow::into_owned));
    match decoded.await {
        Ok(Some(d)) => {
            *text = d;
            true
        }
        _ => false,
    }
}

fn key(p: &Part) -> (u64, u64) {
    (p.msn, p.index)
}

/// Follows the stream until `deadline`.
async fn view(
    target: Target,
    headers: Vec<String>,
    timeout: Duration,
    deadline: Instant,
) -> Viewer {
    let mut v = Viewer::new();
    let clock = UnixClock::now();
    let mut lists = Client::new(target.endpoint(), timeout);
    let mut media = Client::new(target.endpoint(), timeout);
    let base = target.path.split('?').next().unwrap_or("/").to_string();
    // The playlist URL as the viewer was given it (a signed token in its query, say): a
    // player keeps its query and adds the delivery directives to it.
    let (first, directives) = match target.path.split_once('?') {
        Some((_, q)) if !q.is_empty() => (target.path.clone(), format!("{base}?{q}&")),
        _ => (base.clone(), format!("{base}?")),
    };
    let mut text = Vec::new();
    let mut current: Option<MediaPlaylist> = None;
    let mut have: Option<(u64, u64)> = None;
    while Instant::now() < deadline {
        // Join (or rejoin after a failure) with a plain playlist request.
        let pl = match current.take() {
            Some(pl) => pl,
            None => {
                text.clear();
                let t = Instant::now();
                let res = lists
                    .get(
                        &build_get(&target.host_header, &first, &headers),
                        Body::Capture(&mut text),
                    )
                    .await;
                account(&mut v.stats, t, &res).await;
                let coding = res.as_ref().map_or(Coding::Identity, |r| r.coding);
                let ok = res.as_ref().is_ok_and(|r| r.status == 200);
                let decoded = ok && decode(&mut text, coding).await;
                match decoded.then(|| parse(&text, &target, &base)).flatten() {
                    Some(pl) => pl,
                    None => {
                        if ok {
                            v.stats.error(ErrorKind::Protocol);
                        }
                        tokio::time::sleep(RETRY_PAUSE).await;
                        continue;
                    }
                }
            }
        };
        let Some(hint) = pl.preload_hint.clone() else {
            // Not a low-latency playlist: nothing to follow.
            v.stats.error(ErrorKind::Protocol);
            tokio::time::sleep(RETRY_PAUSE).await;
            continue;
        };
        // Parts listed that this viewer has not fetched: it fell behind; catch up in order.
        if let Some(h) = have {
            for p in pl.parts.iter().filter(|p| key(p) > h) {
                if Instant::now() >= deadline {
                    break;
                }
                v.fell_behind = true;
                let t = Instant::now();
                let res = media
                    .get(&build_get(&target.host_header, &p.path, &headers), Body::Discard)
                    .await;
                account(&mut v.stats, t, &res).await;
                if res.as_ref().is_ok_and(|r| (200..300).contains(&r.status)) {
                    v.parts += 1;
                    v.caught_up += 1;
                    have = Some(key(p));
                }
            }
        }
        let skip = if pl.server_control.can_skip_until.is_some() { "&_HLS_skip=YES" } else { "" };
        let next = format!("{directives}_HLS_msn={}&_HLS_part={}{skip}", hint.msn, hint.index);
        let part_req = build_get(&target.host_header, &hint.path, &headers);
        let list_req = build_get(&target.host_header, &next, &headers);
        text.clear();
        let t = Instant::now();
        let (part_res, list_res) = tokio::join!(
            media.get(&part_req, Body::Discard),
            lists.get(&list_req, Body::Capture(&mut text))
        );
        account(&mut v.stats, t, &part_res).await;
        account(&mut v.stats, t, &list_res).await;
        v.part_paths.insert(hint.path.clone());
        v.playlist_targets.insert(next.clone());
        if let Ok(r) = &part_res
            && (200..300).contains(&r.status)
        {
            v.parts += 1;
            let first = match r.first_body {
                Some(at) => (at, r.first_body_unix_us),
                None => (r.first_byte, None),
            };
            v.sample(&clock, t, first, r, true);
            let last = r.done_unix_us.unwrap_or_else(|| clock.unix_us(r.done));
            if let Sample::Latency(us) = clock.sample(t, last, r.release_ms) {
                put(v.part_last_by_index.entry(hint.index).or_insert_with(hist), us);
            }
            have = Some(key(&hint));
        }
        let Ok(r) = &list_res else { continue };
        if r.status != 200 {
            continue;
        }
        let decoded = decode(&mut text, r.coding).await;
        match decoded.then(|| parse(&text, &target, &next)).flatten() {
            Some(pl) if pl.parts.iter().any(|p| key(p) == key(&hint)) => {
                v.blocking += 1;
                v.compressed += u64::from(r.coding != Coding::Identity);
                v.delta += u64::from(pl.skipped > 0);
                v.sample(&clock, t, (r.done, r.done_unix_us), r, false);
                current = Some(pl);
            }
            // A blocking reload must return a playlist holding the part it asked for.
            _ => v.stats.error(ErrorKind::Protocol),
        }
    }
    v
}

/// Reads `requests_by_target` from the origin's `/__origin/stats`.
async fn origin_counts(
    origin: &Target,
    timeout: Duration,
) -> Result<BTreeMap<String, u64>, String> {
    let mut body = Vec::new();
    let req = build_get(&origin.host_header, "/__origin/stats", &[]);
    let res = tokio::time::timeout(timeout, async {
        let mut c = Conn::connect(origin.endpoint()).await?;
        c.send(&req, Body::Capture(&mut body)).await
    })
    .await
    .map_err(|_| "origin stats: timed out".to_string())?
    .map_err(|e| format!("origin stats: {e}"))?;
    if res.status != 200 {
        return Err(format!("origin stats: status {}", res.status));
    }
    let v: serde_json::Value =
        serde_json::from_slice(&body).map_err(|e| format!("origin stats: {e}"))?;
    let map = v
        .get("requests_by_target")
        .and_then(|m| m.as_object())
        .ok_or("origin stats: no requests_by_target (not a reel demo origin?)")?;
    Ok(map.iter().filter_map(|(k, n)| Some((k.clone(), n.as_u64()?))).collect())
}

/// Runs the LL-HLS scenario.
pub async fn run_llhls(cfg: &LlhlsConfig) -> Result<LlhlsReport, ScenarioError> {
    cfg.common.check_h1()?;
    check_count(cfg.viewers, "viewers must be 1..=1000000")?;
    let start = Instant::now();
    let deadline = start + cfg.common.duration;
    let mut set = JoinSet::new();
    for _ in 0..cfg.viewers {
        set.spawn(view(
            cfg.playlist.clone(),
            cfg.common.headers.clone(),
            cfg.common.timeout,
            deadline,
        ));
    }
    let hard = deadline + cfg.common.timeout + Duration::from_secs(1);
    let mut stats = Stats::new();
    let mut playlist_latency = hist();
    let mut part_latency = hist();
    let mut part_last_by_index: BTreeMap<u64, Histogram<u64>> = BTreeMap::new();
    let mut fig = LlhlsFigures {
        parts: 0,
        playlists_blocking: 0,
        playlists_delta: 0,
        playlists_compressed: 0,
        playlist_latency_us: Tail::default(),
        part_first_byte_latency_us: Tail::default(),
        part_last_byte_by_index_us: Vec::new(),
        without_release: 0,
        asked_after_release: 0,
        viewers_fell_behind: 0,
        parts_caught_up: 0,
        origin: None,
        origin_error: None,
    };
    let mut part_paths = HashSet::new();
    let mut playlist_targets = HashSet::new();
    loop {
        match tokio::time::timeout_at(hard, set.join_next()).await {
            Ok(Some(Ok(v))) => {
                stats.merge(&v.stats);
                let _ = playlist_latency.add(&v.playlist_latency);
                let _ = part_latency.add(&v.part_latency);
                for (i, h) in &v.part_last_by_index {
                    let _ = part_last_by_index.entry(*i).or_insert_with(hist).add(h);
                }
                fig.parts += v.parts;
                fig.playlists_blocking += v.blocking;
                fig.playlists_delta += v.delta;
                fig.playlists_compressed += v.compressed;
                fig.without_release += v.without_release;
                fig.asked_after_release += v.late;
                fig.viewers_fell_behind += u64::from(v.fell_behind);
                fig.parts_caught_up += v.caught_up;
                part_paths.extend(v.part_paths);
                playlist_targets.extend(v.playlist_targets);
            }
            Ok(Some(Err(_))) => {}
            Ok(None) => break,
            Err(_) => {
                set.abort_all();
                break;
            }
        }
    }
    let elapsed = start.elapsed();
    fig.playlist_latency_us = Tail::of(&playlist_latency);
    fig.part_first_byte_latency_us = Tail::of(&part_latency);
    fig.part_last_byte_by_index_us = part_last_by_index
        .iter()
        .map(|(&index, h)| IndexTail { index, tail: Tail::of(h) })
        .collect();
    if let Some(origin) = &cfg.origin {
        match origin_counts(origin, cfg.common.timeout).await {
            Ok(counts) => {
                fig.origin = Some(OriginLoad {
                    per_part: PerTarget::of(part_paths.iter(), &counts),
                    per_playlist_version: PerTarget::of(playlist_targets.iter(), &counts),
                });
            }
            Err(e) => fig.origin_error = Some(e),
        }
    }
    let base = stats.report("llhls", &cfg.playlist.url(), cfg.viewers, elapsed);
    Ok(LlhlsReport { base, llhls: fig })
}

fn ms(us: u64) -> String {
    format!("{:.3} ms", us as f64 / 1000.0)
}

impl fmt::Display for LlhlsReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.base)?;
        let l = &self.llhls;
        let tail = |t: &Tail| {
            format!("p50 {}  p99 {}  p99.9 {}  max {}", ms(t.p50), ms(t.p99), ms(t.p999), ms(t.max))
        };
        writeln!(
            f,
            "playlists     {} blocking ({} delta updates, {} compressed); after release {}",
            l.playlists_blocking,
            l.playlists_delta,
            l.playlists_compressed,
            tail(&l.playlist_latency_us)
        )?;
        writeln!(
            f,
            "parts         {}; first byte after release {}",
            l.parts,
            tail(&l.part_first_byte_latency_us)
        )?;
        for t in &l.part_last_byte_by_index_us {
            writeln!(f, "  part {}    last byte after release {}", t.index, tail(&t.tail))?;
        }
        writeln!(
            f,
            "not sampled   {} asked for after their release, {} without x-origin-release-ms",
            l.asked_after_release, l.without_release
        )?;
        match (&l.origin, &l.origin_error) {
            (Some(o), _) => {
                let per = |p: &PerTarget| {
                    format!(
                        "{} distinct, {:.2} requests each (min {}, max {})",
                        p.distinct, p.mean, p.min, p.max
                    )
                };
                writeln!(f, "origin        per part: {}", per(&o.per_part))?;
                writeln!(
                    f,
                    "              per playlist version: {}",
                    per(&o.per_playlist_version)
                )?;
            }
            (None, Some(e)) => writeln!(f, "origin        n/a ({e})")?,
            (None, None) => {}
        }
        writeln!(
            f,
            "behind        {} of {} viewers fell behind ({} parts caught up)",
            l.viewers_fell_behind, self.base.connections, l.parts_caught_up
        )
    }
}
