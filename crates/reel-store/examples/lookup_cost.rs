//! Instructions per lookup, for a count that noise does not move: `lookup_cost hit|miss N`
//! stores 10 000 small objects and then looks up N keys (hits on the stored ones, or N
//! misses), each future polled once as a worker's would be. Run it under
//! `valgrind --tool=callgrind` with two values of N: the difference of the instruction
//! totals over the difference of N is the cost of one lookup (docs/store.md, "Index").

use bytes::Bytes;
use reel_store::{IoMode, Lookup, Store, StoreConfig};

fn now<F: std::future::Future>(f: F) -> F::Output {
    let mut f = std::pin::pin!(f);
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    match f.as_mut().poll(&mut cx) {
        std::task::Poll::Ready(v) => v,
        std::task::Poll::Pending => panic!("waited"),
    }
}

fn main() {
    let mode = std::env::args().nth(1).unwrap();
    let n: usize = std::env::args().nth(2).unwrap().parse().unwrap();
    let dir = tempfile::tempdir_in("/var/tmp").unwrap();
    let cfg = StoreConfig::single(dir.path().to_owned(), 64 << 20, 16 << 20, IoMode::Threads);
    let store = Store::open(cfg).unwrap();
    store.wait_loaded();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let keys: Vec<String> = (0..10_000).map(|i| format!("cdn.example/vod/seg_{i:06}.ts")).collect();
    rt.block_on(async {
        for k in &keys {
            let mut w = store
                .begin_fill(k.as_bytes(), Bytes::from_static(b"meta"), Some(100))
                .await
                .unwrap();
            w.append(Bytes::from_static(&[1u8; 100])).await.unwrap();
            w.commit().await.unwrap();
        }
    });
    let mut i = 0usize;
    let mut hits = 0;
    for _ in 0..n {
        i = (i + 7919) % keys.len();
        let k = if mode == "hit" { keys[i].as_bytes() } else { b"cdn.example/none" };
        if matches!(now(store.lookup(k)), Some(Lookup::Hit(_))) {
            hits += 1;
        }
    }
    std::hint::black_box(hits);
}
