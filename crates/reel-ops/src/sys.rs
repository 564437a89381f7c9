//! The few libc calls ops needs, each wrapped once with its safety argument: the clock-tick
//! rate for `/proc` CPU times, the monotonic clock systemd's `MONOTONIC_USEC` wants, taking
//! ownership of a descriptor inherited at exec, the caller's thread id, and `mkfifo` for
//! tests of a stalled access-log reader.

use std::collections::HashSet;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::sync::Mutex;

/// Descriptor numbers already taken by [`take_inherited_fd`].
static TAKEN: Mutex<Option<HashSet<RawFd>>> = Mutex::new(None);

/// Takes ownership of descriptor `fd`, which the process inherited at exec (systemd's
/// sockets, or one a predecessor named in the environment): fails if it is not open or
/// was taken before in this process; sets `FD_CLOEXEC`.
pub(crate) fn take_inherited_fd(fd: RawFd) -> std::io::Result<OwnedFd> {
    if fd < 0 {
        return Err(std::io::Error::from_raw_os_error(libc::EBADF));
    }
    let mut taken = TAKEN.lock().unwrap_or_else(|p| p.into_inner());
    let taken = taken.get_or_insert_with(HashSet::new);
    if taken.contains(&fd) {
        return Err(std::io::Error::other("taken already"));
    }
    // SAFETY: fcntl(F_GETFD) only queries the descriptor table; an invalid number fails
    // with EBADF.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFD) };
    if flags < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: sets the close-on-exec flag of a descriptor that is open (checked above).
    if unsafe { libc::fcntl(fd, libc::F_SETFD, flags | libc::FD_CLOEXEC) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    taken.insert(fd);
    // SAFETY: the descriptor is open (checked above) and was inherited at exec, which only
    // callers that read its number from the environment at start-up claim; the registry
    // guarantees no second `OwnedFd` is made from it here.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// The descriptor flags of `fd` (`F_GETFD`).
#[cfg(test)]
pub(crate) fn fd_flags(fd: &impl std::os::fd::AsRawFd) -> i32 {
    // SAFETY: F_GETFD only queries the descriptor `fd` owns.
    unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFD) }
}

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
