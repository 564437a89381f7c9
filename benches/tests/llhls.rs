//! `reel-load llhls` against a real demo origin on 127.0.0.1:0: viewers follow the LL-HLS
//! stream, and their own counts must match what the origin saw per target.

use std::time::Duration;

use reel_benches::llhls::{LlhlsConfig, run_llhls};
use reel_benches::scenario::Common;
use reel_benches::target::Target;
use reel_demo_origin::{DemoOrigin, DemoOriginConfig, spawn};

fn origin(parts: u32) -> DemoOrigin {
    let cfg = DemoOriginConfig {
        segment_duration: Duration::from_millis(800),
        live_segment_size: 400_000,
        parts_per_segment: parts,
        // 4 s window, above the 6-target-duration skip boundary: delta updates skip segments.
        live_window: 10,
        ..DemoOriginConfig::no_latency()
    };
    spawn("127.0.0.1:0".parse().unwrap(), cfg).unwrap()
}

fn cfg(o: &DemoOrigin, viewers: usize, ms: u64) -> LlhlsConfig {
    let playlist = Target::parse(&o.url("/live/index.m3u8")).unwrap();
    LlhlsConfig {
        origin: Some(playlist.clone()),
        playlist,
        viewers,
        common: Common {
            duration: Duration::from_millis(ms),
            timeout: Duration::from_secs(5),
            headers: vec![],
            mark: Default::default(),
            h3_streams: None,
        },
    }
}

#[tokio::test]
async fn viewers_follow_parts_and_playlists_and_match_the_origin_counts() {
    let o = origin(4);
    let viewers = 8;
    let r = run_llhls(&cfg(&o, viewers, 2500)).await.unwrap();
    let l = &r.llhls;
    assert_eq!(r.base.errors_total, 0, "{r}");
    assert!(l.parts >= viewers as u64 * 3, "{r}");
    assert!(l.playlists_blocking >= viewers as u64 * 3, "{r}");
    // Every blocking reload after the first asked for a delta update, and the window is
    // longer than the skip boundary.
    assert!(l.playlists_delta > 0, "{r}");
    assert_eq!(l.without_release, 0);
    // Every blocking reload and hinted part is either a latency sample or was asked for
    // after its release (at least each viewer's first part, asked for on joining).
    let hinted = l.parts - l.parts_caught_up;
    let samples = l.playlist_latency_us.count + l.part_first_byte_latency_us.count;
    assert_eq!(samples + l.asked_after_release, l.playlists_blocking + hinted, "{r}");
    assert!(l.part_first_byte_latency_us.count > 0 && l.playlist_latency_us.count > 0, "{r}");
    // Requests: one plain playlist per viewer, then a part and a playlist per step, plus
    // parts caught up.
    assert_eq!(r.base.requests, viewers as u64 + l.parts + l.playlists_blocking);

    // The origin served each viewer directly: its per-target counts add up to what the
    // viewers fetched, and no target was asked more than once per viewer.
    let origin = l.origin.expect("origin figures");
    assert_eq!(origin.per_part.requests, l.parts, "{r}");
    assert_eq!(origin.per_playlist_version.requests, l.playlists_blocking, "{r}");
    assert!(origin.per_part.max <= viewers as u64 && origin.per_part.min >= 1, "{r}");
    assert!(origin.per_playlist_version.max <= viewers as u64, "{r}");
    assert!(o.stats().total() >= r.base.requests);
    let table = r.to_string();
    assert!(table.contains("first byte after release") && table.contains("per part:"), "{table}");
}

#[tokio::test]
async fn a_classic_playlist_is_a_protocol_error_and_missing_origin_stats_are_reported() {
    let o = origin(0);
    let mut c = cfg(&o, 2, 500);
    // An origin address where nothing listens.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    c.origin = Some(Target::parse(&format!("http://{}/", closed.local_addr().unwrap())).unwrap());
    drop(closed);
    let r = run_llhls(&c).await.unwrap();
    assert!(r.base.errors.protocol >= 2, "{r}");
    assert_eq!(r.llhls.parts, 0);
    assert!(r.llhls.origin.is_none());
    assert!(r.llhls.origin_error.as_deref().is_some_and(|e| e.contains("origin stats")), "{r}");
}
