//! Measures a restart: how long `Store::open` takes, when the first lookup is answered,
//! and when the whole index is loaded (lookups miss until then), after a clean close
//! (checkpoint) or after `kill -9` (scan of the record headers).
//!
//! Usage: `rebuild DIR SIZE_MIB VOLUME_MIB OBJECT_BYTES MODE [OBJECTS]`
//!
//! - `fill`: fills DIR with up to OBJECTS objects (default: until the store is full)
//!   of OBJECT_BYTES bytes and 200 bytes of metadata, then closes cleanly (writes the
//!   checkpoint).
//! - `fill-hang`: the same, but prints `filled` and waits instead of closing: kill it
//!   with `kill -9` for a crash.
//! - `open`: opens DIR and prints the times.
//!
//! Example (1 M objects of 4000 bytes in 8 GiB; each record takes 8 KiB, a 4 KiB header
//! block and the 4 KiB-aligned body):
//! `rebuild /var/tmp/r 8192 256 4000 fill 1000000 && rebuild /var/tmp/r 8192 256 4000 open`

use std::time::{Duration, Instant};

use bytes::Bytes;
use reel_store::{IoMode, Lookup, Store, StoreConfig};

fn key(i: u64) -> String {
    format!("cdn.example/vod/title-{:04}/seg_{i:08}.ts", i % 1000)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 6 {
        return Err(
            "usage: rebuild DIR SIZE_MIB VOLUME_MIB OBJECT_BYTES fill|fill-hang|open [OBJECTS]"
                .into(),
        );
    }
    let num = |i: usize| -> Result<u64, Box<dyn std::error::Error>> { Ok(args[i].parse()?) };
    let cfg = StoreConfig::single(args[1].clone(), num(2)? << 20, num(3)? << 20, IoMode::Auto);
    let obj = num(4)? as usize;
    let limit = args.get(6).map(|a| a.parse()).transpose()?.unwrap_or(u64::MAX);
    match args[5].as_str() {
        mode @ ("fill" | "fill-hang") => {
            let store = Store::open(cfg)?;
            store.wait_loaded();
            let payload = Bytes::from(vec![0xa5u8; obj]);
            let meta = Bytes::from(vec![b'h'; 200]);
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
            let t0 = Instant::now();
            let n = rt.block_on(async {
                let mut i = 0u64;
                // Until the limit, or until the store is full (its first reclaim).
                while i < limit && store.stats().reclaims == 0 {
                    if let Ok(mut w) =
                        store.begin_fill(key(i).as_bytes(), meta.clone(), Some(obj as u64)).await
                    {
                        let _ = w.append(payload.clone()).await;
                        let _ = w.commit().await;
                    }
                    i += 1;
                }
                i
            });
            let st = store.stats();
            println!(
                "filled: {n} fills, {} objects, {:.2} GB in {:.1} s",
                st.objects,
                st.bytes_used as f64 / 1e9,
                t0.elapsed().as_secs_f64()
            );
            if mode == "fill-hang" {
                loop {
                    std::thread::sleep(Duration::from_secs(3600));
                }
            }
            let t1 = Instant::now();
            let n = store.close()?;
            println!(
                "clean close: checkpoint of {n} objects in {:.3} s",
                t1.elapsed().as_secs_f64()
            );
        }
        "open" => {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
            let t0 = Instant::now();
            let store = Store::open(cfg)?;
            let opened = t0.elapsed();
            // Lookups are answered at once (a miss until the index is loaded).
            let hit = matches!(rt.block_on(store.lookup(key(0).as_bytes())), Some(Lookup::Hit(_)));
            let first_lookup = t0.elapsed();
            store.wait_loaded();
            let loaded = t0.elapsed();
            let st = store.stats();
            println!(
                "open {:.3} s, first lookup answered {:.3} s ({}), full index {:.3} s \
                 ({} objects, load {} ms, {} records dropped)",
                opened.as_secs_f64(),
                first_lookup.as_secs_f64(),
                if hit { "hit" } else { "miss" },
                loaded.as_secs_f64(),
                st.objects,
                st.index_load_millis,
                st.dropped_on_rebuild
            );
            // Resident memory now (the index loaded) and at its peak (during the load).
            let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
            let kib = |k: &str| {
                status.lines().find_map(|l| l.strip_prefix(k)).map_or(String::from("?"), |v| {
                    let n: u64 = v.trim().trim_end_matches(" kB").trim().parse().unwrap_or(0);
                    format!("{:.0} MB", n as f64 * 1024.0 / 1e6)
                })
            };
            println!("RSS after the load {}, peak {}", kib("VmRSS:"), kib("VmHWM:"));
            store.close()?;
        }
        m => return Err(format!("unknown mode {m}").into()),
    }
    Ok(())
}
