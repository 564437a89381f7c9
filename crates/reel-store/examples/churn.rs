//! Fill-and-evict churn: cycles a store several times while reading hot objects, then
//! prints store counters and the change in the TLB-shootdown row of /proc/interrupts.
//!
//! Run it under `strace -f -c` to check that reclaim never calls fadvise64 or
//! madvise (see docs/store.md for the method and figures).
//!
//! Usage: `churn [DIR] [SIZE_MIB] [VOLUME_MIB] [OBJECT_KIB] [CYCLES]`
//! (defaults: a temp dir, 256, 16, 2048, 8).

use std::time::Instant;

use bytes::Bytes;
use reel_store::{IoMode, Lookup, Store, StoreConfig};

fn tlb_total() -> u64 {
    let s = std::fs::read_to_string("/proc/interrupts").unwrap_or_default();
    s.lines()
        .find(|l| l.trim_start().starts_with("TLB:"))
        .map(|l| l.split_whitespace().skip(1).filter_map(|w| w.parse::<u64>().ok()).sum())
        .unwrap_or(0)
}

fn arg(i: usize, default: u64) -> u64 {
    std::env::args().nth(i).and_then(|a| a.parse().ok()).unwrap_or(default)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let tmp = tempfile::tempdir()?;
    let dir = std::env::args()
        .nth(1)
        .filter(|a| a != "-")
        .map_or_else(|| tmp.path().to_owned(), std::path::PathBuf::from);
    let size = arg(2, 256) << 20;
    let vol = arg(3, 16) << 20;
    let obj = (arg(4, 2048) << 10) as usize;
    let cycles = arg(5, 8);
    let store = Store::open(StoreConfig::single(dir, size, vol, IoMode::Auto))?;
    let n = cycles * size / obj as u64;
    let payload = Bytes::from(vec![0x5au8; obj]);
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let tlb0 = tlb_total();
    let t0 = Instant::now();
    rt.block_on(async {
        for i in 0..n {
            let key = format!("churn/{i}");
            if let Ok(mut w) =
                store.begin_fill(key.as_bytes(), Bytes::from_static(b"m"), Some(obj as u64)).await
            {
                let mut ok = true;
                for c in payload.chunks(256 << 10) {
                    ok &= w.append(payload.slice_ref(c)).await.is_ok();
                }
                if ok {
                    let _ = w.commit().await;
                }
            }
            // Read a recent object through the store and one "hot" object.
            for k in [format!("churn/{}", i / 2), "churn/0".to_owned()] {
                if let Some(Lookup::Hit(h)) = store.lookup(k.as_bytes()).await {
                    let _ = h.read(0, h.body_len().min(64 << 10)).await;
                }
            }
        }
    });
    let secs = t0.elapsed().as_secs_f64();
    let tlb = tlb_total().saturating_sub(tlb0);
    let st = store.stats();
    println!(
        "objects written: {n} of {obj} bytes in {secs:.2} s ({:.0} MB/s)",
        n as f64 * obj as f64 / secs / 1e6
    );
    println!("{st:?}");
    println!(
        "TLB shootdowns (all CPUs): {tlb}; per 1000 evictions: {:.2}",
        if st.evictions > 0 { tlb as f64 * 1000.0 / st.evictions as f64 } else { 0.0 }
    );
    Ok(())
}
