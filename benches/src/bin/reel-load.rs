//! `reel-load`: the command-line front end of the load generator (scenarios
//! `fixed`, `connect`, `open`, `live`, `llhls`, `vod`, `herd`, `seek`, `zipf`, `idle`;
//! `fixed` and `open` over HTTP/3 with `--h3`) and `get`, one request shown like
//! `curl -i`; loopback targets only. It runs on one current-thread tokio runtime: pin it
//! to its own core with `taskset`.

use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::{Args, Parser, Subcommand};
use reel_benches::client::{Body, Conn, build_get};
use reel_benches::h3::{H3Conn, build_request, close, endpoint};
use reel_benches::llhls::{LlhlsConfig, LlhlsReport, run_llhls};
use reel_benches::scenario::{
    Common, ConnectConfig, FixedConfig, HerdConfig, IdleConfig, LiveConfig, Mark, OpenConfig,
    VodConfig, ZipfConfig, run_connect, run_fixed, run_herd, run_idle, run_live, run_open, run_vod,
    run_zipf,
};
use reel_benches::seek::{SeekConfig, SeekReport, run_seek};
use reel_benches::stats::Report;
use reel_benches::target::Target;

#[derive(Parser)]
#[command(
    name = "reel-load",
    about = "Loopback-only HTTP/1.1 (and HTTPS, and HTTP/3) load generator for video caches"
)]
struct Cli {
    #[command(subcommand)]
    scenario: Scenario,
}

#[derive(Args, Clone)]
struct CommonArgs {
    /// Load duration: `10`, `10s`, `500ms`, `2m`.
    #[arg(short, long, default_value = "10s", value_parser = parse_duration)]
    duration: Duration,
    /// Per-request timeout (connect included).
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    timeout: Duration,
    /// Extra request header, `name: value` (repeatable).
    #[arg(short = 'H', long = "header")]
    headers: Vec<String>,
    /// Print the report as JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// Print the report as flat `key=value` lines (`latency_us.p99=1234`), for shell scripts.
    #[arg(long, conflicts_with = "json")]
    kv: bool,
    /// Report responses whose field contains a value apart, `name: substring` (ASCII case
    /// insensitive), e.g. `cache-status: hit` (fixed, open, zipf).
    #[arg(long, value_parser = parse_mark_header)]
    mark_header: Option<(String, String)>,
    /// Report responses to URLs whose path contains this apart (fixed, open, zipf).
    #[arg(long)]
    mark_url: Option<String>,
    /// HTTP/3 over QUIC instead of HTTP/1.1 (`https://` URLs; fixed and open): `-c`
    /// QUIC connections from one UDP socket.
    #[arg(long)]
    h3: bool,
    /// With `--h3`: requests at once on each connection.
    #[arg(long, default_value_t = 1, requires = "h3")]
    streams: usize,
}

fn parse_mark_header(s: &str) -> Result<(String, String), String> {
    let (n, v) = s.split_once(':').ok_or("expected `name: substring`")?;
    let (n, v) = (n.trim(), v.trim());
    if n.is_empty() || v.is_empty() {
        return Err("expected `name: substring`".into());
    }
    Ok((n.to_string(), v.to_string()))
}

