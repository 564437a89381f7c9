//! Criterion micro-benchmarks of reel-store: index lookup (hit; on one disk and placed
//! over 12 disks of equal and of mixed sizes), append (a 256 KiB
//! object written and committed through the worker's ring or the I/O threads), and the
//! page-cache residency check of a 2 MiB hit (what the cache asks before sendfile).
use std::sync::Arc;

use criterion::{Criterion, criterion_group, criterion_main};
use reel_store::{Bytes, DiskConfig, IoMode, Lookup, Store, StoreConfig};

/// A scratch directory removed on drop (the benches crate has no tempfile).
struct Scratch(std::path::PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let p =
            std::env::temp_dir().join(format!("reel-store-bench-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        Scratch(p)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn open(dir: &std::path::Path, io: IoMode) -> Arc<Store> {
    Store::open(StoreConfig::single(dir.to_owned(), 256 << 20, 16 << 20, io)).expect("open store")
}

/// A store over 12 disks (subdirectories of `dir`), of equal sizes or of 32 and 64 MiB.
fn open_disks(dir: &std::path::Path, mixed: bool) -> Arc<Store> {
    let disks = (0..12)
        .map(|i| {
            let path = dir.join(format!("disk{i}"));
            std::fs::create_dir_all(&path).expect("disk dir");
            let size = if mixed && i % 2 == 1 { 64 << 20 } else { 32 << 20 };
            DiskConfig { path, size }
        })
        .collect();
    let cfg = StoreConfig {
        disks,
        volume_size: 16 << 20,
        io: IoMode::Auto,
        disk_error_limit: 0,
        scrub_rate: 0,
        record_cache: reel_store::DEFAULT_RECORD_CACHE,
    };
    Store::open(cfg).expect("open store")
}

fn lookup(c: &mut Criterion) {
    let one = Scratch::new("lookup");
    let equal = Scratch::new("lookup-12");
    let mixed = Scratch::new("lookup-12-mixed");
    let stores = [
        ("store/lookup_hit", open(&one.0, IoMode::Auto)),
        ("store/lookup_hit_12_disks", open_disks(&equal.0, false)),
        ("store/lookup_hit_12_mixed_disks", open_disks(&mixed.0, true)),
    ];
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("rt");
    let keys: Vec<String> = (0..10_000).map(|i| format!("cdn.example/vod/seg_{i:06}.ts")).collect();
    for (name, store) in &stores {
        rt.block_on(async {
            for k in &keys {
                let mut w = store
                    .begin_fill(k.as_bytes(), Bytes::from_static(b"meta"), Some(100))
                    .await
                    .expect("fill");
                w.append(Bytes::from_static(&[1u8; 100])).await.expect("append");
                w.commit().await.expect("commit");
            }
        });
        let mut i = 0usize;
        c.bench_function(name, |b| {
            b.iter(|| {
                i = (i + 7919) % keys.len();
                matches!(now(store.lookup(keys[i].as_bytes())), Some(Lookup::Hit(_)))
            })
        });
    }
    let store = &stores[0].1;
    c.bench_function("store/lookup_miss", |b| {
        b.iter(|| now(store.lookup(b"cdn.example/none")).is_none())
    });
}

/// The output of a lookup whose record is in memory: its future completes at the first
/// poll (what a worker pays, without a runtime's scheduling around it).
fn now<F: std::future::Future>(f: F) -> F::Output {
    let mut f = std::pin::pin!(f);
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    match f.as_mut().poll(&mut cx) {
        std::task::Poll::Ready(v) => v,
        std::task::Poll::Pending => panic!("a lookup in memory waited"),
    }
}

fn append(c: &mut Criterion) {
    for (name, io) in [("uring", IoMode::Uring), ("threads", IoMode::Threads)] {
        let dir = Scratch::new(name);
        let store = open(&dir.0, io);
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("rt");
        let body = Bytes::from(vec![7u8; 256 << 10]);
        let mut i = 0u64;
        c.bench_function(&format!("store/append_256k_{name}"), |b| {
            b.iter(|| {
                i += 1;
                rt.block_on(async {
                    let key = format!("k{i}");
                    if let Ok(mut w) =
                        store.begin_fill(key.as_bytes(), Bytes::new(), Some(256 << 10)).await
                    {
                        let _ = w.append(body.clone()).await;
                        let _ = w.commit().await;
                    }
                })
            })
        });
    }
}

fn residency(c: &mut Criterion) {
    let dir = Scratch::new("resident");
    let store = open(&dir.0, IoMode::Auto);
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("rt");
    let len = 2u64 << 20;
    rt.block_on(async {
        let mut w = store.begin_fill(b"seg_2m.ts", Bytes::new(), Some(len)).await.expect("fill");
        w.append(Bytes::from(vec![3u8; len as usize])).await.expect("append");
        w.commit().await.expect("commit");
    });
    let Some(Lookup::Hit(hit)) = rt.block_on(store.lookup(b"seg_2m.ts")) else { panic!("stored") };
    assert!(hit.is_resident(0, len), "a just-written object is in the page cache");
    c.bench_function("store/is_resident_2m", |b| b.iter(|| hit.is_resident(0, len)));
}

criterion_group!(benches, lookup, append, residency);
criterion_main!(benches);
