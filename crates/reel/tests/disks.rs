//! A store on two disks behind real traffic: objects spread over both, a disk taken out
//! of service mid-traffic (0 failed requests; the origin sees that disk's share again),
//! `/healthz` still 200 with a `store_degraded` reason naming it, per-disk `/status` and
//! `/metrics`, the disk brought back by the admin call, and a restart with one disk gone.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use serde_json::Value;

use crate::common::*;
use crate::origin::{Object, Origin};

const N: usize = 60;

fn path(i: usize) -> String {
    format!("/d/{i}.ts")
}

fn disk<'a>(status: &'a Value, p: &Path) -> &'a Value {
    status["store"]["disks"]
        .as_array()
        .expect("disks")
        .iter()
        .find(|d| d["path"] == p.display().to_string())
        .expect("the disk is listed")
}

fn healthz(reel: &Reel) -> (u16, Value) {
    let r = get(reel.data, "/healthz");
    (r.status, r.json())
}

#[test]
fn a_disk_leaves_service_mid_traffic_comes_back_and_a_restart_goes_on_without_it() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    std::fs::create_dir(&a).unwrap();
    std::fs::create_dir(&b).unwrap();
    let o = Origin::start("o");
    for i in 0..N {
        o.put(&path(i), Object::ok(format!("{i:>6}").repeat(2000)));
    }
    let body = |i: usize| format!("{i:>6}").repeat(2000);
    let origin_count = |i: usize| o.all_hits().get(&path(i)).copied().unwrap_or(0);
    let mut conf = Conf::new(dir.path(), &o);
    conf.raw = Some(conf.with_disks(&[&a, &b]));
    let reel = Reel::start(&conf);

    for i in 0..N {
        let r = get(reel.data, &path(i));
        assert_eq!((r.status, r.text()), (200, body(i)), "{}", path(i));
    }
    // Spread over both disks.
    let st = eventually("all objects stored", || {
        let st = reel.status();
        (st["store"]["objects"].as_u64() == Some(N as u64)).then_some(st)
    });
    let on_b = disk(&st, &b)["objects"].as_u64().unwrap() as usize;
    assert!(on_b > N / 5 && on_b < N * 4 / 5, "{on_b} of {N} on b: {}", st["store"]);
    assert_eq!(disk(&st, &a)["state"], "online");

    // Viewers keep fetching while b is taken out of service.
    let before: Vec<u64> = (0..N).map(origin_count).collect();
    let stop = Arc::new(AtomicBool::new(false));
    // Odd while a request is in flight: incremented as each request starts and ends.
    let steps = Arc::new(AtomicU64::new(0));
    let viewer = {
        let (stop, steps, data) = (stop.clone(), steps.clone(), reel.data);
        std::thread::spawn(move || {
            let (mut ok, mut failed) = (0u64, Vec::new());
            let mut i = 0;
            while !stop.load(Ordering::SeqCst) {
                steps.fetch_add(1, Ordering::SeqCst);
                let r = get(data, &path(i % N));
                steps.fetch_add(1, Ordering::SeqCst);
                if r.status == 200 && r.text() == body(i % N) {
                    ok += 1;
                } else {
                    failed.push((path(i % N), r.status));
                }
                i += 1;
            }
            (ok, failed)
        })
    };
    // The disk leaves while a request is in flight (a viewer's request spans the call).
    let in_flight = eventually("a viewer's request in flight", || {
        let s = steps.load(Ordering::SeqCst);
        (s > 2 * N as u64 && s % 2 == 1).then_some(s)
    });
    let target = format!("/admin/store/disk?path={}&online=0", b.display());
    let r = reel.admin_req("POST", &target);
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["changed"], true);
    // Then every object is asked for again with b out of service.
    let after = steps.load(Ordering::SeqCst).max(in_flight + 1);
    eventually("every object asked for with b offline", || {
        (steps.load(Ordering::SeqCst) >= after + 2 * N as u64 + 2).then_some(())
    });
    stop.store(true, Ordering::SeqCst);
    let (ok, failed) = viewer.join().unwrap();
    assert!(failed.is_empty(), "{failed:?} failed ({ok} ok)");
    assert!(ok as usize > 2 * N, "{ok} ok: requests before and after the disk left");

    // Every object of b was fetched from the origin once more; those of a were not.
    for i in 0..N {
        let r = get(reel.data, &path(i));
        assert_eq!((r.status, r.text()), (200, body(i)), "{}", path(i));
    }
    let again: Vec<u64> = (0..N).map(|i| origin_count(i) - before[i]).collect();
    assert!(again.iter().all(|&n| n <= 1), "{again:?}");
    let refetched = again.iter().filter(|&&n| n == 1).count();
    assert_eq!(refetched, on_b, "the origin sees b's share again, and only that");

    let (code, h) = eventually("healthz names the disk", || {
        let (code, h) = healthz(&reel);
        let named = h["reasons"].as_array().is_some_and(|r| {
            r.iter().any(|x| {
                x.as_str().is_some_and(|x| {
                    x.starts_with("store_degraded") && x.contains(&*b.to_string_lossy())
                })
            })
        });
        named.then_some((code, h))
    });
    assert_eq!((code, h["status"].as_str()), (200, Some("ok")), "{h}");
    let st = reel.status();
    assert_eq!(disk(&st, &b)["state"], "offline", "{}", st["store"]);
    assert!(disk(&st, &b)["reason"].as_str().unwrap().contains("operator"));
    let m = reel.metrics();
    let label = |p: &Path| format!("{{path=\"{}\"}}", p.display());
    assert_eq!(metric(&m, &format!("reel_store_disk_online{}", label(&b))), Some(0.0));
    assert_eq!(metric(&m, &format!("reel_store_disk_online{}", label(&a))), Some(1.0));
    // Stored objects' keys and metadata are held in memory (their records were cached
    // when they were written).
    assert!(metric(&m, "reel_store_record_cache_bytes").is_some_and(|b| b > 0.0), "{m}");
    assert!(metric(&m, "reel_store_record_reads_total").is_some());

    // Back in service: empty; b's objects are fetched once more and stored there again.
    let r = reel.admin_req("POST", &format!("/admin/store/disk?path={}&online=1", b.display()));
    assert_eq!(r.status, 200, "{}", r.text());
    let st = reel.status();
    assert_eq!(disk(&st, &b)["state"], "online");
    assert_eq!(disk(&st, &b)["objects"], 0);
    let before: Vec<u64> = (0..N).map(origin_count).collect();
    for i in 0..N {
        assert_eq!(get(reel.data, &path(i)).status, 200);
    }
    let refetched = (0..N).filter(|&i| origin_count(i) > before[i]).count();
    assert_eq!(refetched, on_b, "b took back its own share");
    eventually("healthz without the reason", || {
        let (code, h) = healthz(&reel);
        (code == 200 && h["reasons"].as_array().is_some_and(|r| r.is_empty())).then_some(())
    });
    let r = reel.admin_req("POST", "/admin/store/disk?path=/nope&online=1");
    assert_eq!(r.status, 404, "{}", r.text());
    for bad in [
        "/admin/store/disk".to_owned(),
        format!("/admin/store/disk?path={}", b.display()),
        "/admin/store/disk?online=1".to_owned(),
        format!("/admin/store/disk?path={}&online=yes", b.display()),
    ] {
        let r = reel.admin_req("POST", &bad);
        assert_eq!(r.status, 400, "{bad}: {}", r.text());
        assert!(r.json()["error"].as_str().is_some_and(|e| e.contains("online")), "{bad}");
    }
    assert_eq!(disk(&reel.status(), &b)["state"], "online", "a refused call changes nothing");
    let r = reel.admin_req("GET", &format!("/admin/store/disk?path={}&online=1", b.display()));
    assert_eq!(r.status, 405);
    drop(reel);

    // A restart with b gone (unmounted): reel starts, says that b is out, and serves
    // every object as a hit from a: b's too, whose copies were stored on a while b was
    // out of service the first time.
    std::fs::rename(&b, dir.path().join("b-away")).unwrap();
    let reel = Reel::start(&conf);
    let st = reel.status();
    assert_eq!(disk(&st, &b)["state"], "offline");
    assert!(
        disk(&st, &b)["reason"].as_str().unwrap().contains("no such directory"),
        "{}",
        st["store"]
    );
    let (code, h) = eventually("healthz after the restart", || {
        let (code, h) = healthz(&reel);
        (h["reasons"].to_string().contains("store_degraded")).then_some((code, h))
    });
    assert_eq!(code, 200, "{h}");
    eventually("the index of a loaded", || {
        let hits =
            (0..N).filter(|&i| get(reel.data, &path(i)).cache_status() == "reel; hit").count();
        (hits == N).then_some(())
    });
}