#[derive(Subcommand)]
enum Scenario {
    /// One request: the status line on stderr (with `-i`, the status line and fields on
    /// stdout, like `curl -i`), the body on stdout; exits 0 on a 2xx or 3xx.
    Get {
        /// HTTP/3 over QUIC (`https://` URLs).
        #[arg(long)]
        h3: bool,
        /// Print the response head before the body on stdout.
        #[arg(short = 'i', long = "include")]
        include: bool,
        /// Extra request header, `name: value` (repeatable).
        #[arg(short = 'H', long = "header")]
        headers: Vec<String>,
        /// Request timeout (connect included).
        #[arg(long, default_value = "5s", value_parser = parse_duration)]
        timeout: Duration,
        /// URL, `http://` or `https://`, loopback only.
        url: String,
    },
    /// Closed loop at maximum rate over one or more URLs.
    Fixed {
        /// Keep-alive connections.
        #[arg(short, long, default_value_t = 64)]
        connections: usize,
        /// URLs (round robin per connection), `http://` or `https://`, loopback only.
        #[arg(required = true)]
        urls: Vec<String>,
        #[command(flatten)]
        common: CommonArgs,
    },
    /// Closed loop with a new connection per request (`Connection: close`); over TLS a
    /// handshake per request, resumed from tickets unless `--full`.
    Connect {
        /// Concurrent connections.
        #[arg(short, long, default_value_t = 64)]
        connections: usize,
        /// TLS: full handshakes only (no session resumption).
        #[arg(long)]
        full: bool,
        /// URLs (round robin), `http://` or `https://`, loopback only.
        #[arg(required = true)]
        urls: Vec<String>,
        #[command(flatten)]
        common: CommonArgs,
    },
    /// Open loop at a fixed total request rate; latency from the intended send time.
    Open {
        /// Keep-alive connections sharing the schedule.
        #[arg(short, long, default_value_t = 64)]
        connections: usize,
        /// Requests per second in total.
        #[arg(short, long)]
        rate: f64,
        /// URLs (round robin), `http://` or `https://`, loopback only.
        #[arg(required = true)]
        urls: Vec<String>,
        #[command(flatten)]
        common: CommonArgs,
    },
    /// Viewers polling a live HLS playlist every target duration.
    Live {
        /// Number of viewers (one connection each).
        #[arg(short, long, default_value_t = 100)]
        viewers: usize,
        /// Spread viewer start times uniformly over this window instead of a synchronized start.
        #[arg(long, value_parser = parse_duration)]
        jitter: Option<Duration>,
        /// Playlist URL, e.g. http://127.0.0.1:8080/live/index.m3u8.
        url: String,
        #[command(flatten)]
        common: CommonArgs,
    },
    /// Viewers following a Low-Latency HLS playlist like players: blocking reloads for the
    /// next part, hinted parts fetched ahead, delta updates when offered.
    Llhls {
        /// Number of viewers (two connections each).
        #[arg(short, long, default_value_t = 100)]
        viewers: usize,
        /// The origin whose /__origin/stats counts requests per target (a reel demo origin),
        /// e.g. http://127.0.0.1:8081; default: the playlist's own server.
        #[arg(long)]
        origin: Option<String>,
        /// Playlist URL, e.g. http://127.0.0.1:8080/live/index.m3u8.
        url: String,
        #[command(flatten)]
        common: CommonArgs,
    },
    /// Viewers walking Zipf-popular VOD titles.
    Vod {
        /// Number of viewers.
        #[arg(short, long, default_value_t = 100)]
        viewers: usize,
        /// Number of titles in the catalog.
        #[arg(long, default_value_t = 100)]
        titles: usize,
        /// Zipf exponent of title popularity (0 = uniform).
        #[arg(long, default_value_t = 1.0)]
        zipf: f64,
        /// Title playlist path; `{i}` is replaced by the title rank, `{i:03}` zero-padded.
        #[arg(long, default_value = "/vod/title_{i:03}/index.m3u8")]
        template: String,
        /// Pace segment fetches at their play duration (default: as fast as possible).
        #[arg(long)]
        realtime: bool,
        /// RNG seed.
        #[arg(long, default_value_t = 42)]
        seed: u64,
        /// Server base URL, e.g. http://127.0.0.1:8080.
        url: String,
        #[command(flatten)]
        common: CommonArgs,
    },
    /// Viewers playing one large file by byte ranges from random start points, seeking
    /// again after each run.
    Seek {
        /// Number of viewers (one connection each).
        #[arg(short, long, default_value_t = 32)]
        viewers: usize,
        /// The file's length in bytes.
        #[arg(long)]
        size: u64,
        /// Bytes per request (chunk boundaries are multiples of it).
        #[arg(long, default_value_t = 2 << 20)]
        chunk: u64,
        /// Play rate in bytes per second.
        #[arg(long, default_value_t = 2 << 20)]
        rate: u64,
        /// Chunks fetched back to back after the first of a run.
        #[arg(long, default_value_t = 2)]
        startup: u32,
        /// How long a viewer plays before seeking again.
        #[arg(long, default_value = "10s", value_parser = parse_duration)]
        run: Duration,
        /// RNG seed.
        #[arg(long, default_value_t = 42)]
        seed: u64,
        /// The file's URL, e.g. http://127.0.0.1:8080/obj/1073741824.mp4.
        url: String,
        #[command(flatten)]
        common: CommonArgs,
    },
    /// Viewers requesting objects of a catalog by Zipf popularity (object k has weight
    /// 1/(k+1)^s), one request every `--interval` each (default: back to back).
    Zipf {
        /// Number of viewers (one connection each).
        #[arg(short, long, default_value_t = 100)]
        viewers: usize,
        /// Objects in the catalog.
        #[arg(long, default_value_t = 1000)]
        objects: usize,
        /// Zipf exponent (0 = uniform).
        #[arg(long, default_value_t = 1.0)]
        exponent: f64,
        /// Time between a viewer's requests.
        #[arg(long, value_parser = parse_duration)]
        interval: Option<Duration>,
        /// RNG seed.
        #[arg(long, default_value_t = 42)]
        seed: u64,
        /// Share of requests (0 to 1) sent to URLs requested once in the run (one-hit
        /// wonders: `{i}` becomes a number past the catalog, unique to the request).
        #[arg(long, default_value_t = 0.0)]
        one_hit_share: f64,
        /// URL whose path contains `{i}` or `{i:0N}` (the object's rank), e.g.
        /// `http://127.0.0.1:8080/obj/2097152?v={i}`.
        url: String,
        #[command(flatten)]
        common: CommonArgs,
    },
    /// Many keep-alive connections, each making one request and then sitting idle to the
    /// end of the run.
    Idle {
        /// Connections.
        #[arg(short, long, default_value_t = 1000)]
        connections: usize,
        /// New connections per second.
        #[arg(long, default_value_t = 2000.0)]
        connect_rate: f64,
        /// Read buffer per connection, bytes.
        #[arg(long, default_value_t = 8192)]
        buffer: usize,
        /// URL each connection requests once.
        url: String,
        #[command(flatten)]
        common: CommonArgs,
    },
    /// Rounds of all viewers requesting the same cold URL at the same instant.
    Herd {
        /// Viewers per round.
        #[arg(short, long, default_value_t = 100)]
        viewers: usize,
        /// Time between rounds.
        #[arg(long, default_value = "1s", value_parser = parse_duration)]
        interval: Duration,
        /// URL with `{n}` (replaced by a run-unique token per round).
        url: String,
        #[command(flatten)]
        common: CommonArgs,
    },
}

