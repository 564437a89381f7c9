//! The load scenarios. Every one is bounded by its duration (plus at most one
//! request timeout for requests in flight at the deadline, after which any
//! straggler is aborted) and every task keeps its own [`Stats`], merged once
//! at the end, so connections never contend on shared counters.
//!
//! - [`run_fixed`]: closed loop at maximum rate (like wrk).
//! - [`run_open`]: open loop at a fixed rate; latency counts from the intended
//!   send time, which corrects coordinated omission.
//! - [`run_live`]: viewers polling a live HLS playlist every target duration.
//! - [`run_vod`]: viewers walking Zipf-popular VOD titles.
//! - [`run_herd`]: all viewers requesting the same cold object at the same
//!   instant, repeatedly: time to first byte of coalesced misses.
//! - [`run_zipf`]: viewers requesting objects of a catalog by Zipf popularity, paced.
//! - [`run_idle`]: many keep-alive connections that make one request and then sit idle.
//!
//! `fixed` and `open` also speak HTTP/3 ([`Common::h3_streams`], the client in
//! [`crate::h3`]); the others refuse it.
//!
//! A [`Mark`] splits the latency of `fixed`, `open` and `zipf` in two: responses that
//! carry a given header value (a cache's hits) or that answer given URLs (cold objects)
//! against the rest.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rand::{Rng, SeedableRng};
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::client::{Body, Conn, Response, build_get};
use crate::h3::{self as http3, H3Client};
use crate::playlist;
use crate::stats::{ErrorKind, Report, Stats};
use crate::target::{Endpoint, Target};
use crate::zipf::Zipf;

mod players;

use players::fetch_segment;
pub use players::{run_live, run_vod, run_zipf, title_path};

/// Longest accepted run.
pub const MAX_DURATION: Duration = Duration::from_secs(24 * 3600);
/// Pause after a failed connect, so a dead server does not turn into a busy loop.
const CONNECT_BACKOFF: Duration = Duration::from_millis(10);
/// Pause after an unusable playlist before trying again.
pub(crate) const RETRY_PAUSE: Duration = Duration::from_millis(100);

/// A configuration the scenarios refuse to run.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ScenarioError {
    /// Invalid numeric setting.
    #[error("invalid setting: {0}")]
    Invalid(&'static str),
    /// All URLs of one run must be on the same server.
    #[error("all URLs must point at the same host:port")]
    MixedHosts,
    /// The QUIC endpoint could not be set up, or a request could not be prepared for HTTP/3.
    #[error("HTTP/3: {0}")]
    Http3(String),
}

/// Most requests at once on one HTTP/3 connection.
pub const MAX_STREAMS: usize = 10_000;

/// Settings shared by all scenarios.
#[derive(Debug, Clone)]
pub struct Common {
    /// How long to generate load (1 ms ..= 24 h).
    pub duration: Duration,
    /// Per-request timeout (connect included); also the grace period after the deadline.
    pub timeout: Duration,
    /// Extra request header lines, `name: value`.
    pub headers: Vec<String>,
    /// Which responses are reported apart.
    pub mark: Mark,
    /// `Some(m)`: HTTP/3 over QUIC instead of HTTP/1.1 (`https://` targets; `fixed` and
    /// `open` only), `m` requests at once on each connection (1 ..= [`MAX_STREAMS`]).
    /// `None`: HTTP/1.1, one request at a time per connection.
    pub h3_streams: Option<usize>,
}

/// Which responses count as marked. Marking is on when either is set.
#[derive(Debug, Clone, Default)]
pub struct Mark {
    /// `(name, substring)`: the response's field `name` contains `substring` (ASCII case
    /// insensitive), e.g. `("cache-status", "hit")`.
    pub header: Option<(String, String)>,
    /// The request's path contains this.
    pub url: Option<String>,
}

impl Mark {
    fn on(&self) -> bool {
        self.header.is_some() || self.url.is_some()
    }

    fn url_marks(&self, path: &str) -> bool {
        self.url.as_deref().is_some_and(|u| path.contains(u))
    }
}

impl Common {
    pub(crate) fn check(&self) -> Result<(), ScenarioError> {
        if self.duration.is_zero() || self.duration > MAX_DURATION {
            return Err(ScenarioError::Invalid("duration must be > 0 and <= 24 h"));
        }
        if self.timeout.is_zero() {
            return Err(ScenarioError::Invalid("timeout must be > 0"));
        }
        if self.headers.iter().any(|h| !h.contains(':') || h.contains(['\r', '\n'])) {
            return Err(ScenarioError::Invalid("headers must be single `name: value` lines"));
        }
        if self.h3_streams.is_some_and(|m| m == 0 || m > MAX_STREAMS) {
            return Err(ScenarioError::Invalid("streams must be 1..=10000"));
        }
        Ok(())
    }

