//! Integration tests of reel-store, run on both I/O backends (io_uring and threads).

mod basic;
mod crash;
mod faults;
mod handover;
mod model;

use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;
use reel_store::{IoMode, Lookup, Store, StoreConfig};

/// 1 MiB volumes: small enough to cycle the store many times in a test.
pub const VOL: u64 = 1 << 20;

/// Opens a store of `volumes` 1 MiB volumes.
pub fn open(dir: &Path, volumes: u64, io: IoMode) -> Arc<Store> {
    Store::open(StoreConfig { path: dir.to_owned(), size: volumes * VOL, volume_size: VOL, io })
        .expect("open store")
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

/// Stores one object, streamed in 50 kB chunks.
pub async fn put(store: &Arc<Store>, key: &[u8], meta: &[u8], data: &[u8], known: bool) {
    let mut w = store
        .begin_fill(key, Bytes::copy_from_slice(meta), known.then_some(data.len() as u64))
        .await
        .expect("begin_fill");
    for c in data.chunks(50_000) {
        w.append(Bytes::copy_from_slice(c)).await.expect("append");
    }
    w.commit().await.expect("commit");
}

/// Full body and meta of a complete object, or None on a miss.
pub async fn get(store: &Arc<Store>, key: &[u8]) -> Option<(Vec<u8>, Vec<u8>)> {
    match store.lookup(key)? {
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

/// Declares one test per I/O backend.
#[macro_export]
macro_rules! both {
    ($name:ident, $body:ident) => {
        mod $name {
            #[test]
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
