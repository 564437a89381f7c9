//! What a body's write pattern costs its hits: `sendfile` of a 2 MiB body written whole
//! against the same bytes written in pieces, and the page-cache folios each layout gets.
//!
//! Bodies are laid out as the store lays them out: in one preallocated (`fallocate`)
//! volume file, each body starting one 4 KiB page after a record start, records
//! 2 MiB + 8 KiB apart. A plain file written whole from offset 0 (what a static file server
//! serves) is measured beside them. Each layout's bodies are sent over TCP loopback to a
//! thread that drains them (the sender pinned to CPU 0, the drainer to CPU 1); the sending
//! thread's CPU time (`getrusage(RUSAGE_THREAD)`,
//! which includes loopback's receive softirq) per 2 MiB `sendfile` is reported, median of
//! the interleaved rounds. The folio sizes come from `/proc/self/pagemap` and
//! `/proc/kpageflags` (root only): the range is mapped read-only for that count, which
//! does not change the page cache's folios.
//!
//! ```text
//! cargo run --release -p reel-benches --example sendfile_layout -- \
//!     [--dir /var/tmp/reel-sendfile] [--objects 1] [--sends 400] [--rounds 5] \
//!     [--layouts whole,4k,16k,64k,256k,odd,a64k,a256k,a2m,plain] [--prealloc fallocate|sparse] \
//!     [--only LAYOUT --secs S]
//! ```
//!
//! `a64k`, `a256k`, `a2m` write pieces that end on multiples of 64 KiB, 256 KiB, 2 MiB
//! of the file offset (the store's fill writes). `odd` writes 12 345-byte pieces (chunks as a socket hands them over: not
//! page-aligned). `--only` sends one layout's bodies for `--secs` seconds (for
//! `perf record -g` of one layout).

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

const BODY: u64 = 2 << 20;
const PAGE: u64 = 4096;
/// Record stride in the volume: header page, body, trailer page.
const STRIDE: u64 = BODY + 2 * PAGE;

struct Args {
    dir: PathBuf,
    objects: usize,
    sends: usize,
    rounds: usize,
    layouts: Vec<String>,
    sparse: bool,
    only: Option<String>,
    secs: u64,
}

fn parse() -> Result<Args> {
    let mut a = Args {
        dir: PathBuf::from("/var/tmp/reel-sendfile"),
        objects: 1,
        sends: 400,
        rounds: 5,
        layouts: "whole,4k,16k,64k,256k,odd,a64k,a256k,a2m,plain"
            .split(',')
            .map(String::from)
            .collect(),
        sparse: false,
        only: None,
        secs: 5,
    };
    let mut it = std::env::args().skip(1);
    while let Some(k) = it.next() {
        let mut v = || it.next().context("missing value");
        match k.as_str() {
            "--dir" => a.dir = v()?.into(),
            "--objects" => a.objects = v()?.parse()?,
            "--sends" => a.sends = v()?.parse()?,
            "--rounds" => a.rounds = v()?.parse()?,
            "--layouts" => a.layouts = v()?.split(',').map(String::from).collect(),
            "--prealloc" => a.sparse = v()? == "sparse",
            "--only" => a.only = Some(v()?),
            "--secs" => a.secs = v()?.parse()?,
            _ => bail!("unknown argument {k}"),
        }
    }
    Ok(a)
}

/// Marks a piece size whose pieces end on multiples of it in the file.
const ALIGNED: u64 = 1 << 62;

/// Piece size of a layout; `None` for a plain file of its own.
fn piece(layout: &str) -> Result<Option<u64>> {
    Ok(Some(match layout {
        "whole" => BODY,
        "4k" => 4 << 10,
        "16k" => 16 << 10,
        "64k" => 64 << 10,
        "256k" => 256 << 10,
        "2m" => 2 << 20,
        "odd" => 12_345,
        // Pieces that end on multiples of the size in the file (what the store's fills
        // write since coalescing: `a` for aligned).
        "a64k" => 64 << 10 | ALIGNED,
        "a256k" => 256 << 10 | ALIGNED,
        "a2m" => 2 << 20 | ALIGNED,
        "plain" => return Ok(None),
        _ => bail!("unknown layout {layout}"),
    }))
}

/// Where one layout's bodies live: a file and the bodies' offsets.
struct Bodies {
    file: File,
    offs: Vec<u64>,
}

fn body_bytes(i: usize) -> Vec<u8> {
    (0..BODY).map(|j| (j as usize).wrapping_mul(31).wrapping_add(i) as u8).collect()
}

fn write_in(file: &File, data: &[u8], off: u64, piece: u64) -> Result<()> {
    if piece & ALIGNED != 0 {
        let unit = piece & !ALIGNED;
        let mut pos = 0u64;
        while pos < data.len() as u64 {
            let end = (((off + pos) / unit + 1) * unit - off).min(data.len() as u64);
            file.write_all_at(&data[pos as usize..end as usize], off + pos)?;
            pos = end;
        }
        return Ok(());
    }
    for (k, c) in data.chunks(piece as usize).enumerate() {
        file.write_all_at(c, off + k as u64 * piece)?;
    }
    Ok(())
}

