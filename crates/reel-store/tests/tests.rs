//! Integration tests of reel-store, run on both I/O backends (io_uring and threads).

mod basic;
mod coalesce;
mod crash;
mod disks;
mod faults;
mod handover;
mod model;
mod reuse;
mod scrub;
mod unknown_len;

use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;
use reel_store::{Committed, IoMode, Lookup, Store, StoreConfig, StoreError};

/// 1 MiB volumes: small enough to cycle the store many times in a test.
pub const VOL: u64 = 1 << 20;

/// Opens a store of `volumes` 1 MiB volumes and waits for its index.
pub fn open(dir: &Path, volumes: u64, io: IoMode) -> Arc<Store> {
    let s = Store::open(StoreConfig::single(dir.to_owned(), volumes * VOL, VOL, io))
        .expect("open store");
    s.wait_loaded();
    s
}

/// Deterministic body for a key and length.
pub fn body(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// Stores one object, streamed in 50 kB chunks. A fill refused (or, of unknown length,
/// delivered but not stored) because the maintenance thread has not reclaimed a volume
/// yet is retried after a forced maintenance pass.
pub async fn put(store: &Arc<Store>, key: &[u8], meta: &[u8], data: &[u8], known: bool) {
    for _ in 0..100 {
        let len = known.then_some(data.len() as u64);
        let mut w = match store.begin_fill(key, Bytes::copy_from_slice(meta), len).await {
            Err(StoreError::NoSpace) => {
                store.maintain().await;
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                continue;
            }
            r => r.expect("begin_fill"),
        };
        for c in data.chunks(50_000) {
            w.append(Bytes::copy_from_slice(c)).await.expect("append");
        }
        match w.commit().await.expect("commit") {
            Committed::Stored => return,
            Committed::NotStored => store.maintain().await,
        }
    }
    panic!("the store never found room for {}", String::from_utf8_lossy(key));
}

/// Full body and meta of a complete object, or None on a miss.
pub async fn get(store: &Arc<Store>, key: &[u8]) -> Option<(Vec<u8>, Vec<u8>)> {
    match store.lookup(key).await? {
        Lookup::Hit(h) => {
            let b = h.read(0, h.body_len()).await.ok()?;
            Some((h.meta().to_vec(), b.to_vec()))
        }
        Lookup::Filling(_) => None,
    }
}

/// Runs `f` on a current_thread runtime, like a reel worker.
pub fn rt<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime").block_on(f)
}

/// The I/O backends this machine can run (io_uring only where the build probe found it).
pub fn backends() -> &'static [IoMode] {
    if cfg!(reel_no_uring) { &[IoMode::Threads] } else { &[IoMode::Uring, IoMode::Threads] }
}

/// Declares one test per I/O backend; the io_uring one is ignored, with the reason,
/// where io_uring is unavailable (see `build.rs`).
#[macro_export]
macro_rules! both {
    ($name:ident, $body:ident) => {
        mod $name {
            #[test]
            #[cfg_attr(reel_no_uring, ignore = "io_uring is unavailable on this machine")]
            fn uring() {
                super::$body(reel_store::IoMode::Uring)
            }
            #[test]
            fn threads() {
                super::$body(reel_store::IoMode::Threads)
            }
        }
    };
}
