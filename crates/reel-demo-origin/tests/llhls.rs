//! LL-HLS behaviour of the live stream: parts, preload hints held and streamed, blocking
//! reloads under many waiters, delta updates, release times and per-target counters.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use reel_demo_origin::{DemoOriginConfig, StatsSnapshot};

use super::{Resp, assert_ts, get, origin};

/// 800 ms segments of four 200 ms parts; 2 MiB budgets give five pictures per part.
fn ll_cfg() -> DemoOriginConfig {
    DemoOriginConfig {
        segment_duration: Duration::from_millis(800),
        live_segment_size: 2 << 20,
        ..DemoOriginConfig::no_latency()
    }
}

fn unix_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as u64
}

/// Decodes a chunked body (RFC 9112 §7.1); panics on bad framing.
fn dechunk(mut b: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let line_end = b.windows(2).position(|w| w == b"\r\n").expect("chunk size line");
        let size = usize::from_str_radix(std::str::from_utf8(&b[..line_end]).unwrap(), 16).unwrap();
        b = &b[line_end + 2..];
        if size == 0 {
            return out;
        }
        out.extend_from_slice(&b[..size]);
        assert_eq!(&b[size..size + 2], b"\r\n");
        b = &b[size + 2..];
    }
}

/// The body without chunked framing.
fn body(r: &Resp) -> Vec<u8> {
    if r.header("transfer-encoding") == Some("chunked") { dechunk(&r.body) } else { r.body.clone() }
}

fn release(r: &Resp) -> u64 {
    r.header("x-origin-release-ms").expect("x-origin-release-ms").parse().unwrap()
}

/// `(msn, part)` of the preload hint.
fn hint(playlist: &str) -> (u64, u64) {
    let uri = playlist
        .lines()
        .find_map(|l| l.strip_prefix("#EXT-X-PRELOAD-HINT:TYPE=PART,URI=\""))
        .expect("preload hint");
    let (msn, p) =
        uri.trim_end_matches("\"").strip_prefix("seg_").unwrap().split_once(".part").unwrap();
    (msn.parse().unwrap(), p.trim_end_matches(".ts").parse().unwrap())
}

#[tokio::test]
async fn the_hinted_part_is_held_then_streamed_and_equals_the_finished_part() {
    let o = origin(ll_cfg());
    let a = o.local_addr();
    let pl = get(a, "/live/index.m3u8").await;
    assert!(pl.text().contains("#EXT-X-PART-INF:PART-TARGET=0.200\n"), "{}", pl.text());
    // A blocking reload returns the moment a part completes, with a fresh hint; the hinted
    // part is then in production for one part duration. A stalled machine may let it
    // complete before the request arrives: then try the next one.
    let (mut msn, mut p) = hint(&pl.text());
    let mut tries = 0;
    let (path, live, head_unix) = loop {
        tries += 1;
        assert!(tries <= 10, "the hinted part was always complete before it was asked for");
        let fresh = get(a, &format!("/live/index.m3u8?_HLS_msn={msn}&_HLS_part={p}")).await;
        (msn, p) = hint(&fresh.text());
        let path = format!("/live/seg_{msn}.part{p}.ts");
        let live = get(a, &path).await;
        if live.header("transfer-encoding").is_some() {
            break (path, live, unix_ms());
        }
    };
    assert_eq!(live.status, 200);
    assert_eq!(live.header("transfer-encoding"), Some("chunked"));
    assert_eq!(live.content_length(), None);
    assert_eq!(live.header("content-type"), Some("video/mp2t"));
    // Held until its first picture existed: the head cannot precede the release.
    assert!(head_unix + 1 >= release(&live), "{head_unix} < {}", release(&live));
    let streamed = dechunk(&live.body);
    assert_ts(&streamed);

    // Once complete, the same part is an ordinary object with a length and the same bytes,
    // headers and release time.
    let done = get(a, &path).await;
    assert_eq!(done.status, 200);
    assert_eq!(done.content_length(), Some(done.body.len()));
    assert_eq!(done.body, streamed);
    assert_eq!(done.header("etag"), live.header("etag"));
    assert_eq!(release(&done), release(&live));
}

#[tokio::test]
async fn parts_tile_their_segment_and_unhinted_parts_are_404() {
    let o = origin(ll_cfg());
    let a = o.local_addr();
    let (msn, p) = hint(&get(a, "/live/index.m3u8").await.text());
    // Parts after the hinted one have not been announced (three parts on: 400 ms margin).
    let later = msn * 4 + p + 3;
    let (nm, np) = (later / 4, later % 4);
    let early = get(a, &format!("/live/seg_{nm}.part{np}.ts")).await;
    assert_eq!(early.status, 404);
    assert_eq!(early.header("cache-control"), Some("no-store"));
    assert_eq!(get(a, &format!("/live/seg_{msn}.part4.ts")).await.status, 404);

    // Wait for segment `msn` to complete, then compare it with its parts.
    let r = get(a, &format!("/live/index.m3u8?_HLS_msn={msn}")).await;
    assert_eq!(r.status, 200);
    let seg = get(a, &format!("/live/seg_{msn}.ts")).await;
    assert_eq!(seg.status, 200);
    assert_ts(&seg.body);
    let mut joined = Vec::new();
    let mut last_release = 0;
    for part in 0..4 {
        let r = get(a, &format!("/live/seg_{msn}.part{part}.ts")).await;
        assert_eq!(r.status, 200, "part {part}");
        assert_ts(&r.body);
        assert!(release(&r) > last_release);
        last_release = release(&r);
        joined.extend_from_slice(&r.body);
    }
    assert_eq!(joined, seg.body);
    assert_eq!(release(&seg), (msn + 1) * 800);
    assert!(release(&seg) >= last_release);
}

