//! Unit tests of the store internals: replay order of the rebuild, where reclaim runs.

use std::collections::HashMap;

use bytes::Bytes;

use super::Disk;
use super::rebuild::{ScannedRecord, apply_record};
use crate::format::Kind;

fn rec(kind: Kind, key: &[u8], off: u64, target: Option<(u64, u64)>) -> ScannedRecord {
    ScannedRecord {
        kind,
        key: key.into(),
        meta: Bytes::from_static(b"m"),
        rec_off: off,
        body_off: off + 4096,
        body_len: 1,
        span: 8192,
        stored_at: 0,
        target,
    }
}

#[test]
fn replay_applies_targeted_records_only_to_their_object() {
    let mut idx = HashMap::new();
    apply_record(&mut idx, 0, 5, rec(Kind::Object, b"a", 4096, None));
    apply_record(&mut idx, 0, 5, rec(Kind::Object, b"a", 12288, None));
    // Aimed at the older copy: ignored.
    apply_record(&mut idx, 0, 5, rec(Kind::Tombstone, b"a", 20480, Some((5, 4096))));
    assert_eq!(idx.len(), 1);
    apply_record(&mut idx, 0, 5, rec(Kind::Meta, b"a", 24576, Some((5, 12288))));
    apply_record(&mut idx, 0, 5, rec(Kind::Object, b"ab", 28672, None));
    apply_record(&mut idx, 0, 5, rec(Kind::PurgePrefix, b"a", 32768, None));
    assert!(idx.is_empty());
}

fn small_store(dir: &std::path::Path, volumes: u64, background: bool) -> std::sync::Arc<Disk> {
    let cfg = super::DiskOpen::new(dir, volumes << 20, 1 << 20, crate::IoMode::Threads);
    Disk::open_with(cfg, background, true).expect("open store")
}

fn rt<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime").block_on(f)
}

async fn put(s: &std::sync::Arc<Disk>, key: &[u8], len: usize) {
    let mut w = s.begin_fill(key, Bytes::from_static(b"m"), Some(len as u64)).await.expect("fill");
    w.append(Bytes::from(vec![7u8; len])).await.expect("append");
    w.commit().await.expect("commit");
}

/// Writes 300 kB objects until no volume is free and a sealed one waits for reclaim.
async fn fill_until_reclaim_due(s: &std::sync::Arc<Disk>) {
    for i in 0..100 {
        put(s, format!("k{i}").as_bytes(), 300_000).await;
        let a = s.lock_alloc();
        if a.free.is_empty() && !a.sealed.is_empty() {
            return;
        }
    }
    panic!("the store never ran out of free volumes");
}

#[test]
fn a_fill_never_runs_reclaim_inline() {
    let dir = tempfile::tempdir().unwrap();
    let s = small_store(dir.path(), 3, false);
    rt(async {
        fill_until_reclaim_due(&s).await;
        assert_eq!(s.stats().reclaims, 0);
        // A client's miss now: it must start writing without reclaiming anything.
        let mut w = s.begin_fill(b"miss", Bytes::from_static(b"m"), Some(1000)).await.unwrap();
        w.append(Bytes::from(vec![1u8; 1000])).await.unwrap();
        w.commit().await.unwrap();
        assert_eq!(s.stats().reclaims, 0, "a fill reclaimed a volume inline");
        assert!(s.lock_alloc().free.is_empty());
        // The maintenance task does it.
        s.maintain().await;
        let st = s.stats();
        assert_eq!(st.reclaims, 1, "{st:?}");
        assert!(st.evictions > 0, "{st:?}");
        assert!(!s.lock_alloc().free.is_empty());
    });
}

