//! Positional file I/O off the event loop: one io_uring per worker thread, or a small
//! pool of I/O threads when io_uring is unavailable or `REEL_STORE_IO=threads`.
//!
//! The ring is created lazily per thread (thread-local) on first use inside a tokio
//! runtime. Completions are signalled through an eventfd registered with the ring and
//! awaited with [`tokio::io::unix::AsyncFd`], so a cold read suspends only the task that
//! issued it. Buffers move into the operation and come back with the result; if the
//! future is dropped early the buffer stays parked in the ring until the kernel is done
//! with it.
//!
//! We use the `io-uring` crate directly rather than tokio-uring: tokio-uring owns the
//! whole runtime (its own `start()`), while reel's workers run a plain tokio
//! current_thread runtime that also drives sockets; a bare ring plus an eventfd slots
//! into that runtime without changing it.
//!
//! The parts: [`Io`] here picks the backend per operation and falls back to the pool;
//! `ring` is a worker's io_uring, `pool` the I/O threads, and `residency` asks the page
//! cache what it holds (`cachestat(2)`, or `RWF_NOWAIT` probes) without reading.

mod pool;
mod residency;
mod ring;

use std::fs::File;
use std::io;
use std::os::fd::AsFd;
use std::os::unix::fs::FileExt;
use std::sync::Arc;

use bytes::Bytes;
use io_uring::IoUring;

use crate::IoMode;

pub(crate) use pool::Pool;
use pool::pool;
pub(crate) use residency::is_resident;
use residency::nowait_read;
#[cfg(test)]
use residency::{NO_CACHESTAT, cachestat_pages, page_size, probe_pages};
#[cfg(test)]
use ring::thread_has_ring;
use ring::{MAX_IOVECS, Ring};

/// Resolved I/O backend of a store, shared by all workers.
pub(crate) struct Io {
    uring: bool,
    pool: &'static Pool,
}

impl Io {
    /// Resolves `mode` (the `REEL_STORE_IO` environment variable wins) and logs the choice.
    /// `lane`: the disk's position in the store; each disk has its own I/O threads, so
    /// a slow disk does not hold up another's reads.
    pub(crate) fn new(mode: IoMode, lane: usize) -> io::Result<Io> {
        let env = std::env::var("REEL_STORE_IO").ok();
        let mode = match env.as_deref() {
            Some("threads") => IoMode::Threads,
            Some("uring") => IoMode::Uring,
            _ => mode,
        };
        let uring = match mode {
            IoMode::Threads => false,
            IoMode::Uring => {
                IoUring::new(8)?;
                true
            }
            IoMode::Auto => match IoUring::new(8) {
                Ok(_) => true,
                Err(e) => {
                    tracing::warn!(error = %e, "io_uring unavailable, using I/O thread pool");
                    false
                }
            },
        };
        tracing::info!(backend = if uring { "io_uring" } else { "threads" }, "store I/O backend");
        Ok(Io { uring, pool: pool(lane)? })
    }

