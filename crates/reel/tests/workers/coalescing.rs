//! Coalesced misses at N workers: however many viewers on however many workers miss one
//! object at once, its origin is asked once (a plain body, a chunked body of unknown
//! length), and once per Vary variant.

use super::*;

/// Viewers per burst.
const VIEWERS: usize = 24;

/// `VIEWERS` viewers miss `path` while its origin response is held at a gate; the gate
/// opens once all but the leader wait on the leader's fetch. Returns the answers.
fn gated_burst(reel: &Reel, origin: &Origin, path: &str, asks: Vec<Ask>, gate: &Gate) -> Vec<Resp> {
    let n = asks.len() as f64;
    let pending = burst_bg(asks);
    eventually("every viewer but the leader waiting on the leader", || {
        (origin.hits(path) >= 1 && waiters(reel) >= n - 1.0).then_some(())
    });
    gate.open();
    pending.join().expect("burst")
}

#[test]
fn concurrent_misses_ask_the_origin_once_at_any_worker_count() {
    for n in WORKERS {
        let dir = tempfile::tempdir().unwrap();
        let origin = Origin::start("o");
        let reel = start_n(&Conf::new(dir.path(), &origin), n);
        let before = per_worker(&reel);
        for (path, chunked) in [("/plain.ts", false), ("/chunked.ts", true)] {
            let gate = Gate::default();
            let body: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
            let mut obj = Object::ok(body.clone()).header("cache-control", "max-age=600");
            if chunked {
                obj = obj.chunked();
            }
            origin.put(path, obj.gated(&gate));
            let asks = (0..VIEWERS).map(|_| Ask::get(reel.data, path)).collect();
            let answers = gated_burst(&reel, &origin, path, asks, &gate);
            for r in &answers {
                assert_eq!((r.status, r.body.len()), (200, body.len()), "{n} workers, {path}");
                assert!(r.body == body, "{n} workers, {path}: the origin's bytes");
            }
            let stored = answers.iter().filter(|r| r.cache_status().contains("stored")).count();
            assert_eq!(stored, 1, "{n} workers, {path}: one leader");
            assert_eq!(origin.hits(path), 1, "{n} workers, {path}: one origin request");
        }
        assert_spread(&reel, &before, &format!("{n} workers"));
    }
}

/// With `[store] admission = "second-hit"` the first fetch of an object is not stored, yet
/// it is still one fetch: every viewer that missed it at once gets the whole body from it,
/// small bodies (read whole before the viewers are released, the fill ends at once) too.
/// The next request fetches again and stores.
#[test]
fn concurrent_first_misses_share_one_unstored_fetch_at_any_worker_count() {
    for n in WORKERS {
        let dir = tempfile::tempdir().unwrap();
        let origin = Origin::start("o");
        let mut conf = Conf::new(dir.path(), &origin);
        conf.store = "admission = \"second-hit\"\n".into();
        let reel = start_n(&conf, n);
        let before = per_worker(&reel);
        for (path, len, chunked) in [
            ("/plain.ts", 200_000, false),
            ("/small.ts", 2_000, false),
            ("/chunked.ts", 150_000, true),
        ] {
            let gate = Gate::default();
            let body: Vec<u8> = (0..len as u32).map(|i| (i % 253) as u8).collect();
            let mut obj = Object::ok(body.clone()).header("cache-control", "max-age=600");
            if chunked {
                obj = obj.chunked();
            }
            origin.put(path, obj.gated(&gate));
            let asks = (0..VIEWERS).map(|_| Ask::get(reel.data, path)).collect();
            let answers = gated_burst(&reel, &origin, path, asks, &gate);
            for r in &answers {
                assert_eq!((r.status, r.body.len()), (200, body.len()), "{n} workers, {path}");
                assert!(r.body == body, "{n} workers, {path}: the origin's bytes");
            }
            let statuses: Vec<&str> = answers.iter().map(|r| r.cache_status()).collect();
            let leaders = statuses.iter().filter(|s| s.contains("detail=not-admitted")).count();
            assert_eq!(leaders, 1, "{n} workers, {path}: one leader, not admitted: {statuses:?}");
            assert!(
                statuses.iter().all(|s| s.contains("not-admitted") || s.contains("collapsed")),
                "{n} workers, {path}: {statuses:?}"
            );
            assert_eq!(origin.hits(path), 1, "{n} workers, {path}: one origin request");
            // A request while the fill is still ending joins it; the first after it fetches
            // again and stores.
            eventually("a request after the unstored fetch ends stores the object", || {
                let r = get(reel.data, path);
                assert!(r.body == body, "{n} workers, {path}: {}", r.cache_status());
                r.cache_status().contains("stored").then_some(())
            });
            assert_eq!(origin.hits(path), 2, "{n} workers, {path}: stored by the second fetch");
        }
        assert_eq!(sample(&reel, "reel_store_admission_rejected_total"), 3.0, "{n} workers");
        assert_eq!(sample(&reel, "reel_store_objects"), 3.0, "{n} workers");
        assert_spread(&reel, &before, &format!("{n} workers"));
    }
}

#[test]
fn concurrent_misses_of_two_variants_ask_the_origin_once_per_variant() {
    for n in WORKERS {
        let dir = tempfile::tempdir().unwrap();
        let origin = Origin::start("o");
        let reel = start_n(&Conf::new(dir.path(), &origin), n);
        let before = per_worker(&reel);
        let gate = Gate::default();
        let path = "/vary.ts";
        origin.put(
            path,
            Object::ok(vec![7u8; 50_000])
                .header("cache-control", "max-age=600")
                .header("vary", "accept-encoding")
                .gated(&gate),
        );
        let asks = (0..VIEWERS)
            .map(|i| {
                let ae = if i % 2 == 0 { "gzip" } else { "identity" };
                Ask::get(reel.data, path).with("accept-encoding", ae)
            })
            .collect();
        let answers = gated_burst(&reel, &origin, path, asks, &gate);
        assert!(answers.iter().all(|r| r.status == 200 && r.body.len() == 50_000), "{n} workers");
        assert_eq!(
            origin.hits(path),
            2,
            "{n} workers: one origin request per variant: {:?}",
            answers.iter().map(|r| r.cache_status()).collect::<Vec<_>>()
        );
        // Both variants are stored: a second round is all hits.
        for ae in ["gzip", "identity"] {
            eventually("both variants stored", || {
                let r = request(reel.data, "GET", "127.0.0.1", path, &[("accept-encoding", ae)]);
                (r.cache_status() == "reel; hit").then_some(())
            });
        }
        let again = burst(
            (0..8)
                .map(|i| {
                    let ae = if i % 2 == 0 { "gzip" } else { "identity" };
                    Ask::get(reel.data, path).with("accept-encoding", ae)
                })
                .collect(),
        );
        assert!(again.iter().all(|r| r.cache_status() == "reel; hit"), "{n} workers");
        assert_eq!(origin.hits(path), 2, "{n} workers");
        assert_spread(&reel, &before, &format!("{n} workers"));
    }
}