fn prepare(a: &Args, layout: &str) -> Result<Bodies> {
    std::fs::create_dir_all(&a.dir)?;
    let path = a.dir.join(layout);
    let _ = std::fs::remove_file(&path);
    let file = OpenOptions::new().read(true).write(true).create(true).truncate(true).open(&path)?;
    let mut offs = Vec::new();
    match piece(layout)? {
        None => {
            // A plain file: every body its own file, written whole from offset 0. One
            // file holds body 0; the others get files of their own.
            for i in 0..a.objects {
                let f = if i == 0 {
                    file.try_clone()?
                } else {
                    let p = a.dir.join(format!("{layout}.{i}"));
                    let _ = std::fs::remove_file(&p);
                    OpenOptions::new().read(true).write(true).create(true).truncate(true).open(p)?
                };
                (&f).write_all(&body_bytes(i))?;
                f.sync_data()?;
                offs.push(0);
            }
            if a.objects > 1 {
                bail!("plain with --objects > 1 is not supported (one file per layout)");
            }
        }
        Some(p) => {
            let size = PAGE + a.objects as u64 * STRIDE;
            if a.sparse {
                file.set_len(size)?;
            } else {
                // SAFETY: plain syscall on a descriptor we own; no memory is passed.
                let r = unsafe { libc::fallocate(file.as_raw_fd(), 0, 0, size as libc::off_t) };
                if r != 0 {
                    bail!("fallocate: {}", std::io::Error::last_os_error());
                }
            }
            for i in 0..a.objects {
                let off = PAGE + i as u64 * STRIDE + PAGE;
                write_in(&file, &body_bytes(i), off, p)?;
                offs.push(off);
            }
            file.sync_data()?;
        }
    }
    Ok(Bodies { file, offs })
}

/// Folio sizes (KiB → count of folios) of `len` bytes at `off` in `file`'s page cache.
fn folios(file: &File, off: u64, len: u64) -> Result<BTreeMap<u64, u64>> {
    let pages = (len / PAGE) as usize;
    // SAFETY: a fresh read-only shared mapping of a range inside the file; unmapped
    // below before `file` can be closed, and only read through `ptr` within it.
    let ptr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len as usize,
            libc::PROT_READ,
            libc::MAP_SHARED,
            file.as_raw_fd(),
            off as libc::off_t,
        )
    };
    if ptr == libc::MAP_FAILED {
        bail!("mmap: {}", std::io::Error::last_os_error());
    }
    // Only resident pages are looked at: touching another would read it in.
    let mut resident = vec![0u8; pages];
    // SAFETY: `ptr` is the mapping made above, `len` its length, `resident` has one byte
    // per page of it.
    let r = unsafe { libc::mincore(ptr, len as usize, resident.as_mut_ptr()) };
    if r != 0 {
        bail!("mincore: {}", std::io::Error::last_os_error());
    }
    let mut sum = 0u64;
    for (i, _) in resident.iter().enumerate().filter(|(_, r)| **r & 1 == 1) {
        let p = (ptr as *const u8).wrapping_add(i * PAGE as usize);
        // SAFETY: `i * PAGE < len`: `p` is inside the mapping made above, readable.
        sum += u64::from(unsafe { std::ptr::read_volatile(p) });
    }
    std::hint::black_box(sum);
    let mut pagemap = File::open("/proc/self/pagemap")?;
    let mut kflags = File::open("/proc/kpageflags")?;
    let mut hist = BTreeMap::new();
    let mut cur: u64 = 0;
    for (i, res) in resident.iter().enumerate() {
        if res & 1 == 0 {
            if cur > 0 {
                *hist.entry(cur * 4).or_insert(0) += 1;
            }
            cur = 0;
            continue;
        }
        let va = ptr as u64 + i as u64 * PAGE;
        let mut e = [0u8; 8];
        pagemap.read_exact_at(&mut e, va / PAGE * 8)?;
        let e = u64::from_le_bytes(e);
        let pfn = e & ((1 << 55) - 1);
        if e >> 63 == 0 || pfn == 0 {
            bail!("page {i} not present or no PFN (run as root)");
        }
        let mut f = [0u8; 8];
        kflags.read_exact_at(&mut f, pfn * 8)?;
        let f = u64::from_le_bytes(f);
        let (head, tail) = (f >> 15 & 1 == 1, f >> 16 & 1 == 1);
        if tail && cur > 0 {
            cur += 1;
        } else {
            if cur > 0 {
                *hist.entry(cur * 4).or_insert(0) += 1;
            }
            cur = 1;
            if !head && !tail {
                *hist.entry(4).or_insert(0) += 1;
                cur = 0;
            }
        }
    }
    if cur > 0 {
        *hist.entry(cur * 4).or_insert(0) += 1;
    }
    let _ = (&mut pagemap, &mut kflags);
    // SAFETY: unmaps exactly the mapping made above; nothing refers to it any more.
    unsafe { libc::munmap(ptr, len as usize) };
    Ok(hist)
}