#[test]
fn the_maintenance_thread_reclaims_without_any_fill() {
    let dir = tempfile::tempdir().unwrap();
    let s = small_store(dir.path(), 3, false);
    rt(async {
        fill_until_reclaim_due(&s).await;
        // No more fills, no maintain call: the thread reclaims the oldest volume on its
        // next pass.
        s.background.store(true, std::sync::atomic::Ordering::Relaxed);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while s.lock_alloc().free.is_empty() {
            assert!(std::time::Instant::now() < deadline, "no reclaim: {:?}", s.stats());
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        assert_eq!(s.stats().reclaims, 1);
    });
}

#[test]
fn a_fill_with_nowhere_to_move_is_still_delivered_whole() {
    let dir = tempfile::tempdir().unwrap();
    let s = small_store(dir.path(), 3, false);
    rt(async {
        fill_until_reclaim_due(&s).await;
        // A fill of unknown length, then a stored object right behind it that takes
        // (almost) the rest of the active volume: the first fill can neither grow in
        // place nor move, and no volume is free.
        let mut a = s.begin_fill(b"live", Bytes::from_static(b"m"), None).await.unwrap();
        let room = (1 << 20) - s.lock_alloc().head;
        put(&s, b"behind", (room - 3 * 4096) as usize).await;
        let Some(crate::Lookup::Filling(mut f)) = s.lookup(b"live") else { panic!("filling") };
        let data: Vec<u8> = (0..600_000u32).map(|i| (i % 251) as u8).collect();
        let mut got = Vec::new();
        for c in data.chunks(40_000) {
            a.append(Bytes::copy_from_slice(c)).await.expect("keeps streaming");
            a.flush().await.expect("keeps streaming");
            let st = f.wait_for(got.len() as u64 + 1).await.unwrap();
            got.extend_from_slice(
                &f.read(got.len() as u64, st.available - got.len() as u64).await.unwrap(),
            );
        }
        assert!(s.stats().no_space > 0, "{:?}", s.stats());
        assert_eq!(a.commit().await.unwrap(), crate::Committed::NotStored);
        assert_eq!(f.wait_for(u64::MAX).await.unwrap().final_len, Some(600_000));
        assert!(got == data, "the follower got {} bytes, wrong or short", got.len());
        assert!(s.lookup(b"live").is_none());
        assert_eq!(s.stats().not_stored, 1);
        // The reclaim that was due makes room again: the next fill is stored.
        s.maintain().await;
        put(&s, b"live", 600_000).await;
    });
}

async fn body_of(s: &std::sync::Arc<Disk>, key: &[u8]) -> Option<Vec<u8>> {
    match s.lookup(key)? {
        crate::Lookup::Hit(h) => Some(h.read(0, h.body_len()).await.ok()?.to_vec()),
        crate::Lookup::Filling(_) => None,
    }
}

async fn put_byte(s: &std::sync::Arc<Disk>, key: &[u8], len: usize, byte: u8) {
    let mut w = s.begin_fill(key, Bytes::from_static(b"m"), Some(len as u64)).await.unwrap();
    w.append(Bytes::from(vec![byte; len])).await.unwrap();
    assert_eq!(w.commit().await.unwrap(), crate::Committed::Stored);
}

/// Live traffic while the index loads: what is written, removed or purged meanwhile
/// wins over what the load finds on disk, and no key ends up twice.
#[test]
fn writes_while_the_index_loads_win_over_the_loaded_ones() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = super::DiskOpen::new(dir.path(), 4 << 20, 1 << 20, crate::IoMode::Threads);
    {
        let s = Disk::open_with(cfg.clone(), false, true).unwrap();
        rt(async {
            for k in [&b"keep"[..], b"newer", b"gone", b"p/1", b"p/2", b"filling"] {
                put_byte(&s, k, 20_000, 1).await;
            }
        });
    }
    // Crash-like: no checkpoint, so the load scans.
    std::fs::remove_file(dir.path().join(super::checkpoint::FILE)).unwrap();
    let s = Disk::open_with(cfg.clone(), false, false).unwrap();
    rt(async {
        assert!(s.stats().index_loading);
        assert!(s.lookup(b"keep").is_none(), "not loaded yet: a miss");
        put_byte(&s, b"newer", 30_000, 2).await;
        assert!(s.remove(b"gone").await.unwrap(), "may be on disk: removed");
        s.remove_prefix(b"p/").await.unwrap();
        let mut w = s.begin_fill(b"filling", Bytes::from_static(b"m"), Some(5)).await.unwrap();
        s.load_index();
        // The maintenance pass that follows the load writes the tombstone of "gone".
        s.maintain().await;
        assert!(!s.stats().index_loading);
        assert_eq!(body_of(&s, b"keep").await, Some(vec![1; 20_000]));
        assert_eq!(body_of(&s, b"newer").await, Some(vec![2; 30_000]), "the live one wins");
        assert!(s.lookup(b"gone").is_none(), "a removal during the load sticks");
        assert!(s.lookup(b"p/1").is_none() && s.lookup(b"p/2").is_none(), "so does a purge");
        // The fill replaces the loaded object; aborted, it brings that one back.
        w.append(Bytes::from_static(b"12345")).await.unwrap();
        drop(w);
        assert_eq!(body_of(&s, b"filling").await, Some(vec![1; 20_000]));
        assert_eq!(s.stats().objects, 3, "{:?}", s.stats());
    });
    drop(s);
    // The same after a restart, from the checkpoint of that clean close, and from a scan.
    for scan in [false, true] {
        if scan {
            std::fs::remove_file(dir.path().join(super::checkpoint::FILE)).unwrap();
        }
        let s = Disk::open_with(cfg.clone(), false, true).unwrap();
        rt(async {
            assert_eq!(body_of(&s, b"keep").await, Some(vec![1; 20_000]));
            assert_eq!(body_of(&s, b"newer").await, Some(vec![2; 30_000]));
            assert_eq!(body_of(&s, b"filling").await, Some(vec![1; 20_000]));
            for k in [&b"gone"[..], b"p/1", b"p/2"] {
                assert!(s.lookup(k).is_none());
            }
            assert_eq!(s.stats().objects, 3, "scan {scan}: {:?}", s.stats());
        });
    }
}

