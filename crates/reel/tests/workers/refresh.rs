//! Stored objects at N workers: a stale object is refreshed (stale-while-revalidate) or
//! revalidated once however many viewers find it stale; a negative answer is fetched once
//! and then served from the store; a purge on the admin listener is seen by every worker's
//! next request; an edge fills each key from its shield once.

use std::time::Duration;

use super::*;

/// Viewers per burst.
const VIEWERS: usize = 24;

/// `VIEWERS` requests for `path` on the data listener.
fn asks(reel: &Reel, path: &str, k: usize) -> Vec<Ask> {
    (0..k).map(|_| Ask::get(reel.data, path)).collect()
}

#[test]
fn a_stale_object_is_refreshed_once_in_the_background_at_any_worker_count() {
    for n in WORKERS {
        let dir = tempfile::tempdir().unwrap();
        let origin = Origin::start("o");
        let reel = start_n(&Conf::new(dir.path(), &origin), n);
        let before = per_worker(&reel);
        let path = "/swr.bin";
        let gate = Gate::default();
        origin.put(
            path,
            Object::ok("version one")
                .header("cache-control", "max-age=1, stale-while-revalidate=60")
                .header("etag", "\"v1\""),
        );
        assert_eq!(get(reel.data, path).cache_status(), "reel; fwd=miss; stored");
        std::thread::sleep(Duration::from_millis(2100));
        // The refresh's 304 is held: every viewer meanwhile is answered from the store.
        origin.put(
            path,
            Object::ok("version one")
                .header("cache-control", "max-age=60, stale-while-revalidate=60")
                .header("etag", "\"v1\"")
                .gated(&gate),
        );
        let answers = burst(asks(&reel, path, VIEWERS));
        gate.open();
        for r in &answers {
            assert_eq!((r.status, r.text().as_str()), (200, "version one"), "{n} workers");
            assert!(
                r.cache_status().contains("stale-while-revalidate"),
                "{n} workers: {}",
                r.cache_status()
            );
        }
        eventually("the refresh's answer stored", || {
            (get(reel.data, path).cache_status() == "reel; hit").then_some(())
        });
        assert_eq!(origin.conditional_hits(path), 1, "{n} workers: one background refresh");
        assert_eq!(origin.hits(path), 2, "{n} workers");
        assert_spread(&reel, &before, &format!("{n} workers"));
    }
}

#[test]
fn a_stale_object_is_revalidated_once_however_many_viewers_wait_at_any_worker_count() {
    for n in WORKERS {
        let dir = tempfile::tempdir().unwrap();
        let origin = Origin::start("o");
        let reel = start_n(&Conf::new(dir.path(), &origin), n);
        let before = per_worker(&reel);
        let path = "/reval.bin";
        origin.put(
            path,
            Object::ok("the body").header("cache-control", "max-age=1").header("etag", "\"e\""),
        );
        assert_eq!(get(reel.data, path).status, 200);
        std::thread::sleep(Duration::from_millis(2100));
        let gate = Gate::default();
        origin.put(
            path,
            Object::ok("the body")
                .header("cache-control", "max-age=60")
                .header("etag", "\"e\"")
                .gated(&gate),
        );
        let pending = burst_bg(asks(&reel, path, VIEWERS));
        eventually("the other viewers waiting on the revalidation", || {
            (origin.conditional_hits(path) == 1 && waiters(&reel) >= (VIEWERS - 1) as f64)
                .then_some(())
        });
        gate.open();
        let answers = pending.join().expect("burst");
        let revalidated =
            answers.iter().filter(|r| r.cache_status().contains("fwd-status=304")).count();
        assert_eq!(revalidated, 1, "{n} workers: one leader revalidates");
        assert!(answers.iter().all(|r| r.status == 200 && r.text() == "the body"), "{n} workers");
        assert_eq!(origin.conditional_hits(path), 1, "{n} workers: one conditional request");
        assert_eq!(origin.hits(path), 2, "{n} workers");
        assert_spread(&reel, &before, &format!("{n} workers"));
    }
}

