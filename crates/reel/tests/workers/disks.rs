//! A store on two disks at N workers: a disk taken out of service while viewers on every
//! worker fetch its objects at once; each of its objects is fetched from the origin once
//! more (one fetch per object whatever worker each viewer landed on), none of the other
//! disk's, and no request fails.

use super::*;
use crate::origin::{Object, Origin};

/// Objects spread over the two disks.
const N: usize = 24;
/// Viewers per object in a burst.
const PER_OBJECT: usize = 3;

fn path(i: usize) -> String {
    format!("/n/{i}.ts")
}

fn body(i: usize) -> Vec<u8> {
    format!("{i:>7}").repeat(3000).into_bytes()
}

/// Every object requested by `PER_OBJECT` viewers at once, each on its own connection.
fn all_at_once(reel: &Reel) -> Vec<Resp> {
    let asks =
        (0..N).flat_map(|i| (0..PER_OBJECT).map(move |_| i)).map(|i| Ask::get(reel.data, &path(i)));
    burst(asks.collect())
}

fn objects_on(reel: &Reel, disk: &std::path::Path) -> u64 {
    let st = reel.status();
    st["store"]["disks"]
        .as_array()
        .expect("disks")
        .iter()
        .find(|d| d["path"] == disk.display().to_string())
        .and_then(|d| d["objects"].as_u64())
        .expect("the disk is listed")
}

#[test]
fn a_disk_taken_out_under_concurrent_viewers_costs_one_fetch_per_object_at_any_worker_count() {
    for n in [2, 4] {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        std::fs::create_dir(&a).unwrap();
        std::fs::create_dir(&b).unwrap();
        let origin = Origin::start("o");
        for i in 0..N {
            origin.put(&path(i), Object::ok(body(i)).header("cache-control", "max-age=600"));
        }
        let mut conf = Conf::new(dir.path(), &origin);
        conf.raw = Some(conf.with_disks(&[&a, &b]));
        let reel = start_n(&conf, n);
        let before = per_worker(&reel);

        for (k, r) in all_at_once(&reel).iter().enumerate() {
            let i = k / PER_OBJECT;
            assert_eq!(r.status, 200, "{n} workers, {}", path(i));
            assert!(r.body == body(i), "{n} workers, {}: the origin's bytes", path(i));
        }
        let count = |i: usize| origin.hits(&path(i));
        assert!((0..N).all(|i| count(i) == 1), "{n} workers: one fetch per object");
        eventually("every object stored", || {
            (reel.status()["store"]["objects"].as_u64() == Some(N as u64)).then_some(())
        });
        let on_b = objects_on(&reel, &b) as usize;
        assert!(on_b > 0 && on_b < N, "{n} workers: {on_b} of {N} on b");

        let r = reel.admin_req("POST", &format!("/admin/store/disk?path={}&online=0", b.display()));
        assert_eq!(r.status, 200, "{}", r.text());
        for (k, r) in all_at_once(&reel).iter().enumerate() {
            let i = k / PER_OBJECT;
            assert_eq!(r.status, 200, "{n} workers, {} with b out", path(i));
            assert!(r.body == body(i), "{n} workers, {} with b out", path(i));
        }
        let again: Vec<u64> = (0..N).map(|i| count(i) - 1).collect();
        assert!(again.iter().all(|&c| c <= 1), "{n} workers: at most one more fetch: {again:?}");
        assert_eq!(
            again.iter().filter(|&&c| c == 1).count(),
            on_b,
            "{n} workers: the origin sees b's share again, and only that"
        );
        assert_eq!(objects_on(&reel, &b), 0);
        assert_spread(&reel, &before, &format!("{n} workers"));
    }
}
