//! Players play the stream: ffprobe and ffmpeg read a live segment and part, the live
//! playlist and a VOD title from a real origin. Skipped, with the reason printed, when
//! ffmpeg is not installed (`apt-get install -y ffmpeg`), unless `REEL_REQUIRE_FFMPEG=1`.

use std::net::SocketAddr;
use std::process::Stdio;
use std::time::Duration;

use reel_demo_origin::DemoOriginConfig;
use reel_test_support::have_ffmpeg;

use super::{get, origin};

/// Runs `tool` with `args`; returns (success, stdout, stderr).
async fn run(tool: &str, args: &[&str]) -> (bool, String, String) {
    let child = tokio::process::Command::new(tool)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let out = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
        .await
        .expect("ffmpeg finished within 60 s")
        .unwrap();
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.success(), text(&out.stdout), text(&out.stderr))
}

/// `ffmpeg -i URL -t 6 -c copy -f null -`: reads 6 s of the stream, printing warnings and
/// errors; passes when it exits 0 and printed nothing.
async fn plays(addr: SocketAddr, path: &str) {
    let url = format!("http://{addr}{path}");
    let args = [
        "-hide_banner",
        "-nostdin",
        "-v",
        "warning",
        "-i",
        &url,
        "-t",
        "6",
        "-c",
        "copy",
        "-f",
        "null",
        "-",
    ];
    let (ok, _, err) = run("ffmpeg", &args).await;
    assert!(ok && err.trim().is_empty(), "ffmpeg {args:?}: {err}");
}

#[tokio::test]
async fn ffmpeg_plays_the_live_stream_and_a_vod_title() {
    if !have_ffmpeg("ffmpeg") {
        return;
    }
    let o = origin(DemoOriginConfig::no_latency());
    plays(o.local_addr(), "/live/index.m3u8").await;
    plays(o.local_addr(), "/live/news/index.m3u8").await;
    plays(o.local_addr(), "/vod/title_001/index.m3u8").await;
}

#[tokio::test]
async fn ffprobe_sees_h264_in_segments_and_parts() {
    if !have_ffmpeg("ffprobe") {
        return;
    }
    let o = origin(DemoOriginConfig::no_latency());
    let a = o.local_addr();
    let pl = get(a, "/live/index.m3u8").await.text();
    let seg = pl.lines().rfind(|l| l.starts_with("seg_")).unwrap();
    let part = pl
        .lines()
        .filter_map(|l| l.strip_prefix("#EXT-X-PART:DURATION=0.500,URI=\""))
        .next_back()
        .unwrap()
        .split('"')
        .next()
        .unwrap();
    for (path, frames) in [(format!("/live/{seg}"), "16"), (format!("/live/{part}"), "4")] {
        let url = format!("http://{a}{path}");
        let (ok, out, err) = run(
            "ffprobe",
            &[
                "-v",
                "error",
                "-count_frames",
                "-show_entries",
                "stream=codec_name,profile,width,height,nb_read_frames",
                "-of",
                "csv=p=0",
                &url,
            ],
        )
        .await;
        assert!(ok && err.trim().is_empty(), "{path}: {err}");
        // One line per program's stream and per stream: the same stream.
        let line = out.lines().next().unwrap_or("");
        assert_eq!(line, format!("h264,Constrained Baseline,256,144,{frames}"), "{path}");
    }
}