/// Parses `10`, `1.5`, `10s`, `250ms`, `2m` into a duration.
fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let (num, scale) = if let Some(n) = s.strip_suffix("ms") {
        (n, 0.001)
    } else if let Some(n) = s.strip_suffix('s') {
        (n, 1.0)
    } else if let Some(n) = s.strip_suffix('m') {
        (n, 60.0)
    } else {
        (s, 1.0)
    };
    let v: f64 = num.trim().parse().map_err(|_| format!("bad duration {s:?}"))?;
    if !v.is_finite() || v < 0.0 || v * scale > 86_400.0 {
        return Err(format!("duration out of range: {s:?}"));
    }
    Ok(Duration::from_secs_f64(v * scale))
}

fn targets(urls: &[String]) -> Result<Vec<Target>> {
    urls.iter().map(|u| Target::parse(u).with_context(|| format!("target {u}"))).collect()
}

fn common(c: &CommonArgs) -> Common {
    Common {
        duration: c.duration,
        timeout: c.timeout,
        headers: c.headers.clone(),
        mark: Mark { header: c.mark_header.clone(), url: c.mark_url.clone() },
        h3_streams: c.h3.then_some(c.streams),
    }
}

/// Report format.
#[derive(Clone, Copy)]
enum Output {
    Table,
    Json,
    Kv,
}

fn fmt(c: &CommonArgs) -> Output {
    if c.json {
        Output::Json
    } else if c.kv {
        Output::Kv
    } else {
        Output::Table
    }
}

/// Flattens nested JSON objects into `a.b=value` lines.
fn flatten(prefix: &str, v: &serde_json::Value, out: &mut Vec<String>) {
    match v {
        serde_json::Value::Object(m) => {
            for (k, v) in m {
                let key = if prefix.is_empty() { k.clone() } else { format!("{prefix}.{k}") };
                flatten(&key, v, out);
            }
        }
        serde_json::Value::Array(a) => {
            for (i, v) in a.iter().enumerate() {
                flatten(&format!("{prefix}.{i}"), v, out);
            }
        }
        serde_json::Value::String(s) => out.push(format!("{prefix}={s}")),
        other => out.push(format!("{prefix}={other}")),
    }
}

