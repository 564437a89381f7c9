//! LL-HLS through the cache in front of the real demo origin (`reel-demo-origin`, in
//! process): hundreds of viewers blocked on the next part's playlist and on the hinted part
//! cost the origin one request each (its `requests_by_target`), prefetch fetches what a
//! playlist announces, and ffmpeg plays the live stream through the cache.

use std::net::SocketAddr;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use reel_cache::Prefetch;
use reel_demo_origin::{DemoOrigin, DemoOriginConfig};
use reel_test_support::{have_ffmpeg, wait_until};

use crate::client::{Conn, Resp};
use crate::server::{HOST, Opts, Server};

/// A demo origin whose parts last `part` (four per segment), about four pictures each.
fn demo(part: Duration) -> DemoOrigin {
    let cfg = DemoOriginConfig {
        segment_duration: part * 4,
        live_segment_size: 1 << 20,
        ..DemoOriginConfig::no_latency()
    };
    reel_demo_origin::spawn("127.0.0.1:0".parse().unwrap(), cfg).expect("demo origin")
}

fn server(o: &DemoOrigin, prefetch: Prefetch) -> Server {
    let mut opts = Opts::new(o.local_addr());
    opts.prefetch = prefetch;
    // Several parts: on a loaded machine the waiters may be sent late in a part's time.
    opts.blocking_timeout = Duration::from_secs(10);
    Server::start(opts)
}

/// One GET on its own connection: the response, when the request was sent, and when its
/// body had arrived (monotonic and Unix ms).
struct Timed {
    resp: Resp,
    sent: Instant,
    done: Instant,
    done_unix_ms: u64,
}

fn unix_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

fn get_timed(addr: SocketAddr, target: &str, start: Option<&Barrier>) -> Timed {
    let mut c = Conn::open(addr);
    if let Some(b) = start {
        b.wait();
    }
    c.send(
        format!("GET {target} HTTP/1.1\r\nHost: {HOST}\r\nConnection: close\r\n\r\n").as_bytes(),
    );
    let sent = Instant::now();
    let resp = c.read_response(false);
    Timed { resp, sent, done: Instant::now(), done_unix_ms: unix_ms() }
}

/// `(msn, part, uri)` of the playlist's `EXT-X-PRELOAD-HINT`.
fn hint(playlist: &[u8]) -> (u64, u64, String) {
    let text = String::from_utf8_lossy(playlist);
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix("#EXT-X-PRELOAD-HINT:"))
        .unwrap_or_else(|| panic!("no preload hint in {text}"));
    let uri = line.split("URI=\"").nth(1).and_then(|r| r.split('"').next()).expect("hint URI");
    let (msn, part) = uri
        .strip_prefix("seg_")
        .and_then(|r| r.strip_suffix(".ts"))
        .and_then(|r| r.split_once(".part"))
        .expect("seg_<msn>.part<p>.ts");
    (msn.parse().unwrap(), part.parse().unwrap(), uri.to_string())
}

fn reload(msn: u64, part: u64) -> String {
    format!("/live/index.m3u8?_HLS_msn={msn}&_HLS_part={part}")
}

#[test]
fn three_hundred_blocking_reloads_and_hinted_part_requests_cost_one_origin_request_each() {
    const N: usize = 300;
    let o = demo(Duration::from_secs(2));
    let s = server(&o, Prefetch::Off);
    // Wait on the hinted part's playlist once: it returns as that part completes, so the
    // next part has just started and the whole of it is left to send the requests in.
    let first = get_timed(s.addr, "/live/index.m3u8", None).resp;
    let (msn, part, _) = hint(&first.body);
    let at_edge = get_timed(s.addr, &reload(msn, part), None).resp;
    assert_eq!(at_edge.status, 200);
    let (msn, part, uri) = hint(&at_edge.body);
    let playlist = reload(msn, part);
    let part_path = format!("/live/{uri}");

    let start = Arc::new(Barrier::new(2 * N));
    let clients: Vec<_> = (0..2 * N)
        .map(|i| {
            let target = if i % 2 == 0 { playlist.clone() } else { part_path.clone() };
            let (addr, start) = (s.addr, start.clone());
            std::thread::Builder::new()
                .stack_size(256 << 10)
                .spawn(move || (i % 2 == 0, get_timed(addr, &target, Some(&start))))
                .expect("client thread")
        })
        .collect();
    let (mut lists, mut parts) = (Vec::new(), Vec::new());
    for c in clients {
        let (is_list, t) = c.join().expect("client");
        if is_list { lists.push(t) } else { parts.push(t) }
    }

    // One origin request each, whatever the number of viewers.
    let stats = o.stats();
    assert_eq!(stats.target(&playlist), 1, "origin requests for {playlist}");
    assert_eq!(stats.target(&part_path), 1, "origin requests for {part_path}");

    // Every viewer got the same playlist version, holding the part it waited for, and the
    // whole hinted part as the origin serves it.
    let body = &lists[0].resp.body;
    let release = lists[0].resp.header("x-origin-release-ms").expect("release time").to_string();
    let mut stored = 0;
    for t in &lists {
        assert_eq!(t.resp.status, 200);
        assert!(t.resp.complete && &t.resp.body == body, "one version for all");
        assert_eq!(t.resp.header("x-origin-release-ms"), Some(release.as_str()));
        let cs = t.resp.cache_status();
        stored += usize::from(cs.contains("fwd=miss; stored"));
        assert!(cs.contains("stored") || cs.contains("collapsed") || cs.contains("hit"), "{cs}");
    }
    assert_eq!(stored, 1, "one leader, the other waiters joined it");
    assert!(String::from_utf8_lossy(body).contains(&format!("URI=\"{uri}\"")), "holds the part");
    let direct = crate::client::request(o.local_addr(), "GET", &part_path, &[]);
    assert!(direct.complete && !direct.body.is_empty());
    for t in &parts {
        assert_eq!(t.resp.status, 200);
        assert!(t.resp.complete, "framed completely");
        assert!(t.resp.body == direct.body, "the whole part, as the origin serves it");
    }
    assert!(
        parts.iter().any(|t| t.resp.header("content-length").is_none()),
        "the part in production streams without a length"
    );

    // The waiters were all held, and all released by that one response: every request was
    // sent before the first playlist came back, and every playlist arrived before the
    // origin released the next version (one part later).
    let last_sent = lists.iter().map(|t| t.sent).max().unwrap();
    let first_done = lists.iter().map(|t| t.done).min().unwrap();
    assert!(last_sent < first_done, "a waiter was answered before the others had asked");
    let (msn2, part2, _) = hint(body);
    let next = get_timed(s.addr, &reload(msn2, part2), None).resp;
    let next_release: u64 =
        next.header("x-origin-release-ms").and_then(|v| v.parse().ok()).expect("release time");
    let last_done = lists.iter().map(|t| t.done_unix_ms).max().unwrap();
    assert!(last_done < next_release, "a waiter got the playlist only after the next version");
}

