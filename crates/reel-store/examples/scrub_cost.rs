//! Measures what the background scrub costs: fills a store with objects, then
//!
//! - `step`: runs whole scrub passes with an unlimited budget on this thread and prints
//!   the thread's CPU time per GB verified (the bodies are in the page cache after the
//!   fill, so this is the CPU side: copy out of the page cache plus CRC-32C);
//! - `rate R_MIB SECS`: sets the scrub rate to R_MIB MiB/s, lets the maintenance thread
//!   run it for SECS seconds, and prints the bytes it verified and that thread's CPU
//!   time (from `/proc/self/task/*/stat`), as a share of one core.
//!
//! Usage: `scrub_cost DIR SIZE_MIB VOLUME_MIB OBJECT_KIB step|rate [R_MIB SECS]`
//! Example: `scrub_cost /var/tmp/s 1024 64 2048 rate 4 60`

use std::time::{Duration, Instant};

use bytes::Bytes;
use reel_store::{IoMode, Store, StoreConfig};

/// CPU seconds (user + system) of one thread, from its `stat` file.
fn thread_cpu(stat: &str) -> Option<f64> {
    // Fields after the parenthesised name: state is field 3, utime 14, stime 15.
    let rest = stat.rsplit_once(')')?.1;
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
    Some(ticks as f64 / rustix::param::clock_ticks_per_second() as f64)
}

/// CPU seconds of the store's maintenance thread.
fn maint_cpu() -> Option<f64> {
    for t in std::fs::read_dir("/proc/self/task").ok()?.flatten() {
        let comm = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
        // `comm` keeps 15 bytes of the name.
        if "reel-store-maint".starts_with(comm.trim()) && comm.trim().len() >= 14 {
            return thread_cpu(&std::fs::read_to_string(t.path().join("stat")).ok()?);
        }
    }
    None
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 6 {
        return Err(
            "usage: scrub_cost DIR SIZE_MIB VOLUME_MIB OBJECT_KIB step|rate [R_MIB SECS]".into()
        );
    }
    let num = |i: usize| -> Result<u64, Box<dyn std::error::Error>> { Ok(args[i].parse()?) };
    let store = Store::open(StoreConfig::single(
        args[1].clone(),
        num(2)? << 20,
        num(3)? << 20,
        IoMode::Auto,
    ))?;
    store.wait_loaded();
    let obj = (num(4)? << 10) as usize;
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    rt.block_on(async {
        let payload: Vec<u8> = (0..obj).map(|i| (i * 131 % 251) as u8).collect();
        let payload = Bytes::from(payload);
        // Until the store is full (its first reclaim); kept as it is if it holds objects.
        let fresh = store.stats().objects == 0;
        let mut i = 0u64;
        while fresh && store.stats().reclaims == 0 {
            let key = format!("cdn.example/vod/t-{:03}/seg_{i:06}.ts", i % 100);
            if let Ok(mut w) =
                store.begin_fill(key.as_bytes(), Bytes::new(), Some(obj as u64)).await
            {
                let _ = w.append(payload.clone()).await;
                let _ = w.commit().await;
            } else {
                store.maintain().await;
            }
            i += 1;
        }
    });
    let st = store.stats();
    println!("{} objects, {} MB stored", st.objects, st.bytes_used / 1_000_000);
    match args[5].as_str() {
        "step" => {
            for _ in 0..3 {
                let (cpu0, t0, b0) = (self_cpu(), Instant::now(), store.stats().scrub_bytes);
                rt.block_on(async { while !store.scrub_step(u64::MAX).await.pass_done {} });
                let (cpu, wall) = (self_cpu() - cpu0, t0.elapsed().as_secs_f64());
                let gb = (store.stats().scrub_bytes - b0) as f64 / 1e9;
                println!(
                    "pass: {gb:.3} GB in {wall:.3} s wall, {cpu:.3} s CPU: {:.3} CPU s/GB, {:.2} GB/s",
                    cpu / gb,
                    gb / wall
                );
            }
        }
        "rate" => {
            let rate = num(6)? << 20;
            let secs = num(7)?;
            let (cpu0, b0) = (maint_cpu().ok_or("no maintenance thread")?, store.stats());
            store.set_scrub_rate(rate);
            std::thread::sleep(Duration::from_secs(secs));
            store.set_scrub_rate(0);
            let (cpu, st) = (maint_cpu().ok_or("no maintenance thread")? - cpu0, store.stats());
            let mb = (st.scrub_bytes - b0.scrub_bytes) as f64 / 1e6;
            println!(
                "{secs} s at {} MiB/s: {mb:.1} MB verified ({:.2} MB/s), {} objects, \
                 maintenance thread {cpu:.2} s CPU = {:.3}% of a core",
                rate >> 20,
                mb / secs as f64,
                st.scrub_objects - b0.scrub_objects,
                100.0 * cpu / secs as f64
            );
        }
        m => return Err(format!("unknown mode {m}").into()),
    }
    store.close()?;
    Ok(())
}

/// CPU seconds of the calling thread.
fn self_cpu() -> f64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    t.tv_sec as f64 + t.tv_nsec as f64 / 1e9
}