    /// The disk's I/O thread pool (also runs its scans and checkpoints).
    pub(crate) fn pool(&self) -> &'static Pool {
        self.pool
    }

    /// Whether this store uses io_uring (per worker thread) for reads and writes.
    pub(crate) fn is_uring(&self) -> bool {
        self.uring
    }

    /// Reads up to `buf.len()` bytes at `off`; returns the count and the buffer.
    pub(crate) async fn read_at(
        &self,
        file: &Arc<File>,
        buf: Vec<u8>,
        off: u64,
    ) -> (io::Result<usize>, Vec<u8>) {
        if self.uring
            && let Some(ring) = Ring::current()
        {
            return ring.read_at(file.clone(), buf, off).await;
        }
        let file = file.clone();
        self.pool
            .run(move || {
                let mut buf = buf;
                let r = file.read_at(&mut buf, off);
                (r, buf)
            })
            .await
            .unwrap_or_else(|| (Err(pool_gone()), Vec::new()))
    }

    /// Writes `buf` at `off` (possibly partially); returns the count and the buffer.
    pub(crate) async fn write_at(
        &self,
        file: &Arc<File>,
        buf: Bytes,
        off: u64,
    ) -> (io::Result<usize>, Bytes) {
        if self.uring
            && let Some(ring) = Ring::current()
        {
            return ring.write_at(file.clone(), buf, off).await;
        }
        let file = file.clone();
        self.pool
            .run(move || {
                let r = file.write_at(&buf, off);
                (r, buf)
            })
            .await
            .unwrap_or_else(|| (Err(pool_gone()), Bytes::new()))
    }

    /// Writes `bufs` back to back at `off` in one call (`pwritev`, or an io_uring
    /// `WRITEV`), possibly partially; returns the count and the buffers. At most
    /// [`MAX_IOVECS`] buffers are written per call.
    pub(crate) async fn writev_at(
        &self,
        file: &Arc<File>,
        bufs: Vec<Bytes>,
        off: u64,
    ) -> (io::Result<usize>, Vec<Bytes>) {
        if self.uring
            && let Some(ring) = Ring::current()
        {
            return ring.writev_at(file.clone(), bufs, off).await;
        }
        let file = file.clone();
        self.pool
            .run(move || {
                let slices: Vec<io::IoSlice<'_>> =
                    bufs.iter().take(MAX_IOVECS).map(|b| io::IoSlice::new(b)).collect();
                let r = rustix::io::pwritev(&file, &slices, off).map_err(io::Error::from);
                drop(slices);
                (r, bufs)
            })
            .await
            .unwrap_or_else(|| (Err(pool_gone()), Vec::new()))
    }

    /// Writes all of `bufs`, back to back, at `off`: one gathered write per try,
    /// retrying short writes from where the kernel stopped.
    pub(crate) async fn write_all_vectored_at(
        &self,
        file: &Arc<File>,
        mut bufs: Vec<Bytes>,
        mut off: u64,
    ) -> io::Result<()> {
        bufs.retain(|b| !b.is_empty());
        while !bufs.is_empty() {
            let (r, b) = self.writev_at(file, bufs, off).await;
            bufs = b;
            match r {
                Ok(0) => return Err(io::Error::new(io::ErrorKind::WriteZero, "write returned 0")),
                Ok(n) => {
                    advance(&mut bufs, n)?;
                    off += n as u64;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Reads exactly `len` bytes at `off`. Short reads are retried; end of file before
    /// `len` bytes is reported as `UnexpectedEof`, never returned as data.
    pub(crate) async fn read_exact_at(
        &self,
        file: &Arc<File>,
        len: usize,
        off: u64,
    ) -> io::Result<Vec<u8>> {
        let mut out = vec![0u8; len];
        let done = nowait_read(file.as_fd(), &mut out, off);
        let mut done = done;
        while done < len {
            let chunk = vec![0u8; len - done];
            let (r, chunk) = self.read_at(file, chunk, off + done as u64).await;
            match r {
                Ok(0) => return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "short read")),
                Ok(n) => {
                    out[done..done + n].copy_from_slice(&chunk[..n]);
                    done += n;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(out)
    }

    /// Writes all of `buf` at `off`, retrying short writes.
    pub(crate) async fn write_all_at(
        &self,
        file: &Arc<File>,
        mut buf: Bytes,
        mut off: u64,
    ) -> io::Result<()> {
        while !buf.is_empty() {
            let (r, b) = self.write_at(file, buf, off).await;
            buf = b;
            match r {
                Ok(0) => return Err(io::Error::new(io::ErrorKind::WriteZero, "write returned 0")),
                Ok(n) if n <= buf.len() => {
                    let _ = buf.split_to(n);
                    off += n as u64;
                }
                Ok(_) => return Err(io::Error::other("write returned more than requested")),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

/// Drops the first `n` bytes of `bufs` (bytes the kernel wrote).
fn advance(bufs: &mut Vec<Bytes>, mut n: usize) -> io::Result<()> {
    let mut whole = 0;
    for b in bufs.iter_mut() {
        if n == 0 {
            break;
        }
        if n >= b.len() {
            n -= b.len();
            whole += 1;
        } else {
            let _ = b.split_to(n);
            n = 0;
        }
    }
    bufs.drain(..whole);
    if n > 0 {
        return Err(io::Error::other("write returned more than requested"));
    }
    Ok(())
}

fn pool_gone() -> io::Error {
    io::Error::other("store I/O thread pool is gone")
}

#[cfg(test)]
mod tests;
