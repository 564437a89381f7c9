//! The few libc calls ops needs, each wrapped once with its safety argument: the clock-tick
//! rate for `/proc` CPU times, the monotonic clock systemd's `MONOTONIC_USEC` wants, the
//! caller's thread id, and `mkfifo` for tests of a stalled access-log reader.

/// `sysconf(_SC_CLK_TCK)`, 100 if the system does not say.
pub(crate) fn clock_ticks_per_sec() -> f64 {
    // SAFETY: sysconf has no preconditions; it only reads a system constant.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 { t as f64 } else { 100.0 }
}

/// `CLOCK_MONOTONIC` in microseconds.
pub(crate) fn monotonic_usec() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: ts is a valid, writable timespec that outlives the call.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000 + ts.tv_nsec as u64 / 1000
}

/// The calling thread's kernel id.
#[cfg(test)]
pub(crate) fn gettid() -> i32 {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::gettid() }
}

/// Makes a FIFO at `path`.
#[cfg(test)]
pub(crate) fn mkfifo(path: &std::path::Path) -> std::io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes())?;
    // SAFETY: c is a valid NUL-terminated path that lives across the call.
    if unsafe { libc::mkfifo(c.as_ptr(), 0o600) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_wrappers_answer() {
        assert!(super::clock_ticks_per_sec() >= 1.0);
        let a = super::monotonic_usec();
        std::thread::sleep(std::time::Duration::from_millis(2));
        assert!(super::monotonic_usec() >= a + 1000);
        assert!(super::gettid() > 0);
    }
}
