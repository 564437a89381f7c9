//! Crash tests: kill -9 mid-fill (with a periodic checkpoint behind it), truncated
//! volumes, damaged record headers and trailers, stale checkpoints. Nothing damaged or
//! stale may ever be returned; records whose header or commit trailer does not check out
//! are dropped. (Bodies are not read at open, so a flipped bit inside a body is not
//! caught there: see docs/store.md.)

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
    check_no_corruption_n(dir, io, OBJECTS)
}

/// [`check_no_corruption`] for objects `0..n`.
fn check_no_corruption_n(dir: &Path, io: IoMode, n: u64) -> u64 {
    let s = open(dir, 8, io);
    rt(async {
        let mut found = 0;
        for i in 0..n {
            if let Some((meta, b)) = get(&s, format!("obj-{i}").as_bytes()).await {
                assert_eq!(meta, format!("m{i}").as_bytes());
                assert!(b == body(i, obj_len(i)), "corrupted body returned for obj-{i}");
                found += 1;
            }
        }
        found
    })
}

/// Where the record metadata of a volume lies: each record's header (with key and
/// metadata) and its commit trailer, found by walking the clean volume (layout:
/// docs/store-format.md).
fn metadata_ranges(vol: &Path) -> Vec<(u64, u64)> {
    let f = std::fs::File::open(vol).unwrap();
    let at = |off: u64, n: usize| {
        let mut b = vec![0u8; n];
        std::os::unix::fs::FileExt::read_exact_at(&f, &mut b, off).unwrap();
        b
    };
    let u = |b: &[u8], o: usize, n: usize| {
        let mut a = [0u8; 8];
        a[..n].copy_from_slice(&b[o..o + n]);
        u64::from_le_bytes(a)
    };
    let mut out = vec![(0, 40)];
    let mut off = 4096;
    loop {
        let h = at(off, 72);
        if &h[0..4] != b"REC1" {
            return out;
        }
        let header_len = 72 + u(&h, 32, 4) + u(&h, 36, 4);
        let (body_len, span) = (u(&h, 40, 8), u(&h, 48, 8));
        let trailer = off + header_len.div_ceil(4096) * 4096 + body_len;
        out.push((off, off + header_len));
        out.push((trailer, trailer + 40));
        off += span;
    }
}

