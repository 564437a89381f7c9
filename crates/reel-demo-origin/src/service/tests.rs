//! Routing and small helpers of the demo origin.

use super::*;

fn shared() -> Shared {
    Shared::new(DemoOriginConfig::no_latency(), OriginStats::new()).unwrap()
}

#[test]
fn routes() {
    let s = shared();
    let cases: &[(&str, Route)] = &[
        ("/healthz", Route::Health),
        ("/live/index.m3u8", Route::LivePlaylist),
        ("/live/news/index.m3u8", Route::LivePlaylist),
        ("/live/seg_12.ts", Route::LiveSegment(12)),
        ("/live/news/seg_7.ts", Route::LiveSegment(7)),
        ("/live/seg_12.part3.ts", Route::LivePart(12, 3)),
        ("/live/news/seg_7.part0.ts", Route::LivePart(7, 0)),
        ("/live/seg_12.part.ts", Route::NotFound),
        ("/live/seg_.part1.ts", Route::NotFound),
        ("/live/playlist.m3u8", Route::FixedPlaylist),
        ("/live/part0.m4s", Route::FixedGen(PART_SIZE)),
        ("/vod/seg.ts", Route::FixedGen(FIXED_SEGMENT_SIZE)),
        ("/vod/cat/seg_199.ts", Route::FixedGen(FIXED_SEGMENT_SIZE)),
        ("/vod/", Route::VodIndex),
        ("/vod/index.json", Route::VodIndex),
        ("/vod/title_001/index.m3u8", Route::VodPlaylist(1)),
        ("/vod/title_003/seg_29.ts", Route::VodSegment(3, 29)),
        ("/vod/title_003/seg_30.ts", Route::NotFound),
        ("/vod/title_004/index.m3u8", Route::NotFound),
        ("/obj/1024", Route::Object(1024)),
        ("/obj/1073741824.mp4", Route::Object(1 << 30)),
        ("/obj/.mp4", Route::NotFound),
        ("/obj/", Route::NotFound),
        ("/obj/-1", Route::NotFound),
        ("/obj/99999999999999999999999", Route::NotFound),
        ("/live/seg_.ts", Route::NotFound),
        ("/live/a b/index.m3u8", Route::NotFound),
        ("/", Route::NotFound),
    ];
    for (p, want) in cases {
        assert_eq!(s.route(p), *want, "{p}");
    }
}

#[test]
fn fixed_playlist_is_exactly_1024_bytes_and_valid() {
    let p = fixed_playlist();
    assert_eq!(p.len(), FIXED_PLAYLIST_SIZE);
    let text = std::str::from_utf8(&p).unwrap();
    assert!(text.starts_with("#EXTM3U\n"));
    assert!(text.ends_with("#EXT-X-ENDLIST\n"));
    assert!(text.contains("/vod/cat/seg_000.ts"));
}

#[test]
fn live_stream_names() {
    assert_eq!(live_stream("/live/seg_1.ts"), "");
    assert_eq!(live_stream("/live/news/seg_1.ts"), "news");
    assert_eq!(live_stream("/live/news/index.m3u8"), "news");
}

#[test]
fn query_params_and_if_none_match() {
    assert_eq!(query_param(Some("a=1&_HLS_msn=5"), "_HLS_msn"), Some("5"));
    assert_eq!(query_param(Some("_HLS_part"), "_HLS_part"), Some(""));
    assert_eq!(query_param(None, "x"), None);
    assert!(none_match("\"a\", W/\"b\"", "\"b\""));
    assert!(none_match("*", "\"b\""));
    assert!(!none_match("\"a\"", "\"b\""));
}
