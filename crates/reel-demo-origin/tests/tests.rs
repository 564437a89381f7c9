//! Integration tests: a real simulator on 127.0.0.1:0, a raw HTTP/1.1 client over real
//! sockets, and the binary as a child process.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use reel_demo_origin::content::expected_bytes;
use reel_demo_origin::{DemoOrigin, DemoOriginConfig, Error, PathClass, StatsSnapshot, spawn};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

mod llhls;
mod play;

const LOCAL: &str = "127.0.0.1:0";

#[derive(Debug)]
struct Resp {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
    /// When the response head had fully arrived, relative to sending the request.
    head_at: Duration,
    /// When the connection ended.
    end_at: Duration,
}

impl Resp {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
    fn content_length(&self) -> Option<usize> {
        self.header("content-length").and_then(|v| v.parse().ok())
    }
}

/// Sends one request with `Connection: close` and reads until EOF or reset.
async fn request(addr: SocketAddr, method: &str, path: &str, extra: &[(&str, &str)]) -> Resp {
    let mut s = TcpStream::connect(addr).await.unwrap();
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: origin\r\nConnection: close\r\n");
    for (k, v) in extra {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    let t0 = Instant::now();
    s.write_all(req.as_bytes()).await.unwrap();
    let mut buf = Vec::new();
    let mut chunk = vec![0u8; 64 << 10];
    let mut head_at = None;
    let mut head_len = 0;
    loop {
        match s.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
        if head_at.is_none() {
            let mut hs = [httparse::EMPTY_HEADER; 32];
            let mut r = httparse::Response::new(&mut hs);
            if let httparse::Status::Complete(n) = r.parse(&buf).unwrap() {
                head_at = Some(t0.elapsed());
                head_len = n;
            }
        }
    }
    let end_at = t0.elapsed();
    let mut hs = [httparse::EMPTY_HEADER; 32];
    let mut r = httparse::Response::new(&mut hs);
    assert!(r.parse(&buf).unwrap().is_complete(), "incomplete head: {buf:?}");
    let headers = r
        .headers
        .iter()
        .map(|h| (h.name.to_string(), String::from_utf8_lossy(h.value).into_owned()))
        .collect();
    Resp {
        status: r.code.unwrap(),
        headers,
        body: buf[head_len..].to_vec(),
        head_at: head_at.unwrap(),
        end_at,
    }
}

async fn get(addr: SocketAddr, path: &str) -> Resp {
    request(addr, "GET", path, &[]).await
}

fn origin(cfg: DemoOriginConfig) -> DemoOrigin {
    spawn(LOCAL.parse().unwrap(), cfg).unwrap()
}

fn live_cfg() -> DemoOriginConfig {
    DemoOriginConfig {
        segment_duration: Duration::from_millis(200),
        live_segment_size: 10_000,
        live_window: 6,
        ..DemoOriginConfig::no_latency()
    }
}

/// A whole number of TS packets, each starting with the sync byte.
fn assert_ts(body: &[u8]) {
    assert!(!body.is_empty() && body.len().is_multiple_of(188), "{} bytes", body.len());
    assert!(body.chunks(188).all(|p| p[0] == 0x47), "lost TS sync");
}

/// (media sequence, segment URIs) of a live playlist.
fn parse_live(text: &str) -> (u64, Vec<String>) {
    let seq = text
        .lines()
        .find_map(|l| l.strip_prefix("#EXT-X-MEDIA-SEQUENCE:"))
        .and_then(|v| v.parse().ok())
        .expect("media sequence");
    let uris = text.lines().filter(|l| !l.starts_with('#') && !l.is_empty()).map(String::from);
    (seq, uris.collect())
}

#[tokio::test]
async fn live_playlist_advances_and_its_segments_are_deterministic() {
    let o = origin(live_cfg());
    let a = o.local_addr();
    let r1 = get(a, "/live/index.m3u8").await;
    assert_eq!(r1.status, 200);
    assert_eq!(r1.header("cache-control"), Some("max-age=1"));
    assert_eq!(r1.header("content-type"), Some("application/vnd.apple.mpegurl"));
    let t = r1.text();
    assert!(t.starts_with("#EXTM3U\n"), "{t}");
    assert!(t.contains("#EXT-X-TARGETDURATION:1\n"), "{t}");
    assert!(t.contains("#EXT-X-SERVER-CONTROL:CAN-BLOCK-RELOAD=YES"), "{t}");
    assert_eq!(t.matches("#EXTINF:0.200,").count(), 6, "{t}");
    let (seq1, uris) = parse_live(&t);
    let want: Vec<String> = (seq1..seq1 + 6).map(|n| format!("seg_{n}.ts")).collect();
    assert_eq!(uris, want);

    tokio::time::sleep(Duration::from_millis(700)).await;
    let (seq2, _) = parse_live(&get(a, "/live/index.m3u8").await.text());
    assert!(seq2 >= seq1 + 2, "sequence {seq1} -> {seq2} after 700 ms of 200 ms segments");

    let path = format!("/live/{}", uris[5]);
    let s1 = get(a, &path).await;
    assert_eq!(s1.status, 200);
    // One picture per 50 ms part does not fit 10 000 bytes: the segment is the pictures.
    assert_ts(&s1.body);
    assert!(s1.body.len() > 10_000);
    assert_eq!(s1.content_length(), Some(s1.body.len()));
    assert_eq!(s1.header("cache-control"), Some("public, max-age=86400"));
    assert_eq!(s1.header("content-type"), Some("video/mp2t"));
    assert!(s1.header("last-modified").is_some());
    let s2 = get(a, &path).await;
    assert_eq!(s2.body, s1.body);
    assert_eq!(s2.header("etag"), s1.header("etag"));
    let other = get(a, &format!("/live/{}", uris[4])).await;
    assert_ne!(other.body, s1.body);
    assert_ne!(other.header("etag"), s1.header("etag"));

    // A second stream has its own segments.
    let news = get(a, "/live/news/index.m3u8").await;
    assert_eq!(news.status, 200);
    let (_, nuris) = parse_live(&news.text());
    let seg = get(a, &format!("/live/news/{}", nuris[0])).await;
    assert_eq!(seg.status, 200);
    assert_ts(&seg.body);
    let same_msn = get(a, &format!("/live/{}", nuris[0])).await;
    assert_eq!(same_msn.body.len(), seg.body.len());
    assert_ne!(same_msn.body, seg.body, "each stream shows its own name");
}

#[tokio::test]
async fn media_bytes_depend_only_on_config_path_and_seed() {
    let o1 = origin(live_cfg());
    let o2 = origin(live_cfg());
    let o3 = origin(DemoOriginConfig { seed: 1, ..live_cfg() });
    let (seq, _) = parse_live(&get(o1.local_addr(), "/live/index.m3u8").await.text());
    for path in [
        format!("/live/seg_{seq}.ts"),
        format!("/live/seg_{seq}.part1.ts"),
        "/vod/title_003/seg_5.ts".to_string(),
    ] {
        let a = get(o1.local_addr(), &path).await;
        let b = get(o2.local_addr(), &path).await;
        assert_eq!(a.status, 200, "{path}");
        assert_ts(&a.body);
        assert!(a.body == b.body, "{path} differs between origins");
        assert_eq!(a.header("etag"), b.header("etag"), "{path}");
        // The seed shifts the background colour.
        let c = get(o3.local_addr(), &path).await;
        assert!(c.body.len() == a.body.len() && c.body != a.body, "{path}: seed ignored");
    }
}

#[tokio::test]
async fn future_and_expired_live_segments_are_404_and_not_cacheable() {
    let o = origin(live_cfg());
    let a = o.local_addr();
    let (seq, _) = parse_live(&get(a, "/live/index.m3u8").await.text());
    let future = get(a, &format!("/live/seg_{}.ts", seq + 50)).await;
    assert_eq!(future.status, 404);
    assert_eq!(future.header("cache-control"), Some("no-store"));
    let expired = get(a, &format!("/live/seg_{}.ts", seq - 100)).await;
    assert_eq!(expired.status, 404);
    // Still inside the DVR window (10 windows of 6).
    assert_eq!(get(a, &format!("/live/seg_{}.ts", seq - 20)).await.status, 200);
}

#[tokio::test]
async fn blocking_reload_waits_for_the_sequence_then_answers() {
    let o = origin(live_cfg());
    let a = o.local_addr();
    let (seq, _) = parse_live(&get(a, "/live/index.m3u8").await.text());
    let next = seq + 6; // the first segment not yet in the playlist
    // With _HLS_part the playlist comes back once that part exists (§6.2.5.2) ...
    let r = get(a, &format!("/live/index.m3u8?_HLS_msn={next}&_HLS_part=0")).await;
    assert_eq!(r.status, 200);
    assert!(r.text().contains(&format!("URI=\"seg_{next}.part0.ts\"")), "{}", r.text());
    // ... without it, once the whole segment does.
    let r = get(a, &format!("/live/index.m3u8?_HLS_msn={next}")).await;
    assert_eq!(r.status, 200);
    assert!(r.text().contains(&format!("\nseg_{next}.ts\n")), "{}", r.text());
    // That segment now exists.
    assert_eq!(get(a, &format!("/live/seg_{next}.ts")).await.status, 200);

    let far = get(a, &format!("/live/index.m3u8?_HLS_msn={}", seq + 40)).await;
    assert_eq!(far.status, 400);
    assert_eq!(get(a, "/live/index.m3u8?_HLS_part=1").await.status, 400);
    assert_eq!(get(a, "/live/index.m3u8?_HLS_msn=abc").await.status, 400);
    // Already published: answers at once with the current playlist.
    let past = get(a, &format!("/live/index.m3u8?_HLS_msn={seq}")).await;
    assert_eq!(past.status, 200);
}

#[tokio::test]
async fn vod_catalog_playlists_segments_ranges_and_validators() {
    let cfg = DemoOriginConfig { vod_segment_size: 100_000, ..DemoOriginConfig::no_latency() };
    // 100 000 bytes hold 531 TS packets: one picture and null-packet filler.
    let len = 100_000 / 188 * 188;
    let o = origin(cfg);
    let a = o.local_addr();
    for p in ["/vod/", "/vod/index.json"] {
        let idx = get(a, p).await;
        assert_eq!(idx.status, 200);
        let v: serde_json::Value = serde_json::from_slice(&idx.body).unwrap();
        let titles = v["titles"].as_array().unwrap();
        assert_eq!(titles.len(), 4);
        assert_eq!(titles[1]["playlist"], "/vod/title_001/index.m3u8");
    }
    let pl = get(a, "/vod/title_002/index.m3u8").await;
    assert_eq!(pl.status, 200);
    assert_eq!(pl.header("cache-control"), Some("public, max-age=3600"));
    let t = pl.text();
    assert!(t.contains("#EXT-X-PLAYLIST-TYPE:VOD\n") && t.ends_with("#EXT-X-ENDLIST\n"), "{t}");
    assert_eq!(t.matches("#EXTINF:2.000,").count(), 30);
    assert!(t.contains("\nseg_29.ts\n"));

    let path = "/vod/title_002/seg_7.ts";
    let full = get(a, path).await;
    assert_eq!(full.status, 200);
    assert_eq!(full.body.len(), len);
    assert_ts(&full.body);
    assert_eq!(full.header("content-type"), Some("video/mp2t"));
    assert_eq!(full.header("accept-ranges"), Some("bytes"));
    let etag = full.header("etag").unwrap().to_string();
    let lm = full.header("last-modified").unwrap().to_string();

    let part = request(a, "GET", path, &[("Range", "bytes=1000-1999")]).await;
    assert_eq!(part.status, 206);
    assert_eq!(part.header("content-range"), Some(format!("bytes 1000-1999/{len}").as_str()));
    assert_eq!(part.body, full.body[1000..2000]);
    let suffix = request(a, "GET", path, &[("Range", "bytes=-10")]).await;
    assert_eq!(suffix.status, 206);
    assert_eq!(suffix.body, full.body[len - 10..]);
    let open = request(a, "GET", path, &[("Range", &format!("bytes={}-", len - 1))]).await;
    assert_eq!(open.body, full.body[len - 1..]);
    let bad = request(a, "GET", path, &[("Range", &format!("bytes={len}-"))]).await;
    assert_eq!(bad.status, 416);
    assert_eq!(bad.header("content-range"), Some(format!("bytes */{len}").as_str()));
    let multi = request(a, "GET", path, &[("Range", "bytes=0-1,5-6")]).await;
    assert_eq!(multi.status, 200);
    let stale = request(a, "GET", path, &[("Range", "bytes=0-9"), ("If-Range", "\"nope\"")]).await;
    assert_eq!(stale.status, 200);
    assert_eq!(stale.body.len(), len);
    let fresh = request(a, "GET", path, &[("Range", "bytes=0-9"), ("If-Range", &etag)]).await;
    assert_eq!(fresh.status, 206);

    let inm = request(a, "GET", path, &[("If-None-Match", &etag)]).await;
    assert_eq!(inm.status, 304);
    assert!(inm.body.is_empty());
    assert_eq!(inm.header("etag"), Some(etag.as_str()));
    let ims = request(a, "GET", path, &[("If-Modified-Since", &lm)]).await;
    assert_eq!(ims.status, 304);
    let head = request(a, "HEAD", path, &[]).await;
    assert_eq!(head.status, 200);
    assert_eq!(head.content_length(), Some(len));
    assert!(head.body.is_empty());

    assert_eq!(get(a, "/vod/title_002/seg_30.ts").await.status, 404);
    assert_eq!(get(a, "/vod/title_009/index.m3u8").await.status, 404);
    assert_eq!(request(a, "POST", path, &[]).await.status, 405);
}

#[tokio::test]
async fn fixed_objects_have_their_sizes_and_depend_only_on_seed_and_path() {
    let o1 = origin(DemoOriginConfig::no_latency());
    let o2 = origin(DemoOriginConfig::no_latency());
    let o3 = origin(DemoOriginConfig { seed: 9, ..DemoOriginConfig::no_latency() });
    for (path, len) in [
        ("/obj/1024", 1024),
        ("/obj/262144", 262_144),
        ("/obj/0", 0),
        ("/live/playlist.m3u8", 1024),
        ("/live/part0.m4s", 256 << 10),
        ("/vod/seg.ts", 2 << 20),
        ("/vod/cat/seg_123.ts", 2 << 20),
    ] {
        let r = get(o1.local_addr(), path).await;
        assert_eq!(r.status, 200, "{path}");
        assert_eq!(r.body.len(), len, "{path}");
        assert_eq!(r.content_length(), Some(len), "{path}");
        assert_eq!(r.header("cache-control"), Some("public, max-age=3600"), "{path}");
        let again = get(o2.local_addr(), path).await;
        assert_eq!(again.body, r.body, "{path}");
        assert_eq!(again.header("etag"), r.header("etag"), "{path}");
        if len > 0 && path != "/live/playlist.m3u8" {
            assert_eq!(r.body, expected_bytes(0, path, 0, len), "{path}");
            assert_ne!(get(o3.local_addr(), path).await.body, r.body, "{path}");
        }
    }
    assert!(get(o1.local_addr(), "/live/playlist.m3u8").await.text().starts_with("#EXTM3U"));
}

#[tokio::test]
async fn error_rate_one_answers_503_but_health_stays_up() {
    let o = origin(DemoOriginConfig { error_rate: 1.0, ..DemoOriginConfig::no_latency() });
    let a = o.local_addr();
    let r = get(a, "/obj/10").await;
    assert_eq!(r.status, 503);
    assert_eq!(r.header("cache-control"), Some("no-store"));
    assert_eq!(get(a, "/healthz").await.status, 200);
    let forced_ok = request(a, "GET", "/obj/10", &[("x-origin-fault", "none")]).await;
    assert_eq!(forced_ok.status, 200);
    assert_eq!(o.stats().snapshot().injected_errors, 1);
}

#[tokio::test]
async fn reset_rate_one_sends_a_short_body_then_closes() {
    let o = origin(DemoOriginConfig { reset_rate: 1.0, ..DemoOriginConfig::no_latency() });
    let a = o.local_addr();
    let r = get(a, "/obj/1000000").await;
    assert_eq!(r.status, 200);
    assert_eq!(r.content_length(), Some(1_000_000));
    assert_eq!(r.body.len(), 500_000, "half the body, then the connection ends");
    assert_eq!(r.body, expected_bytes(0, "/obj/1000000", 0, 500_000));
    // Per-request fault header on a clean origin.
    let clean = origin(DemoOriginConfig::no_latency());
    let f = request(clean.local_addr(), "GET", "/obj/4096", &[("x-origin-fault", "reset")]).await;
    assert_eq!(f.content_length(), Some(4096));
    assert_eq!(f.body.len(), 2048);
    assert_eq!(clean.stats().snapshot().injected_resets, 1);
}

#[tokio::test]
async fn delay_and_slow_stream_overrides() {
    let o = origin(DemoOriginConfig::no_latency());
    let a = o.local_addr();
    let d = request(a, "GET", "/obj/100", &[("x-origin-delay-ms", "300")]).await;
    assert_eq!(d.status, 200);
    assert!(d.head_at >= Duration::from_millis(300), "{:?}", d.head_at);
    assert_eq!(d.header("x-origin-latency-ms"), Some("300"));
    let q = get(a, "/obj/100?x-origin-delay-ms=200").await;
    assert!(q.head_at >= Duration::from_millis(200), "{:?}", q.head_at);
    assert_eq!(get(a, "/obj/100?x-origin-delay-ms=soon").await.status, 400);

    let s = request(a, "GET", "/obj/200000", &[("x-origin-stream-ms", "800")]).await;
    assert_eq!(s.body, expected_bytes(0, "/obj/200000", 0, 200_000));
    assert!(s.end_at - s.head_at >= Duration::from_millis(600), "{:?} {:?}", s.head_at, s.end_at);

    let slow =
        origin(DemoOriginConfig { slow_body_bps: Some(500_000), ..DemoOriginConfig::no_latency() });
    let r = get(slow.local_addr(), "/obj/300000").await;
    assert_eq!(r.body.len(), 300_000);
    assert!(r.end_at >= Duration::from_millis(450), "{:?}", r.end_at);
}

#[tokio::test]
async fn counters_by_class_status_and_path_and_reset() {
    let o = origin(live_cfg());
    let a = o.local_addr();
    get(a, "/obj/10").await;
    get(a, "/obj/10").await;
    get(a, "/vod/title_000/index.m3u8").await;
    get(a, "/nope").await;
    get(a, "/live/index.m3u8").await;
    let r = get(a, "/__origin/stats").await;
    assert_eq!(r.status, 200);
    let s: StatsSnapshot = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(s.total, 5, "{s:?}");
    assert_eq!(s.by_class["object"], 2);
    assert_eq!(s.by_class["vod_playlist"], 1);
    assert_eq!(s.by_class["live_playlist"], 1);
    assert_eq!(s.by_class["other"], 1);
    assert_eq!(s.by_status[&200], 4);
    assert_eq!(s.by_status[&404], 1);
    assert_eq!(s.by_path["/obj/10"], 2);
    assert_eq!(o.stats().class(PathClass::Object), 2);
    assert_eq!(o.stats().path("/obj/10"), 2);
    assert_eq!(o.stats().status(404), 1);

    assert_eq!(get(a, "/__origin/reset").await.status, 405);
    assert_eq!(request(a, "POST", "/__origin/reset", &[]).await.status, 204);
    assert_eq!(o.stats().total(), 0);
    let s: StatsSnapshot = serde_json::from_slice(&get(a, "/__origin/stats").await.body).unwrap();
    assert_eq!(s.total, 0);
    assert!(s.by_path.is_empty());
}

#[tokio::test]
async fn shutdown_stops_listening() {
    let o = origin(DemoOriginConfig::no_latency());
    let a = o.local_addr();
    assert_eq!(get(a, "/healthz").await.status, 200);
    tokio::task::spawn_blocking(move || o.shutdown()).await.unwrap().unwrap();
    assert!(TcpStream::connect(a).await.is_err());
}

#[test]
fn invalid_config_is_refused_with_every_problem() {
    let cfg = DemoOriginConfig { error_rate: 3.0, live_window: 0, ..DemoOriginConfig::default() };
    match spawn(LOCAL.parse().unwrap(), cfg) {
        Err(Error::Config(e)) => assert_eq!(e.problems.len(), 2, "{e}"),
        other => panic!("expected a config error, got {other:?}"),
    }
}

#[tokio::test]
async fn binary_serves_as_a_child_process() {
    use tokio::io::AsyncBufReadExt;
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_reel-demo-origin"))
        .args(["--listen", "127.0.0.1:0", "--latency-scale", "0"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let line = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let addr: SocketAddr = line.strip_prefix("listening on http://").unwrap().parse().unwrap();
    let r = get(addr, "/obj/1024").await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body, expected_bytes(0, "/obj/1024", 0, 1024));
    child.kill().await.unwrap();
}

#[tokio::test]
async fn many_blocking_reloads_for_one_sequence_all_get_it() {
    let o = origin(live_cfg());
    let a = o.local_addr();
    let (seq, _) = parse_live(&get(a, "/live/index.m3u8").await.text());
    let want = seq + 7; // up to two segments past the edge
    let path = format!("/live/index.m3u8?_HLS_msn={want}");
    let waiters: Vec<_> = (0..50)
        .map(|_| {
            let path = path.clone();
            tokio::spawn(async move { get(a, &path).await })
        })
        .collect();
    for w in waiters {
        let r = w.await.unwrap();
        assert_eq!(r.status, 200);
        assert!(r.text().contains(&format!("\nseg_{want}.ts\n")), "{}", r.text());
    }
    assert_eq!(o.stats().path("/live/index.m3u8"), 51);
}

#[tokio::test]
async fn keep_alive_serves_several_requests_on_one_connection() {
    let o = origin(DemoOriginConfig::no_latency());
    let mut s = TcpStream::connect(o.local_addr()).await.unwrap();
    let req = "GET /obj/10 HTTP/1.1\r\nHost: o\r\n\r\nGET /obj/20 HTTP/1.1\r\nHost: o\r\nConnection: close\r\n\r\n";
    s.write_all(req.as_bytes()).await.unwrap();
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).await.unwrap();
    let text = String::from_utf8_lossy(&buf);
    assert_eq!(text.matches("HTTP/1.1 200 OK").count(), 2, "{text}");
    assert_eq!(o.stats().total(), 2);
}

#[tokio::test]
async fn shutdown_does_not_wait_for_a_long_delayed_request() {
    let o = origin(DemoOriginConfig::no_latency());
    let a = o.local_addr();
    let pending = tokio::spawn(async move {
        request(a, "GET", "/obj/1", &[("x-origin-delay-ms", "600000")]).await
    });
    // Let the request reach the server before shutting down.
    while o.stats().total() == 0 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let t0 = Instant::now();
    tokio::task::spawn_blocking(move || o.shutdown()).await.unwrap().unwrap();
    assert!(t0.elapsed() < Duration::from_secs(60), "shutdown took {:?}", t0.elapsed());
    pending.abort();
}

#[tokio::test]
async fn a_large_object_serves_any_range_counts_each_range_and_can_change_version() {
    let o = origin(DemoOriginConfig::no_latency());
    let (addr, path) = (o.local_addr(), "/obj/3221225472.mp4");
    let at = 3 * (1u64 << 30) - 1000;
    let range = format!("bytes={at}-");
    let r = request(addr, "GET", path, &[("Range", &range)]).await;
    assert_eq!(r.status, 206);
    assert_eq!(r.header("content-type"), Some("video/mp4"));
    assert_eq!(r.header("content-range"), Some("bytes 3221224472-3221225471/3221225472"));
    assert_eq!(r.body, expected_bytes(0, path, at, 1000));
    let v0 = r.header("etag").unwrap().to_string();
    assert_eq!(o.stats().range(path, &range), 1);
    request(addr, "GET", path, &[("Range", &range)]).await;
    assert_eq!(o.stats().range(path, &range), 2, "one count per request of the range");
    assert_eq!(o.stats().body_bytes(), 2000);

    // An origin that ignores Range: the whole object, no Accept-Ranges.
    let r =
        request(addr, "GET", "/obj/5000?x-origin-ranges=ignore", &[("Range", "bytes=0-9")]).await;
    assert_eq!((r.status, r.body.len()), (200, 5000));
    assert_eq!(r.header("accept-ranges"), None);

    // A new version: other bytes and validators, for every /obj/ object.
    let bumped = request(addr, "POST", "/__origin/version", &[]).await;
    assert_eq!((bumped.status, bumped.text()), (200, "1\n".to_string()));
    let r = request(addr, "GET", path, &[("Range", &range)]).await;
    assert_ne!(r.header("etag"), Some(v0.as_str()));
    let want = reel_demo_origin::content::object_bytes(0, 1, path, at, 1000);
    assert_eq!(r.body, want);
    assert_ne!(want, expected_bytes(0, path, at, 1000));
    let snap: StatsSnapshot =
        serde_json::from_slice(&get(addr, "/__origin/stats").await.body).unwrap();
    assert_eq!(snap.requests_by_range[&format!("{path} {range}")], 3);
    assert_eq!(snap.body_bytes, 3000 + 5000);
}
