//! Reading file bodies into memory for transports that cannot `sendfile(2)` (TLS,
//! HTTP/2), without blocking the worker: `preadv2(RWF_NOWAIT)` copies what the page
//! cache holds; bytes that are not resident are read through the range's own
//! [`FileRange::read_cold`] (the store's io_uring), so a cold disk read suspends only
//! the task that needs it.

use std::io::{self, IoSliceMut};

use crate::response::FileRange;
use crate::sys;

/// Fills all of `dst` with the bytes at file offset `off` of `range`'s file. A file that
/// ends first fails with `UnexpectedEof` (the caller aborts the response).
pub(crate) async fn read_exact(range: &dyn FileRange, off: u64, dst: &mut [u8]) -> io::Result<()> {
    let fd = range.fd();
    let mut done = 0usize;
    while done < dst.len() {
        let at = off + done as u64;
        match sys::pread_nowait(fd, &mut dst[done..], at) {
            Ok(0) => return Err(short()),
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                let want = dst.len() - done;
                let got = range.read_cold(at, want).await?;
                if got.is_empty() {
                    return Err(short());
                }
                let n = got.len().min(want);
                dst[done..done + n].copy_from_slice(&got[..n]);
                done += n;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if e.raw_os_error() == Some(libc::EOPNOTSUPP) => {
                // A file system without RWF_NOWAIT support: a plain read.
                match sys::pread(fd, &mut dst[done..], at)? {
                    0 => return Err(short()),
                    n => done += n,
                }
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Fills each buffer of `bufs` in turn with the bytes from file offset `off` of `range`'s
/// file on, as [`read_exact`] would one after the other; what the page cache holds is
/// read by one `preadv2` for all of them.
pub(crate) async fn read_exact_bufs(
    range: &dyn FileRange,
    off: u64,
    bufs: &mut [&mut [u8]],
) -> io::Result<()> {
    let mut done = 0usize;
    if bufs.len() > 1 {
        let fd = range.fd();
        let mut iov: [IoSliceMut<'_>; MAX_BUFS] = std::array::from_fn(|_| IoSliceMut::new(&mut []));
        let n = bufs.len().min(MAX_BUFS);
        for (slot, b) in iov.iter_mut().zip(bufs.iter_mut()) {
            *slot = IoSliceMut::new(b);
        }
        // Anything short of all of it (cold pages, EINTR, no RWF_NOWAIT) is finished below.
        done = sys::preadv_nowait(fd, &mut iov[..n], off).unwrap_or(0);
    }
    let mut at = 0usize;
    for b in bufs.iter_mut() {
        let len = b.len();
        let skip = done.saturating_sub(at).min(len);
        if skip < len {
            read_exact(range, off + (at + skip) as u64, &mut b[skip..]).await?;
        }
        at += len;
    }
    Ok(())
}

/// Most buffers [`read_exact_bufs`] reads with one call.
pub(crate) const MAX_BUFS: usize = 8;

fn short() -> io::Error {
    io::Error::new(io::ErrorKind::UnexpectedEof, "file shorter than the declared range")
}
