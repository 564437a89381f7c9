//! Slices at N workers: viewers of one large file on different workers, each reading it
//! from the start with read-ahead, ask the origin for each slice once.

use std::time::Duration;

use reel_demo_origin::DemoOriginConfig;

use super::*;

/// The object's size: eight slices of 1 MiB.
const SIZE: u64 = 8 << 20;
const SLICE: u64 = 1 << 20;

#[test]
fn viewers_on_different_workers_fetch_each_slice_once_with_read_ahead() {
    for n in WORKERS {
        let origin =
            reel_demo_origin::spawn("127.0.0.1:0".parse().unwrap(), DemoOriginConfig::no_latency())
                .expect("demo origin");
        let dir = tempfile::tempdir().unwrap();
        let unused = Origin::start("unused");
        let mut conf = Conf::new(dir.path(), &unused);
        conf.origins = vec![origin.local_addr()];
        let text = conf.render();
        let site = "origin_group = \"o\"\n";
        assert!(text.contains(site));
        conf.raw =
            Some(text.replacen(site, &format!("{site}slice = \"1MiB\"\nread_ahead = 2\n"), 1));
        let reel = start_n(&conf, n);
        let before = per_worker(&reel);
        let path = format!("/obj/{SIZE}.mp4");
        // 16 viewers: with 6, all of them landed on one of two workers about one run in
        // 32 (the kernel hashes each connection), and the spread check below failed.
        let answers = burst((0..16).map(|_| Ask::get(reel.data, &path)).collect());
        let first = &answers[0].body;
        assert_eq!(first.len() as u64, SIZE, "{n} workers");
        for r in &answers {
            assert_eq!(r.status, 200, "{n} workers: {}", r.cache_status());
            assert!(&r.body == first, "{n} workers: every viewer gets the same bytes");
        }
        // Read-ahead fetches may still be finishing.
        std::thread::sleep(Duration::from_millis(300));
        let stats = json_at(origin.local_addr(), "/__origin/stats");
        let ranges = stats["requests_by_range"].as_object().cloned().unwrap_or_default();
        for k in 0..SIZE / SLICE {
            let want = format!("{path} bytes={}-{}", k * SLICE, (k + 1) * SLICE - 1);
            let count = ranges.get(&want).and_then(Value::as_u64).unwrap_or(0);
            assert_eq!(count, 1, "{n} workers: slice {k} asked {count} times: {ranges:?}");
        }
        assert_eq!(
            ranges.len() as u64,
            SIZE / SLICE,
            "{n} workers: nothing but the slices: {ranges:?}"
        );
        assert_spread(&reel, &before, &format!("{n} workers"));
    }
}