#[tokio::test]
async fn blocking_reloads_answer_once_the_part_exists_with_its_release_time() {
    let o = origin(ll_cfg());
    let a = o.local_addr();
    let (msn, p) = hint(&get(a, "/live/index.m3u8").await.text());
    let r = get(a, &format!("/live/index.m3u8?_HLS_msn={msn}&_HLS_part={p}")).await;
    assert_eq!(r.status, 200);
    let t = r.text();
    assert!(t.contains(&format!("URI=\"seg_{msn}.part{p}.ts\",INDEPENDENT=YES\n")), "{t}");
    // Released when that part completed: the end of part p of segment msn.
    assert!(release(&r) >= msn * 800 + (p + 1) * 200, "{}", release(&r));
    assert!(r.header("etag").is_some());
    // More than two segments past the playlist's last segment is refused at once.
    let far = get(a, &format!("/live/index.m3u8?_HLS_msn={}", msn + 10)).await;
    assert_eq!(far.status, 400);
    assert_eq!(far.header("cache-control"), Some("no-store"));
    assert_eq!(get(a, "/live/index.m3u8?_HLS_skip=maybe").await.status, 400);
}

#[tokio::test]
async fn delta_updates_skip_segments_older_than_the_skip_boundary() {
    // 200 ms segments: target 1 s, skip boundary 6 s = 30 segments; a 40-segment window.
    let cfg = DemoOriginConfig {
        segment_duration: Duration::from_millis(200),
        live_segment_size: 10_000,
        live_window: 40,
        ..DemoOriginConfig::no_latency()
    };
    let o = origin(cfg);
    let a = o.local_addr();
    // Ask both for the same, already released version, retrying across a version change.
    for _ in 0..20 {
        let full = get(a, "/live/index.m3u8").await;
        let delta = get(a, "/live/index.m3u8?_HLS_skip=YES").await;
        if release(&full) != release(&delta) {
            continue;
        }
        let (f, d) = (full.text(), delta.text());
        assert!(f.contains("CAN-SKIP-UNTIL=6.0"), "{f}");
        assert!(!f.contains("EXT-X-SKIP:"));
        let skipped: usize = d
            .lines()
            .find_map(|l| l.strip_prefix("#EXT-X-SKIP:SKIPPED-SEGMENTS="))
            .expect("EXT-X-SKIP")
            .parse()
            .unwrap();
        assert!((9..=10).contains(&skipped), "{skipped}\n{d}");
        assert!(d.contains("#EXT-X-VERSION:9\n"));
        let uris = |t: &str| -> Vec<String> {
            t.lines().filter(|l| l.starts_with("seg_")).map(String::from).collect()
        };
        assert_eq!(uris(&f).len(), 40);
        assert_eq!(uris(&d), uris(&f)[skipped..]);
        return;
    }
    panic!("no two requests fell in the same playlist version");
}

#[tokio::test]
async fn hundreds_of_waiters_get_the_same_playlist_and_part_and_are_counted_by_target() {
    let o = origin(ll_cfg());
    let a = o.local_addr();
    let (msn, p) = hint(&get(a, "/live/index.m3u8").await.text());
    // Wait for a fresh hint so every waiter starts well before the part completes.
    let (msn, p) = {
        let r = get(a, &format!("/live/index.m3u8?_HLS_msn={msn}&_HLS_part={p}")).await;
        hint(&r.text())
    };
    let playlist = format!("/live/index.m3u8?_HLS_msn={msn}&_HLS_part={p}");
    let part = format!("/live/seg_{msn}.part{p}.ts");
    let waiters: Vec<_> = (0..600)
        .map(|i| {
            let target = if i % 2 == 0 { playlist.clone() } else { part.clone() };
            tokio::spawn(async move { get(a, &target).await })
        })
        .collect();
    let mut playlists = Vec::new();
    let mut parts = Vec::new();
    for (i, w) in waiters.into_iter().enumerate() {
        let r = w.await.unwrap();
        assert_eq!(r.status, 200);
        // Waiters that connected after the part completed get it with a length.
        if i % 2 == 0 { playlists.push(r) } else { parts.push(body(&r)) }
    }
    // The playlist version can only move on between waiters, never fall short of the part.
    assert!(playlists.iter().all(|r| r.text().contains(&format!("seg_{msn}.part{p}.ts\""))));
    assert!(parts.windows(2).all(|w| w[0] == w[1]));
    assert_ts(&parts[0]);

    let s: StatsSnapshot = serde_json::from_slice(&get(a, "/__origin/stats").await.body).unwrap();
    assert_eq!(s.requests_by_target[&playlist], 300);
    assert_eq!(s.requests_by_target[&part], 300);
    assert_eq!(s.by_class["live_part"], 300);
    assert_eq!(o.stats().target(&playlist), 300);
    assert_eq!(o.stats().target("/live/index.m3u8"), 1);
}
