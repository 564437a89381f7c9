//! The syscalls the response path needs and std/tokio do not expose, through `rustix`:
//! `send(2)` with `MSG_MORE`, `sendfile(2)`, and `preadv2(2)` with `RWF_NOWAIT`. Every
//! call takes a `BorrowedFd`: a [`FileRange`](crate::FileRange) lends its file's, so no
//! descriptor number is taken on trust.

use std::io::{self, IoSliceMut};
use std::os::fd::BorrowedFd;

use rustix::io::ReadWriteFlags;
use rustix::net::SendFlags;

/// `send(2)` with `MSG_NOSIGNAL` (a reset peer yields `EPIPE`, never `SIGPIPE`), plus
/// `MSG_MORE` when `more` is set so a head followed by a `sendfile` leaves in full segments.
pub(crate) fn send(fd: BorrowedFd<'_>, buf: &[u8], more: bool) -> io::Result<usize> {
    let mut flags = SendFlags::NOSIGNAL | SendFlags::DONTWAIT;
    if more {
        flags |= SendFlags::MORE;
    }
    Ok(rustix::net::send(fd, buf, flags)?)
}

/// `sendfile(2)` of up to `count` bytes from `in_fd` at `*offset` to socket `out_fd`;
/// `*offset` advances by the number of bytes sent (returned), and only on success.
/// `Ok(0)` means `*offset` is at or past the end of the file.
pub(crate) fn sendfile(
    out_fd: BorrowedFd<'_>,
    in_fd: BorrowedFd<'_>,
    offset: &mut u64,
    count: usize,
) -> io::Result<usize> {
    let mut off = check_offset(*offset)?;
    let n = rustix::fs::sendfile(out_fd, in_fd, Some(&mut off), count)?;
    *offset = off;
    Ok(n)
}

/// `preadv2(2)` with `RWF_NOWAIT`: copies only what the page cache holds. `WouldBlock`
/// (EAGAIN) when the first byte at `offset` is not resident; a short count when only a
/// prefix is; `Ok(0)` at end of file.
pub(crate) fn pread_nowait(fd: BorrowedFd<'_>, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    let off = check_offset(offset)?;
    Ok(rustix::io::preadv2(fd, &mut [IoSliceMut::new(buf)], off, ReadWriteFlags::NOWAIT)?)
}

/// [`pread_nowait`] into several buffers in turn (one syscall): what the page cache holds
/// from `offset` on, up to their total length.
pub(crate) fn preadv_nowait(
    fd: BorrowedFd<'_>,
    bufs: &mut [IoSliceMut<'_>],
    offset: u64,
) -> io::Result<usize> {
    let off = check_offset(offset)?;
    Ok(rustix::io::preadv2(fd, bufs, off, ReadWriteFlags::NOWAIT)?)
}

/// `pread(2)` (may block on a cold page).
pub(crate) fn pread(fd: BorrowedFd<'_>, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    let off = check_offset(offset)?;
    Ok(rustix::io::pread(fd, buf, off)?)
}

/// `offset` if the kernel's signed `loff_t` holds it. rustix would pass a larger one
/// through as negative (EINVAL, or for `preadv2` at `u64::MAX` the current file position).
fn check_offset(offset: u64) -> io::Result<u64> {
    if offset > i64::MAX as u64 {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "file offset too large"));
    }
    Ok(offset)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::os::fd::AsFd;
    use std::os::unix::net::UnixStream;

    #[test]
    fn send_and_sendfile_move_exact_bytes() {
        let (a, mut b) = UnixStream::pair().unwrap();
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(b"0123456789abcdef").unwrap();
        assert_eq!(send(a.as_fd(), b"head:", true).unwrap(), 5);
        let mut off = 4;
        let n = sendfile(a.as_fd(), file.as_fd(), &mut off, 6).unwrap();
        assert_eq!((n, off), (6, 10));
        let mut past = 16;
        assert_eq!(sendfile(a.as_fd(), file.as_fd(), &mut past, 4).unwrap(), 0);
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
        assert_eq!(pread_nowait(file.as_fd(), &mut buf, 4).unwrap(), 6);
        assert_eq!(&buf, b"456789");
        assert_eq!(pread(file.as_fd(), &mut buf[..2], 14).unwrap(), 2);
        assert_eq!(&buf[..2], b"ef");
        assert_eq!(pread_nowait(file.as_fd(), &mut buf, 16).unwrap(), 0);
        assert!(pread_nowait(file.as_fd(), &mut buf, u64::MAX).is_err());
    }

    #[test]
    fn send_to_closed_peer_is_an_error_not_a_signal() {
        let (a, b) = UnixStream::pair().unwrap();
        drop(b);
        let err = send(a.as_fd(), b"x", false).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::BrokenPipe);
        // Not a socket.
        assert!(send(tempfile::tempfile().unwrap().as_fd(), b"x", false).is_err());
    }
}
