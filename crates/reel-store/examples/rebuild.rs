//! Measures the restart rebuild: fills a store to capacity, then times `Store::open`.
//!
//! Usage: `rebuild [DIR] [SIZE_MIB] [VOLUME_MIB] [OBJECT_KIB]`
//! (defaults: a temp dir, 2048, 256, 2048). An existing full store in DIR is reused:
//! pass `-` to skip the fill.

use std::time::Instant;

use bytes::Bytes;
use reel_store::{IoMode, Store, StoreConfig};

fn arg(i: usize, default: u64) -> u64 {
    std::env::args().nth(i).and_then(|a| a.parse().ok()).unwrap_or(default)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let tmp = tempfile::tempdir()?;
    let dir = std::env::args()
        .nth(1)
        .filter(|a| a != "-")
        .map_or_else(|| tmp.path().to_owned(), std::path::PathBuf::from);
    let cfg = StoreConfig {
        path: dir,
        size: arg(2, 2048) << 20,
        volume_size: arg(3, 256) << 20,
        io: IoMode::Auto,
    };
    let obj = (arg(4, 2048) << 10) as usize;
    let skip_fill = std::env::args().nth(5).is_some_and(|a| a == "-");
    if !skip_fill {
        let store = Store::open(cfg.clone())?;
        let payload = Bytes::from(vec![0xa5u8; obj]);
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        rt.block_on(async {
            let mut i = 0u64;
            // Fill until the first reclaim: the store is then full.
            while store.stats().reclaims == 0 {
                let key = format!("cdn.example/vod/seg_{i:08}.ts");
                if let Ok(mut w) = store
                    .begin_fill(key.as_bytes(), Bytes::from(vec![b'h'; 300]), Some(obj as u64))
                    .await
                {
                    let _ = w.append(payload.clone()).await;
                    let _ = w.commit().await;
                }
                i += 1;
            }
        });
    }
    let t0 = Instant::now();
    let store = Store::open(cfg)?;
    let secs = t0.elapsed().as_secs_f64();
    let st = store.stats();
    println!(
        "rebuild: {} objects, {:.3} GB used of {:.3} GB in {secs:.3} s = {:.0} objects/s, {:.2} GB/s",
        st.recovered,
        st.bytes_used as f64 / 1e9,
        st.capacity as f64 / 1e9,
        st.recovered as f64 / secs,
        st.bytes_used as f64 / 1e9 / secs
    );
    Ok(())
}