#[test]
fn damaged_or_truncated_volumes_never_return_bad_bytes() {
    let src = tempfile::tempdir().unwrap();
    write_objects(src.path(), IoMode::Threads);
    assert_eq!(check_no_corruption(src.path(), IoMode::Threads), OBJECTS);
    let meta = metadata_ranges(&src.path().join("vol-00000.dat"));
    assert!(meta.len() > 2 * 10, "a dozen objects in the first volume");
    let mut rng = rand::rngs::StdRng::seed_from_u64(0x5eed);
    for round in 0..12 {
        let dir = tempfile::tempdir().unwrap();
        for e in std::fs::read_dir(src.path()).unwrap() {
            let e = e.unwrap();
            // Without the checkpoint of the clean close the volumes are scanned.
            if e.file_name().to_string_lossy().ends_with(".dat") {
                std::fs::copy(e.path(), dir.path().join(e.file_name())).unwrap();
            }
        }
        let vol = dir.path().join("vol-00000.dat");
        let f = std::fs::OpenOptions::new().write(true).open(&vol).unwrap();
        if round % 3 == 0 {
            f.set_len(rng.random_range(0..VOL)).unwrap();
        } else {
            for _ in 0..rng.random_range(1..8) {
                let (from, to) = meta[rng.random_range(0..meta.len())];
                let off = rng.random_range(from..to);
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

/// A checkpoint from an earlier clean close, put back after the store moved on, is
/// never trusted for volumes that changed: nothing stale comes back.
#[test]
fn a_stale_checkpoint_is_never_trusted() {
    let dir = tempfile::tempdir().unwrap();
    let ckpt = dir.path().join("index.ckpt");
    write_objects(dir.path(), IoMode::Threads);
    let old = std::fs::read(&ckpt).expect("a clean close writes a checkpoint");
    // Changes that live in newer volumes only: the old checkpoint still covers the
    // volumes of obj-5 and obj-6, the records that replace and remove them are scanned.
    {
        let s = open(dir.path(), 8, IoMode::Threads);
        rt(async {
            put(&s, b"obj-5", b"five", &body(1005, 3000), true).await;
            assert!(s.remove(b"obj-6").await.unwrap());
        });
    }
    std::fs::write(&ckpt, &old).unwrap();
    {
        let s = open(dir.path(), 8, IoMode::Threads);
        rt(async {
            let five = Some((b"five".to_vec(), body(1005, 3000)));
            assert!(get(&s, b"obj-5").await == five, "obj-5 is not the new one");
            assert!(get(&s, b"obj-6").await.is_none(), "a removed object came back");
            let seven = Some((b"m7".to_vec(), body(7, obj_len(7))));
            assert!(get(&s, b"obj-7").await == seven, "obj-7 is lost or wrong");
        });
    }
    std::fs::write(&ckpt, &old).unwrap();
    {
        let s = open(dir.path(), 8, IoMode::Threads);
        rt(async {
            // Replace, remove, and cycle the 8 MiB store twice so old volumes are reused.
            put(&s, b"obj-1", b"new", &body(1000, 5000), true).await;
            assert!(s.remove(b"obj-2").await.unwrap());
            for i in 0..160u64 {
                put(&s, format!("fill-{i}").as_bytes(), b"f", &body(i, 100_000), true).await;
            }
            put(&s, b"obj-3", b"newer", &body(1001, 5000), true).await;
            assert!(s.stats().reclaims >= 8, "{:?}", s.stats());
        });
    }
    std::fs::write(&ckpt, &old).unwrap();
    let s = open(dir.path(), 8, IoMode::Threads);
    rt(async {
        assert!(get(&s, b"obj-1").await.is_none_or(|(m, b)| m == b"new" && b == body(1000, 5000)));
        assert!(get(&s, b"obj-5").await.is_none_or(|(m, b)| m == b"five" && b == body(1005, 3000)));
        assert!(get(&s, b"obj-2").await.is_none(), "a removed object came back");
        let three = Some((b"newer".to_vec(), body(1001, 5000)));
        assert!(get(&s, b"obj-3").await == three, "obj-3 is not the newest");
        assert!(get(&s, b"obj-6").await.is_none(), "a removed object came back");
        for i in 7..OBJECTS {
            // Evicted long ago: their volumes were reused, the old entries are not.
            assert!(get(&s, format!("obj-{i}").as_bytes()).await.is_none(), "obj-{i} is stale");
        }
        assert!(get(&s, b"fill-159").await.unwrap().1 == body(159, 100_000));
    });
}

/// Child side of the kill -9 test: commits objects, then streams a fill forever.
#[test]
fn child_writer() {
    let Ok(dir) = std::env::var("REEL_STORE_CHILD_DIR") else { return };
    write_objects(Path::new(&dir), IoMode::Auto);
    let s = open(Path::new(&dir), 8, IoMode::Auto);
    rt(async {
        // More objects, a periodic checkpoint, more objects after it: the open after the
        // kill takes the checkpoint and scans what it does not cover.
        for i in OBJECTS..OBJECTS + 10 {
            put(
                &s,
                format!("obj-{i}").as_bytes(),
                format!("m{i}").as_bytes(),
                &body(i, obj_len(i)),
                true,
            )
            .await;
        }
        assert!(s.checkpoint().unwrap() > 0, "the sealed volumes are in it");
        for i in OBJECTS + 10..OBJECTS + 20 {
            put(
                &s,
                format!("obj-{i}").as_bytes(),
                format!("m{i}").as_bytes(),
                &body(i, obj_len(i)),
                false,
            )
            .await;
        }
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
    // The first open scans past the checkpoint and drops the torn records; the next
    // ones load the checkpoint of the clean close before them.
    for (n, &io) in backends().iter().cycle().take(3).enumerate() {
        let s = open(dir.path(), 8, io);
        if n == 0 {
            assert!(s.stats().dropped_on_rebuild >= 2, "{:?}", s.stats());
        }
        assert!(rt(s.lookup(b"torn")).is_none());
        assert!(rt(s.lookup(b"torn2")).is_none());
        drop(s);
        assert_eq!(check_no_corruption_n(dir.path(), io, OBJECTS + 20), OBJECTS + 20);
    }
}

/// A clean store of [`OBJECTS`] objects, written once for the property below.
fn clean_source() -> &'static Path {
    static SRC: std::sync::OnceLock<tempfile::TempDir> = std::sync::OnceLock::new();
    SRC.get_or_init(|| {
        let src = tempfile::tempdir().unwrap();
        write_objects(src.path(), IoMode::Threads);
        src
    })
    .path()
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 24, ..Default::default() })]

    /// Any set of bit flips in record headers, trailers and the volume header, with or
    /// without a truncation, opens without a panic and never returns a wrong byte:
    /// every object found is the one written.
    #[test]
    fn random_damage_to_record_metadata_never_returns_bad_bytes(
        flips in proptest::collection::vec(
            (proptest::prelude::any::<proptest::sample::Index>(), 0u64..u64::MAX, 0u8..8),
            0..10,
        ),
        truncate in proptest::option::of(0..VOL),
        threads in proptest::bool::ANY,
    ) {
        let src = clean_source();
        let meta = metadata_ranges(&src.join("vol-00000.dat"));
        let dir = tempfile::tempdir().unwrap();
        for e in std::fs::read_dir(src).unwrap() {
            let e = e.unwrap();
            // Without the checkpoint of the clean close the volumes are scanned.
            if e.file_name().to_string_lossy().ends_with(".dat") {
                std::fs::copy(e.path(), dir.path().join(e.file_name())).unwrap();
            }
        }
        let vol = dir.path().join("vol-00000.dat");
        let f = std::fs::OpenOptions::new().read(true).write(true).open(vol).unwrap();
        for (which, at, bit) in &flips {
            let (from, to) = meta[which.index(meta.len())];
            let off = from + at % (to - from);
            let mut b = [0u8; 1];
            std::os::unix::fs::FileExt::read_exact_at(&f, &mut b, off).unwrap();
            std::os::unix::fs::FileExt::write_all_at(&f, &[b[0] ^ (1 << bit)], off).unwrap();
        }
        if let Some(len) = truncate {
            f.set_len(len).unwrap();
        }
        drop(f);
        let io = if threads { IoMode::Threads } else { backends()[0] };
        // check_no_corruption asserts every returned object byte for byte.
        let found = check_no_corruption(dir.path(), io);
        proptest::prop_assert!(found <= OBJECTS);
        if flips.is_empty() && truncate.is_none() {
            proptest::prop_assert_eq!(found, OBJECTS);
        }
    }
}
