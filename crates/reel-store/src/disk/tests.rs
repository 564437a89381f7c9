//! Unit tests of the store internals: replay order of the rebuild, where reclaim runs.

use bytes::Bytes;

use super::index::{MetaAt, index_hash};
use super::purge_rule::Rule;
use super::rebuild::{Replay, ScannedRecord, apply_record};
use super::state::Disk;
use crate::format::Kind;

fn rec(kind: Kind, key: &[u8], off: u64, target: Option<(u64, u64)>) -> ScannedRecord {
    ScannedRecord {
        kind,
        h: index_hash(key),
        prefix: (kind == Kind::PurgePrefix).then(|| key.into()),
        rec_off: off,
        body_off: off + 4096,
        body_len: 1,
        target,
    }
}

#[test]
fn replay_applies_targeted_records_only_to_their_object() {
    let mut idx = Replay::default();
    let a = index_hash(b"a");
    assert!(apply_record(&mut idx, 0, 5, rec(Kind::Object, b"a", 4096, None)).is_none());
    apply_record(&mut idx, 0, 5, rec(Kind::Object, b"a", 12288, None));
    // Aimed at the older copy: ignored.
    apply_record(&mut idx, 0, 5, rec(Kind::Tombstone, b"a", 20480, Some((5, 4096))));
    assert_eq!(idx.entries.len(), 1);
    // Aimed at the older copy: ignored; at the current one: where its metadata is now.
    apply_record(&mut idx, 0, 5, rec(Kind::Meta, b"a", 16384, Some((5, 4096))));
    assert_eq!(idx.metas.get(&a), None);
    apply_record(&mut idx, 1, 6, rec(Kind::Meta, b"a", 24576, Some((5, 12288))));
    let at = MetaAt { obj: (0, 5, 12288), vol: 1, seq: 6, rec_off: 24576 };
    assert_eq!(idx.metas.get(&a), Some(&at));
    assert!(idx.entries[&a].refreshed());
    apply_record(&mut idx, 1, 6, rec(Kind::Object, b"ab", 28672, None));
    // A purge is a rule at its own place in the log; the entries stay for lookups to
    // judge.
    let rule = apply_record(&mut idx, 1, 6, rec(Kind::PurgePrefix, b"a", 32768, None));
    assert_eq!(rule, Some(Rule { prefix: b"a"[..].into(), seq: 6, off: 32768 }));
    assert_eq!(idx.entries.len(), 2);
    apply_record(&mut idx, 1, 6, rec(Kind::Tombstone, b"ab", 36864, None));
    assert_eq!(idx.entries.len(), 1);
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
        let Some(crate::Lookup::Filling(mut f)) = s.lookup(b"live").await else {
            panic!("filling")
        };
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
        assert!(s.lookup(b"live").await.is_none());
        assert_eq!(s.stats().not_stored, 1);
        // The reclaim that was due makes room again: the next fill is stored.
        s.maintain().await;
        put(&s, b"live", 600_000).await;
    });
}

