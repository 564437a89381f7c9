//! Measures index memory per object: heap bytes held after a rebuild of N objects
//! minus the heap of the same store opened empty, via a counting allocator.
//!
//! Usage: `index_mem [OBJECTS]` (default 20000; key ~40 bytes, metadata 300 bytes).

use bytes::Bytes;
use reel_store::{IoMode, Store, StoreConfig};
use reel_test_support::CountingAlloc;

#[global_allocator]
static A: CountingAlloc = CountingAlloc;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let n: u64 = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(20_000);
    let dir = tempfile::tempdir()?;
    // Each small object takes 8 KiB on disk (4 KiB header block + 4 KiB body block).
    let vol = 16u64 << 20;
    let size = ((n * 8192 * 5 / 4) / vol + 2) * vol;
    let cfg = StoreConfig {
        path: dir.path().to_owned(),
        size,
        volume_size: vol,
        io: IoMode::Threads,
        scrub_rate: 0,
    };
    let base = {
        let s = Store::open(cfg.clone())?;
        let b = CountingAlloc::live();
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        rt.block_on(async {
            for i in 0..n {
                let key = format!("cdn.example.com/live/chan1/seg_{i:010}.m4s");
                let mut w =
                    s.begin_fill(key.as_bytes(), Bytes::from(vec![b'm'; 300]), Some(100)).await?;
                w.append(Bytes::from_static(&[7u8; 100])).await?;
                w.commit().await?;
            }
            Ok::<_, reel_store::StoreError>(())
        })?;
        b
    };
    let s = Store::open(cfg)?;
    // The index loads in the background; measure it whole.
    s.wait_loaded();
    let after = CountingAlloc::live();
    let objects = s.stats().objects;
    println!(
        "{objects} objects: {:.1} heap bytes per object (key 42 B + meta 300 B included)",
        (after - base) as f64 / objects as f64
    );
    Ok(())
}