/// Keys `k0..` that `fill_until_reclaim_due` stored and the store still holds.
fn stored_keys(s: &std::sync::Arc<Disk>) -> Vec<String> {
    (0..100).map(|i| format!("k{i}")).filter(|k| s.lookup(k.as_bytes()).is_some()).collect()
}

/// A full store was made to have a free volume at every open by dropping its oldest
/// volume: restarts alone emptied it, one volume at a time.
#[test]
fn a_full_store_loses_nothing_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let keys = {
        let s = small_store(dir.path(), 3, false);
        rt(fill_until_reclaim_due(&s));
        stored_keys(&s)
    };
    assert!(keys.len() >= 4, "{keys:?}");
    for restart in 0..3 {
        let s = small_store(dir.path(), 3, false);
        assert_eq!(stored_keys(&s), keys, "restart {restart}");
        assert_eq!(s.stats().objects, keys.len() as u64, "restart {restart}");
        assert_eq!(s.stats().reclaims, 0);
        rt(async {
            for k in &keys {
                assert_eq!(body_of(&s, k.as_bytes()).await, Some(vec![7; 300_000]), "{k}");
            }
        });
    }
}

/// While the index of a full store loads, a fill still finds room: it takes the oldest
/// volume (whose objects the load then leaves out); after the load, reclaim as usual.
#[test]
fn a_fill_on_a_full_store_while_its_index_loads_takes_the_oldest_volume() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = super::DiskOpen::new(dir.path(), 3 << 20, 1 << 20, crate::IoMode::Threads);
    let keys = {
        let s = Disk::open_with(cfg.clone(), false, true).unwrap();
        rt(fill_until_reclaim_due(&s));
        stored_keys(&s)
    };
    std::fs::remove_file(dir.path().join(super::checkpoint::FILE)).unwrap();
    let s = Disk::open_with(cfg, false, false).unwrap();
    assert!(s.lock_alloc().free.is_empty(), "the store is full");
    rt(async {
        put(&s, b"during-load", 300_000).await;
        s.load_index();
        s.maintain().await;
        let left = stored_keys(&s);
        assert!(!left.is_empty() && left.len() < keys.len(), "{left:?} of {keys:?}");
        // The oldest objects went with their volume; the rest load whole.
        assert_eq!(left[..], keys[keys.len() - left.len()..]);
        for k in &left {
            assert_eq!(body_of(&s, k.as_bytes()).await, Some(vec![7; 300_000]), "{k}");
        }
        assert_eq!(body_of(&s, b"during-load").await, Some(vec![7; 300_000]));
        assert_eq!(s.stats().objects, left.len() as u64 + 1, "{:?}", s.stats());
    });
}

