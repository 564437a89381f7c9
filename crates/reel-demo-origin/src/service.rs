//! Routing and responses: live HLS (with LL-HLS parts, blocking reload and delta updates),
//! the VOD catalog, fixed benchmark objects, the control endpoints, and where latency and
//! faults are injected.
//!
//! Principal type: [`Shared`], the per-server state every connection's service holds.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http::header::{self, HeaderName, HeaderValue};
use http::{HeaderMap, Method, Request, Response, StatusCode};
use tokio::time::Instant;

use crate::body::{OriginBody, Source};
use crate::config::{DemoOriginConfig, MAX_OBJECT_SIZE};
use crate::content::{content_key, etag};
use crate::latency::{LatencyTable, SplitMix};
use crate::live::{Directives, Refusal, Timeline};
use crate::media::{self, Key, Layout, MediaCache, MediaError, Spec};
use crate::range::{RangeSpec, parse_range};
use crate::stats::{OriginStats, PathClass};

/// Header (or query parameter) replacing the sampled latency for one request, in ms.
pub const DELAY_HEADER: &str = "x-origin-delay-ms";
/// Header (or query parameter) spreading the body over this many ms.
pub const STREAM_HEADER: &str = "x-origin-stream-ms";
/// Header (or query parameter) forcing a fault: `error` (503), `reset` (cut body) or
/// `none` (neither, whatever the configured rates).
pub const FAULT_HEADER: &str = "x-origin-fault";
/// Header (or query parameter) `ignore`: the response ignores `Range` (a whole `200`, as an
/// origin without range support answers).
pub const RANGES_HEADER: &str = "x-origin-ranges";
/// Header on every content response giving the latency that was added, in ms.
pub const LATENCY_HEADER: &str = "x-origin-latency-ms";
/// Header on live playlists, segments and parts: the Unix time in ms when the origin released
/// that playlist version (its newest part completed) or the first bytes of that part or
/// segment. Arrival minus this is the latency added on the way to a viewer.
pub const RELEASE_HEADER: &str = "x-origin-release-ms";

/// Live segments older than this many windows are answered 404 (the DVR depth).
pub const LIVE_DVR_WINDOWS: u64 = 10;
/// Size of each peers-harness `/live/part<N>.m4s` object.
pub const PART_SIZE: u64 = 256 << 10;
/// Size of `/vod/seg.ts` and each `/vod/cat/seg_<NNN>.ts`.
pub const FIXED_SEGMENT_SIZE: u64 = 2 << 20;
/// Size of `/live/playlist.m3u8`.
pub const FIXED_PLAYLIST_SIZE: usize = 1024;
/// `Last-Modified` of every VOD and fixed object: 2024-01-01T00:00:00Z, so separate
/// origin processes agree on validators.
const VOD_EPOCH: u64 = 1_704_067_200;

const M3U8: &str = "application/vnd.apple.mpegurl";
const TS: &str = "video/mp2t";
const LONG_CACHE: &str = "public, max-age=3600";

/// State shared by every connection of one server.
#[derive(Debug)]
pub(crate) struct Shared {
    cfg: DemoOriginConfig,
    table: LatencyTable,
    rng: SplitMix,
    pub(crate) stats: OriginStats,
    clock: Clock,
    live: Timeline,
    live_layout: Layout,
    vod_layout: Layout,
    media: MediaCache,
    titles: Vec<String>,
    fixed_playlist: Bytes,
    vod_index: Bytes,
    /// The version of every `/obj/` object, bumped by `POST /__origin/version`.
    object_version: std::sync::atomic::AtomicU64,
}

/// Unix time from the monotonic clock: sequence numbers are derived from Unix time (see
/// [`Timeline`]), so they agree across restarts and across several origin processes, and
/// elapsed time never goes backwards.
#[derive(Debug)]
struct Clock {
    start: Instant,
    start_unix_ms: u64,
}

impl Clock {
    fn now_ms(&self) -> u64 {
        self.start_unix_ms + self.start.elapsed().as_millis() as u64
    }

