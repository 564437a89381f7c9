//! Thin wrappers over the syscalls the response path needs and std/tokio do not expose:
//! `send(2)` with `MSG_MORE`, `sendfile(2)`, and `preadv2(2)` with `RWF_NOWAIT`.

use std::io;
use std::os::fd::RawFd;

/// `send(2)` with `MSG_NOSIGNAL` (a reset peer yields `EPIPE`, never `SIGPIPE`), plus
/// `MSG_MORE` when `more` is set so a head followed by a `sendfile` leaves in full segments.
pub(crate) fn send(fd: RawFd, buf: &[u8], more: bool) -> io::Result<usize> {
    let mut flags = libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT;
    if more {
        flags |= libc::MSG_MORE;
    }
    // SAFETY: `buf` is a live slice for the whole call and its pointer/length pair is
    // passed unchanged; the kernel only reads from it. An invalid `fd` yields EBADF.
    let n = unsafe { libc::send(fd, buf.as_ptr().cast(), buf.len(), flags) };
    if n < 0 { Err(io::Error::last_os_error()) } else { Ok(n as usize) }
}

/// `sendfile(2)` of up to `count` bytes from `in_fd` at `*offset` to socket `out_fd`;
/// the kernel advances `*offset` by the number of bytes sent (returned). `Ok(0)` means
/// `*offset` is at or past the end of the file.
pub(crate) fn sendfile(
    out_fd: RawFd,
    in_fd: RawFd,
    offset: &mut u64,
    count: usize,
) -> io::Result<usize> {
    let mut off: libc::off_t = libc::off_t::try_from(*offset)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "file offset too large"))?;
    // SAFETY: `off` is a live, exclusively borrowed local for the duration of the call;
    // the kernel reads and updates it. Invalid fds yield EBADF/EINVAL, never UB.
    let n = unsafe { libc::sendfile(out_fd, in_fd, &mut off, count) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    *offset = off as u64;
    Ok(n as usize)
}

/// `preadv2(2)` with `RWF_NOWAIT`: copies only what the page cache holds. `WouldBlock`
/// (EAGAIN) when the first byte at `offset` is not resident; a short count when only a
/// prefix is; `Ok(0)` at end of file.
pub(crate) fn pread_nowait(fd: RawFd, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    let off = libc::off_t::try_from(offset)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "file offset too large"))?;
    let iov = libc::iovec { iov_base: buf.as_mut_ptr().cast(), iov_len: buf.len() };
    // SAFETY: `iov` describes `buf`, a live, exclusively borrowed buffer of `iov_len`
    // bytes; the kernel writes at most that many bytes into it. Bad fds yield EBADF.
    let n = unsafe { libc::preadv2(fd, &iov, 1, off, libc::RWF_NOWAIT) };
    if n < 0 { Err(io::Error::last_os_error()) } else { Ok(n as usize) }
}

/// `pread(2)` (may block on a cold page).
pub(crate) fn pread(fd: RawFd, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    let off = libc::off_t::try_from(offset)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "file offset too large"))?;
    // SAFETY: as for `pread_nowait`: `buf` is live and exclusively borrowed for the call.
    let n = unsafe { libc::pread(fd, buf.as_mut_ptr().cast(), buf.len(), off) };
    if n < 0 { Err(io::Error::last_os_error()) } else { Ok(n as usize) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::os::fd::AsRawFd;
    use std::os::unix::net::UnixStream;

    #[test]
    fn send_and_sendfile_move_exact_bytes() {
        let (a, mut b) = UnixStream::pair().unwrap();
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(b"0123456789abcdef").unwrap();
        assert_eq!(send(a.as_raw_fd(), b"head:", true).unwrap(), 5);
        let mut off = 4;
        let n = sendfile(a.as_raw_fd(), file.as_raw_fd(), &mut off, 6).unwrap();
        assert_eq!((n, off), (6, 10));
        let mut past = 16;
        assert_eq!(sendfile(a.as_raw_fd(), file.as_raw_fd(), &mut past, 4).unwrap(), 0);
        drop(a);
        let mut got = Vec::new();
        b.read_to_end(&mut got).unwrap();
        assert_eq!(got, b"head:456789");
    }

    #[test]
    fn nowait_and_plain_reads_copy_exact_bytes() {
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(b"0123456789abcdef").unwrap();
        let mut buf = [0u8; 6];
        // Just written: resident in the page cache.
        assert_eq!(pread_nowait(file.as_raw_fd(), &mut buf, 4).unwrap(), 6);
        assert_eq!(&buf, b"456789");
        assert_eq!(pread(file.as_raw_fd(), &mut buf[..2], 14).unwrap(), 2);
        assert_eq!(&buf[..2], b"ef");
        assert_eq!(pread_nowait(file.as_raw_fd(), &mut buf, 16).unwrap(), 0);
        assert!(pread_nowait(-1, &mut buf, 0).is_err());
    }

    #[test]
    fn send_to_closed_peer_is_an_error_not_a_signal() {
        let (a, b) = UnixStream::pair().unwrap();
        drop(b);
        let err = send(a.as_raw_fd(), b"x", false).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::BrokenPipe);
        assert!(send(-1, b"x", false).is_err());
    }
}
