//! A store over several disks: placement by weight, a disk that fails (read errors, and
//! write errors on a full tmpfs), a disk missing at start, one brought back, a restart
//! with one gone. Each disk is its own directory.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use reel_store::{
    Committed, DiskConfig, DiskState, IoMode, Lookup, Store, StoreConfig, StoreError,
};

use reel_test_support::ShutdownFs;

use crate::{VOL, body, both, rt};

fn cfg(disks: &[(&Path, u64)], limit: u64, io: IoMode) -> StoreConfig {
    StoreConfig {
        record_cache: reel_store::DEFAULT_RECORD_CACHE,
        disks: disks
            .iter()
            .map(|&(p, volumes)| DiskConfig { path: p.to_owned(), size: volumes * VOL })
            .collect(),
        volume_size: VOL,
        io,
        disk_error_limit: limit,
        scrub_rate: 0,
    }
}

fn open(disks: &[(&Path, u64)], limit: u64, io: IoMode) -> Arc<Store> {
    let s = Store::open(cfg(disks, limit, io)).expect("open store");
    s.wait_loaded();
    s
}

async fn put(s: &Store, key: &[u8], data: &[u8]) {
    let mut w =
        s.begin_fill(key, Bytes::from_static(b"m"), Some(data.len() as u64)).await.expect("fill");
    w.append(Bytes::copy_from_slice(data)).await.expect("append");
    w.commit().await.expect("commit");
}

async fn get(s: &Store, key: &[u8]) -> Option<Vec<u8>> {
    let Some(Lookup::Hit(h)) = s.lookup(key).await else { return None };
    h.read(0, h.body_len()).await.ok().map(|b| b.to_vec())
}

fn key(i: u64) -> Vec<u8> {
    format!("live/seg-{i}.ts").into_bytes()
}

fn state(s: &Store, p: &Path) -> (DiskState, Option<String>, u64) {
    let d = s.disks().into_iter().find(|d| d.path == p).expect("disk listed");
    (d.state, d.reason, d.stats.objects)
}

fn dirs(n: usize) -> (tempfile::TempDir, Vec<PathBuf>) {
    let root = tempfile::tempdir().unwrap();
    let v: Vec<PathBuf> = (0..n)
        .map(|i| {
            let p = root.path().join(format!("disk{i}"));
            std::fs::create_dir(&p).unwrap();
            p
        })
        .collect();
    (root, v)
}

fn spread_by_weight(io: IoMode) {
    let (_root, d) = dirs(3);
    // 4, 8 and 4 volumes: a quarter, a half and a quarter of the objects.
    let s = open(&[(&d[0], 4), (&d[1], 8), (&d[2], 4)], 0, io);
    let n = 400;
    rt(async {
        for i in 0..n {
            put(&s, &key(i), &body(i, 2000)).await;
        }
        for i in 0..n {
            assert_eq!(get(&s, &key(i)).await, Some(body(i, 2000)), "key {i}");
            let on = s.disk_of(&key(i)).unwrap();
            assert!(d.contains(&on));
        }
    });
    let counts: Vec<u64> = s.disks().iter().map(|d| d.stats.objects).collect();
    assert_eq!(counts.iter().sum::<u64>(), n);
    for (c, share) in counts.iter().zip([0.25, 0.5, 0.25]) {
        let got = *c as f64 / n as f64;
        assert!((got - share).abs() < 0.08, "{counts:?}: {got} where {share} was expected");
    }
    assert_eq!(s.stats().capacity, 16 * VOL);
    // Every disk records the set in service.
    for p in &d {
        let text = std::fs::read_to_string(p.join("disks.state")).unwrap();
        assert!(d.iter().all(|q| text.contains(&*q.to_string_lossy())), "{text}");
    }
}
both!(objects_spread_by_weight, spread_by_weight);

