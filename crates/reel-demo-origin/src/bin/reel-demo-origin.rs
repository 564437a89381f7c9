//! `reel-demo-origin`: runs the origin simulator as its own process, for benchmarks and
//! manual testing. Prints `listening on http://<addr>` on stdout once bound (so scripts may
//! pass port 0), logs to stderr, and exits cleanly on SIGINT or SIGTERM.

use std::io::Write;
use std::net::SocketAddr;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::Parser;
use reel_demo_origin::{DemoOriginConfig, OriginStats, serve_with_stats};

/// Origin simulator: live HLS, VOD catalog, benchmark objects, production-shaped latency.
#[derive(Debug, Parser)]
#[command(name = "reel-demo-origin", version)]
struct Args {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:8081")]
    listen: SocketAddr,
    /// Factor on the latency table; 0 disables added latency.
    #[arg(long, default_value_t = 1.0)]
    latency_scale: f64,
    /// Latency table as `percentile:ms` pairs, e.g. `50:33,99:166,100:1000`.
    #[arg(long)]
    latency_table: Option<String>,
    /// Fraction of requests answered 503.
    #[arg(long, default_value_t = 0.0)]
    error_rate: f64,
    /// Fraction of bodies cut midway (connection closed after half the body).
    #[arg(long, default_value_t = 0.0)]
    reset_rate: f64,
    /// Live segment duration in milliseconds.
    #[arg(long, default_value_t = 2000)]
    segment_duration_ms: u64,
    /// Byte budget per live segment (media plus TS null-packet filler).
    #[arg(long, default_value_t = 1 << 20)]
    live_segment_size: u64,
    /// Segments in the live playlist window.
    #[arg(long, default_value_t = 10)]
    live_window: u64,
    /// LL-HLS parts per live segment; 0 serves classic playlists.
    #[arg(long, default_value_t = 4)]
    parts_per_segment: u32,
    /// Hold a request for the part in production until the whole part exists, instead of
    /// sending it picture by picture as it is produced.
    #[arg(long)]
    whole_parts: bool,
    /// Number of VOD titles.
    #[arg(long, default_value_t = 4)]
    vod_titles: usize,
    /// Segments per VOD title.
    #[arg(long, default_value_t = 30)]
    vod_segments: u64,
    /// Byte budget per VOD segment.
    #[arg(long, default_value_t = 2 << 20)]
    vod_segment_size: u64,
    /// Pace every body at this many bytes per second.
    #[arg(long)]
    slow_body_bps: Option<u64>,
    /// Seed for latency and fault draws and generated content.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Runtime threads: 1 runs a current-thread runtime, more a multi-thread one.
    #[arg(long, default_value_t = 1)]
    threads: usize,
}

fn parse_table(s: &str) -> anyhow::Result<Vec<(f64, f64)>> {
    s.split(',')
        .map(|pair| {
            let (p, ms) =
                pair.split_once(':').context("latency table entries are percentile:ms")?;
            Ok((p.trim().parse()?, ms.trim().parse()?))
        })
        .collect()
}

fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    let args = Args::parse();
    let defaults = DemoOriginConfig::default();
    let cfg = DemoOriginConfig {
        latency_scale: args.latency_scale,
        latency_table: match &args.latency_table {
            Some(t) => parse_table(t)?,
            None => defaults.latency_table,
        },
        error_rate: args.error_rate,
        reset_rate: args.reset_rate,
        segment_duration: Duration::from_millis(args.segment_duration_ms),
        live_segment_size: args.live_segment_size,
        live_window: args.live_window,
        parts_per_segment: args.parts_per_segment,
        stream_parts: !args.whole_parts,
        vod_titles: args.vod_titles,
        vod_segments: args.vod_segments,
        vod_segment_size: args.vod_segment_size,
        slow_body_bps: args.slow_body_bps,
        seed: args.seed,
    };
    cfg.validate()?;
    if args.threads == 0 {
        bail!("--threads must be at least 1");
    }
    let rt = if args.threads == 1 {
        tokio::runtime::Builder::new_current_thread().enable_all().build()?
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(args.threads)
            .enable_all()
            .build()?
    };
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind(args.listen)
            .await
            .with_context(|| format!("binding {}", args.listen))?;
        let addr = listener.local_addr()?;
        let mut out = std::io::stdout().lock();
        writeln!(out, "listening on http://{addr}")?;
        out.flush()?;
        drop(out);
        tracing::info!(%addr, "reel-demo-origin serving");
        serve_with_stats(listener, cfg, OriginStats::new(), shutdown_signal()).await?;
        tracing::info!("reel-demo-origin stopped");
        Ok(())
    })
}

async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    match signal(SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = term.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
        }
        Err(e) => {
            tracing::warn!(error = %e, "no SIGTERM handler; only SIGINT stops the server");
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}
