//! The index's memory per object, counted by the allocator (this test binary's global
//! allocator counts live heap bytes; it holds this one test so nothing else allocates
//! meanwhile): 50 000 objects stored, the store reopened, the loaded index measured
//! against the same store empty. Keys and metadata stay in the records on disk, so the
//! index holds at most 64 bytes an object whatever their sizes.

use bytes::Bytes;
use reel_store::{IoMode, Store, StoreConfig};
use reel_test_support::CountingAlloc;

#[global_allocator]
static A: CountingAlloc = CountingAlloc;

const OBJECTS: u64 = 50_000;

#[test]
fn the_index_holds_at_most_64_bytes_an_object() {
    let dir = tempfile::tempdir().unwrap();
    let vol = 16u64 << 20;
    // 8 KiB an object on disk (a header page and a body page), with room to spare.
    let size = ((OBJECTS * 8192 * 5 / 4) / vol + 2) * vol;
    let cfg = StoreConfig::single(dir.path().to_owned(), size, vol, IoMode::Threads);
    // A long key and a large metadata blob: neither is in the index.
    let key = |i: u64| format!("cdn.example.com/vod/title-{:04}/1080p/seg_{i:010}.m4s", i % 977);
    let meta = Bytes::from(vec![b'm'; 1500]);
    let base = {
        let s = Store::open(cfg.clone()).unwrap();
        let base = CountingAlloc::live();
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            for i in 0..OBJECTS {
                let mut w = s.begin_fill(key(i).as_bytes(), meta.clone(), Some(100)).await.unwrap();
                w.append(Bytes::from_static(&[7u8; 100])).await.unwrap();
                w.commit().await.unwrap();
            }
        });
        s.close().unwrap();
        base
    };
    let s = Store::open(cfg).unwrap();
    s.wait_loaded();
    let objects = s.stats().objects;
    assert_eq!(objects, OBJECTS);
    let per_object = CountingAlloc::live().saturating_sub(base) as f64 / objects as f64;
    assert!(per_object <= 64.0, "{per_object:.1} heap bytes an object");
    // The objects are all there, key and metadata read from their records.
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    for i in [0, OBJECTS / 2, OBJECTS - 1] {
        let Some(reel_store::Lookup::Hit(h)) = rt.block_on(s.lookup(key(i).as_bytes())) else {
            panic!("object {i}")
        };
        assert_eq!((h.key(), h.meta().len(), h.body_len()), (key(i).as_bytes(), 1500, 100));
    }
}