    /// [`Common::check`] for the scenarios that speak HTTP/1.1 only.
    pub(crate) fn check_h1(&self) -> Result<(), ScenarioError> {
        self.check()?;
        if self.h3_streams.is_some() {
            return Err(ScenarioError::Invalid("HTTP/3 is supported by fixed and open only"));
        }
        Ok(())
    }
}

/// `fixed`: closed loop over `urls` (round robin per connection) at maximum rate.
#[derive(Debug, Clone)]
pub struct FixedConfig {
    /// URLs to request; all on one server.
    pub urls: Vec<Target>,
    /// Concurrent keep-alive connections.
    pub connections: usize,
    /// Duration, timeout, headers.
    pub common: Common,
}

/// `connect`: like `fixed`, but every request on a new connection (`Connection: close`):
/// measures connection set-up, with TLS a handshake per request, full or resumed.
#[derive(Debug, Clone)]
pub struct ConnectConfig {
    /// URLs to request; all on one server.
    pub urls: Vec<Target>,
    /// Concurrent connections.
    pub connections: usize,
    /// TLS: resume sessions from tickets (`false`: every handshake is a full one).
    pub resume: bool,
    /// Duration, timeout, headers.
    pub common: Common,
}

/// `open`: `rate` requests/s in total, spread evenly over `connections`.
#[derive(Debug, Clone)]
pub struct OpenConfig {
    /// URLs to request; all on one server.
    pub urls: Vec<Target>,
    /// Keep-alive connections sharing the schedule.
    pub connections: usize,
    /// Requests per second, all connections together.
    pub rate: f64,
    /// Duration, timeout, headers.
    pub common: Common,
}

/// `live`: viewers polling a live media playlist.
#[derive(Debug, Clone)]
pub struct LiveConfig {
    /// The playlist URL (e.g. `http://127.0.0.1:8080/live/index.m3u8`).
    pub playlist: Target,
    /// Number of viewers, one keep-alive connection each.
    pub viewers: usize,
    /// `None`: all viewers start at the same instant (thundering herd);
    /// `Some(j)`: each starts at a uniformly random offset in `[0, j)`.
    pub jitter: Option<Duration>,
    /// Duration, timeout, headers.
    pub common: Common,
}

/// `vod`: viewers picking titles by Zipf popularity and fetching their segments in order.
#[derive(Debug, Clone)]
pub struct VodConfig {
    /// Server (its path is ignored).
    pub server: Target,
    /// Playlist path with `{i}` replaced by the title rank (0 = most popular),
    /// or `{i:0N}` by the rank zero-padded to N digits, e.g. `/vod/title_{i:03}/index.m3u8`
    /// (the demo origin's catalog).
    pub title_template: String,
    /// Number of titles.
    pub titles: usize,
    /// Zipf exponent (0 = uniform).
    pub zipf_exponent: f64,
    /// Number of viewers.
    pub viewers: usize,
    /// Fetch each segment when the previous one would have finished playing
    /// (true) or back to back (false).
    pub realtime: bool,
    /// RNG seed (viewer i uses seed + i).
    pub seed: u64,
    /// Duration, timeout, headers.
    pub common: Common,
}

/// `herd`: every `interval`, all viewers GET the same new URL at once.
#[derive(Debug, Clone)]
pub struct HerdConfig {
    /// URL whose path contains `{n}`, replaced per round by a run-unique token,
    /// so every round's object is cold in the cache.
    pub target: Target,
    /// Viewers (connections) per round.
    pub viewers: usize,
    /// Time between rounds.
    pub interval: Duration,
    /// Duration, timeout, headers.
    pub common: Common,
}

/// `zipf`: viewers requesting objects of a catalog by Zipf popularity: object k of
/// `objects` (0 = most popular) has weight 1/(k+1)^s.
#[derive(Debug, Clone)]
pub struct ZipfConfig {
    /// URL whose path contains `{i}` or `{i:0N}`, replaced by the object's rank.
    pub target: Target,
    /// Objects in the catalog.
    pub objects: usize,
    /// Zipf exponent (0 = uniform).
    pub exponent: f64,
    /// Viewers, one keep-alive connection each.
    pub viewers: usize,
    /// A viewer sends a request every `interval` (starts spread over the first one);
    /// `None`: back to back.
    pub interval: Option<Duration>,
    /// RNG seed (viewer v uses `seed + v`).
    pub seed: u64,
    /// Share of requests (0 to 1) that go to URLs requested once in the run (one-hit
    /// wonders): `{i}` becomes a number past the catalog, unique to the request (distinct
    /// between runs with distinct seeds).
    pub one_hit_share: f64,
    /// Duration, timeout, headers, mark.
    pub common: Common,
}