/// A scenario's report (one per run).
#[allow(clippy::large_enum_variant)]
enum Any {
    Plain(Report),
    Llhls(LlhlsReport),
    Seek(SeekReport),
}

impl Any {
    fn base(&self) -> &Report {
        match self {
            Any::Plain(r) => r,
            Any::Llhls(r) => &r.base,
            Any::Seek(r) => &r.base,
        }
    }

    fn json(&self) -> Result<serde_json::Value> {
        Ok(match self {
            Any::Plain(r) => serde_json::to_value(r)?,
            Any::Llhls(r) => serde_json::to_value(r)?,
            Any::Seek(r) => serde_json::to_value(r)?,
        })
    }

    fn table(&self) -> String {
        match self {
            Any::Plain(r) => r.to_string(),
            Any::Llhls(r) => r.to_string(),
            Any::Seek(r) => r.to_string(),
        }
    }
}

/// A fetched response for `get`: its head as HTTP/1.1 text and its body.
struct Fetched {
    status: u16,
    head: Vec<u8>,
    body: Vec<u8>,
}

/// `get`: one request over a new connection, the whole response kept.
async fn fetch(url: &str, h3: bool, headers: &[String], timeout: Duration) -> Result<Fetched> {
    let target = Target::parse(url).with_context(|| format!("target {url}"))?;
    if headers.iter().any(|h| !h.contains(':') || h.contains(['\r', '\n'])) {
        bail!("headers must be single `name: value` lines");
    }
    let mut body = Vec::new();
    if h3 {
        if !target.tls {
            bail!("HTTP/3 needs an https:// URL");
        }
        let req = build_request(&target, headers)?;
        let ep = endpoint(target.addr)?;
        let res = tokio::time::timeout(timeout, async {
            let mut conn = H3Conn::connect(&ep, target.addr).await?;
            conn.send_head(&req, Body::Capture(&mut body), None).await
        })
        .await;
        close(&ep).await;
        let (resp, head) = res.context("timed out")??;
        let mut text = format!("HTTP/3 {}\r\n", resp.status).into_bytes();
        for (n, v) in head.headers() {
            text.extend_from_slice(n.as_str().as_bytes());
            text.extend_from_slice(b": ");
            text.extend_from_slice(v.as_bytes());
            text.extend_from_slice(b"\r\n");
        }
        text.extend_from_slice(b"\r\n");
        return Ok(Fetched { status: resp.status, head: text, body });
    }
    let req = build_get(&target.host_header, &target.path, headers);
    let (status, head) = tokio::time::timeout(timeout, async {
        let mut conn = Conn::connect(target.endpoint()).await?;
        conn.keep_head = true;
        let r = conn.send(&req, Body::Capture(&mut body)).await?;
        Ok::<_, anyhow::Error>((r.status, conn.head().to_vec()))
    })
    .await
    .context("timed out")??;
    Ok(Fetched { status, head, body })
}

