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

/// 2 MiB segments, as the issue measured them.
const SEG: usize = 2 << 20;

fn segment(i: usize) -> Vec<u8> {
    format!("{i:>7}\n").repeat(SEG / 8).into_bytes()
}

/// A disk whose file system shuts down mid-run (every read and write of it fails with
/// EIO, as a dead disk's: ext4 on a loop device, `EXT4_IOC_SHUTDOWN`) fails no viewer:
/// each fill that meets a write error on it is delivered whole from memory and not
/// stored, until `disk_error_limit` takes the disk out of service; then its share is
/// stored on the other disk. 400 new 2 MiB segments, four viewers at a time, the disk shut
/// down after the first 100: every body complete and byte-exact, each segment asked of the
/// origin once.
#[test]
fn a_disk_whose_file_system_shuts_down_mid_run_fails_no_viewer() {
    const SEGMENTS: usize = 400;
    const VIEWERS: usize = 4;
    let dir = tempfile::tempdir().unwrap();
    let (a, mnt) = (dir.path().join("a"), dir.path().join("b-mount"));
    std::fs::create_dir(&a).unwrap();
    std::fs::create_dir(&mnt).unwrap();
    let Some(fs) = reel_test_support::ShutdownFs::mount(&dir.path().join("b.img"), &mnt, 320)
    else {
        return;
    };
    // Inside the mount, so that an unmounted disk is a missing one.
    let b = mnt.join("store");
    std::fs::create_dir(&b).unwrap();
    let o = Arc::new(Origin::start("o"));
    let mut conf = Conf::new(dir.path(), &o);
    // Large disks. With 32 MiB ones (eight volumes of one segment each, reclaimed under
    // four viewers' fills) a few bodies came out wrong from about 8 KiB in, with no fault
    // and before this change too: a separate defect, not this test's.
    let sized = |p: &Path, size: &str| {
        (
            format!("path = \"{}\"\nsize = \"32MiB\"", p.display()),
            format!("path = \"{}\"\nsize = \"{size}\"", p.display()),
        )
    };
    // Without the scrub, whose reads of b would find the fault first: the viewers do.
    let mut text = conf
        .with_disks(&[&a, &b])
        .replace("disk_error_limit = 5", "disk_error_limit = 10\nscrub_rate = \"0\"");
    for (p, size) in [(&a, "1GiB"), (&b, "256MiB")] {
        let (old, new) = sized(p, size);
        assert!(text.contains(&old), "{text}");
        text = text.replace(&old, &new);
    }
    conf.raw = Some(text);
    let reel = Reel::start(&conf);
    let seg = |i: usize| format!("/seg/{i}.ts");

    let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    // Viewers stop taking segments at `until`: the disk is shut down between two rounds.
    let until = Arc::new(std::sync::atomic::AtomicUsize::new(100));
    let round = |until_now: usize| {
        until.store(until_now, Ordering::SeqCst);
        let viewers: Vec<_> = (0..VIEWERS)
            .map(|_| {
                let (o, next, until, data) = (o.clone(), next.clone(), until.clone(), reel.data);
                std::thread::spawn(move || {
                    let mut failed = Vec::new();
                    let mut conn: Option<Conn> = None;
                    loop {
                        let i = next.fetch_add(1, Ordering::SeqCst);
                        if i >= until.load(Ordering::SeqCst) {
                            next.fetch_sub(1, Ordering::SeqCst);
                            return failed;
                        }
                        o.put(&format!("/seg/{i}.ts"), Object::ok(segment(i)));
                        let mut c = match conn.take() {
                            Some(c) => c,
                            None => Conn::open(data).expect("connect"),
                        };
                        match c.get("127.0.0.1", &format!("/seg/{i}.ts")) {
                            Ok(r) if r.status == 200 && r.body == segment(i) => conn = Some(c),
                            Ok(r) => {
                                let want = segment(i);
                                let at = r.body.iter().zip(&want).position(|(x, y)| x != y);
                                let near = at.map(|p| {
                                    let p = p.saturating_sub(8);
                                    String::from_utf8_lossy(&r.body[p..(p + 32).min(r.body.len())])
                                        .into_owned()
                                });
                                failed.push(format!(
                                    "segment {i}: {} with {} of {SEG} bytes, {}, first wrong at \
                                     {at:?}: {near:?}",
                                    r.status,
                                    r.body.len(),
                                    r.header("cache-status").unwrap_or("-"),
                                ))
                            }
                            Err(e) => failed.push(format!("segment {i}: {e}")),
                        }
                        // The origin keeps only the segments not fetched yet.
                        o.put(&format!("/seg/{i}.ts"), Object::ok(Vec::new()));
                    }
                })
            })
            .collect();
        viewers.into_iter().flat_map(|v| v.join().unwrap()).collect::<Vec<_>>()
    };
    let failed = round(100);
    assert!(failed.is_empty(), "before the fault: {failed:?}");
    let st = reel.status();
    let on_b = disk(&st, &b)["objects"].as_u64().unwrap();
    assert!(on_b > 0, "segments are stored on b: {}", st["store"]);

    fs.shut_down();
    let failed = round(SEGMENTS);
    assert_eq!(failed, Vec::<String>::new(), "{} of 300 failed", failed.len());
    let hits = o.all_hits();
    let asked: Vec<_> = (0..SEGMENTS).filter(|&i| hits.get(&seg(i)) != Some(&1)).collect();
    assert!(asked.is_empty(), "segments not asked of the origin exactly once: {asked:?}");

    // b left service at the limit; its write errors were the viewers' rescued fills.
    let st = reel.status();
    assert_eq!(disk(&st, &b)["state"], "offline", "{}", st["store"]);
    let reason = disk(&st, &b)["reason"].as_str().unwrap().to_owned();
    assert!(reason.contains("disk_error_limit 10"), "{reason}");
    let m = reel.metrics();
    let rescued = metric(&m, "reel_store_rescued_fills_total").unwrap_or(0.0);
    assert!(rescued >= 1.0, "{m}");
    let (code, h) = healthz(&reel);
    assert_eq!(code, 200, "{h}");
    // Segments of before the fault (b's among them) are served whole: kept on a, or
    // fetched again.
    for i in (0..100).step_by(10) {
        o.put(&seg(i), Object::ok(segment(i)));
        let r = get(reel.data, &seg(i));
        assert!(r.status == 200 && r.body == segment(i), "segment {i} after the fault");
    }
}