/// `idle`: `connections` keep-alive connections, opened at `connect_rate` per second,
/// each making one request and then holding the connection open, silent, to the end.
#[derive(Debug, Clone)]
pub struct IdleConfig {
    /// What each connection requests once.
    pub target: Target,
    /// Connections.
    pub connections: usize,
    /// New connections per second.
    pub connect_rate: f64,
    /// Read buffer per connection, bytes.
    pub buffer: usize,
    /// Duration, timeout, headers.
    pub common: Common,
}

/// A keep-alive connection that reconnects after failures and enforces the request timeout.
pub(crate) struct Client {
    addr: Endpoint,
    conn: Option<Conn>,
    timeout: Duration,
    /// TLS session resumption.
    resume: bool,
    /// Marks responses carrying this field value (see [`Mark::header`]).
    mark: Option<std::sync::Arc<(String, String)>>,
}

impl Client {
    pub(crate) fn new(addr: Endpoint, timeout: Duration) -> Self {
        Self { addr, conn: None, timeout, resume: true, mark: None }
    }

    /// A client whose responses are marked by `mark`'s header rule.
    fn marking(addr: Endpoint, timeout: Duration, mark: &Mark) -> Self {
        let mut c = Self::new(addr, timeout);
        c.mark = mark.header.clone().map(std::sync::Arc::new);
        c
    }

    pub(crate) async fn connect(&mut self) -> Result<(), ErrorKind> {
        if self.conn.is_none() {
            let mut c =
                tokio::time::timeout(self.timeout, Conn::connect_with(self.addr, self.resume))
                    .await
                    .map_err(|_| ErrorKind::Timeout)?
                    .map_err(|e| e.kind())?;
            c.mark_header = self.mark.clone();
            self.conn = Some(c);
        }
        Ok(())
    }

    pub(crate) async fn get(
        &mut self,
        request: &[u8],
        body: Body<'_>,
    ) -> Result<Response, ErrorKind> {
        let (addr, resume, mark) = (self.addr, self.resume, self.mark.clone());
        let slot = &mut self.conn;
        let res = tokio::time::timeout(self.timeout, async {
            let c = match slot {
                Some(c) => c,
                None => {
                    let mut c = Conn::connect_with(addr, resume).await?;
                    c.mark_header = mark;
                    slot.insert(c)
                }
            };
            c.send(request, body).await
        })
        .await;
        match res {
            Err(_) => {
                self.conn = None;
                Err(ErrorKind::Timeout)
            }
            Ok(Err(e)) => {
                self.conn = None;
                Err(e.kind())
            }
            Ok(Ok(r)) => {
                if !r.keep_alive {
                    self.conn = None;
                }
                Ok(r)
            }
        }
    }
}

/// What a load task sends its requests with: its own HTTP/1.1 keep-alive connection, or a
/// share of an HTTP/3 connection (one of its streams at a time).
// One per task, moved into it once: its size does not matter.
#[allow(clippy::large_enum_variant)]
enum Sender {
    H1 { client: Client, reqs: Arc<[Vec<u8>]> },
    H3 { client: Arc<H3Client>, reqs: Arc<[http::Request<()>]> },
}

impl Sender {
    fn len(&self) -> usize {
        match self {
            Sender::H1 { reqs, .. } => reqs.len(),
            Sender::H3 { reqs, .. } => reqs.len(),
        }
    }

    async fn connect(&mut self) -> Result<(), ErrorKind> {
        match self {
            Sender::H1 { client, .. } => client.connect().await,
            Sender::H3 { client, .. } => client.connect().await,
        }
    }

    /// Sends request `k` (of the URLs, in order) and drains its response.
    async fn get(&mut self, k: usize) -> Result<Response, ErrorKind> {
        match self {
            Sender::H1 { client, reqs } => client.get(&reqs[k], Body::Discard).await,
            Sender::H3 { client, reqs } => client.get(&reqs[k], Body::Discard).await,
        }
    }
}