async fn body_of(s: &std::sync::Arc<Disk>, key: &[u8]) -> Option<Vec<u8>> {
    match s.lookup(key).await? {
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
    std::fs::remove_file(dir.path().join(super::dir::CHECKPOINT_FILE)).unwrap();
    let s = Disk::open_with(cfg.clone(), false, false).unwrap();
    rt(async {
        assert!(s.stats().index_loading);
        assert!(s.lookup(b"keep").await.is_none(), "not loaded yet: a miss");
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
        assert!(s.lookup(b"gone").await.is_none(), "a removal during the load sticks");
        assert!(
            s.lookup(b"p/1").await.is_none() && s.lookup(b"p/2").await.is_none(),
            "so does a purge"
        );
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
            std::fs::remove_file(dir.path().join(super::dir::CHECKPOINT_FILE)).unwrap();
        }
        let s = Disk::open_with(cfg.clone(), false, true).unwrap();
        rt(async {
            assert_eq!(body_of(&s, b"keep").await, Some(vec![1; 20_000]));
            assert_eq!(body_of(&s, b"newer").await, Some(vec![2; 30_000]));
            assert_eq!(body_of(&s, b"filling").await, Some(vec![1; 20_000]));
            for k in [&b"gone"[..], b"p/1", b"p/2"] {
                assert!(s.lookup(k).await.is_none());
            }
            assert_eq!(s.stats().objects, 3, "scan {scan}: {:?}", s.stats());
        });
    }
}

/// Keys `k0..` that `fill_until_reclaim_due` stored and the store still holds.
async fn stored_keys(s: &std::sync::Arc<Disk>) -> Vec<String> {
    let mut keys = Vec::new();
    for k in (0..100).map(|i| format!("k{i}")) {
        if s.lookup(k.as_bytes()).await.is_some() {
            keys.push(k);
        }
    }
    keys
}

/// A full store was made to have a free volume at every open by dropping its oldest
/// volume: restarts alone emptied it, one volume at a time.
#[test]
fn a_full_store_loses_nothing_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let keys = {
        let s = small_store(dir.path(), 3, false);
        rt(fill_until_reclaim_due(&s));
        rt(stored_keys(&s))
    };
    assert!(keys.len() >= 4, "{keys:?}");
    for restart in 0..3 {
        let s = small_store(dir.path(), 3, false);
        assert_eq!(rt(stored_keys(&s)), keys, "restart {restart}");
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
        rt(stored_keys(&s))
    };
    std::fs::remove_file(dir.path().join(super::dir::CHECKPOINT_FILE)).unwrap();
    let s = Disk::open_with(cfg, false, false).unwrap();
    assert!(s.lock_alloc().free.is_empty(), "the store is full");
    rt(async {
        put(&s, b"during-load", 300_000).await;
        s.load_index();
        s.maintain().await;
        let left = stored_keys(&s).await;
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
        assert!(s.lookup(b"on-disk").await.is_none());
        let a = s.lock_alloc();
        assert!(a.active.is_some(), "the tombstone of the key found on disk");
    });
    drop(s);
    // Not removed again after a scan, nor from the checkpoint.
    for scan in [true, false] {
        if scan {
            std::fs::remove_file(dir.path().join(super::dir::CHECKPOINT_FILE)).unwrap();
        }
        let s = Disk::open_with(cfg.clone(), false, true).unwrap();
        assert!(rt(s.lookup(b"on-disk")).is_none(), "scan {scan}");
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
        slow.final_header().await.unwrap();
        let _entry = slow.seal().await.unwrap();
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

/// The index keys on 64 bits of the key's hash and keeps no key: a lookup whose hash
/// names another key's object (a collision, made here by hand) reads that object's record
/// or finds it in the record cache, sees another key and misses. It never returns the
/// other object.
#[test]
fn a_hash_that_names_another_keys_object_is_a_miss() {
    let dir = tempfile::tempdir().unwrap();
    let s = small_store(dir.path(), 4, false);
    rt(async {
        put_byte(&s, b"a", 5000, 1).await;
        put_byte(&s, b"b", 5000, 2).await;
        let (ha, hb) = (index_hash(b"a"), index_hash(b"b"));
        // "a"'s slot now names "b"'s record.
        let b_entry = {
            let mut sh = s.shard(hb).write().unwrap();
            match sh.remove(&hb) {
                Some(super::index::Slot::Ready(e)) => e,
                _ => panic!("b stored"),
            }
        };
        let b_loc = b_entry.loc();
        s.shard(ha).write().unwrap().insert(ha, super::index::Slot::Ready(b_entry));
        // From disk (nothing cached under "a"'s hash for this version).
        s.records.remove(ha);
        assert!(s.lookup(b"a").await.is_none(), "another key's record read from disk");
        // From the cache: "b"'s record cached under "a"'s hash for that version.
        let rec = super::records::Record {
            ver: super::records::Ver::new(b_loc, None),
            kh: crate::format::key_hash(b"b"),
            key: b"b"[..].into(),
            meta: Bytes::from_static(b"m"),
            stored_at: 0,
        };
        s.records.insert(ha, std::sync::Arc::new(rec));
        assert!(s.lookup(b"a").await.is_none(), "another key's record from the cache");
        // Where the key matches, the same slot is a hit (the record read from disk).
        let bh = index_hash(b"b");
        let e = s.shard(ha).write().unwrap().remove(&ha);
        s.shard(bh).write().unwrap().insert(bh, e.unwrap());
        s.records.remove(bh);
        assert_eq!(body_of(&s, b"b").await, Some(vec![2; 5000]));
    });
}

/// A hit reads its key and metadata from its record when the record cache does not hold
/// them, and a refreshed object's from its newest metadata record; both survive a
/// restart (checkpoint and scan) without being held in the index.
#[test]
fn hits_read_key_and_metadata_from_disk_when_not_cached() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = super::DiskOpen::new(dir.path(), 4 << 20, 1 << 20, crate::IoMode::Threads);
    cfg.record_cache = 0;
    {
        let s = Disk::open_with(cfg.clone(), false, true).unwrap();
        rt(async {
            put_byte(&s, b"k1", 3000, 1).await;
            put_byte(&s, b"k2", 3000, 2).await;
            assert!(s.update_meta(b"k2", Bytes::from_static(b"fresh")).await.unwrap());
            let Some(crate::Lookup::Hit(h)) = s.lookup(b"k2").await else { panic!("k2") };
            assert_eq!((h.key(), &h.meta()[..]), (&b"k2"[..], &b"fresh"[..]));
            let Some(crate::Lookup::Hit(h)) = s.lookup(b"k1").await else { panic!("k1") };
            assert_eq!(&h.meta()[..], b"m");
            // update_meta's own lookup and the two hits: each read its record.
            let st = s.stats();
            assert_eq!((st.record_reads, st.record_cache_bytes), (3, 0), "{st:?}");
        });
    }
    for scan in [false, true] {
        if scan {
            std::fs::remove_file(dir.path().join(super::dir::CHECKPOINT_FILE)).unwrap();
        }
        let s = Disk::open_with(cfg.clone(), false, true).unwrap();
        rt(async {
            let Some(crate::Lookup::Hit(h)) = s.lookup(b"k2").await else { panic!("k2") };
            assert_eq!(&h.meta()[..], b"fresh", "scan {scan}");
            assert_eq!(body_of(&s, b"k1").await, Some(vec![1; 3000]));
        });
    }
}

/// A purge of objects whose records are not in memory is a rule: lookups of its keys
/// miss at once, objects stored after it are served, and so it stays after a restart
/// from the checkpoint and from a scan; a reclaim does not copy a purged object.
#[test]
fn a_purge_of_cold_objects_holds_at_once_and_after_restarts() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = super::DiskOpen::new(dir.path(), 4 << 20, 1 << 20, crate::IoMode::Threads);
    cfg.record_cache = 0;
    {
        let s = Disk::open_with(cfg.clone(), false, true).unwrap();
        rt(async {
            for k in [&b"p/1"[..], b"p/2", b"q/1"] {
                put_byte(&s, k, 3000, 1).await;
                // Read: a second chance at reclaim, were it not purged.
                assert!(s.lookup(k).await.is_some());
            }
            assert_eq!(s.remove_prefix(b"p/").await.unwrap(), 0, "nothing in memory");
            assert!(s.lookup(b"p/1").await.is_none() && s.lookup(b"p/2").await.is_none());
            assert_eq!(body_of(&s, b"q/1").await, Some(vec![1; 3000]));
            put_byte(&s, b"p/2", 3000, 9).await;
            assert_eq!(body_of(&s, b"p/2").await, Some(vec![9; 3000]), "stored after the purge");
            assert_eq!(s.rules().len(), 1);
        });
    }
    for scan in [false, true] {
        if scan {
            std::fs::remove_file(dir.path().join(super::dir::CHECKPOINT_FILE)).unwrap();
        }
        let s = Disk::open_with(cfg.clone(), false, true).unwrap();
        rt(async {
            assert!(s.lookup(b"p/1").await.is_none(), "scan {scan}");
            assert_eq!(body_of(&s, b"p/2").await, Some(vec![9; 3000]), "scan {scan}");
            assert_eq!(body_of(&s, b"q/1").await, Some(vec![1; 3000]), "scan {scan}");
        });
    }
    // Reclaims: the purged object is not copied; once its volume is gone, so is the rule.
    let s = Disk::open_with(cfg, false, true).unwrap();
    rt(async {
        for i in 0..12 {
            put_byte(&s, format!("fill/{i}").as_bytes(), 300_000, 3).await;
            s.maintain().await;
        }
        assert!(s.stats().reclaims >= 2, "{:?}", s.stats());
        assert!(s.lookup(b"p/1").await.is_none());
        assert!(s.rules().is_empty(), "the rule outlived every volume it covered");
    });
}
