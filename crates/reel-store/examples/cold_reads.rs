//! Cold reads through the store: the cost of reading objects whose pages are not in the
//! page cache, per read, with the store's I/O backend (io_uring, or the I/O threads with
//! `REEL_STORE_IO=threads`; ring setup flags from `REEL_STORE_URING_SETUP`, e.g.
//! `coop,single` or `defer`).
//!
//! Fills the store with OBJECTS objects of OBJECT_KIB once (kept between runs), then per
//! round drops the volume files from the page cache (written back, then
//! `POSIX_FADV_DONTNEED`: the harness does this, the store never does) and reads every
//! object whole in 256 KiB reads, DEPTH of them in flight, on one current_thread runtime,
//! like a worker streaming cold hits. Prints per cold read: the process's CPU time (all its
//! threads, from getrusage), the machine's function-call (CAL) and rescheduling (RES) IPIs,
//! and the wall time of the round.
//!
//! Usage: `cold_reads DIR [OBJECTS] [OBJECT_KIB] [DEPTH] [ROUNDS]`
//! (defaults: 256 objects of 2048 KiB, 8 in flight, 5 rounds). Pin it with `taskset -c 0`.

use std::rc::Rc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use reel_store::{IoMode, Lookup, Store, StoreConfig};

/// Read size of the cache's cold stream (`reel_cache::path::answer::stored::STREAM_CHUNK`).
const CHUNK: u64 = 256 * 1024;

fn arg(i: usize, default: u64) -> u64 {
    std::env::args().nth(i).and_then(|a| a.parse().ok()).unwrap_or(default)
}

/// Sum over CPUs of a /proc/interrupts row (`CAL`, `RES`).
fn irq(row: &str) -> u64 {
    let s = std::fs::read_to_string("/proc/interrupts").unwrap_or_default();
    s.lines()
        .find(|l| l.trim_start().starts_with(&format!("{row}:")))
        .map(|l| l.split_whitespace().skip(1).filter_map(|w| w.parse::<u64>().ok()).sum())
        .unwrap_or(0)
}

/// User + system CPU time of the whole process.
fn cpu() -> Duration {
    // SAFETY: rusage is plain integers, for which all-zero bytes are a valid value.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage writes into the struct we own; no other memory is touched.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// Writes back and drops every volume file of `dir` from the page cache; returns how many
/// files took the advice.
fn evict(dir: &std::path::Path) -> std::io::Result<usize> {
    let mut n = 0;
    for e in std::fs::read_dir(dir)? {
        let p = e?.path();
        if p.extension().is_some_and(|x| x == "dat") {
            let f = std::fs::File::open(&p)?;
            f.sync_all()?;
            if rustix::fs::fadvise(&f, 0, None, rustix::fs::Advice::DontNeed).is_ok() {
                n += 1;
            }
        }
    }
    Ok(n)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::path::PathBuf::from(std::env::args().nth(1).ok_or("usage: cold_reads DIR ...")?);
    let objects = arg(2, 256);
    let obj = arg(3, 2048) << 10;
    let depth = arg(4, 8).max(1);
    let rounds = arg(5, 5);
    // Room for every object with its record header, in 64 MiB volumes, plus two spare.
    let vol = 64u64 << 20;
    let per_vol = (vol - 4096) / (obj + 8192);
    let size = (objects.div_ceil(per_vol.max(1)) + 2) * vol;
    let store = Store::open(StoreConfig::single(dir.clone(), size, vol, IoMode::Auto))?;
    store.wait_loaded();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let local = tokio::task::LocalSet::new();
    println!(
        "backend {}, setup {:?}, {objects} objects of {} KiB, {depth} in flight",
        if store.stats().uring { "io_uring" } else { "threads" },
        std::env::var("REEL_STORE_URING_SETUP").unwrap_or_else(|_| "(default)".into()),
        obj >> 10
    );
    local.block_on(&rt, async {
        let payload = Bytes::from(vec![0xa5u8; obj as usize]);
        for i in 0..objects {
            let key = format!("cold/{i}");
            if store.lookup(key.as_bytes()).await.is_some() {
                continue;
            }
            let mut w = store.begin_fill(key.as_bytes(), Bytes::from_static(b"m"), Some(obj)).await?;
            w.append(payload.clone()).await?;
            w.commit().await?;
        }
        for round in 0..rounds {
            evict(&dir)?;
            let (cal0, res0, cpu0, t0) = (irq("CAL"), irq("RES"), cpu(), Instant::now());
            let next = Rc::new(std::cell::Cell::new(0u64));
            let reads = Rc::new(std::cell::Cell::new(0u64));
            let mut tasks = Vec::new();
            for _ in 0..depth {
                let (store, next, reads) = (store.clone(), next.clone(), reads.clone());
                tasks.push(tokio::task::spawn_local(async move {
                    loop {
                        let i = next.get();
                        if i >= objects {
                            return;
                        }
                        next.set(i + 1);
                        let Some(Lookup::Hit(h)) = store.lookup(format!("cold/{i}").as_bytes()).await
                        else {
                            continue;
                        };
                        let mut off = 0;
                        while off < h.body_len() {
                            let n = CHUNK.min(h.body_len() - off);
                            if h.read(off, n).await.is_err() {
                                eprintln!("read of cold/{i} failed");
                                return;
                            }
                            reads.set(reads.get() + 1);
                            off += n;
                        }
                    }
                }));
            }
            for t in tasks {
                let _ = t.await;
            }
            let (wall, used) = (t0.elapsed(), cpu() - cpu0);
            let n = reads.get().max(1);
            println!(
                "round {round}: {n} reads of {} KiB in {:.3} s ({:.0} MB/s): CPU {:.1} µs/read, CAL {:.2}/read, RES {:.2}/read",
                CHUNK >> 10,
                wall.as_secs_f64(),
                (n * CHUNK) as f64 / wall.as_secs_f64() / 1e6,
                used.as_secs_f64() * 1e6 / n as f64,
                (irq("CAL") - cal0) as f64 / n as f64,
                (irq("RES") - res0) as f64 / n as f64,
            );
        }
        Ok::<_, Box<dyn std::error::Error>>(())
    })?;
    Ok(())
}
