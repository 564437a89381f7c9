//! Round trips of both I/O backends.

use std::future::poll_fn;
use std::os::fd::BorrowedFd;
use std::task::Poll;

use super::*;
use rustix::fs::Advice;

async fn round_trip(mode: IoMode) {
    let dir = tempfile::tempdir().unwrap();
    let f = Arc::new(
        std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(dir.path().join("f"))
            .unwrap(),
    );
    let io = Io::new(mode, 0).unwrap();
    io.write_all_at(&f, Bytes::from(vec![7u8; 100_000]), 4096).await.unwrap();
    let got = io.read_exact_at(&f, 100_000, 4096).await.unwrap();
    assert!(got.iter().all(|&b| b == 7));
    // Past the end of file: must be an error, never a short success.
    let err = io.read_exact_at(&f, 10, 104_090).await.unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof);
    assert!(is_resident(f.as_fd(), 4096, 100_000));
    if mode == IoMode::Uring {
        assert!(thread_has_ring());
    }
}

#[tokio::test]
#[cfg_attr(reel_no_uring, ignore = "io_uring is unavailable on this machine")]
async fn uring_round_trip_and_short_read_is_error() {
    round_trip(IoMode::Uring).await;
}

#[tokio::test]
async fn threads_round_trip_and_short_read_is_error() {
    round_trip(IoMode::Threads).await;
}

#[tokio::test]
#[cfg_attr(reel_no_uring, ignore = "io_uring is unavailable on this machine")]
async fn dropped_uring_read_parks_buffer_until_completion() {
    let dir = tempfile::tempdir().unwrap();
    let f = Arc::new(File::create(dir.path().join("f")).unwrap());
    let io = Io::new(IoMode::Uring, 0).unwrap();
    let f2 = Arc::new(File::open(dir.path().join("f")).unwrap());
    drop(f);
    {
        let fut = io.read_at(&f2, vec![0u8; 4096], 0);
        let mut fut = std::pin::pin!(fut);
        let _ = futures_poll_once(fut.as_mut()).await;
    }
    let (r, _) = io.read_at(&f2, vec![0u8; 16], 0).await;
    assert_eq!(r.unwrap(), 0);
}

/// Residency of ranges of a file of which only some pages are in the page cache:
/// written, synced and evicted with `posix_fadvise(DONTNEED)` (the test does that;
/// the store never does). The file lives next to the test binary, on the build's
/// disk: tmpfs could not evict it. Pages never written are no good for this: a
/// `RWF_NOWAIT` read of a hole is served by zero-filling without I/O.
#[test]
fn residency_counts_cached_pages_without_reading() {
    let exe = std::env::current_exe().unwrap();
    let dir = tempfile::tempdir_in(exe.parent().unwrap()).unwrap();
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(dir.path().join("f"))
        .unwrap();
    let ps = page_size();
    f.write_all_at(&vec![7u8; 256 * ps as usize], 0).unwrap();
    f.sync_all().unwrap();
    let fd = f.as_fd();
    let advise = |from: u64, to: u64, advice| {
        let len = std::num::NonZeroU64::new((to - from) * ps);
        rustix::fs::fadvise(fd, from * ps, len, advice).unwrap();
    };
    advise(0, 256, Advice::DontNeed);
    // No readahead: the reads below bring in exactly their pages.
    advise(0, 256, Advice::Random);
    let cached = |from: u64, to: u64| {
        let mut b = vec![0u8; ((to - from) * ps) as usize];
        f.read_exact_at(&mut b, from * ps).unwrap();
    };
    cached(64, 80);
    cached(81, 97);
    assert!(
        !NO_CACHESTAT.load(std::sync::atomic::Ordering::Relaxed)
            || cachestat_pages(fd, 0, 256 * ps).is_some(),
    );
    if let Some(n) = cachestat_pages(fd, 0, 256 * ps) {
        assert_eq!(n, 32, "the file system kept evicted pages (tmpfs?)");
        assert_eq!(cachestat_pages(fd, 64 * ps, 33 * ps), Some(32));
    }
    let (start, end) = (64 * ps, 80 * ps);
    // cachestat counts every page: one missing in the middle is seen (the probe, a
    // sample, may miss it).
    assert!(!is_resident(fd, start, 33 * ps), "page 80 is not cached");
    // A `RWF_NOWAIT` read that misses starts reading its page, and on a loaded machine
    // that read can finish before the probe looks (the probe is a sample; its mistake
    // costs a short wait, never wrong bytes). So "not resident" is asked with the pages
    // outside the cached ranges evicted again, a few times: a probe that cannot see an
    // evicted page fails every time.
    let evicted = |resident: fn(BorrowedFd<'_>, u64, u64) -> bool, off: u64, len: u64| {
        (0..20).any(|_| {
            advise(0, 64, Advice::DontNeed);
            advise(80, 81, Advice::DontNeed);
            advise(97, 256, Advice::DontNeed);
            let gone = !resident(fd, off, len);
            if !gone {
                // Let the read a missed probe started finish before evicting again.
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            gone
        })
    };
    for resident in [is_resident, probe_pages] {
        assert!(resident(fd, start, end - start));
        assert!(resident(fd, start + 100, 3 * ps), "unaligned inside");
        assert!(evicted(resident, start - 1, 2), "starts in an evicted page");
        assert!(evicted(resident, end - 1, 2), "ends in an evicted page");
        assert!(evicted(resident, 0, 256 * ps));
        assert!(evicted(resident, 200 * ps, 10 * ps));
        assert!(resident(fd, 0, 0), "an empty range needs nothing");
    }
}

async fn futures_poll_once<F: std::future::Future + Unpin>(mut f: F) -> Option<F::Output> {
    poll_fn(|cx| match std::pin::Pin::new(&mut f).poll(cx) {
        Poll::Ready(v) => Poll::Ready(Some(v)),
        Poll::Pending => Poll::Ready(None),
    })
    .await
}

/// A gathered write of more buffers than one call passes (several calls, each resuming
/// where the kernel stopped) lands byte-exact, on both backends.
async fn gathered_write(mode: IoMode) {
    let dir = tempfile::tempdir().unwrap();
    let f = Arc::new(
        std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(dir.path().join("f"))
            .unwrap(),
    );
    let io = Io::new(mode, 0).unwrap();
    let bufs: Vec<Bytes> = (0..MAX_IOVECS * 2 + 7)
        .map(|i| Bytes::from(vec![(i % 251) as u8; 1 + i % 3000]))
        .chain([Bytes::new()])
        .collect();
    let want: Vec<u8> = bufs.iter().flat_map(|b| b.iter().copied()).collect();
    io.write_all_vectored_at(&f, bufs, 8192).await.unwrap();
    let got = io.read_exact_at(&f, want.len(), 8192).await.unwrap();
    assert_eq!(got, want);
}

#[tokio::test]
#[cfg_attr(reel_no_uring, ignore = "io_uring is unavailable on this machine")]
async fn uring_gathered_write_is_byte_exact() {
    gathered_write(IoMode::Uring).await;
}

#[tokio::test]
async fn threads_gathered_write_is_byte_exact() {
    gathered_write(IoMode::Threads).await;
}

#[test]
fn advance_drops_written_bytes_across_buffers() {
    let mut v =
        vec![Bytes::from_static(b"abc"), Bytes::from_static(b"de"), Bytes::from_static(b"f")];
    advance(&mut v, 4).unwrap();
    assert_eq!(v, vec![Bytes::from_static(b"e"), Bytes::from_static(b"f")]);
    assert!(advance(&mut v, 3).is_err());
}
