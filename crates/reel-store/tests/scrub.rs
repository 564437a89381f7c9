//! The background scrub: a byte flipped inside a stored body on disk is found, the object
//! removed for good (after a clean close, a crash behind a stale checkpoint, and a full
//! scan), and a step reads about its budget.

use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use reel_store::{IoMode, Store};

use crate::{body, both, get, open, put, rt};

const META: &[u8] = b"meta";

fn key(i: u64) -> Vec<u8> {
    format!("cdn.example/seg/{i}.ts").into_bytes()
}

fn len(i: u64) -> usize {
    90_000 + (i as usize * 7919) % 30_000
}

/// Where `data` starts in the store's volume files: bodies start on 4 KiB boundaries.
fn find_body(dir: &Path, data: &[u8]) -> (PathBuf, u64) {
    let probe = &data[..256];
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_none_or(|x| x != "dat") {
            continue;
        }
        let bytes = std::fs::read(&p).unwrap();
        if let Some(at) = (0..bytes.len()).step_by(4096).find(|&at| bytes[at..].starts_with(probe))
        {
            return (p, at as u64);
        }
    }
    panic!("body not found in the volumes");
}

/// Flips one bit of the byte at `off` of `file`, behind the store's back.
fn flip(file: &Path, off: u64) {
    let f = std::fs::OpenOptions::new().read(true).write(true).open(file).unwrap();
    let mut b = [0u8; 1];
    f.read_exact_at(&mut b, off).unwrap();
    f.write_all_at(&[b[0] ^ 0x10], off).unwrap();
}

/// Steps with an unlimited budget until a pass completes.
fn scrub_pass(s: &Arc<Store>) {
    rt(async {
        for _ in 0..100 {
            if s.scrub_step(u64::MAX).await.pass_done {
                return;
            }
        }
        panic!("no scrub pass completed");
    });
}

/// Every object but `gone` is there, byte for byte; `gone` is a miss.
fn check(s: &Arc<Store>, n: u64, gone: u64) {
    rt(async {
        for i in 0..n {
            let got = get(s, &key(i)).await;
            if i == gone {
                assert!(got.is_none(), "the corrupt object is served");
            } else {
                assert!(got == Some((META.to_vec(), body(i, len(i)))), "object {i} lost or wrong");
            }
        }
    });
}

const N: u64 = 24;
const BAD: u64 = 3;

fn a_corrupt_body_is_removed_for_good(io: IoMode) {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path(), 8, io);
    rt(async {
        for i in 0..N {
            put(&s, &key(i), META, &body(i, len(i)), true).await;
        }
    });
    // A periodic checkpoint that still lists the object: after the crash below it is
    // stale, and only the tombstone in a later volume keeps the object out.
    assert!(s.checkpoint().unwrap() > BAD, "the first volumes are in it");
    scrub_pass(&s);
    let st = s.stats();
    assert_eq!((st.scrub_objects, st.scrub_corrupt, st.scrub_passes), (N, 0, 1), "{st:?}");

    let (file, at) = find_body(dir.path(), &body(BAD, len(BAD)));
    flip(&file, at + 5000);
    scrub_pass(&s);
    let st = s.stats();
    assert_eq!((st.scrub_objects, st.scrub_corrupt, st.scrub_passes), (2 * N, 1, 2), "{st:?}");
    assert_eq!(st.objects, N - 1);
    assert!(st.scrub_bytes >= 2 * (0..N).map(|i| len(i) as u64).sum::<u64>(), "{st:?}");
    assert_eq!((st.read_errors, st.quarantined_volumes), (0, 0));
    check(&s, N, BAD);

    // A crash: no checkpoint at the drop of a frozen store.
    s.freeze();
    drop(s);
    let s = open(dir.path(), 8, io);
    check(&s, N, BAD);
    assert_eq!(s.stats().objects, N - 1);
    drop(s);

    // No checkpoint at all: every volume is scanned (bodies unread), the tombstone
    // replayed.
    std::fs::remove_file(dir.path().join("index.ckpt")).unwrap();
    let s = open(dir.path(), 8, io);
    assert_eq!(s.stats().recovered, N - 1);
    check(&s, N, BAD);
    s.close().unwrap();
    drop(s);

    // A clean close: the checkpoint leaves it out. The next pass finds nothing more.
    let s = open(dir.path(), 8, io);
    check(&s, N, BAD);
    scrub_pass(&s);
    let st = s.stats();
    assert_eq!((st.scrub_objects, st.scrub_corrupt), (N - 1, 0), "{st:?}");
}
both!(a_corrupt_body_is_removed_for_good_on, a_corrupt_body_is_removed_for_good);