    fn instant_of(&self, unix_ms: u64) -> Instant {
        self.start + Duration::from_millis(unix_ms.saturating_sub(self.start_unix_ms))
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Route {
    Health,
    LivePlaylist,
    LiveSegment(u64),
    LivePart(u64, u64),
    VodIndex,
    VodPlaylist(usize),
    VodSegment(usize, u64),
    Object(u64),
    FixedPlaylist,
    FixedGen(u64),
    NotFound,
}

impl Route {
    fn class(&self) -> PathClass {
        match self {
            Route::Health => PathClass::Health,
            Route::LivePlaylist => PathClass::LivePlaylist,
            Route::LiveSegment(_) => PathClass::LiveSegment,
            Route::LivePart(..) => PathClass::LivePart,
            Route::VodIndex => PathClass::VodIndex,
            Route::VodPlaylist(_) => PathClass::VodPlaylist,
            Route::VodSegment(..) => PathClass::VodSegment,
            Route::Object(_) => PathClass::Object,
            Route::FixedPlaylist | Route::FixedGen(_) => PathClass::Fixed,
            Route::NotFound => PathClass::Other,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    Error,
    Reset,
    None,
}

#[derive(Debug, Default)]
struct Overrides {
    delay_ms: Option<u64>,
    stream_ms: Option<u64>,
    fault: Option<Fault>,
    ignore_ranges: bool,
}

/// A refusal decided before any representation exists.
struct Reject(StatusCode, &'static str);

/// A representation ready to send, with its validators.
struct Entity {
    source: Source,
    len: u64,
    etag: String,
    last_modified_secs: u64,
    content_type: &'static str,
    cache_control: String,
    /// Value of [`RELEASE_HEADER`].
    release_ms: Option<u64>,
    /// `(Unix ms, end offset)`: the body is still being produced and leaves in these steps,
    /// chunked; the response head waits for the first step.
    schedule: Option<Vec<(u64, u64)>>,
}

fn seg_number(name: &str, prefix: &str, suffix: &str) -> Option<u64> {
    let digits = name.strip_prefix(prefix)?.strip_suffix(suffix)?;
    if digits.is_empty() || digits.len() > 19 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// `seg_<msn>.part<p>.ts`.
fn part_name(name: &str) -> Option<(u64, u64)> {
    let (msn, p) = name.strip_prefix("seg_")?.strip_suffix(".ts")?.split_once(".part")?;
    Some((seg_number(msn, "", "")?, seg_number(p, "", "")?))
}

/// The stream name of a live path: `news` for `/live/news/...`, empty for `/live/...`.
fn live_stream(path: &str) -> &str {
    let mut it = path.trim_start_matches('/').split('/');
    match (it.next(), it.next(), it.next()) {
        (Some("live"), Some(s), Some(_)) => s,
        _ => "",
    }
}

fn valid_stream(s: &str) -> bool {
    (1..=64).contains(&s.len())
        && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

fn query_param<'a>(query: Option<&'a str>, name: &str) -> Option<&'a str> {
    query?.split('&').find_map(|kv| {
        let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
        (k == name).then_some(v)
    })
}

fn hv(s: impl AsRef<str>) -> HeaderValue {
    HeaderValue::from_str(s.as_ref()).unwrap_or_else(|_| HeaderValue::from_static("invalid"))
}

fn simple(status: StatusCode, msg: &str) -> Response<OriginBody> {
    let mut r = Response::new(OriginBody::bytes(Bytes::from(format!("{msg}\n"))));
    *r.status_mut() = status;
    let h = r.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
    // Errors must not be cached: a 404 for a not-yet-published live segment is heuristically
    // cacheable (RFC 9110 §15.1) and would outlive the segment's publication.
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}

fn unix_secs(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// Weak comparison of an `If-None-Match` list against our tag (RFC 9110 §13.1.2).
fn none_match(value: &str, tag: &str) -> bool {
    let tag = tag.trim_start_matches("W/");
    value.split(',').map(str::trim).any(|v| v == "*" || v.trim_start_matches("W/") == tag)
}

impl Shared {
    pub(crate) fn new(cfg: DemoOriginConfig, stats: OriginStats) -> Result<Self, crate::Error> {
        cfg.validate()?;
        let table = LatencyTable::new(&cfg.latency_table)?;
        let seg_ms = (cfg.segment_duration.as_millis() as u64).max(1);
        let clock = Clock {
            start: Instant::now(),
            start_unix_ms: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as u64),
        };
        let live = Timeline { seg_ms, parts: cfg.parts_per_segment, window: cfg.live_window };
        let media_err = |e: MediaError| crate::Error::Io(std::io::Error::other(e));
        let live_layout =
            Layout::new(seg_ms, cfg.parts_per_segment, cfg.live_segment_size).map_err(media_err)?;
        let vod_layout = Layout::new(seg_ms, 1, cfg.vod_segment_size).map_err(media_err)?;
        let titles: Vec<String> = (0..cfg.vod_titles).map(|i| format!("title_{i:03}")).collect();
        let vod_index = serde_json::json!({
            "titles": titles.iter().map(|t| serde_json::json!({
                "name": t,
                "playlist": format!("/vod/{t}/index.m3u8"),
                "segments": cfg.vod_segments,
                "segment_size": vod_layout.segment_len(),
                "segment_duration_ms": seg_ms,
            })).collect::<Vec<_>>(),
        });
        let vod_index = Bytes::from(serde_json::to_vec_pretty(&vod_index).unwrap_or_default());
        let media = MediaCache::new(live_layout.segment_len().max(vod_layout.segment_len()));
        Ok(Self {
            rng: SplitMix::new(cfg.seed),
            fixed_playlist: fixed_playlist(),
            table,
            stats,
            clock,
            live,
            live_layout,
            vod_layout,
            media,
            titles,
            vod_index,
            object_version: std::sync::atomic::AtomicU64::new(0),
            cfg,
        })
    }

    fn route(&self, path: &str) -> Route {
        let parts: Vec<&str> = path.strip_prefix('/').unwrap_or(path).split('/').collect();
        match parts.as_slice() {
            ["healthz"] => Route::Health,
            ["live", "index.m3u8"] => Route::LivePlaylist,
            ["live", "playlist.m3u8"] => Route::FixedPlaylist,
            ["live", f] if seg_number(f, "part", ".m4s").is_some() => Route::FixedGen(PART_SIZE),
            ["live", f] => live_file(f),
            ["live", s, "index.m3u8"] if valid_stream(s) => Route::LivePlaylist,
            ["live", s, f] if valid_stream(s) => live_file(f),
            ["vod"] | ["vod", ""] | ["vod", "index.json"] => Route::VodIndex,
            ["vod", "seg.ts"] => Route::FixedGen(FIXED_SEGMENT_SIZE),
            ["vod", "cat", f] if seg_number(f, "seg_", ".ts").is_some() => {
                Route::FixedGen(FIXED_SEGMENT_SIZE)
            }
            ["vod", t, f] => match self.titles.iter().position(|x| x == t) {
                Some(i) if *f == "index.m3u8" => Route::VodPlaylist(i),
                Some(i) => match seg_number(f, "seg_", ".ts") {
                    Some(n) if n < self.cfg.vod_segments => Route::VodSegment(i, n),
                    _ => Route::NotFound,
                },
                None => Route::NotFound,
            },
            ["obj", n] => match seg_number(n, "", "").or_else(|| seg_number(n, "", ".mp4")) {
                Some(len) if len <= MAX_OBJECT_SIZE => Route::Object(len),
                _ => Route::NotFound,
            },
            _ => Route::NotFound,
        }
    }

    /// Answers one request; never fails (every problem is an HTTP status).
    pub(crate) async fn handle<B>(
        self: Arc<Self>,
        req: Request<B>,
    ) -> Result<Response<OriginBody>, Infallible> {
        let path = req.uri().path().to_string();
        if let Some(ctl) = path.strip_prefix("/__origin/") {
            return Ok(self.control(ctl, req.method()));
        }
        let route = self.route(&path);
        self.stats.record_request(route.class(), &path, req.uri().query());
        if let Some(r) = req.headers().get(header::RANGE).and_then(|v| v.to_str().ok()) {
            self.stats.record_range(&path, r);
        }
        let resp = self.content(route, &path, &req).await;
        self.stats.record_status(resp.status().as_u16());
        Ok(resp)
    }

    fn control(&self, what: &str, method: &Method) -> Response<OriginBody> {
        match (what, method) {
            ("stats", &Method::GET) => {
                let body = serde_json::to_vec_pretty(&self.stats.snapshot()).unwrap_or_default();
                let mut r = Response::new(OriginBody::bytes(body));
                r.headers_mut()
                    .insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
                r.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
                r
            }
            ("reset", &Method::POST) => {
                self.stats.reset();
                let mut r = Response::new(OriginBody::empty());
                *r.status_mut() = StatusCode::NO_CONTENT;
                r
            }
            ("version", &Method::POST) => {
                use std::sync::atomic::Ordering;
                let v = self.object_version.fetch_add(1, Ordering::SeqCst) + 1;
                let mut r = Response::new(OriginBody::bytes(format!("{v}\n")));
                r.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
                r
            }
            ("stats", _) | ("reset", _) | ("version", _) => {
                simple(StatusCode::METHOD_NOT_ALLOWED, "wrong method")
            }
            _ => simple(StatusCode::NOT_FOUND, "no such control endpoint"),
        }
    }

    fn overrides(headers: &HeaderMap, query: Option<&str>) -> Result<Overrides, String> {
        let get = |name: &str| {
            headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .or_else(|| query_param(query, name))
                .map(str::trim)
        };
        let num = |name: &str| -> Result<Option<u64>, String> {
            match get(name) {
                None => Ok(None),
                Some(v) => v.parse().map(Some).map_err(|_| format!("{name}: not a number")),
            }
        };
        let fault = match get(FAULT_HEADER) {
            None => None,
            Some("error") => Some(Fault::Error),
            Some("reset") => Some(Fault::Reset),
            Some("none") => Some(Fault::None),
            Some(_) => return Err(format!("{FAULT_HEADER}: expected error, reset or none")),
        };
        let ignore_ranges = match get(RANGES_HEADER) {
            None | Some("honor") => false,
            Some("ignore") => true,
            Some(_) => return Err(format!("{RANGES_HEADER}: expected ignore or honor")),
        };
        Ok(Overrides {
            delay_ms: num(DELAY_HEADER)?,
            stream_ms: num(STREAM_HEADER)?,
            fault,
            ignore_ranges,
        })
    }

    async fn content<B>(&self, route: Route, path: &str, req: &Request<B>) -> Response<OriginBody> {
        let method = req.method();
        if method != Method::GET && method != Method::HEAD {
            let mut r = simple(StatusCode::METHOD_NOT_ALLOWED, "only GET and HEAD");
            r.headers_mut().insert(header::ALLOW, HeaderValue::from_static("GET, HEAD"));
            return r;
        }
        let query = req.uri().query();
        let ov = match Self::overrides(req.headers(), query) {
            Ok(ov) => ov,
            Err(e) => return simple(StatusCode::BAD_REQUEST, &e),
        };
        // Health checks see neither latency nor faults: they answer "is the process up".
        let faults = route != Route::Health;
        let mut delay = Duration::ZERO;
        if faults {
            delay = ov.delay_ms.map_or_else(
                || self.table.sample(self.rng.next_f64(), self.cfg.latency_scale),
                Duration::from_millis,
            );
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            let error = match ov.fault {
                Some(f) => f == Fault::Error,
                None => self.rng.chance(self.cfg.error_rate),
            };
            if error {
                self.stats.record_error();
                return simple(StatusCode::SERVICE_UNAVAILABLE, "injected error");
            }
        }
        let entity = match route {
            Route::Health => {
                Ok(self.static_entity(Bytes::from_static(b"ok\n"), "text/plain", "no-store"))
            }
            Route::LivePlaylist => self.live_playlist(query).await,
            Route::LiveSegment(msn) => self.live_segment(path, msn),
            Route::LivePart(msn, p) => self.live_part(path, msn, p),
            Route::VodIndex => {
                Ok(self.static_entity(self.vod_index.clone(), "application/json", LONG_CACHE))
            }
            Route::VodPlaylist(i) => Ok(self.vod_playlist(i)),
            Route::VodSegment(t, n) => self.vod_segment(path, t, n),
            Route::Object(len) => Ok(self.object(path, len)),
            Route::FixedPlaylist => {
                Ok(self.static_entity(self.fixed_playlist.clone(), M3U8, LONG_CACHE))
            }
            Route::FixedGen(len) => {
                let ct = if path.ends_with(".m4s") { "video/iso.segment" } else { TS };
                Ok(self.generated(path, len, ct))
            }
            Route::NotFound => Err(Reject(StatusCode::NOT_FOUND, "not found")),
        };
        let mut resp = match entity {
            Ok(e) => {
                let reset = faults
                    && match ov.fault {
                        Some(f) => f == Fault::Reset,
                        None => self.rng.chance(self.cfg.reset_rate),
                    };
                self.send(req, e, &ov, reset).await
            }
            Err(Reject(status, msg)) => simple(status, msg),
        };
        if faults {
            resp.headers_mut().insert(LATENCY_HEADER, hv(delay.as_millis().to_string()));
        }
        resp
    }

    async fn send<B>(
        &self,
        req: &Request<B>,
        e: Entity,
        ov: &Overrides,
        reset: bool,
    ) -> Response<OriginBody> {
        let stream_ms = ov.stream_ms;
        let headers = req.headers();
        let hstr = |name: HeaderName| headers.get(name).and_then(|v| v.to_str().ok());
        let lm = UNIX_EPOCH + Duration::from_secs(e.last_modified_secs);
        let mut validators = HeaderMap::new();
        validators.insert(header::ETAG, hv(&e.etag));
        validators.insert(header::LAST_MODIFIED, hv(httpdate::fmt_http_date(lm)));
        validators.insert(header::CACHE_CONTROL, hv(&e.cache_control));
        if let Some(ms) = e.release_ms {
            validators.insert(RELEASE_HEADER, hv(ms.to_string()));
        }

        // RFC 9110 §13.2.2: If-None-Match, when present, decides; If-Modified-Since only
        // without it.
        let not_modified = match (hstr(header::IF_NONE_MATCH), hstr(header::IF_MODIFIED_SINCE)) {
            (Some(inm), _) => none_match(inm, &e.etag),
            (None, Some(ims)) => {
                httpdate::parse_http_date(ims).is_ok_and(|t| e.last_modified_secs <= unix_secs(t))
            }
            (None, None) => false,
        };
        if not_modified {
            let mut r = Response::new(OriginBody::empty());
            *r.status_mut() = StatusCode::NOT_MODIFIED;
            r.headers_mut().extend(validators);
            return r;
        }

        if let Some(steps) = e.schedule {
            return self
                .send_producing(req, e.source, e.len, e.content_type, validators, steps, reset)
                .await;
        }

        let mut spec = RangeSpec::Full;
        let range = match req.method() {
            &Method::GET if !ov.ignore_ranges => hstr(header::RANGE),
            _ => None,
        };
        if let Some(range) = range {
            // RFC 9110 §13.1.5: a failed If-Range means "send it all".
            let if_range_ok = match hstr(header::IF_RANGE) {
                None => true,
                Some(v) if v.starts_with('"') => v == e.etag,
                Some(v) => {
                    httpdate::parse_http_date(v).is_ok_and(|t| unix_secs(t) == e.last_modified_secs)
                }
            };
            if if_range_ok {
                spec = parse_range(range, e.len);
            }
        }
        let (status, start, end) = match spec {
            RangeSpec::Full => (StatusCode::OK, 0, e.len),
            RangeSpec::Partial(a, b) => (StatusCode::PARTIAL_CONTENT, a, b + 1),
            RangeSpec::Unsatisfiable => {
                let mut r = simple(StatusCode::RANGE_NOT_SATISFIABLE, "range not satisfiable");
                r.headers_mut().insert(header::CONTENT_RANGE, hv(format!("bytes */{}", e.len)));
                return r;
            }
        };
        let len = end - start;
        let mut body = OriginBody::empty();
        if req.method() != Method::HEAD {
            body = OriginBody::new(e.source, start, end).counted(&self.stats);
            let pace = stream_ms.map(Duration::from_millis).or_else(|| {
                self.cfg.slow_body_bps.map(|bps| Duration::from_secs_f64(len as f64 / bps as f64))
            });
            if let Some(total) = pace {
                body = body.paced(total);
            }
            if reset && len >= 2 {
                self.stats.record_reset();
                body = body.cut_after(len / 2);
            }
        }
        let mut r = Response::new(body);
        *r.status_mut() = status;
        let h = r.headers_mut();
        h.extend(validators);
        h.insert(header::CONTENT_TYPE, HeaderValue::from_static(e.content_type));
        h.insert(header::CONTENT_LENGTH, hv(len.to_string()));
        if !ov.ignore_ranges {
            h.insert(header::ACCEPT_RANGES, HeaderValue::from_static("bytes"));
        }
        if status == StatusCode::PARTIAL_CONTENT {
            h.insert(header::CONTENT_RANGE, hv(format!("bytes {start}-{}/{}", end - 1, e.len)));
        }
        r
    }
}

impl Shared {
    /// A body still being produced: holds the response until the first step, then sends the
    /// rest as each step comes due, without a length (chunked). Ranges are ignored (RFC 9110
    /// §14.2 allows it).
    #[allow(clippy::too_many_arguments)]
    async fn send_producing<B>(
        &self,
        req: &Request<B>,
        source: Source,
        len: u64,
        content_type: &'static str,
        validators: HeaderMap,
        steps: Vec<(u64, u64)>,
        reset: bool,
    ) -> Response<OriginBody> {
        if let Some(&(first, _)) = steps.first() {
            tokio::time::sleep_until(self.clock.instant_of(first)).await;
        }
        let mut body = OriginBody::empty();
        if req.method() != Method::HEAD {
            let steps = steps.into_iter().map(|(ms, upto)| (self.clock.instant_of(ms), upto));
            body = OriginBody::new(source, 0, len).scheduled(steps).counted(&self.stats);
            if reset && len >= 2 {
                self.stats.record_reset();
                body = body.cut_after(len / 2);
            }
        }
        let mut r = Response::new(body);
        let h = r.headers_mut();
        h.extend(validators);
        h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
        r
    }
}

fn media_failed(e: MediaError) -> Reject {
    tracing::error!(error = %e, "media generation failed");
    Reject(StatusCode::INTERNAL_SERVER_ERROR, "media generation failed")
}

/// A file under `/live/`: a segment or a part.
fn live_file(f: &str) -> Route {
    if let Some((msn, p)) = part_name(f) {
        return Route::LivePart(msn, p);
    }
    seg_number(f, "seg_", ".ts").map_or(Route::NotFound, Route::LiveSegment)
}

/// The peers-harness `/live/playlist.m3u8`: a VOD playlist over `/vod/cat/` padded with a
/// comment to exactly [`FIXED_PLAYLIST_SIZE`] bytes.
fn fixed_playlist() -> Bytes {
    let mut s = String::from(
        "#EXTM3U\n#EXT-X-VERSION:3\n#EXT-X-PLAYLIST-TYPE:VOD\n#EXT-X-TARGETDURATION:2\n\
         #EXT-X-MEDIA-SEQUENCE:0\n",
    );
    let end = "#EXT-X-ENDLIST\n";
    let mut n = 0;
    loop {
        let entry = format!("#EXTINF:2.000,\n/vod/cat/seg_{n:03}.ts\n");
        // Keep room for the end tag and a minimal "#\n" padding line.
        if s.len() + entry.len() + end.len() + 2 > FIXED_PLAYLIST_SIZE {
            break;
        }
        s.push_str(&entry);
        n += 1;
    }
    let pad = FIXED_PLAYLIST_SIZE - s.len() - end.len();
    s.push('#');
    s.push_str(&"-".repeat(pad - 2));
    s.push('\n');
    s.push_str(end);
    Bytes::from(s)
}

mod entities;

#[cfg(test)]
mod tests;