/// A read error past the limit takes the disk out: its objects miss (and are stored on
/// the next disk), the other disk's objects still hit, nothing more is written to it.
/// Back in service it starts empty; a key removed meanwhile does not come back from the
/// disk that held it while the first was out.
fn read_errors_fail_a_disk(io: IoMode) {
    let (_root, d) = dirs(2);
    let s = open(&[(&d[0], 4), (&d[1], 4)], 1, io);
    let n = 60;
    rt(async {
        for i in 0..n {
            put(&s, &key(i), &body(i, 3000)).await;
        }
        let on_b: Vec<u64> =
            (0..n).filter(|&i| s.disk_of(&key(i)).as_deref() == Some(&*d[1])).collect();
        assert!(on_b.len() > 10 && on_b.len() < 50, "{} of {n} on b", on_b.len());
        // Truncate b's volumes under the open store: its next read finds end of file.
        for e in std::fs::read_dir(&d[1]).unwrap() {
            let p = e.unwrap().path();
            if p.extension().is_some_and(|x| x == "dat") {
                std::fs::OpenOptions::new().write(true).open(&p).unwrap().set_len(0).unwrap();
            }
        }
        let first = on_b[0];
        assert_eq!(get(&s, &key(first)).await, None, "the read fails");
        let (st, reason, _) = state(&s, &d[1]);
        assert_eq!(st, DiskState::Offline);
        assert!(reason.unwrap().contains("disk_error_limit 1"));
        // The index of b is dropped off the workers; lookups skip b at once.
        for i in 0..n {
            let got = get(&s, &key(i)).await;
            if on_b.contains(&i) {
                assert_eq!(got, None, "key {i} was on the failed disk");
                assert_eq!(s.disk_of(&key(i)).as_deref(), Some(&*d[0]));
            } else {
                assert_eq!(got, Some(body(i, 3000)), "key {i} on the good disk");
            }
        }
        // Its keys are stored on the other disk now.
        put(&s, &key(first), &body(first, 3000)).await;
        assert_eq!(get(&s, &key(first)).await, Some(body(first, 3000)));
        // The maintenance thread drops b's index, then records the disks in service.
        let recorded = || {
            let text = std::fs::read_to_string(d[0].join("disks.state")).unwrap();
            !text.contains(&*d[1].to_string_lossy())
        };
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !recorded() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert!(recorded(), "disks.state on a still lists b");

        // Back in service: empty, and it takes its keys back.
        assert!(s.set_online(&d[1], true).unwrap());
        assert!(!s.set_online(&d[1], true).unwrap(), "already in service");
        let (st, _, objects) = state(&s, &d[1]);
        assert_eq!((st, objects), (DiskState::Online, 0));
        assert_eq!(get(&s, &key(first)).await, None, "placed on b again, which is empty");
        put(&s, &key(first), &body(first, 3000)).await;
        // Removed: from both disks, so taking b out again does not bring back the copy
        // stored on a while b was out.
        assert!(s.remove(&key(first)).await.unwrap());
        assert!(s.set_online(&d[1], false).unwrap());
        assert_eq!(get(&s, &key(first)).await, None, "the copy on a was removed too");
    });
    assert!(matches!(s.set_online(Path::new("/nope"), true), Err(StoreError::Config(_))));
}
both!(a_disk_with_read_errors_leaves_service_and_comes_back_empty, read_errors_fail_a_disk);

/// A disk missing at start is left out (with the reason); a store whose every disk is
/// missing fails to open. A restart with a disk gone serves the others' objects, and the
/// disk that comes back at a later restart starts empty.
fn missing_and_restart(io: IoMode) {
    let (root, d) = dirs(2);
    let gone = root.path().join("unmounted");
    {
        let s = open(&[(&d[0], 4), (&gone, 4)], 10, io);
        let (st, reason, _) = state(&s, &gone);
        assert_eq!(st, DiskState::Offline);
        assert!(reason.unwrap().contains("no such directory"));
        assert!(!gone.exists(), "a disk's directory is not created with several disks");
        assert_eq!(s.disk_of(b"x").as_deref(), Some(&*d[0]));
    }
    let all_gone = Store::open(cfg(&[(&gone, 4), (&root.path().join("also"), 4)], 10, io));
    assert!(matches!(all_gone, Err(StoreError::Open { .. })), "no disk left");

    let n = 40;
    let on_b: Vec<u64> = {
        let s = open(&[(&d[0], 4), (&d[1], 4)], 10, io);
        rt(async {
            for i in 0..n {
                put(&s, &key(i), &body(i, 3000)).await;
            }
        });
        let on_b = (0..n).filter(|&i| s.disk_of(&key(i)).as_deref() == Some(&*d[1])).collect();
        s.close().unwrap();
        on_b
    };
    let away = root.path().join("away");
    std::fs::rename(&d[1], &away).unwrap();
    {
        let s = open(&[(&d[0], 4), (&d[1], 4)], 10, io);
        assert_eq!(state(&s, &d[1]).0, DiskState::Offline);
        rt(async {
            for i in 0..n {
                let want = (!on_b.contains(&i)).then(|| body(i, 3000));
                assert_eq!(get(&s, &key(i)).await, want, "key {i}");
            }
        });
        s.close().unwrap();
    }
    std::fs::rename(&away, &d[1]).unwrap();
    let s = open(&[(&d[0], 4), (&d[1], 4)], 10, io);
    assert_eq!(state(&s, &d[1]).0, DiskState::Online);
    assert_eq!(state(&s, &d[1]).2, 0, "it was out of service: it starts empty");
    rt(async {
        for &i in &on_b {
            assert_eq!(get(&s, &key(i)).await, None, "key {i}");
        }
    });
}
both!(a_missing_disk_and_a_restart_with_one_gone, missing_and_restart);

