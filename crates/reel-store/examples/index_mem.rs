//! Measures the index's memory per object with a counting allocator: heap bytes held
//! once N objects are indexed, minus the heap of the same store opened empty.
//!
//! Usage (needs the `measure` feature):
//! `cargo run --release -p reel-store --features measure --example index_mem -- MODE N`
//!
//! - `real N`: stores N small objects (key ~42 bytes, metadata 300 bytes, body 100
//!   bytes; 8 KiB each on disk), reopens the store and measures the loaded index (from
//!   the checkpoint of the clean close). The record cache is empty after the reopen.
//! - `synthetic N`: puts N entries straight into the index of an empty store
//!   (`reel_store::measure::fill_index`), writing no record: the figure at box scale
//!   without writing tens of GB.

use bytes::Bytes;
use reel_store::{IoMode, Store, StoreConfig};
use reel_test_support::CountingAlloc;

#[global_allocator]
static A: CountingAlloc = CountingAlloc;

fn key(i: u64) -> String {
    format!("cdn.example.com/live/chan1/seg_{i:010}.m4s")
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let mode = args.get(1).map(String::as_str).unwrap_or("real");
    let n: u64 = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(20_000);
    let dir = tempfile::tempdir_in(std::env::var("TMPDIR").unwrap_or("/var/tmp".into()))?;
    let vol = 64u64 << 20;
    let (size, cfg) = match mode {
        // Each small object takes 8 KiB on disk (4 KiB header block + 4 KiB body block).
        "real" => {
            let size = ((n * 8192 * 5 / 4) / vol + 2) * vol;
            (size, StoreConfig::single(dir.path().to_owned(), size, vol, IoMode::Threads))
        }
        "synthetic" => {
            // Volumes are created sparse: a few of them suffice for any count.
            let size = 16 * vol;
            (size, StoreConfig::single(dir.path().to_owned(), size, vol, IoMode::Threads))
        }
        m => return Err(format!("unknown mode {m}: real or synthetic").into()),
    };
    let (base, objects, after) = if mode == "real" {
        let base = {
            let s = Store::open(cfg.clone())?;
            let b = CountingAlloc::live();
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
            rt.block_on(async {
                for i in 0..n {
                    let meta = Bytes::from(vec![b'm'; 300]);
                    let mut w = s.begin_fill(key(i).as_bytes(), meta, Some(100)).await?;
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
        (base, s.stats().objects, CountingAlloc::live())
    } else {
        let s = Store::open(cfg)?;
        s.wait_loaded();
        let base = CountingAlloc::live();
        let added = reel_store::measure::fill_index(&s, n, key);
        (base, added, CountingAlloc::live())
    };
    println!(
        "{mode}: {objects} objects in a store of {} GiB: {:.1} heap bytes per object \
         (index only: keys and metadata stay on disk)",
        size >> 30,
        (after - base) as f64 / objects as f64
    );
    Ok(())
}
