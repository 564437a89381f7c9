//! Origin simulator for reel: the built-in demo origin behind the default config and the
//! origin of load tests and benchmarks. It is not on reel's hot path, so it uses hyper's
//! HTTP/1.1 server; [`serve`] runs on whatever tokio runtime calls it (connections are
//! `tokio::spawn`ed, so a multi-thread runtime spreads them), and [`spawn`] gives it its own
//! thread with a current-thread runtime.
//!
//! What it serves (all `GET`/`HEAD`; other methods get 405):
//!
//! - **Live HLS** with Low-Latency HLS: `/live/index.m3u8` and `/live/<stream>/index.m3u8`
//!   (stream names `[A-Za-z0-9_-]{1,64}`), a sliding window of `live_window` segments whose
//!   media sequence advances with wall-clock time (segment `n` covers `[n·d, (n+1)·d)` after
//!   the Unix epoch and is published at its end, so separate processes agree). Each segment
//!   `seg_<msn>.ts` is cut into `parts_per_segment` parts `seg_<msn>.part<p>.ts`, listed with
//!   `EXT-X-PART` near the live edge; the part in production is announced by
//!   `EXT-X-PRELOAD-HINT`, and a request for it is held, then streamed (chunked) as its
//!   pictures are produced. `EXT-X-SERVER-CONTROL` offers blocking reload
//!   (`_HLS_msn`/`_HLS_part`, held until that part or segment exists; too far ahead is a 400)
//!   and delta updates (`_HLS_skip=YES`, `EXT-X-SKIP`); see the `live` module. A segment or
//!   part not yet published is 404; one more than [`LIVE_DVR_WINDOWS`]` × live_window`
//!   segments behind the live edge is 404 too. Playlists carry
//!   `Cache-Control: max-age=<max(1, target/2)>`, segments and parts
//!   `public, max-age=86400`, all of them ETag, Last-Modified and [`RELEASE_HEADER`].
//!   Classic players ignore the part tags and play the segments.
//! - **VOD catalog**: `/vod/`, `/vod/index.json` (JSON list of titles), per title
//!   `/vod/title_<NNN>/index.m3u8` (`#EXT-X-PLAYLIST-TYPE:VOD`, `#EXT-X-ENDLIST`) and
//!   `/vod/title_<NNN>/seg_<n>.ts`.
//! - **Benchmark objects**: `/obj/<bytes>` (up to [`MAX_OBJECT_SIZE`]), and the peers-harness
//!   paths `/live/playlist.m3u8` (1024 bytes), `/live/part<N>.m4s` (256 KiB), `/vod/seg.ts` and
//!   `/vod/cat/seg_<NNN>.ts` (2 MiB). `Cache-Control: public, max-age=3600`.
//! - `/healthz`: 200 `ok`, never delayed or faulted.
//! - Control (not counted): `GET /__origin/stats` ([`StatsSnapshot`] as JSON, with request
//!   counts by class, status, path and request target),
//!   `POST /__origin/reset` (204, zeroes the counters).
//!
//! Live and VOD segments and parts are playable media ([`media`]): MPEG-TS with H.264
//! pictures of a clock and the sequence numbers, a pure function of the configuration, the
//! path and (for the background colour) the seed. The other generated bodies are a pure
//! function of `(seed, path, offset)` ([`content::expected_bytes`]). Every complete object
//! supports single ranges (206/416) and conditional requests (304 on `If-None-Match` /
//! `If-Modified-Since`).
//!
//! Latency, drawn per request from [`DemoOriginConfig::latency_table`] and scaled by
//! `latency_scale`, delays the response head. Per request, header or query parameter
//! [`DELAY_HEADER`] replaces it, [`STREAM_HEADER`] spreads the body over N ms and
//! [`FAULT_HEADER`] (`error` | `reset` | `none`) overrides the configured fault rates. A
//! "reset" sends the head with the full `Content-Length`, half the body, then closes the
//! connection.

#![forbid(unsafe_code)]

mod body;
mod config;
pub mod content;
mod latency;
mod live;
pub mod media;
mod range;
mod service;
mod stats;

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::{oneshot, watch};
use tokio::task::JoinSet;

pub use body::{BodyCut, OriginBody};
pub use config::{ConfigError, DemoOriginConfig, MAX_MEDIA_SEGMENT, MAX_OBJECT_SIZE, MAX_PARTS};
pub use latency::{DEFAULT_LATENCY_TABLE, LatencyTable, SplitMix, mix64};
pub use service::{
    DELAY_HEADER, FAULT_HEADER, FIXED_PLAYLIST_SIZE, FIXED_SEGMENT_SIZE, LATENCY_HEADER,
    LIVE_DVR_WINDOWS, PART_SIZE, RELEASE_HEADER, STREAM_HEADER,
};
pub use stats::{MAX_TRACKED_PATHS, OriginStats, PathClass, StatsSnapshot};

use service::Shared;

/// After shutdown is requested, in-flight requests get this long before they are dropped.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(2);

