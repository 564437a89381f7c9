//! The bounds of coalescing at N workers: followers on any worker give up on a leader
//! whose origin is slow after `lock_timeout` and fetch on their own; the viewers of an
//! LL-HLS blocking request whose media does not appear get 504 `detail=blocking-timeout`
//! together at `blocking_timeout`, from one origin request, counted apart from origin
//! failures and never held against the origin's health.

use super::*;

/// Viewers per burst.
const VIEWERS: usize = 16;

/// A test config whose `[cache]` also has `lines`.
fn conf_with_cache(dir: &std::path::Path, origin: &Origin, lines: &str) -> Conf {
    let mut conf = Conf::new(dir, origin);
    conf.rules = format!("{lines}\n{}", conf.rules);
    conf
}

#[test]
fn followers_give_up_on_a_slow_leader_after_lock_timeout_at_any_worker_count() {
    for n in WORKERS {
        let dir = tempfile::tempdir().unwrap();
        let origin = Origin::start("o");
        let reel = start_n(&conf_with_cache(dir.path(), &origin, "lock_timeout = \"1s\""), n);
        let before = per_worker(&reel);
        let path = "/slow.bin";
        let gate = Gate::default();
        origin.put(path, Object::ok("slow").header("cache-control", "max-age=600").gated(&gate));
        let pending = burst_bg((0..VIEWERS).map(|_| Ask::get(reel.data, path)).collect());
        // Every follower, past lock_timeout, asks the origin on its own.
        eventually("every follower fetching on its own", || {
            (origin.hits(path) == VIEWERS as u64).then_some(())
        });
        gate.open();
        let answers = pending.join().expect("burst");
        assert!(answers.iter().all(|r| r.status == 200 && r.text() == "slow"), "{n} workers");
        let timed_out =
            answers.iter().filter(|r| r.cache_status().contains("detail=lock-timeout")).count();
        assert_eq!(timed_out, VIEWERS - 1, "{n} workers: every follower gave up");
        let stored = answers.iter().filter(|r| r.cache_status().contains("stored")).count();
        assert_eq!(stored, 1, "{n} workers: the leader's fill is stored");
        eventually("the fill stored", || {
            (get(reel.data, path).cache_status() == "reel; hit").then_some(())
        });
        assert_eq!(origin.hits(path), VIEWERS as u64, "{n} workers");
        assert_spread(&reel, &before, &format!("{n} workers"));
    }
}

#[test]
fn waiters_of_a_blocking_request_whose_media_never_comes_get_504_blocking_timeout_at_any_worker_count()
 {
    for n in WORKERS {
        let dir = tempfile::tempdir().unwrap();
        let origin = Origin::start("o");
        let reel = start_n(&conf_with_cache(dir.path(), &origin, "blocking_timeout = \"1s\""), n);
        let before = per_worker(&reel);
        let gate = Gate::default();
        let path = "/live/never.m3u8";
        origin.put(path, Object::ok("#EXTM3U\n").gated(&gate));
        // Four rounds: more than `fall` (3) timeouts in a row, which would mark a failing
        // origin down.
        for round in 0..4 {
            let target = format!("{path}?_HLS_msn={}&_HLS_part=0", 100 + round);
            let answers = burst((0..VIEWERS).map(|_| Ask::get(reel.data, &target)).collect());
            for r in &answers {
                assert_eq!(r.status, 504, "{n} workers: {}", r.cache_status());
                assert_eq!(
                    r.cache_status(),
                    "reel; fwd=miss; detail=blocking-timeout",
                    "{n} workers"
                );
            }
            assert_eq!(origin.hits(path), round + 1, "{n} workers: one origin request per target");
        }
        let m = reel.metrics();
        let addr = origin.addr.to_string();
        assert_eq!(
            metric(&m, "reel_blocking_timeouts_total"),
            Some((4 * VIEWERS) as f64),
            "{n} workers"
        );
        let kind = |k: &str| {
            metric(
                &m,
                &format!("reel_origin_errors_total{{group=\"o\",host=\"{addr}\",kind=\"{k}\"}}"),
            )
        };
        assert_eq!(kind("blocking_timeout"), Some(4.0), "{n} workers: counted apart");
        assert_eq!(kind("first_byte_timeout"), Some(0.0), "{n} workers: not an origin failure");
        assert_eq!(
            metric(&m, &format!("reel_origin_healthy{{group=\"o\",host=\"{addr}\"}}")),
            Some(1.0),
            "{n} workers: the origin stays healthy"
        );
        gate.open();
        assert_spread(&reel, &before, &format!("{n} workers"));
    }
}

/// The default `blocking_timeout` (10 s) is above a realistic origin's p99.99 (6 s): a
/// blocking reload whose one origin answer takes 4 s, past the old 3 s default, reaches
/// every waiter as the playlist, not as a 504 they would only retry.
#[test]
fn a_blocking_reload_slower_than_three_seconds_reaches_every_waiter_on_the_default() {
    let n = 2;
    let dir = tempfile::tempdir().unwrap();
    let origin = Origin::start("o");
    let reel = start_n(&Conf::new(dir.path(), &origin), n);
    let before = per_worker(&reel);
    let gate = Gate::default();
    let path = "/live/slow.m3u8";
    let playlist = Object::ok("#EXTM3U\n#EXT-X-VERSION:9\n").header("cache-control", "max-age=1");
    origin.put(path, playlist.gated(&gate));
    let target = format!("{path}?_HLS_msn=7&_HLS_part=1");
    let pending = burst_bg((0..VIEWERS).map(|_| Ask::get(reel.data, &target)).collect());
    eventually("the one origin request", || (origin.hits(path) == 1).then_some(()));
    // The origin's slowness is the fault under test: hold its answer past 3 s.
    std::thread::sleep(std::time::Duration::from_secs(4));
    gate.open();
    let answers = pending.join().expect("burst");
    for r in &answers {
        assert_eq!(r.status, 200, "{}", r.cache_status());
        assert!(r.text().starts_with("#EXTM3U"));
    }
    assert_eq!(origin.hits(path), 1, "one origin request for the target");
    assert_eq!(metric(&reel.metrics(), "reel_blocking_timeouts_total"), Some(0.0));
    assert_spread(&reel, &before, &format!("{n} workers"));
}