/// The load tasks of a `fixed` or `open` run over `urls`: one per HTTP/1.1 connection, or
/// `m` per HTTP/3 connection (task `i` on connection `i / m`), and the QUIC endpoint they
/// share, to close at the end.
fn senders(
    urls: &[Target],
    connections: usize,
    common: &Common,
) -> Result<(Vec<Sender>, Option<quinn::Endpoint>), ScenarioError> {
    let Some(streams) = common.h3_streams else {
        let (addr, reqs) = requests(urls, &common.headers)?;
        let reqs: Arc<[Vec<u8>]> = reqs.into();
        let tasks = (0..connections)
            .map(|_| Sender::H1 {
                client: Client::marking(addr, common.timeout, &common.mark),
                reqs: reqs.clone(),
            })
            .collect();
        return Ok((tasks, None));
    };
    let (addr, _) = requests(urls, &[])?;
    if !addr.tls {
        return Err(ScenarioError::Invalid("HTTP/3 needs https:// URLs"));
    }
    let reqs = urls
        .iter()
        .map(|u| http3::build_request(u, &common.headers))
        .collect::<Result<Arc<[_]>, _>>()
        .map_err(|e| ScenarioError::Http3(e.to_string()))?;
    let ep = http3::endpoint(addr.addr).map_err(|e| ScenarioError::Http3(e.to_string()))?;
    let mark = common.mark.header.clone().map(Arc::new);
    let mut tasks = Vec::with_capacity(connections * streams);
    for _ in 0..connections {
        let client = Arc::new(H3Client::new(ep.clone(), addr.addr, common.timeout, mark.clone()));
        for _ in 0..streams {
            tasks.push(Sender::H3 { client: client.clone(), reqs: reqs.clone() });
        }
    }
    Ok((tasks, Some(ep)))
}

/// Records a finished request measured from `from`, or its error (with a backoff after connect failures).
pub(crate) async fn account(stats: &mut Stats, from: Instant, res: &Result<Response, ErrorKind>) {
    account_marked(stats, from, res, None).await
}

/// [`account`], filing the latency as marked or not when marking is on: `url_mark` is
/// `Some(whether the URL is marked)` then.
async fn account_marked(
    stats: &mut Stats,
    from: Instant,
    res: &Result<Response, ErrorKind>,
    url_mark: Option<bool>,
) {
    if let (Some(u), Ok(r)) = (url_mark, res) {
        stats.record_mark(u || r.marked, r.done.saturating_duration_since(from.into_std()));
    }
    match res {
        Ok(r) => stats.record(
            r.status,
            r.wire_bytes,
            r.body_bytes,
            r.done.saturating_duration_since(from.into_std()),
            r.first_byte.saturating_duration_since(from.into_std()),
        ),
        Err(kind) => {
            stats.error(*kind);
            if *kind == ErrorKind::Connect {
                tokio::time::sleep(CONNECT_BACKOFF).await;
            }
        }
    }
}

fn requests(
    urls: &[Target],
    headers: &[String],
) -> Result<(Endpoint, Vec<Vec<u8>>), ScenarioError> {
    let first = urls.first().ok_or(ScenarioError::Invalid("at least one URL"))?;
    if urls.iter().any(|u| u.endpoint() != first.endpoint()) {
        return Err(ScenarioError::MixedHosts);
    }
    let reqs = urls.iter().map(|u| build_get(&u.host_header, &u.path, headers)).collect();
    Ok((first.endpoint(), reqs))
}

/// Per URL: `Some(marked by its path)` when marking is on, else `None`.
fn url_marks(urls: &[Target], mark: &Mark) -> Vec<Option<bool>> {
    urls.iter().map(|u| mark.on().then(|| mark.url_marks(&u.path))).collect()
}

pub(crate) fn check_count(n: usize, what: &'static str) -> Result<(), ScenarioError> {
    if n == 0 || n > 1_000_000 {
        return Err(ScenarioError::Invalid(what));
    }
    Ok(())
}

/// Waits for every task, aborting stragglers at `hard`, and merges their results.
async fn collect(mut set: JoinSet<Stats>, hard: Instant) -> Stats {
    let mut total = Stats::new();
    loop {
        match tokio::time::timeout_at(hard, set.join_next()).await {
            Ok(Some(Ok(s))) => total.merge(&s),
            Ok(Some(Err(_))) => {}
            Ok(None) => break,
            Err(_) => {
                set.abort_all();
                break;
            }
        }
    }
    total
}