#[test]
fn a_negative_answer_is_fetched_once_and_then_served_from_the_store_at_any_worker_count() {
    for n in WORKERS {
        let dir = tempfile::tempdir().unwrap();
        let origin = Origin::start("o");
        let mut conf = Conf::new(dir.path(), &origin);
        conf.negative_ttl = "60s".into();
        let reel = start_n(&conf, n);
        let before = per_worker(&reel);
        let path = "/missing.bin";
        let gate = Gate::default();
        origin.put(path, Object { status: 404, ..Object::ok("not here") }.gated(&gate));
        let pending = burst_bg(asks(&reel, path, VIEWERS));
        eventually("every viewer but the leader waiting", || {
            (origin.hits(path) == 1 && waiters(&reel) >= (VIEWERS - 1) as f64).then_some(())
        });
        gate.open();
        let answers = pending.join().expect("burst");
        assert!(answers.iter().all(|r| r.status == 404), "{n} workers");
        eventually("the 404 stored", || {
            (get(reel.data, path).cache_status() == "reel; hit").then_some(())
        });
        let again = burst(asks(&reel, path, 8));
        let got: Vec<_> = again.iter().map(|r| (r.status, r.cache_status().to_string())).collect();
        assert!(got.iter().all(|(s, cs)| *s == 404 && cs == "reel; hit"), "{n} workers: {got:?}");
        assert_eq!(origin.hits(path), 1, "{n} workers: one origin request");
        assert_spread(&reel, &before, &format!("{n} workers"));
    }
}

#[test]
fn a_purge_is_seen_by_every_workers_next_request_at_any_worker_count() {
    for n in WORKERS {
        let dir = tempfile::tempdir().unwrap();
        let origin = Origin::start("o");
        let reel = start_n(&Conf::new(dir.path(), &origin), n);
        let before = per_worker(&reel);
        let path = "/purged.ts";
        origin.put(path, Object::ok("old").header("cache-control", "max-age=600"));
        assert_eq!(get(reel.data, path).text(), "old");
        // Every worker has the object (and its metadata decoded) before the purge.
        assert!(burst(asks(&reel, path, VIEWERS)).iter().all(|r| r.text() == "old"));
        origin.put(path, Object::ok("new").header("cache-control", "max-age=600"));
        let r = reel.admin_req("POST", "/admin/purge?url=http://127.0.0.1/purged.ts");
        assert_eq!(r.status, 200, "{}", r.text());
        let answers = burst(asks(&reel, path, VIEWERS));
        for r in &answers {
            assert_eq!(r.text(), "new", "{n} workers: no worker serves the purged object");
        }
        assert_eq!(origin.hits(path), 2, "{n} workers: the new version fetched once");
        assert_spread(&reel, &before, &format!("{n} workers"));
    }
}

#[test]
fn an_edge_fills_each_key_from_its_shield_once_at_any_worker_count() {
    for n in WORKERS {
        let origin = Origin::start("o");
        origin.put_default(Object::ok(vec![3u8; 20_000]).header("cache-control", "max-age=600"));
        let pdir = tempfile::tempdir().unwrap();
        let mut pc = Conf::new(pdir.path(), &origin);
        pc.server = "cdn_id = \"reel\"\ncache_status_name = \"shield\"\n".into();
        let parent = Reel::start(&pc);
        let edir = tempfile::tempdir().unwrap();
        let mut ec = Conf::new(edir.path(), &origin);
        ec.origins = vec![parent.data];
        ec.server = "cdn_id = \"reel\"\ncache_status_name = \"edge\"\n".into();
        let edge = start_n(&ec, n);
        let before = per_worker(&edge);
        let keys: Vec<String> = (0..8).map(|k| format!("/shielded/{k}.ts")).collect();
        let asks = (0..VIEWERS * 2).map(|i| Ask::get(edge.data, &keys[i % keys.len()])).collect();
        let answers = burst(asks);
        assert!(answers.iter().all(|r| r.status == 200 && r.body.len() == 20_000), "{n} workers");
        let edge_fills =
            answers.iter().filter(|r| r.cache_status().contains("edge; fwd=miss; stored")).count();
        assert_eq!(edge_fills, keys.len(), "{n} workers: one edge fill per key");
        let parent_requests: u64 = per_worker(&parent).iter().sum();
        assert_eq!(
            parent_requests,
            keys.len() as u64,
            "{n} workers: the shield was asked once per key"
        );
        for k in &keys {
            assert_eq!(origin.hits(k), 1, "{n} workers: {k}");
        }
        assert_spread(&edge, &before, &format!("{n} workers"));
    }
}
