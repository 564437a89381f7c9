//! Bodies of unknown length (chunked origin responses): concurrent fills that cannot
//! grow in place keep going, and every reader following them gets every byte.

use std::os::unix::fs::FileExt;
use std::sync::Arc;

use bytes::Bytes;
use reel_store::{Committed, Filling, IoMode, Lookup, Store, StoreConfig};

use crate::{body, both, get, rt};

const MIB: u64 = 1 << 20;

fn open16(dir: &std::path::Path, volumes: u64, io: IoMode) -> Arc<Store> {
    let cfg = StoreConfig::single(dir.to_owned(), volumes * 16 * MIB, 16 * MIB, io);
    let s = Store::open(cfg).expect("open store");
    s.wait_loaded();
    s
}

/// Reads a whole fill as a cache follower does: waits for bytes, takes the file range
/// of what is written (the bytes sendfile would send, read here with pread) or reads
/// it through the store, until the fill completes.
async fn follow(mut f: Filling) -> Vec<u8> {
    let mut got = Vec::new();
    let mut by_range = true;
    loop {
        let st = f.wait_for(got.len() as u64 + 1).await.expect("fill aborted");
        let pos = got.len() as u64;
        if st.available > pos {
            let n = (st.available - pos).min(300_000);
            if by_range {
                let r = f.file_range(pos, n).expect("range of written bytes");
                let mut buf = vec![0u8; n as usize];
                let file = std::fs::File::from(r.fd.try_clone_to_owned().expect("dup"));
                file.read_exact_at(&mut buf, r.offset).expect("pread");
                got.extend_from_slice(&buf);
            } else {
                got.extend_from_slice(&f.read(pos, n).await.expect("read"));
            }
            by_range = !by_range;
        }
        if st.final_len == Some(got.len() as u64) {
            return got;
        }
    }
}

fn concurrent_fills(io: IoMode) {
    const FILLS: u64 = 4;
    const LEN: usize = 3 << 20;
    let dir = tempfile::tempdir().unwrap();
    let s = open16(dir.path(), 4, io);
    let bodies: Vec<Vec<u8>> = (0..FILLS).map(|i| body(100 + i, LEN)).collect();
    rt(async {
        let mut writers = Vec::new();
        let mut readers = Vec::new();
        for i in 0..FILLS {
            let key = format!("live/{i}.ts");
            let w = s.begin_fill(key.as_bytes(), Bytes::from_static(b"m"), None).await.unwrap();
            writers.push(w);
            let Some(Lookup::Filling(f)) = s.lookup(key.as_bytes()).await else {
                panic!("filling")
            };
            // Each follower on its own thread with its own runtime (another worker).
            readers.push(std::thread::spawn(move || rt(follow(f))));
        }
        // A range taken early must stay readable after its fill moved.
        let Some(Lookup::Filling(early)) = s.lookup(b"live/0.ts").await else { panic!("filling") };
        let mut early_range = None;
        // Interleaved chunks: no fill stays the last allocation of its volume.
        for (n, c) in (0..LEN).step_by(64 << 10).enumerate() {
            for (i, w) in writers.iter_mut().enumerate() {
                let end = (c + (64 << 10)).min(LEN);
                w.append(Bytes::copy_from_slice(&bodies[i][c..end])).await.unwrap();
            }
            if n == 8 {
                // Bytes below the next write boundary wait in the writer: write them.
                writers[0].flush().await.unwrap();
                let r = early.file_range(0, 512 << 10).unwrap();
                let f = std::fs::File::from(r.fd.try_clone_to_owned().unwrap());
                early_range = Some((f, r.offset));
            }
        }
        for w in writers {
            assert_eq!(w.commit().await.unwrap(), Committed::Stored);
        }
        let st = s.stats();
        assert!(st.fill_moves > 0, "the fills never had to move: {st:?}");
        let (f, off) = early_range.unwrap();
        let mut buf = vec![0u8; 512 << 10];
        f.read_exact_at(&mut buf, off).unwrap();
        assert!(buf == bodies[0][..512 << 10], "an early range was overwritten");
        for (i, r) in readers.into_iter().enumerate() {
            let got = r.join().unwrap();
            assert_eq!(got.len(), LEN, "follower {i} got a short body");
            assert!(got == bodies[i], "follower {i} got wrong bytes");
        }
        for i in 0..FILLS {
            let (_, b) = get(&s, format!("live/{i}.ts").as_bytes()).await.expect("stored");
            assert!(b == bodies[i as usize], "stored object {i} differs");
        }
    });
    drop(s);
    let s = open16(dir.path(), 4, io);
    rt(async {
        for i in 0..FILLS {
            let (_, b) = get(&s, format!("live/{i}.ts").as_bytes()).await.expect("recovered");
            assert!(b == bodies[i as usize], "recovered object {i} differs");
        }
    });
}
both!(concurrent_unknown_length_fills_deliver_every_byte, concurrent_fills);

fn larger_than_a_volume(io: IoMode) {
    const LEN: usize = 20 << 20;
    let dir = tempfile::tempdir().unwrap();
    let s = open16(dir.path(), 4, io);
    let data = body(7, LEN);
    let old = body(8, 100_000);
    rt(async {
        // A stored object under the key: the oversized response replaces it only for
        // the clients it was delivered to.
        crate::put(&s, b"vod/big.mp4", b"old", &old, true).await;
        let mut w = s.begin_fill(b"vod/big.mp4", Bytes::from_static(b"m"), None).await.unwrap();
        let mut readers = Vec::new();
        for _ in 0..2 {
            let Some(Lookup::Filling(f)) = s.lookup(b"vod/big.mp4").await else {
                panic!("filling")
            };
            readers.push(std::thread::spawn(move || rt(follow(f))));
        }
        let mut other = s.begin_fill(b"live/other.ts", Bytes::new(), None).await.unwrap();
        for c in data.chunks(256 << 10) {
            w.append(Bytes::copy_from_slice(c)).await.expect("an oversized body keeps streaming");
            other.append(Bytes::from_static(&[1u8; 1000])).await.unwrap();
        }
        // A reader arriving late still gets every byte.
        let Some(Lookup::Filling(late)) = s.lookup(b"vod/big.mp4").await else { panic!("filling") };
        readers.push(std::thread::spawn(move || rt(follow(late))));
        assert_eq!(w.commit().await.unwrap(), Committed::NotStored);
        assert_eq!(other.commit().await.unwrap(), Committed::Stored);
        for r in readers {
            let got = r.join().unwrap();
            assert_eq!(got.len(), LEN, "a follower got a short body");
            assert!(got == data, "a follower got wrong bytes");
        }
        let st = s.stats();
        assert_eq!(st.not_stored, 1, "{st:?}");
        // Not stored: lookups find the object it was replacing, as after an abort.
        assert_eq!(get(&s, b"vod/big.mp4").await.unwrap(), (b"old".to_vec(), old.clone()));
    });
    drop(s);
    let s = open16(dir.path(), 4, io);
    rt(async {
        assert_eq!(get(&s, b"vod/big.mp4").await.unwrap(), (b"old".to_vec(), old));
        assert_eq!(get(&s, b"live/other.ts").await.unwrap().1, vec![1u8; 1000 * 80]);
    });
    // Nothing of the oversized body is left on disk outside the volumes.
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| {
            !n.ends_with(".dat")
                && !n.starts_with("index.ckpt")
                && n != "lock"
                && n != "disks.state"
        })
        .collect();
    assert!(names.is_empty(), "{names:?}");
}
both!(an_unknown_length_body_larger_than_a_volume_is_delivered_whole, larger_than_a_volume);