/// Runs the closed-loop scenario.
pub async fn run_fixed(cfg: &FixedConfig) -> Result<Report, ScenarioError> {
    cfg.common.check()?;
    check_count(cfg.connections, "connections must be 1..=1000000")?;
    let (tasks, ep) = senders(&cfg.urls, cfg.connections, &cfg.common)?;
    let marks: Arc<[_]> = url_marks(&cfg.urls, &cfg.common.mark).into();
    let start = Instant::now();
    let deadline = start + cfg.common.duration;
    let mut set = JoinSet::new();
    for (c, mut sender) in tasks.into_iter().enumerate() {
        let marks = marks.clone();
        set.spawn(async move {
            let mut stats = Stats::new();
            let mut i = c;
            while Instant::now() < deadline {
                let k = i % sender.len();
                i += 1;
                let t = Instant::now();
                let res = sender.get(k).await;
                account_marked(&mut stats, t, &res, marks[k]).await;
            }
            stats
        });
    }
    let stats = collect(set, deadline + cfg.common.timeout + Duration::from_secs(1)).await;
    let report = stats.report("fixed", &cfg.urls[0].url(), cfg.connections, start.elapsed());
    if let Some(ep) = ep {
        http3::close(&ep).await;
    }
    Ok(report)
}

/// Runs the `connect` scenario (see [`ConnectConfig`]).
pub async fn run_connect(cfg: &ConnectConfig) -> Result<Report, ScenarioError> {
    cfg.common.check_h1()?;
    check_count(cfg.connections, "connections must be 1..=1000000")?;
    let mut headers = cfg.common.headers.clone();
    headers.push("Connection: close".into());
    let (addr, reqs) = requests(&cfg.urls, &headers)?;
    let start = Instant::now();
    let deadline = start + cfg.common.duration;
    let mut set = JoinSet::new();
    for c in 0..cfg.connections {
        let reqs = reqs.clone();
        let timeout = cfg.common.timeout;
        let resume = cfg.resume;
        set.spawn(async move {
            let mut stats = Stats::new();
            let mut client = Client::new(addr, timeout);
            client.resume = resume;
            let mut i = c;
            while Instant::now() < deadline {
                let req = &reqs[i % reqs.len()];
                i += 1;
                let t = Instant::now();
                let res = client.get(req, Body::Discard).await;
                // The server closes after the response; never reuse the connection.
                client.conn = None;
                account(&mut stats, t, &res).await;
            }
            stats
        });
    }
    let stats = collect(set, deadline + cfg.common.timeout + Duration::from_secs(1)).await;
    Ok(stats.report("connect", &cfg.urls[0].url(), cfg.connections, start.elapsed()))
}

/// Runs the open-loop scenario: request k (over all connections) is due at
/// `start + k / rate` and goes to connection `k % connections`; a connection
/// that is still busy sends late, and the wait counts in the latency.
pub async fn run_open(cfg: &OpenConfig) -> Result<Report, ScenarioError> {
    cfg.common.check()?;
    check_count(cfg.connections, "connections must be 1..=1000000")?;
    if !(cfg.rate.is_finite() && cfg.rate > 0.0 && cfg.rate <= 10_000_000.0) {
        return Err(ScenarioError::Invalid("rate must be in (0, 1e7] req/s"));
    }
    let (tasks, ep) = senders(&cfg.urls, cfg.connections, &cfg.common)?;
    let marks: Arc<[_]> = url_marks(&cfg.urls, &cfg.common.mark).into();
    let start = Instant::now();
    let deadline = start + cfg.common.duration;
    let hard = deadline + cfg.common.timeout;
    // Over HTTP/3 the schedule is shared by every stream of every connection.
    let slots = tasks.len() as u64;
    let rate = cfg.rate;
    let mut set = JoinSet::new();
    for (c, mut sender) in tasks.into_iter().enumerate() {
        let marks = marks.clone();
        set.spawn(async move {
            let mut stats = Stats::new();
            // Connect ahead of the schedule so the first request does not pay for it.
            if let Err(kind) = sender.connect().await {
                stats.error(kind);
            }
            let mut k = c as u64;
            loop {
                let due = start + Duration::from_secs_f64(k as f64 / rate);
                if due >= deadline || Instant::now() >= hard {
                    break;
                }
                tokio::time::sleep_until(due).await;
                let i = (k as usize) % sender.len();
                let res = sender.get(i).await;
                account_marked(&mut stats, due, &res, marks[i]).await;
                k += slots;
            }
            stats
        });
    }
    let stats = collect(set, hard + Duration::from_secs(1)).await;
    let report = stats.report("open", &cfg.urls[0].url(), cfg.connections, start.elapsed());
    if let Some(ep) = ep {
        http3::close(&ep).await;
    }
    Ok(report)
}