/// Write errors past the limit take a disk out (its file system is full: the pages its
/// volumes had are punched out and another file took them); the fills that met them are
/// delivered, not stored; its keys are then stored on the other disk.
fn write_errors_fail_a_disk(io: IoMode) {
    let (_root, d) = dirs(2);
    let Some(_tmpfs) = crate::faults::Tmpfs::mount(&d[1]) else { return };
    let s = open(&[(&d[0], 4), (&d[1], 4)], 3, io);
    let on_b: Vec<u64> =
        (0..200).filter(|&i| s.disk_of(&key(i)).as_deref() == Some(&*d[1])).take(6).collect();
    for e in std::fs::read_dir(&d[1]).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "dat") {
            let f = std::fs::OpenOptions::new().write(true).open(&p).unwrap();
            crate::faults::punch_hole(&f, 4096, VOL - 4096);
        }
    }
    assert!(crate::faults::fill_until_enospc(&d[1].join("filler")) > 0);
    rt(async {
        let mut unstored = 0;
        for &i in &on_b {
            let data = body(i, 200_000);
            let r = async {
                let mut w = s
                    .begin_fill(&key(i), Bytes::from_static(b"m"), Some(data.len() as u64))
                    .await?;
                w.append(Bytes::from(data.clone())).await?;
                w.commit().await
            }
            .await;
            assert!(r.is_ok(), "key {i}: {r:?}");
            if r.is_ok_and(|c| c == Committed::NotStored) {
                unstored += 1;
            }
            if state(&s, &d[1]).0 == DiskState::Offline {
                break;
            }
        }
        assert_eq!(unstored, 3, "three write errors, then the disk is out");
        let (st, reason, _) = state(&s, &d[1]);
        assert_eq!(st, DiskState::Offline);
        assert!(reason.unwrap().contains("disk_error_limit 3"));
        assert!(s.disks()[1].errors >= 3);
        for &i in &on_b {
            assert_eq!(s.disk_of(&key(i)).as_deref(), Some(&*d[0]));
            put(&s, &key(i), &body(i, 200_000)).await;
            assert_eq!(get(&s, &key(i)).await, Some(body(i, 200_000)));
        }
    });
    drop(s);
}
both!(a_disk_with_write_errors_leaves_service, write_errors_fail_a_disk);

