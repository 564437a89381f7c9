//! [`CountingAlloc`]: the system allocator, counting the heap bytes live in the process,
//! for tests and examples that measure memory (one per test binary: it is the global
//! allocator, so nothing else may run beside the measurement).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};

static LIVE: AtomicIsize = AtomicIsize::new(0);

/// Install with `#[global_allocator] static A: CountingAlloc = CountingAlloc;`, then read
/// [`CountingAlloc::live`].
pub struct CountingAlloc;

impl CountingAlloc {
    /// Heap bytes allocated and not yet freed, process-wide.
    pub fn live() -> isize {
        LIVE.load(Ordering::Relaxed)
    }
}

// SAFETY: every call goes to `System` unchanged; the counter only observes sizes.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        LIVE.fetch_add(l.size() as isize, Ordering::Relaxed);
        // SAFETY: the caller's layout, as `GlobalAlloc::alloc` requires.
        unsafe { System.alloc(l) }
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        LIVE.fetch_add(l.size() as isize, Ordering::Relaxed);
        // SAFETY: the caller's layout, as `GlobalAlloc::alloc_zeroed` requires.
        unsafe { System.alloc_zeroed(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE.fetch_sub(l.size() as isize, Ordering::Relaxed);
        // SAFETY: `p` came from `System` with layout `l`.
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        LIVE.fetch_add(new as isize - l.size() as isize, Ordering::Relaxed);
        // SAFETY: `p` came from `System` with layout `l`; `new` is the caller's.
        unsafe { System.realloc(p, l, new) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[global_allocator]
    static A: CountingAlloc = CountingAlloc;

    #[test]
    fn live_bytes_follow_allocations_and_frees() {
        // Other tests of this binary may allocate meanwhile: a large block stands out.
        const N: usize = 64 << 20;
        let before = CountingAlloc::live();
        let mut v: Vec<u8> = Vec::with_capacity(N);
        v.push(1);
        assert!(CountingAlloc::live() - before >= N as isize * 9 / 10);
        v.reserve_exact(2 * N);
        assert!(CountingAlloc::live() - before >= 2 * N as isize);
        drop(v);
        assert!(CountingAlloc::live() - before < N as isize / 10);
    }
}