/// Runs `get`: with `-i` the head and body on stdout as `curl -i` writes them, else the
/// status line on stderr and the body alone on stdout.
fn get(rt: &tokio::runtime::Runtime, cmd: &Scenario) -> Result<ExitCode> {
    let Scenario::Get { h3, include, headers, timeout, url } = cmd else {
        bail!("not a get");
    };
    let f = rt.block_on(fetch(url, *h3, headers, *timeout))?;
    let mut out = std::io::stdout().lock();
    if *include {
        out.write_all(&f.head)?;
    } else {
        let line = f.head.split(|&b| b == b'\n').next().unwrap_or_default();
        eprintln!("{}", String::from_utf8_lossy(line).trim_end());
    }
    out.write_all(&f.body)?;
    out.flush()?;
    Ok(if (200..400).contains(&f.status) { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

fn main() -> Result<ExitCode> {
    let cli = Cli::parse();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        // Compressed playlists are decoded off the I/O thread (see `llhls`), on few threads.
        .max_blocking_threads(2)
        .build()
        .context("building the tokio runtime")?;
    if matches!(cli.scenario, Scenario::Get { .. }) {
        return get(&rt, &cli.scenario);
    }
    let (report, out) = rt.block_on(async {
        Ok::<_, anyhow::Error>(match &cli.scenario {
            Scenario::Get { .. } => bail!("get is not a scenario"),
            Scenario::Fixed { connections, urls, common: c } => {
                let cfg = FixedConfig {
                    urls: targets(urls)?,
                    connections: *connections,
                    common: common(c),
                };
                (Any::Plain(run_fixed(&cfg).await?), fmt(c))
            }
            Scenario::Connect { connections, full, urls, common: c } => {
                let cfg = ConnectConfig {
                    urls: targets(urls)?,
                    connections: *connections,
                    resume: !*full,
                    common: common(c),
                };
                (Any::Plain(run_connect(&cfg).await?), fmt(c))
            }
            Scenario::Open { connections, rate, urls, common: c } => {
                let cfg = OpenConfig {
                    urls: targets(urls)?,
                    connections: *connections,
                    rate: *rate,
                    common: common(c),
                };
                (Any::Plain(run_open(&cfg).await?), fmt(c))
            }
            Scenario::Live { viewers, jitter, url, common: c } => {
                let cfg = LiveConfig {
                    playlist: Target::parse(url).with_context(|| format!("target {url}"))?,
                    viewers: *viewers,
                    jitter: *jitter,
                    common: common(c),
                };
                (Any::Plain(run_live(&cfg).await?), fmt(c))
            }
            Scenario::Llhls { viewers, origin, url, common: c } => {
                let playlist = Target::parse(url).with_context(|| format!("target {url}"))?;
                let origin = match origin {
                    Some(o) => Target::parse(o).with_context(|| format!("origin {o}"))?,
                    None => playlist.clone(),
                };
                let cfg = LlhlsConfig {
                    playlist,
                    viewers: *viewers,
                    origin: Some(origin),
                    common: common(c),
                };
                (Any::Llhls(run_llhls(&cfg).await?), fmt(c))
            }
            Scenario::Vod { viewers, titles, zipf, template, realtime, seed, url, common: c } => {
                let cfg = VodConfig {
                    server: Target::parse(url).with_context(|| format!("target {url}"))?,
                    title_template: template.clone(),
                    titles: *titles,
                    zipf_exponent: *zipf,
                    viewers: *viewers,
                    realtime: *realtime,
                    seed: *seed,
                    common: common(c),
                };
                (Any::Plain(run_vod(&cfg).await?), fmt(c))
            }
            Scenario::Seek { viewers, size, chunk, rate, startup, run, seed, url, common: c } => {
                let cfg = SeekConfig {
                    target: Target::parse(url).with_context(|| format!("target {url}"))?,
                    size: *size,
                    viewers: *viewers,
                    chunk: *chunk,
                    rate: *rate,
                    startup: *startup,
                    run: *run,
                    seed: *seed,
                    common: common(c),
                };
                (Any::Seek(run_seek(&cfg).await?), fmt(c))
            }
            Scenario::Zipf {
                viewers,
                objects,
                exponent,
                interval,
                seed,
                one_hit_share,
                url,
                common: c,
            } => {
                let cfg = ZipfConfig {
                    target: Target::parse(url).with_context(|| format!("target {url}"))?,
                    objects: *objects,
                    exponent: *exponent,
                    viewers: *viewers,
                    interval: *interval,
                    seed: *seed,
                    one_hit_share: *one_hit_share,
                    common: common(c),
                };
                (Any::Plain(run_zipf(&cfg).await?), fmt(c))
            }
            Scenario::Idle { connections, connect_rate, buffer, url, common: c } => {
                let cfg = IdleConfig {
                    target: Target::parse(url).with_context(|| format!("target {url}"))?,
                    connections: *connections,
                    connect_rate: *connect_rate,
                    buffer: *buffer,
                    common: common(c),
                };
                (Any::Plain(run_idle(&cfg).await?), fmt(c))
            }
            Scenario::Herd { viewers, interval, url, common: c } => {
                let cfg = HerdConfig {
                    target: Target::parse(url).with_context(|| format!("target {url}"))?,
                    viewers: *viewers,
                    interval: *interval,
                    common: common(c),
                };
                (Any::Plain(run_herd(&cfg).await?), fmt(c))
            }
        })
    })?;
    match out {
        Output::Json => println!("{}", report.json()?),
        Output::Kv => {
            let mut lines = Vec::new();
            flatten("", &report.json()?, &mut lines);
            println!("{}", lines.join("\n"));
        }
        Output::Table => print!("{}", report.table()),
    }
    let base = report.base();
    if base.requests == 0 && base.errors_total > 0 {
        bail!("no request succeeded");
    }
    Ok(ExitCode::SUCCESS)
}