#[test]
fn prefetch_fetches_the_hinted_part_and_the_newest_listed_parts_once() {
    let o = demo(Duration::from_millis(500));
    let s = server(&o, Prefetch::Hinted);
    let pl = get_timed(s.addr, "/live/index.m3u8", None).resp;
    assert_eq!(pl.status, 200);
    // The playlist is read once its fill completes; then the prefetches are under way.
    let (_, _, uri) = hint(&pl.body);
    let hinted = format!("/live/{uri}");
    wait_until("the hinted part to be prefetched", || o.stats().path(&hinted) > 0);
    let text = String::from_utf8_lossy(&pl.body).to_string();
    let listed: Vec<String> = text
        .lines()
        .filter_map(|l| l.strip_prefix("#EXT-X-PART:"))
        .filter_map(|l| l.split("URI=\"").nth(1)?.split('"').next().map(|u| format!("/live/{u}")))
        .collect();
    assert!(listed.len() > reel_cache::path::phase::llhls::PREFETCH_PER_STREAM, "{text}");
    // A viewer's request for the hinted part joins the prefetch (or finds it stored).
    let r = crate::client::get(&s, &hinted, &[]);
    assert_eq!(r.status, 200);
    assert!(r.complete);
    assert!(!r.cache_status().contains("stored"), "{}", r.cache_status());
    assert_eq!(o.stats().path(&hinted), 1);
    // The newest listed parts were fetched beside it, up to the per-stream bound, and
    // nothing else.
    let prefetched = reel_cache::path::phase::llhls::PREFETCH_PER_STREAM - 1;
    for p in listed.iter().rev().take(prefetched) {
        assert_eq!(o.stats().path(p), 1, "{p} prefetched");
        let r = crate::client::get(&s, p, &[]);
        assert!(r.cache_status().contains("hit"), "{p}: {}", r.cache_status());
    }
    for p in listed.iter().rev().skip(prefetched) {
        assert_eq!(o.stats().path(p), 0, "{p}: beyond the bound");
    }
    assert_eq!(o.stats().path(&hinted), 1);
}

#[test]
fn without_prefetch_nothing_is_fetched_before_a_viewer_asks() {
    let o = demo(Duration::from_millis(500));
    let s = server(&o, Prefetch::Off);
    let pl = get_timed(s.addr, "/live/index.m3u8", None).resp;
    assert_eq!(pl.status, 200);
    wait_until("the playlist to be read", || !s.shared.streams.is_empty());
    s.settle();
    assert_eq!(o.stats().total(), 1, "the playlist only");
}

#[test]
fn ffmpeg_plays_the_live_stream_through_the_cache_with_prefetch() {
    if !have_ffmpeg("ffmpeg") {
        return;
    }
    let o = demo(Duration::from_millis(500));
    let s = server(&o, Prefetch::Hinted);
    let url = format!("http://{}/live/index.m3u8", s.addr);
    let mut child = std::process::Command::new("ffmpeg")
        .args(["-hide_banner", "-nostdin", "-v", "warning", "-headers"])
        .arg(format!("Host: {HOST}\r\n"))
        .args(["-i", &url, "-t", "6", "-c", "copy", "-f", "null", "-"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("ffmpeg");
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(st) = child.try_wait().expect("wait") {
            break st;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("ffmpeg did not finish within 60 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut err = String::new();
    if let Some(mut e) = child.stderr.take() {
        use std::io::Read;
        let _ = e.read_to_string(&mut err);
    }
    assert!(status.success() && err.trim().is_empty(), "ffmpeg: {err}");
    // ffmpeg plays segments; the parts came from the prefetch that ran meanwhile.
    assert!(o.stats().class(reel_demo_origin::PathClass::LivePart) > 0, "parts were prefetched");
}
