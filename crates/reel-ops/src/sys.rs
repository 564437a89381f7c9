//! The few system calls ops needs beyond std, wrapped once: the clock-tick rate for `/proc`
//! CPU times, the monotonic clock systemd's `MONOTONIC_USEC` wants, taking ownership of a
//! descriptor inherited at exec, the caller's thread id, and `mkfifo` for tests of a
//! stalled access-log reader. All but the first step of taking a descriptor go through
//! `rustix`.

use std::collections::HashSet;
use std::os::fd::{FromRawFd, IntoRawFd, OwnedFd, RawFd};
use std::sync::Mutex;

use rustix::io::FdFlags;

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
    // Whether the number is open is the question, so it cannot be asked through rustix,
    // whose calls take a descriptor already known to be open.
    // SAFETY: fcntl(F_GETFD) only queries the descriptor table; an invalid number fails
    // with EBADF.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFD) };
    if flags < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: the descriptor is open (checked above) and was inherited at exec, which only
    // callers that read its number from the environment at start-up claim; the registry
    // guarantees no second `OwnedFd` is made from it here.
    let owned = unsafe { OwnedFd::from_raw_fd(fd) };
    let flags = FdFlags::from_bits_retain(flags as u32) | FdFlags::CLOEXEC;
    if let Err(e) = rustix::io::fcntl_setfd(&owned, flags) {
        // Not taken: left open, as found.
        let _ = owned.into_raw_fd();
        return Err(e.into());
    }
    taken.insert(fd);
    Ok(owned)
}

/// The descriptor flags of `fd` (`F_GETFD`).
#[cfg(test)]
pub(crate) fn fd_flags(fd: &impl std::os::fd::AsFd) -> i32 {
    rustix::io::fcntl_getfd(fd).map_or(-1, |f| f.bits() as i32)
}

/// `sysconf(_SC_CLK_TCK)`, 100 if the system does not say.
pub(crate) fn clock_ticks_per_sec() -> f64 {
    // rustix passes sysconf's -1 on as `u64::MAX`.
    match i64::try_from(rustix::param::clock_ticks_per_second()) {
        Ok(t) if t > 0 => t as f64,
        _ => 100.0,
    }
}

/// `CLOCK_MONOTONIC` in microseconds.
pub(crate) fn monotonic_usec() -> u64 {
    let ts = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    ts.tv_sec as u64 * 1_000_000 + ts.tv_nsec as u64 / 1000
}

/// The calling thread's kernel id.
#[cfg(test)]
pub(crate) fn gettid() -> i32 {
    rustix::thread::gettid().as_raw_nonzero().get()
}

/// Makes a FIFO at `path`.
#[cfg(test)]
pub(crate) fn mkfifo(path: &std::path::Path) -> std::io::Result<()> {
    use rustix::fs::{CWD, Mode};
    Ok(rustix::fs::mkfifoat(CWD, path, Mode::from_raw_mode(0o600))?)
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