#[test]
fn a_step_reads_about_its_budget() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path(), 8, IoMode::Threads);
    rt(async {
        for i in 0..N {
            put(&s, &key(i), META, &body(i, len(i)), true).await;
        }
    });
    let bodies: u64 = (0..N).map(|i| len(i) as u64).sum();
    // One record header (fixed part, key, metadata) and one trailer past the budget at
    // most.
    let slack = (72 + key(N).len() + META.len() + 40) as u64;
    rt(async {
        assert_eq!(s.scrub_step(0).await.bytes, 0);
        for budget in [4096, 50_000, 1 << 20] {
            let before = s.stats();
            let (mut steps, mut total, mut objects) = (0u64, 0u64, 0u64);
            loop {
                let p = s.scrub_step(budget).await;
                assert!(p.bytes <= budget + slack, "{p:?} for a budget of {budget}");
                assert!(p.pass_done || p.bytes >= budget, "{p:?}: stopped short of its budget");
                steps += 1;
                total += p.bytes;
                objects += p.objects;
                if p.pass_done {
                    break;
                }
            }
            let st = s.stats();
            assert_eq!(st.scrub_bytes - before.scrub_bytes, total);
            assert_eq!((objects, st.scrub_objects - before.scrub_objects), (N, N));
            assert_eq!(st.scrub_passes - before.scrub_passes, 1);
            assert!(total >= bodies && total <= bodies + N * 8192, "{total} for {bodies}");
            assert!(steps >= total / (budget + slack), "{steps} steps read {total} bytes");
        }
    });
}

/// An object replaced or removed while the scrub is inside it is skipped, not reported.
#[test]
fn objects_changed_under_the_scrub_are_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path(), 8, IoMode::Threads);
    rt(async {
        put(&s, b"a", META, &body(1, 300_000), true).await;
        put(&s, b"b", META, &body(2, 300_000), true).await;
        // Inside "a"; then "a" is replaced and "b" removed.
        let p = s.scrub_step(100_000).await;
        assert_eq!((p.objects, p.pass_done), (0, false));
        put(&s, b"a", META, &body(3, 1000), true).await;
        assert!(s.remove(b"b").await.unwrap());
        // The rest of this pass checks neither; the next one checks the new "a" only.
        for expect in [0, 1] {
            let mut objects = 0;
            loop {
                let p = s.scrub_step(100_000).await;
                objects += p.objects;
                if p.pass_done {
                    break;
                }
            }
            assert_eq!(objects, expect);
        }
        let st = s.stats();
        assert_eq!((st.scrub_corrupt, st.objects), (0, 1), "{st:?}");
        assert!(get(&s, b"a").await.is_some_and(|(_, b)| b == body(3, 1000)));
    });
}

/// A body damaged on disk is not re-appended under a fresh checksum by the second chance
/// of a reclaim (the scrub could never find it then); intact objects still are.
fn a_second_chance_never_launders_a_corrupt_body(io: IoMode) {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path(), 4, io);
    rt(async {
        for i in 0..4 {
            put(&s, &key(i), META, &body(i, len(i)), true).await;
        }
        // Read since written: both earn a second chance.
        assert!(get(&s, &key(0)).await.is_some() && get(&s, &key(1)).await.is_some());
    });
    let (file, at) = find_body(dir.path(), &body(0, len(0)));
    flip(&file, at + 100);
    rt(async {
        let mut i = 100;
        while s.stats().reclaims == 0 {
            put(&s, &key(i), META, &body(i, len(i)), true).await;
            i += 1;
        }
        assert!(get(&s, &key(0)).await.is_none(), "the corrupt body was copied");
        assert!(get(&s, &key(1)).await == Some((META.to_vec(), body(1, len(1)))));
    });
    assert_eq!(s.stats().second_chance, 1, "{:?}", s.stats());
}
both!(
    a_second_chance_never_launders_a_corrupt_body_on,
    a_second_chance_never_launders_a_corrupt_body
);
