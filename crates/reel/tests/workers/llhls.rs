//! LL-HLS at N workers, on the shipped demo config: one origin request per part and per
//! playlist version however many viewers block on them, whatever worker and whatever
//! listener (HTTP on two ports here, as HTTP and HTTPS viewers of one site) they came
//! through, with prefetch on and off, delta updates (`_HLS_skip`) included.

use std::time::{Duration, Instant};

use reel_demo_origin::{DemoOrigin, DemoOriginConfig};

use super::*;

/// Viewers per burst.
const VIEWERS: usize = 32;

/// The demo origin without latency (the latency is not what is under test), and reel on
/// the shipped config in front of it with a second plain listener `alt`, `prefetch` as
/// given.
fn llhls_edge(dir: &std::path::Path, n: usize, prefetch: &str) -> (DemoOrigin, Reel) {
    let origin =
        reel_demo_origin::spawn("127.0.0.1:0".parse().unwrap(), DemoOriginConfig::no_latency())
            .expect("demo origin");
    let mut text = shipped_demo_config(origin.local_addr(), false);
    assert!(text.contains("prefetch = \"hinted\""), "the shipped config prefetches");
    text = text.replace("prefetch = \"hinted\"", &format!("prefetch = \"{prefetch}\""));
    text.push_str("\n[[listener]]\nname = \"alt\"\naddress = \"127.0.0.1:0\"\n");
    let unused = Origin::start("unused");
    let mut conf = Conf::new(dir, &unused);
    conf.raw = Some(text);
    (origin, start_n(&conf, n))
}

/// The part a playlist hints (`EXT-X-PRELOAD-HINT`): its URI, media sequence and index.
fn hint(playlist: &str) -> (String, u64, u64) {
    let uri = playlist
        .lines()
        .find_map(|l| l.strip_prefix("#EXT-X-PRELOAD-HINT:TYPE=PART,URI=\""))
        .and_then(|r| r.split('"').next())
        .unwrap_or_else(|| panic!("no preload hint in\n{playlist}"))
        .to_string();
    let (msn, part) = uri
        .strip_prefix("seg_")
        .and_then(|r| r.strip_suffix(".ts"))
        .and_then(|r| r.split_once(".part"))
        .unwrap_or_else(|| panic!("unexpected part URI {uri}"));
    (uri.clone(), msn.parse().unwrap(), part.parse().unwrap())
}

/// The origin's request counters once it has been asked nothing new for half a second
/// (prefetches run after the playlists that announce them).
fn settled_targets(origin: &DemoOrigin) -> Vec<(String, u64)> {
    let mut last = (u64::MAX, Instant::now());
    loop {
        let stats = json_at(origin.local_addr(), "/__origin/stats");
        let total = stats["total"].as_u64().unwrap_or(0);
        if total != last.0 {
            last = (total, Instant::now());
        } else if last.1.elapsed() > Duration::from_millis(500) {
            let map = stats["requests_by_target"].as_object().cloned().unwrap_or_default();
            return map.into_iter().map(|(k, v)| (k, v.as_u64().unwrap_or(0))).collect();
        }
        assert!(last.1.elapsed() < PATIENCE, "the origin never settled");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn blocking_reloads_and_hinted_parts_ask_the_origin_once_at_any_worker_count() {
    for prefetch in ["hinted", "off"] {
        for n in WORKERS {
            let what = format!("{n} workers, prefetch {prefetch}");
            let dir = tempfile::tempdir().unwrap();
            let (origin, reel) = llhls_edge(dir.path(), n, prefetch);
            let alt = reel.listener_addr("alt").expect("alt listener");
            let before = per_worker(&reel);
            // One viewer starts on the second listener...
            let first =
                request(alt, "GET", &format!("127.0.0.1:{}", alt.port()), "/live/index.m3u8", &[]);
            assert_eq!(first.status, 200, "{what}: {}", first.text());
            let (part_uri, msn, part) = hint(&first.text());
            // ... then many block on the next part and its playlist, on both listeners.
            let reload = format!("/live/index.m3u8?_HLS_msn={msn}&_HLS_part={part}");
            let delta = format!("{reload}&_HLS_skip=YES");
            let part_path = format!("/live/{part_uri}");
            let asks = (0..VIEWERS)
                .map(|i| {
                    let addr = if i % 2 == 0 { reel.data } else { alt };
                    match i % 5 {
                        0 | 1 => Ask::get(addr, &reload),
                        2 => Ask::get(addr, &delta),
                        _ => Ask::get(addr, &part_path),
                    }
                })
                .collect();
            let answers = burst(asks);
            let part_line = format!("URI=\"{part_uri}\"");
            let mut part_body: Option<&[u8]> = None;
            for (i, r) in answers.iter().enumerate() {
                assert_eq!(r.status, 200, "{what}: viewer {i}: {} {}", r.cache_status(), r.text());
                if i % 5 == 3 || i % 5 == 4 {
                    assert!(!r.body.is_empty(), "{what}: the part");
                    let b = part_body.get_or_insert(&r.body);
                    assert!(*b == &r.body[..], "{what}: every viewer of the part gets its bytes");
                } else {
                    let t = r.text();
                    assert!(t.contains(&part_line), "{what}: the playlist lists the part:\n{t}");
                }
            }
            let targets = settled_targets(&origin);
            let live: Vec<_> = targets.iter().filter(|(t, _)| t.starts_with("/live/")).collect();
            for (t, count) in &live {
                assert_eq!(*count, 1, "{what}: {t} asked {count} times of the origin: {live:?}");
            }
            for t in [&reload, &delta, &part_path] {
                assert!(live.iter().any(|(x, _)| x == t), "{what}: {t} never reached the origin");
            }
            if prefetch == "off" {
                let parts = live.iter().filter(|(t, _)| t.contains(".part")).count();
                assert_eq!(parts, 1, "{what}: without prefetch only the hinted part: {live:?}");
            }
            assert_spread(&reel, &before, &what);
        }
    }
}