/// Why the simulator could not start.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The configuration is invalid.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// Binding, runtime or thread creation failed.
    #[error("demo origin: {0}")]
    Io(#[from] io::Error),
}

/// Serves until `shutdown` completes, then stops accepting, lets in-flight requests finish
/// for up to [`SHUTDOWN_GRACE`] and returns. An invalid `cfg` is an `InvalidInput` error.
pub async fn serve(
    listener: TcpListener,
    cfg: DemoOriginConfig,
    shutdown: impl Future<Output = ()>,
) -> io::Result<()> {
    serve_with_stats(listener, cfg, OriginStats::new(), shutdown).await
}

/// [`serve`], counting into `stats` (which the caller may read from any thread).
pub async fn serve_with_stats(
    listener: TcpListener,
    cfg: DemoOriginConfig,
    stats: OriginStats,
    shutdown: impl Future<Output = ()>,
) -> io::Result<()> {
    let shared = Arc::new(Shared::new(cfg, stats).map_err(|e| match e {
        Error::Io(e) => e,
        Error::Config(c) => io::Error::new(io::ErrorKind::InvalidInput, c),
    })?);
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut conns = JoinSet::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _peer)) => {
                    let _ = stream.set_nodelay(true);
                    conns.spawn(connection(stream, shared.clone(), stop_rx.clone()));
                }
                Err(e) => {
                    // EMFILE and friends: back off instead of spinning; the listener stays.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
        }
    }
    drop(listener);
    let _ = stop_tx.send(true);
    let _ =
        tokio::time::timeout(SHUTDOWN_GRACE, async { while conns.join_next().await.is_some() {} })
            .await;
    conns.abort_all();
    Ok(())
}

async fn connection(
    stream: tokio::net::TcpStream,
    shared: Arc<Shared>,
    mut stop: watch::Receiver<bool>,
) {
    let svc = service_fn(move |req| shared.clone().handle(req));
    let conn = http1::Builder::new()
        .timer(TokioTimer::new())
        .keep_alive(true)
        .serve_connection(TokioIo::new(stream), svc);
    let mut conn = std::pin::pin!(conn);
    tokio::select! {
        res = conn.as_mut() => {
            if let Err(e) = res {
                tracing::debug!(error = %e, "connection ended with an error");
            }
        }
        () = async { drop(stop.wait_for(|s| *s).await) } => {
            conn.as_mut().graceful_shutdown();
            let _ = conn.await;
        }
    }
}

/// A simulator running on its own thread (current-thread tokio runtime).
///
/// Dropping it shuts the server down and joins the thread, like [`DemoOrigin::shutdown`].
#[derive(Debug)]
pub struct DemoOrigin {
    local_addr: SocketAddr,
    stats: OriginStats,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<io::Result<()>>>,
}

/// Binds `addr` (port 0 picks a free port) on the calling thread, so bind errors are
/// returned here, then serves on a new thread until [`DemoOrigin::shutdown`] or drop.
pub fn spawn(addr: SocketAddr, cfg: DemoOriginConfig) -> Result<DemoOrigin, Error> {
    cfg.validate()?;
    spawn_on(std::net::TcpListener::bind(addr)?, cfg)
}

/// Like [`spawn`] on a socket that is already listening (e.g. one a restarting server
/// inherited from the process it replaces).
pub fn spawn_on(
    std_listener: std::net::TcpListener,
    cfg: DemoOriginConfig,
) -> Result<DemoOrigin, Error> {
    cfg.validate()?;
    std_listener.set_nonblocking(true)?;
    let local_addr = std_listener.local_addr()?;
    let stats = OriginStats::new();
    let (stop, stopped) = oneshot::channel::<()>();
    let thread_stats = stats.clone();
    let thread = std::thread::Builder::new().name("reel-demo-origin".into()).spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        rt.block_on(async move {
            let listener = TcpListener::from_std(std_listener)?;
            serve_with_stats(listener, cfg, thread_stats, async {
                let _ = stopped.await;
            })
            .await
        })
    })?;
    Ok(DemoOrigin { local_addr, stats, stop: Some(stop), thread: Some(thread) })
}

impl DemoOrigin {
    /// The bound address (with the real port when 0 was asked for).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// `http://<local_addr><path>`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.local_addr)
    }

    /// The live counters (shared with the server thread).
    pub fn stats(&self) -> &OriginStats {
        &self.stats
    }

    /// Stops accepting, waits up to [`SHUTDOWN_GRACE`] for in-flight requests, joins the
    /// server thread and returns its result.
    pub fn shutdown(mut self) -> io::Result<()> {
        self.stop_and_join()
    }

    fn stop_and_join(&mut self) -> io::Result<()> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        match self.thread.take().map(JoinHandle::join) {
            None => Ok(()),
            Some(Ok(res)) => res,
            Some(Err(_)) => Err(io::Error::other("demo origin thread panicked")),
        }
    }
}

impl Drop for DemoOrigin {
    fn drop(&mut self) {
        let _ = self.stop_and_join();
    }
}