/// Runs the `idle` scenario (see [`IdleConfig`]). A connection the server closes before
/// the end counts as a `reset` error; the ones still open at the end as `held`.
pub async fn run_idle(cfg: &IdleConfig) -> Result<Report, ScenarioError> {
    cfg.common.check_h1()?;
    check_count(cfg.connections, "connections must be 1..=1000000")?;
    if !(cfg.connect_rate.is_finite() && cfg.connect_rate > 0.0) {
        return Err(ScenarioError::Invalid("connect rate must be > 0"));
    }
    let req = std::sync::Arc::new(build_get(
        &cfg.target.host_header,
        &cfg.target.path,
        &cfg.common.headers,
    ));
    let start = Instant::now();
    let deadline = start + cfg.common.duration;
    let mut set = JoinSet::new();
    for c in 0..cfg.connections {
        let req = req.clone();
        let (addr, timeout, buffer) = (cfg.target.endpoint(), cfg.common.timeout, cfg.buffer);
        let at = start + Duration::from_secs_f64(c as f64 / cfg.connect_rate);
        set.spawn(async move {
            let mut stats = Stats::new();
            tokio::time::sleep_until(at).await;
            if at >= deadline {
                return stats;
            }
            let t = Instant::now();
            let conn = tokio::time::timeout(timeout, Conn::connect_buffered(addr, true, buffer));
            let mut conn = match conn.await {
                Ok(Ok(c)) => c,
                Ok(Err(e)) => {
                    stats.error(e.kind());
                    return stats;
                }
                Err(_) => {
                    stats.error(ErrorKind::Timeout);
                    return stats;
                }
            };
            let res = match tokio::time::timeout(timeout, conn.send(&req, Body::Discard)).await {
                Ok(r) => r.map_err(|e| e.kind()),
                Err(_) => Err(ErrorKind::Timeout),
            };
            account(&mut stats, t, &res).await;
            if !res.is_ok_and(|r| r.keep_alive) {
                return stats;
            }
            tokio::select! {
                _ = conn.wait_idle() => stats.error(ErrorKind::Reset),
                () = tokio::time::sleep_until(deadline) => stats.held += 1,
            }
            stats
        });
    }
    let stats = collect(set, deadline + cfg.common.timeout + Duration::from_secs(1)).await;
    Ok(stats.report("idle", &cfg.target.url(), cfg.connections, start.elapsed()))
}

/// Runs the herd scenario: round n starts at `start + lead + n * interval`; every
/// viewer requests the round's URL at that instant over its pre-opened connection.
pub async fn run_herd(cfg: &HerdConfig) -> Result<Report, ScenarioError> {
    cfg.common.check_h1()?;
    check_count(cfg.viewers, "viewers must be 1..=1000000")?;
    if cfg.interval.is_zero() {
        return Err(ScenarioError::Invalid("interval must be > 0"));
    }
    if !cfg.target.path.contains("{n}") {
        return Err(ScenarioError::Invalid("herd URL must contain {n}"));
    }
    // Unique per run, so a cache kept warm from an earlier run still misses.
    let nonce =
        SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0)
            ^ u64::from(std::process::id());
    let start = Instant::now();
    let deadline = start + cfg.common.duration;
    let lead = (cfg.common.duration / 10).min(Duration::from_millis(500));
    let mut set = JoinSet::new();
    for _ in 0..cfg.viewers {
        let target = cfg.target.clone();
        let headers = cfg.common.headers.clone();
        let timeout = cfg.common.timeout;
        let interval = cfg.interval;
        set.spawn(async move {
            let mut stats = Stats::new();
            let mut client = Client::new(target.endpoint(), timeout);
            if let Err(kind) = client.connect().await {
                stats.error(kind);
            }
            let mut n = 0u32;
            loop {
                let due = start + lead + interval * n;
                if due >= deadline {
                    break;
                }
                tokio::time::sleep_until(due).await;
                let path = target.path.replace("{n}", &format!("{nonce:x}-{n}"));
                fetch_segment(&mut client, &mut stats, &target, &path, &headers).await;
                n += 1;
            }
            stats
        });
    }
    let stats = collect(set, deadline + cfg.common.timeout + Duration::from_secs(1)).await;
    Ok(stats.report("herd", &cfg.target.url(), cfg.viewers, start.elapsed()))
}
