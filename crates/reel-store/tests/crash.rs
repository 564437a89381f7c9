//! Crash tests: kill -9 mid-fill, truncated and corrupted volumes. No corrupted byte
//! may ever be returned; objects that fail their checksum are dropped.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

use bytes::Bytes;
use rand::{Rng, SeedableRng};
use reel_store::IoMode;

use crate::{VOL, backends, body, get, open, put, rt};

const OBJECTS: u64 = 40;

fn obj_len(i: u64) -> usize {
    (i as usize * 7919) % 120_000 + 1
}

fn write_objects(dir: &Path, io: IoMode) {
    let s = open(dir, 8, io);
    rt(async {
        for i in 0..OBJECTS {
            put(
                &s,
                format!("obj-{i}").as_bytes(),
                format!("m{i}").as_bytes(),
                &body(i, obj_len(i)),
                i % 3 != 0,
            )
            .await;
        }
    });
}

/// Every object returned must be byte-identical to what was written.
fn check_no_corruption(dir: &Path, io: IoMode) -> u64 {
    let s = open(dir, 8, io);
    rt(async {
        let mut found = 0;
        for i in 0..OBJECTS {
            if let Some((meta, b)) = get(&s, format!("obj-{i}").as_bytes()).await {
                assert_eq!(meta, format!("m{i}").as_bytes());
                assert!(b == body(i, obj_len(i)), "corrupted body returned for obj-{i}");
                found += 1;
            }
        }
        found
    })
}

#[test]
fn corrupted_or_truncated_volumes_never_return_bad_bytes() {
    let src = tempfile::tempdir().unwrap();
    write_objects(src.path(), IoMode::Threads);
    assert_eq!(check_no_corruption(src.path(), IoMode::Threads), OBJECTS);
    let mut rng = rand::rngs::StdRng::seed_from_u64(0x5eed);
    for round in 0..12 {
        let dir = tempfile::tempdir().unwrap();
        for e in std::fs::read_dir(src.path()).unwrap() {
            let e = e.unwrap();
            std::fs::copy(e.path(), dir.path().join(e.file_name())).unwrap();
        }
        let vol = dir.path().join("vol-00000.dat");
        let f = std::fs::OpenOptions::new().write(true).open(&vol).unwrap();
        if round % 3 == 0 {
            f.set_len(rng.random_range(0..VOL)).unwrap();
        } else {
            for _ in 0..rng.random_range(1..8) {
                let off = rng.random_range(0..2 * VOL / 3);
                let mut b = [0u8; 1];
                std::os::unix::fs::FileExt::read_exact_at(&f, &mut b, off).ok();
                let b = [b[0] ^ (1 << rng.random_range(0..8))];
                std::os::unix::fs::FileExt::write_all_at(&f, &b, off).unwrap();
            }
        }
        drop(f);
        let io = backends()[round % backends().len()];
        let found = check_no_corruption(dir.path(), io);
        assert!(found <= OBJECTS);
    }
}

/// Child side of the kill -9 test: commits objects, then streams a fill forever.
#[test]
fn child_writer() {
    let Ok(dir) = std::env::var("REEL_STORE_CHILD_DIR") else { return };
    write_objects(Path::new(&dir), IoMode::Auto);
    let s = open(Path::new(&dir), 8, IoMode::Auto);
    rt(async {
        let mut w = s.begin_fill(b"torn", Bytes::from_static(b"m"), None).await.unwrap();
        w.append(Bytes::from(vec![1u8; 100_000])).await.unwrap();
        let mut w2 = s.begin_fill(b"torn2", Bytes::from_static(b"m"), Some(200_000)).await.unwrap();
        w2.append(Bytes::from(vec![2u8; 100_000])).await.unwrap();
        println!("ready");
        std::future::pending::<()>().await;
    });
}

#[test]
fn kill_9_mid_fill_drops_only_the_torn_objects() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "crash::child_writer", "--nocapture", "--test-threads=1"])
        .env("REEL_STORE_CHILD_DIR", dir.path())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let out = child.stdout.take().unwrap();
    let ready = BufReader::new(out).lines().map_while(Result::ok).any(|l| l.contains("ready"));
    assert!(ready, "child never got ready");
    // SAFETY-free: kill the child we spawned, by its PID.
    child.kill().unwrap();
    child.wait().unwrap();
    for &io in backends() {
        assert_eq!(check_no_corruption(dir.path(), io), OBJECTS);
        let s = open(dir.path(), 8, io);
        assert!(s.lookup(b"torn").is_none());
        assert!(s.lookup(b"torn2").is_none());
        assert!(s.stats().dropped_on_rebuild >= 2, "{:?}", s.stats());
    }
}