/// Issue 10.5: a removal that matches nothing writes nothing, also while the index
/// loads (the tombstone of a key the load does find is written after it).
#[test]
fn a_removal_during_the_load_writes_only_for_keys_on_disk() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = super::DiskOpen::new(dir.path(), 4 << 20, 1 << 20, crate::IoMode::Threads);
    {
        let s = Disk::open_with(cfg.clone(), false, true).unwrap();
        rt(put_byte(&s, b"on-disk", 10_000, 3));
    }
    let s = Disk::open_with(cfg.clone(), false, false).unwrap();
    rt(async {
        assert!(s.remove(b"absent").await.unwrap(), "may be on disk while loading");
        assert!(s.remove(b"on-disk").await.unwrap());
        assert_eq!(s.lock_alloc().active, None, "a record was written for a key not indexed");
        s.load_index();
        s.maintain().await;
        assert!(s.lookup(b"on-disk").is_none());
        let a = s.lock_alloc();
        assert!(a.active.is_some(), "the tombstone of the key found on disk");
    });
    drop(s);
    // Not removed again after a scan, nor from the checkpoint.
    for scan in [true, false] {
        if scan {
            std::fs::remove_file(dir.path().join(super::checkpoint::FILE)).unwrap();
        }
        let s = Disk::open_with(cfg.clone(), false, true).unwrap();
        assert!(s.lookup(b"on-disk").is_none(), "scan {scan}");
        assert_eq!(s.stats().objects, 0);
    }
}

/// A sealed fill still holds its volume against reclaim until its entry is in the index
/// and the volume's object list: a reclaim in between would miss the entry, and the index
/// would keep pointing into a volume written over.
#[test]
fn a_sealed_fill_holds_its_volume_until_it_is_indexed() {
    let dir = tempfile::tempdir().unwrap();
    let s = small_store(dir.path(), 3, false);
    rt(async {
        // A slow fill in the first volume, still open while the store fills behind it.
        let mut slow = s.begin_fill(b"slow", Bytes::from_static(b"m"), Some(1000)).await.unwrap();
        slow.append(Bytes::from(vec![1u8; 1000])).await.unwrap();
        let v = slow.vol.idx;
        fill_until_reclaim_due(&s).await;
        assert_eq!(s.lock_alloc().sealed.front(), Some(&v), "the slow fill's volume is oldest");
        // Sealed (the trailer is on disk) but not yet indexed: no reclaim of its volume.
        let span = slow.final_header().await.unwrap();
        let _entry = slow.seal(span).await.unwrap();
        s.maintain().await;
        assert_eq!(s.stats().reclaims, 0, "reclaimed under a fill not yet indexed");
        // Released: now it may go.
        slow.release_volume();
        s.maintain().await;
        assert_eq!(s.stats().reclaims, 1);
        assert_eq!(s.vols[v as usize].writers.load(std::sync::atomic::Ordering::SeqCst), 0);
        drop(slow);
        assert_eq!(s.vols[v as usize].writers.load(std::sync::atomic::Ordering::SeqCst), 0);
    });
}
