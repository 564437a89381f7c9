//! Reading file bodies into memory for transports that cannot `sendfile(2)` (TLS,
//! HTTP/2), without blocking the worker: `preadv2(RWF_NOWAIT)` copies what the page
//! cache holds; bytes that are not resident are read through the range's own
//! [`FileRange::read_cold`] (the store's io_uring), so a cold disk read suspends only
//! the task that needs it.

use std::io;

use crate::response::FileRange;
use crate::sys;

/// Fills all of `dst` with the bytes at file offset `off` of `range`'s file. A file that
/// ends first fails with `UnexpectedEof` (the caller aborts the response).
pub(crate) async fn read_exact(range: &dyn FileRange, off: u64, dst: &mut [u8]) -> io::Result<()> {
    let fd = sys::range_fd(range);
    let mut done = 0usize;
    while done < dst.len() {
        let fd = fd.ok_or_else(sys::bad_fd)?;
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

fn short() -> io::Error {
    io::Error::new(io::ErrorKind::UnexpectedEof, "file shorter than the declared range")
}