/// A disk whose file system shuts down under the store (every read and write of it fails
/// with EIO, as a dead disk's): each fill on it that meets a write error is still
/// delivered whole to the reader following it, and not stored, until the errors reach
/// the limit and the disk leaves service; its keys are then stored on the other disk.
fn shut_down_disk(io: IoMode) {
    let (root, d) = dirs(2);
    let Some(fs) = ShutdownFs::mount(&root.path().join("b.img"), &d[1], 32) else { return };
    let s = open(&[(&d[0], 4), (&d[1], 4)], 3, io);
    let on_b: Vec<u64> =
        (0..400).filter(|&i| s.disk_of(&key(i)).as_deref() == Some(&*d[1])).take(8).collect();
    let len = 500_000;
    rt(async {
        put(&s, &key(on_b[0]), &body(on_b[0], len)).await;
        assert_eq!(get(&s, &key(on_b[0])).await, Some(body(on_b[0], len)), "stored on b");
        fs.shut_down();
        let mut unstored = 0;
        for &i in &on_b[1..] {
            let data = body(i, len);
            let on = s.disk_of(&key(i));
            let mut w = s
                .begin_fill(&key(i), Bytes::from_static(b"m"), Some(len as u64))
                .await
                .expect("fill");
            let Some(Lookup::Filling(mut f)) = s.lookup(&key(i)).await else { panic!("filling") };
            for c in data.chunks(64 * 1024) {
                w.append(Bytes::copy_from_slice(c))
                    .await
                    .unwrap_or_else(|e| panic!("key {i}: {e}"));
            }
            let committed = w.commit().await.unwrap_or_else(|e| panic!("key {i}: {e}"));
            let st = f.wait_for(len as u64).await.unwrap_or_else(|e| panic!("key {i}: {e}"));
            assert_eq!(st.final_len, Some(len as u64));
            assert!(f.read(0, len as u64).await.unwrap() == data, "key {i}: every byte");
            match committed {
                Committed::NotStored => {
                    assert_eq!(on.as_deref(), Some(&*d[1]), "key {i}");
                    unstored += 1;
                }
                Committed::Stored => assert_eq!(on.as_deref(), Some(&*d[0]), "key {i}"),
            }
        }
        assert_eq!(unstored, 3, "three write errors, then the disk is out");
        let (st, reason, _) = state(&s, &d[1]);
        assert_eq!(st, DiskState::Offline);
        assert!(reason.unwrap().contains("disk_error_limit 3"));
        // Its keys, the one stored there before too, are stored on the other disk.
        assert_eq!(get(&s, &key(on_b[0])).await, None);
        put(&s, &key(on_b[0]), &body(on_b[0], len)).await;
        assert_eq!(get(&s, &key(on_b[0])).await, Some(body(on_b[0], len)));
        assert_eq!(s.disk_of(&key(on_b[0])).as_deref(), Some(&*d[0]));
    });
    drop(s);
}
both!(a_disk_whose_file_system_shuts_down_delivers_its_fills_and_leaves_service, shut_down_disk);

/// A hit on a disk that has just failed I/O (its file system shut down) is a miss, not an
/// object whose body fails once its head is out: for a while after an error, a disk's hits
/// are probed first, and a read error quarantines the volume.
fn hit_on_a_shut_down_disk(io: IoMode) {
    let (root, d) = dirs(2);
    let Some(fs) = ShutdownFs::mount(&root.path().join("b.img"), &d[1], 32) else { return };
    let s = open(&[(&d[0], 4), (&d[1], 4)], 100, io);
    let on_b: Vec<u64> =
        (0..400).filter(|&i| s.disk_of(&key(i)).as_deref() == Some(&*d[1])).take(3).collect();
    rt(async {
        for &i in &on_b[..2] {
            put(&s, &key(i), &body(i, 100_000)).await;
            assert!(matches!(s.lookup(&key(i)).await, Some(Lookup::Hit(_))), "key {i} stored");
        }
        fs.shut_down();
        // A fill meets the fault first: delivered, not stored, and the error counted.
        let k = key(on_b[2]);
        let mut w = s.begin_fill(&k, Bytes::from_static(b"m"), Some(1000)).await.unwrap();
        w.append(Bytes::from(body(on_b[2], 1000))).await.expect("delivered");
        assert_eq!(w.commit().await.unwrap(), Committed::NotStored);
        let read_errors = s.stats().read_errors;
        for &i in &on_b[..2] {
            match s.lookup(&key(i)).await {
                None => {}
                Some(Lookup::Hit(h)) => {
                    let r = h.read(0, h.body_len()).await.map(|b| b.len());
                    panic!("key {i}: a hit on the failed disk, whose body reads {r:?}")
                }
                Some(Lookup::Filling(_)) => panic!("key {i}: filling"),
            }
        }
        assert!(s.stats().read_errors > read_errors, "the probe's error is counted");
    });
    drop(s);
}
both!(a_hit_on_a_disk_that_just_failed_io_is_a_miss, hit_on_a_shut_down_disk);
