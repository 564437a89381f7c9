//! What the page cache holds of a file range, asked without blocking on the disk:
//! whether all of it is resident ([`is_resident`]: `cachestat(2)` counts the cached pages
//! on Linux 6.5+; elsewhere a few 1-byte `RWF_NOWAIT` reads probe a sample of them), which
//! a hit checks before it is sent with sendfile, and a copy of its resident head
//! ([`nowait_read`]) that a read takes before it goes to the disk.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

/// Copies what is already in the page cache at `off` into `buf` without blocking
/// (preadv2 with RWF_NOWAIT). Returns the number of leading bytes copied: it stops at
/// the first page not resident (EAGAIN), at end of file, or at any other error.
pub(crate) fn nowait_read(fd: BorrowedFd<'_>, buf: &mut [u8], off: u64) -> usize {
    let mut done = 0usize;
    while done < buf.len() {
        let iov = &mut [io::IoSliceMut::new(&mut buf[done..])];
        match rustix::io::preadv2(fd, iov, off + done as u64, rustix::io::ReadWriteFlags::NOWAIT) {
            Ok(0) | Err(_) => break,
            Ok(n) => done += n,
        }
    }
    done
}

/// Whether `len` bytes at `off` are all resident in the page cache, so that sendfile
/// will not wait for the disk. Nothing is read or copied: `cachestat(2)` (Linux 6.5)
/// counts the cached pages of the range. Where the kernel lacks it (`ENOSYS`, or a
/// seccomp filter that refuses it), a few pages (first, last and some in between) are
/// probed with 1-byte `RWF_NOWAIT` reads instead: a sample, so a page missing between
/// two probes is only found by sendfile itself.
pub(crate) fn is_resident(fd: BorrowedFd<'_>, off: u64, len: u64) -> bool {
    if len == 0 {
        return true;
    }
    match cachestat_pages(fd, off, len) {
        Some(cached) => cached >= pages_of(off, len),
        None => probe_pages(fd, off, len),
    }
}

/// Pages the kernel would count for `len > 0` bytes at `off`.
fn pages_of(off: u64, len: u64) -> u64 {
    let ps = page_size();
    (off + len - 1) / ps - off / ps + 1
}

pub(super) fn page_size() -> u64 {
    static PAGE: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *PAGE.get_or_init(|| {
        // `sysconf(_SC_PAGESIZE)`, -1 (as usize) if the system does not say.
        let ps = rustix::param::page_size();
        i64::try_from(ps).ok().filter(|&p| p > 0).map_or(4096, |p| p as u64)
    })
}

/// `cachestat(2)` is missing (learned from the first `ENOSYS` or `EPERM`).
pub(super) static NO_CACHESTAT: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);

/// The number of cached pages of the range, by `cachestat(2)`; `None` where the
/// syscall is unavailable (or refuses this file: hugetlbfs).
pub(super) fn cachestat_pages(fd: BorrowedFd<'_>, off: u64, len: u64) -> Option<u64> {
    use std::sync::atomic::Ordering;
    /// `struct cachestat_range` of `<linux/mman.h>`.
    #[repr(C)]
    struct Range {
        off: u64,
        len: u64,
    }
    /// `struct cachestat` of `<linux/mman.h>`.
    #[repr(C)]
    #[derive(Default)]
    struct Stat {
        nr_cache: u64,
        nr_dirty: u64,
        nr_writeback: u64,
        nr_evicted: u64,
        nr_recently_evicted: u64,
    }
    // The syscall number is 451 on both architectures we build for (and most others);
    // elsewhere the probe below is used.
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    const SYS_CACHESTAT: libc::c_long = 451;
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    return None;
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    {
        if NO_CACHESTAT.load(Ordering::Relaxed) {
            return None;
        }
        let range = Range { off, len };
        let mut st = Stat::default();
        // SAFETY: `range` and `st` are live, properly aligned `repr(C)` structs laid out
        // as the kernel's `cachestat_range` and `cachestat`; the kernel only reads the
        // first and writes the second for the duration of the call. Flags must be 0.
        let r = unsafe {
            libc::syscall(
                SYS_CACHESTAT,
                fd.as_raw_fd() as libc::c_uint,
                &range as *const Range,
                &mut st as *mut Stat,
                0 as libc::c_uint,
            )
        };
        if r == 0 {
            return Some(st.nr_cache);
        }
        let e = io::Error::last_os_error().raw_os_error();
        if matches!(e, Some(libc::ENOSYS | libc::EPERM)) {
            NO_CACHESTAT.store(true, Ordering::Relaxed);
        }
        None
    }
}

/// Most pages [`probe_pages`] reads one byte of.
const PROBES: u64 = 8;

/// The fallback of [`is_resident`]: a 1-byte `RWF_NOWAIT` read of the first and last
/// page of the range and of evenly spaced pages in between (at most [`PROBES`]).
pub(super) fn probe_pages(fd: BorrowedFd<'_>, off: u64, len: u64) -> bool {
    if len == 0 {
        return true;
    }
    let ps = page_size();
    let (first, last) = (off / ps, (off + len - 1) / ps);
    let n = (last - first + 1).min(PROBES);
    (0..n).all(|i| {
        let page = if n == 1 { first } else { first + (last - first) * i / (n - 1) };
        let at = (page * ps).max(off);
        let mut b = [0u8; 1];
        nowait_read(fd, &mut b, at) == 1
    })
}