fn thread_cpu() -> Duration {
    // SAFETY: `ru` is a properly sized, writable rusage struct for the call's duration.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: see above; RUSAGE_THREAD only reads the calling thread's counters.
    unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(ru.ru_stime) + tv(ru.ru_utime)
}

fn send_one(sock: &TcpStream, file: &File, off: u64) -> Result<()> {
    let mut o = off as libc::off_t;
    let mut left = BODY as usize;
    while left > 0 {
        // SAFETY: both descriptors are open for the call; `o` is a live off_t the
        // kernel advances.
        let n = unsafe { libc::sendfile(sock.as_raw_fd(), file.as_raw_fd(), &mut o, left) };
        if n <= 0 {
            bail!("sendfile: {}", std::io::Error::last_os_error());
        }
        left -= n as usize;
    }
    Ok(())
}

/// CPU µs per 2 MiB sendfile of `n` sends cycling over `b`'s bodies.
fn measure(sock: &TcpStream, b: &Bodies, n: usize) -> Result<f64> {
    let t0 = thread_cpu();
    for i in 0..n {
        send_one(sock, &b.file, b.offs[i % b.offs.len()])?;
    }
    Ok((thread_cpu() - t0).as_secs_f64() * 1e6 / n as f64)
}

/// Pins the calling thread to `cpu` (best effort).
fn pin(cpu: usize) {
    // SAFETY: an all-zero cpu_set_t is a valid, empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: writes one bit inside `set`, which this frame owns.
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: the kernel only reads `set` for the calling thread (pid 0).
    unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
}

fn main() -> Result<()> {
    if std::env::args().nth(1).as_deref() == Some("--inspect") {
        // `--inspect FILE [OFF LEN]`: the folio sizes of a file's resident pages.
        let v: Vec<String> = std::env::args().skip(2).collect();
        let file = File::open(v.first().context("--inspect FILE [OFF LEN]")?)?;
        let off = v.get(1).map_or(Ok(0), |s| s.parse())?;
        let len = match v.get(2) {
            Some(s) => s.parse()?,
            None => file.metadata()?.len() - off,
        };
        let h = folios(&file, off, len)?;
        let s: Vec<String> = h.iter().map(|(k, c)| format!("{c}x{k}K")).collect();
        println!("folios (size: count) of resident pages: {}", s.join(" "));
        return Ok(());
    }
    let a = parse()?;
    let lst = TcpListener::bind("127.0.0.1:0")?;
    let addr = lst.local_addr()?;
    let ncpu = std::thread::available_parallelism().map_or(1, |n| n.get());
    std::thread::Builder::new().name("drain".into()).spawn(move || {
        pin(1 % ncpu);
        let Ok((mut s, _)) = lst.accept() else { return };
        let mut buf = vec![0u8; 1 << 20];
        while matches!(s.read(&mut buf), Ok(n) if n > 0) {}
    })?;
    pin(0);
    let sock = TcpStream::connect(addr)?;
    let mut bodies = Vec::new();
    for l in &a.layouts {
        let b = prepare(&a, l)?;
        match folios(&b.file, b.offs[0], BODY) {
            Ok(h) => {
                let s: Vec<String> = h.iter().map(|(k, c)| format!("{c}x{k}K")).collect();
                println!("{l:>6}: folios of body 0: {}", s.join(" "));
            }
            Err(e) => println!("{l:>6}: folios unknown ({e})"),
        }
        bodies.push((l.clone(), b));
    }
    if let Some(only) = &a.only {
        let (_, b) = bodies.iter().find(|(l, _)| l == only).context("--only names no layout")?;
        let end = Instant::now() + Duration::from_secs(a.secs);
        let (mut n, t0) = (0usize, thread_cpu());
        while Instant::now() < end {
            send_one(&sock, &b.file, b.offs[n % b.offs.len()])?;
            n += 1;
        }
        let us = (thread_cpu() - t0).as_secs_f64() * 1e6 / n as f64;
        println!("{only}: {n} sends, {us:.1} µs CPU per 2 MiB sendfile");
        return Ok(());
    }
    let mut res: Vec<Vec<f64>> = vec![Vec::new(); bodies.len()];
    for (_, b) in &bodies {
        measure(&sock, b, a.sends / 4 + 1)?; // warm
    }
    for _ in 0..a.rounds {
        for (i, (_, b)) in bodies.iter().enumerate() {
            res[i].push(measure(&sock, b, a.sends)?);
        }
    }
    println!(
        "layout  µs CPU per 2 MiB sendfile (median of {} rounds of {} sends) [rounds]",
        a.rounds, a.sends
    );
    for (i, (l, _)) in bodies.iter().enumerate() {
        let mut v = res[i].clone();
        v.sort_by(f64::total_cmp);
        let r: Vec<String> = res[i].iter().map(|x| format!("{x:.1}")).collect();
        println!("{l:>6}  {:>7.1}  [{}]", v[v.len() / 2], r.join(" "));
    }
    Ok(())
}
