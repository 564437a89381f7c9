//! Write faults caused for real: the store lives on a small tmpfs whose preallocated
//! volume pages are punched out and whose free space is taken by another file, so the
//! store's writes fail with a genuine ENOSPC from the kernel. Fills must admit nothing
//! but still deliver every byte to their readers (they go on in memory), the errors must
//! be counted and their log rate-limited, objects already stored must keep being served
//! byte-exact, and writes must work again once space is freed.
//!
//! Needs `mount` (the tests run as root); where mounting is not permitted the test says
//! why and returns early.

use std::fmt::Debug;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use bytes::Bytes;
use reel_store::{Committed, IoMode, Lookup, Store};
use reel_test_support::skip;

use crate::{VOL, body, both, get, open, put, rt};

const PAGE: u64 = 4096;
/// Bytes past the last stored object left allocated in its volume, so the first fill
/// after the fault writes its header and first chunk and then fails mid-stream.
const SLACK: u64 = 64 * 1024;
/// The commit trailer after a body (`docs/store-format.md`).
const TRAILER_LEN: u64 = 40;
/// Message of the store's rate-limited write-error log line.
const WRITE_ERROR_MSG: &str = "store write failed";
/// The store logs write errors at most once per this many seconds.
const LOG_INTERVAL_SECS: u64 = 10;

/// A tmpfs mounted on a directory; lazily unmounted on drop (also when a test panics),
/// so open volume files cannot keep it busy.
pub(crate) struct Tmpfs(PathBuf);

impl Tmpfs {
    /// Mounts a 16 MiB tmpfs on `dir`, or says why it cannot and returns None.
    pub(crate) fn mount(dir: &Path) -> Option<Tmpfs> {
        match Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=16m", "tmpfs"])
            .arg(dir)
            .output()
        {
            Ok(o) if o.status.success() => Some(Tmpfs(dir.to_owned())),
            Ok(o) => {
                skip(&format!(
                    "cannot mount a tmpfs ({}): {}",
                    o.status,
                    String::from_utf8_lossy(&o.stderr).trim()
                ));
                None
            }
            Err(e) => {
                skip(&format!("cannot run mount: {e}"));
                None
            }
        }
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// Gives `off..off + len` of `f` back to the file system: writes there need new pages.
pub(crate) fn punch_hole(f: &File, off: u64, len: u64) {
    use rustix::fs::FallocateFlags;
    let mode = FallocateFlags::PUNCH_HOLE | FallocateFlags::KEEP_SIZE;
    rustix::fs::fallocate(f, mode, off, len).unwrap_or_else(|e| panic!("punch hole: {e}"));
}

/// Appends to `path` until the file system is full (ENOSPC). Returns the bytes written.
pub(crate) fn fill_until_enospc(path: &Path) -> u64 {
    let mut f = OpenOptions::new().create(true).append(true).open(path).expect("open filler");
    let buf = vec![0xa5u8; 64 * 1024];
    let mut total = 0u64;
    loop {
        match f.write(&buf) {
            Ok(0) => panic!("write returned 0 before ENOSPC"),
            Ok(n) => total += n as u64,
            Err(e) if e.raw_os_error() == Some(libc::ENOSPC) => return total,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => panic!("filler write failed with {e}, expected ENOSPC"),
        }
    }
}

/// The volume file of `dir` whose inode is `ino`.
fn volume_with_inode(dir: &Path, ino: u64) -> PathBuf {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| std::fs::metadata(p).is_ok_and(|m| m.ino() == ino))
        .expect("volume file of the stored objects")
}

/// Asserts that `key` is served with exactly `meta` and `data` (without printing bodies).
async fn expect_object(s: &Arc<Store>, key: &[u8], meta: &[u8], data: &[u8]) {
    let key_s = String::from_utf8_lossy(key);
    let (m, b) = get(s, key).await.unwrap_or_else(|| panic!("{key_s} is not served"));
    assert_eq!(String::from_utf8_lossy(&m), String::from_utf8_lossy(meta), "metadata of {key_s}");
    assert!(b == data, "body of {key_s} differs ({} bytes, expected {})", b.len(), data.len());
}

/// Asserts that `key` is served with exactly the body `data`.
async fn expect_body(s: &Arc<Store>, key: &[u8], data: &[u8]) {
    let key_s = String::from_utf8_lossy(key);
    let (_, b) = get(s, key).await.unwrap_or_else(|| panic!("{key_s} is not served"));
    assert!(b == data, "body of {key_s} differs ({} bytes, expected {})", b.len(), data.len());
}

/// Counts the store's write-error log lines (events whose message starts with
/// [`WRITE_ERROR_MSG`]) emitted on the thread where it is the default subscriber.
struct CountWriteErrorLogs(Arc<AtomicUsize>);

struct Message(String);

impl tracing::field::Visit for Message {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn Debug) {
        if field.name() == "message" {
            self.0 = format!("{value:?}");
        }
    }
}

impl tracing::Subscriber for CountWriteErrorLogs {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        let mut m = Message(String::new());
        event.record(&mut m);
        if m.0.starts_with(WRITE_ERROR_MSG) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

/// The fault tests run one at a time: `tracing` caches per call site whether anyone
/// listens, and a first write-error log from another thread racing with this thread's
/// `set_default` can cache "nobody", so the counted log line would never arrive.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn write_faults(io: IoMode) {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let Some(_tmpfs) = Tmpfs::mount(dir.path()) else { return };
    let logs = Arc::new(AtomicUsize::new(0));
    let _log_guard = tracing::subscriber::set_default(CountWriteErrorLogs(logs.clone()));
    let started = Instant::now();
    let filler = dir.path().join("filler");
    let s = open(dir.path(), 4, io);
    let (a, b) = (body(1, 100_000), body(2, 150_000));
    rt(async {
        put(&s, b"a", b"meta-a", &a, true).await;
        put(&s, b"b", b"meta-b", &b, false).await;

        // Punch out every preallocated page the next writes would use: all of every
        // volume except its header page, and in the volume holding "a" and "b" all but
        // those objects plus SLACK bytes. Then take the freed space with another file.
        let ino_of = async |k: &[u8]| {
            let Some(Lookup::Hit(h)) = s.lookup(k).await else { panic!("stored") };
            let r = h.file_range(0, h.body_len()).unwrap();
            let ino = File::from(r.fd.try_clone_to_owned().unwrap()).metadata().unwrap().ino();
            (ino, (r.offset + r.len + TRAILER_LEN).div_ceil(PAGE) * PAGE)
        };
        let (ino, record_end) = ino_of(b"b").await;
        assert_eq!(ino_of(b"a").await.0, ino, "a and b share the first volume");
        let used_vol = volume_with_inode(dir.path(), ino);
        let vols: Vec<PathBuf> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "dat"))
            .collect();
        assert_eq!(vols.len(), 4);
        for v in &vols {
            let f = OpenOptions::new().write(true).open(v).unwrap();
            let keep = if *v == used_vol { record_end + SLACK } else { PAGE };
            punch_hole(&f, keep, VOL - keep);
        }
        assert!(fill_until_enospc(&filler) > 0);
        let before = s.stats();
        let mut failed = 0;

        // 1. A fill that fails mid-stream: the header and first chunk land in the slack,
        // the next chunk hits ENOSPC. The fill goes on in memory (what it wrote is copied
        // there): a reader following it gets every byte, and nothing is admitted.
        let data = body(3, 300_000);
        let mut w = s.begin_fill(b"mid", Bytes::from_static(b"m"), Some(300_000)).await.unwrap();
        w.append(Bytes::copy_from_slice(&data[..50_000])).await.expect("first chunk");
        w.flush().await.expect("the first chunk fits the slack");
        let Some(Lookup::Filling(mut f)) = s.lookup(b"mid").await else { panic!("mid is filling") };
        assert_eq!(f.wait_for(50_000).await.unwrap().available, 50_000);
        for c in data[50_000..].chunks(50_000) {
            w.append(Bytes::copy_from_slice(c)).await.expect("delivered past the write error");
        }
        assert_eq!(w.commit().await.unwrap(), Committed::NotStored);
        failed += 1;
        let st = f.wait_for(300_000).await.expect("the reader is not aborted");
        assert_eq!(st.final_len, Some(300_000));
        assert_eq!(f.read(0, 300_000).await.unwrap(), &data[..], "every byte, in order");
        let r = f.file_range(100_000, 50_000).unwrap();
        let mut buf = vec![0u8; 50_000];
        File::from(r.fd.try_clone_to_owned().unwrap()).read_exact_at(&mut buf, r.offset).unwrap();
        assert_eq!(buf, &data[100_000..150_000], "sendfile ranges of the memory file");
        assert!(s.lookup(b"mid").await.is_none(), "no partial object");
        drop(f);

        // 2. A fill whose very first write (its header) fails.
        let mut w = s.begin_fill(b"new", Bytes::from_static(b"m"), Some(20_000)).await.unwrap();
        let Some(Lookup::Filling(mut f)) = s.lookup(b"new").await else { panic!("filling") };
        w.append(Bytes::from(body(4, 20_000))).await.expect("delivered");
        assert_eq!(w.commit().await.unwrap(), Committed::NotStored);
        failed += 1;
        assert_eq!(f.wait_for(20_000).await.unwrap().final_len, Some(20_000));
        assert_eq!(f.read(0, 20_000).await.unwrap(), &body(4, 20_000)[..]);
        assert!(s.lookup(b"new").await.is_none());

        // 3. Of unknown length (a fresh reservation, possibly in the next volume).
        let mut w = s.begin_fill(b"chunked", Bytes::from_static(b"m"), None).await.unwrap();
        w.append(Bytes::from(body(5, 30_000))).await.expect("delivered");
        assert_eq!(w.commit().await.unwrap(), Committed::NotStored);
        failed += 1;
        assert!(s.lookup(b"chunked").await.is_none());

        // 4. An empty body: the only write is at commit.
        let w = s.begin_fill(b"empty", Bytes::from_static(b"m"), Some(0)).await.unwrap();
        assert_eq!(w.commit().await.unwrap(), Committed::NotStored);
        failed += 1;
        assert!(s.lookup(b"empty").await.is_none());

        // 5. A fill replacing a stored object: the old object comes back.
        let mut w = s.begin_fill(b"a", Bytes::from_static(b"meta-a2"), Some(10_000)).await.unwrap();
        assert!(s.lookup(b"a").await.is_some_and(|l| matches!(l, Lookup::Filling(_))));
        w.append(Bytes::from(body(6, 10_000))).await.expect("delivered");
        assert_eq!(w.commit().await.unwrap(), Committed::NotStored);
        failed += 1;

        let st = s.stats();
        assert_eq!(st.write_errors, before.write_errors + failed, "{st:?}");
        assert_eq!(st.rescued_fills, before.rescued_fills + failed, "{st:?}");
        assert_eq!(st.not_stored, before.not_stored + failed, "{st:?}");
        assert_eq!(st.objects, 2, "nothing admitted, nothing lost: {st:?}");
        assert_eq!(st.quarantined_volumes, 0, "{st:?}");

        // Serving goes on, byte-exact, through the store and through the sendfile range.
        expect_object(&s, b"a", b"meta-a", &a).await;
        expect_object(&s, b"b", b"meta-b", &b).await;
        let Some(Lookup::Hit(ha)) = s.lookup(b"a").await else { panic!("a is served") };
        let r = ha.file_range(0, ha.body_len()).unwrap();
        let mut buf = vec![0u8; r.len as usize];
        File::from(r.fd.try_clone_to_owned().unwrap()).read_exact_at(&mut buf, r.offset).unwrap();
        assert_eq!(buf, a);
        drop(ha);

        // Space is back: fills succeed again, including the keys that failed.
        std::fs::remove_file(&filler).unwrap();
        put(&s, b"c", b"meta-c", &body(7, 200_000), true).await;
        put(&s, b"mid", b"m", &body(3, 300_000), true).await;
        expect_object(&s, b"c", b"meta-c", &body(7, 200_000)).await;
        expect_body(&s, b"mid", &body(3, 300_000)).await;
        assert_eq!(s.stats().write_errors, before.write_errors + failed);
    });

    // Logged at most once per interval, and at least once.
    let n = logs.load(Ordering::SeqCst) as u64;
    let intervals = started.elapsed().as_secs() / LOG_INTERVAL_SECS;
    assert!(n >= 1 && n <= 1 + intervals, "{n} write-error log lines in {intervals} intervals");

    // The failed fills left nothing a restart could resurrect.
    drop(s);
    let s: Arc<Store> = open(dir.path(), 4, io);
    rt(async {
        expect_object(&s, b"a", b"meta-a", &a).await;
        expect_object(&s, b"b", b"meta-b", &b).await;
        expect_body(&s, b"c", &body(7, 200_000)).await;
        expect_body(&s, b"mid", &body(3, 300_000)).await;
        for k in [&b"new"[..], b"chunked", b"empty"] {
            assert!(s.lookup(k).await.is_none(), "{}", String::from_utf8_lossy(k));
        }
        assert_eq!(s.stats().objects, 4, "{:?}", s.stats());
    });
}
both!(write_errors_refuse_the_object_and_serving_goes_on, write_faults);

/// The volume file a fill that has not written yet will write into.
async fn volume_of_fill(s: &Arc<Store>, dir: &Path, key: &[u8]) -> PathBuf {
    let Some(Lookup::Filling(f)) = s.lookup(key).await else { panic!("filling") };
    let r = f.file_range(0, 0).unwrap();
    let ino = File::from(r.fd.try_clone_to_owned().unwrap()).metadata().unwrap().ino();
    volume_with_inode(dir, ino)
}

fn header_faults(io: IoMode) {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let Some(_tmpfs) = Tmpfs::mount(dir.path()) else { return };
    let filler = dir.path().join("filler");
    // Five volumes: with two quarantined, one is still free after the next one
    // starts, so no reclaim evicts "b" during the test.
    let s = open(dir.path(), 5, io);
    // "b" is sized to end exactly at the end of the first volume (each record here is
    // a 4 KiB header page, the body and the trailer, 4 KiB aligned), so every later
    // record starts a new volume and first writes that volume's header.
    let b_len = VOL - PAGE - (PAGE + 102_400) - PAGE - TRAILER_LEN;
    let (a, b) = (body(1, 100_000), body(2, b_len as usize));
    rt(async {
        put(&s, b"a", b"meta-a", &a, true).await;
        put(&s, b"b", b"meta-b", &b, true).await;
        let Some(Lookup::Hit(hb)) = s.lookup(b"b").await else { panic!("b is stored") };
        let r = hb.file_range(0, hb.body_len()).unwrap();
        assert_eq!(r.offset + r.len + TRAILER_LEN, VOL, "b fills its volume");
        drop(hb);

        // The next volume loses its header page (only that: the pages its records
        // would use stay allocated) and the disk is full: its header write fails, the
        // volume is quarantined, and the fill in it fails although the writes of its
        // own record would succeed. Nothing is admitted.
        let mut w = s.begin_fill(b"big", Bytes::new(), Some(500_000)).await.unwrap();
        let p = volume_of_fill(&s, dir.path(), b"big").await;
        punch_hole(&OpenOptions::new().write(true).open(&p).unwrap(), 0, PAGE);
        fill_until_enospc(&filler);
        let mut failed = None;
        for c in body(3, 500_000).chunks(100_000) {
            if let Err(e) = w.append(Bytes::copy_from_slice(c)).await {
                failed = Some(e);
                break;
            }
        }
        assert!(failed.is_none(), "delivered: {failed:?}");
        assert_eq!(
            w.commit().await.unwrap(),
            Committed::NotStored,
            "a fill in a volume without a header is not admitted"
        );
        assert!(s.lookup(b"big").await.is_none());
        let st = s.stats();
        assert_eq!((st.objects, st.write_errors, st.quarantined_volumes), (2, 1, 1), "{st:?}");

        // A metadata update (which, unlike a fill or a removal, does not run the
        // store's pending work first) goes to the active volume, whose header is still
        // pending and fails too; its record must land where a restart finds it, so it
        // moves on to an intact volume. The fill that opened the failed volume fails.
        let mut w = s.begin_fill(b"probe", Bytes::new(), Some(100_000)).await.unwrap();
        let q = volume_of_fill(&s, dir.path(), b"probe").await;
        assert_ne!(p, q);
        punch_hole(&OpenOptions::new().write(true).open(&q).unwrap(), 0, PAGE);
        fill_until_enospc(&filler);
        assert!(s.update_meta(b"b", Bytes::from_static(b"meta-b2")).await.expect("meta written"));
        let st = s.stats();
        assert_eq!((st.objects, st.write_errors, st.quarantined_volumes), (2, 2, 2), "{st:?}");
        w.append(Bytes::from(body(5, 100_000))).await.expect("delivered");
        assert_eq!(w.commit().await.unwrap(), Committed::NotStored);
        assert!(s.lookup(b"probe").await.is_none());
        assert!(s.remove(b"a").await.expect("the tombstone is written"));
        assert_eq!(s.stats().objects, 1);

        // Serving goes on, and once space is back fills succeed in the intact volume.
        expect_object(&s, b"b", b"meta-b2", &b).await;
        std::fs::remove_file(&filler).unwrap();
        put(&s, b"c", b"meta-c", &body(4, 300_000), true).await;
        expect_body(&s, b"c", &body(4, 300_000)).await;
        assert_eq!(s.stats().objects, 2);
    });
    drop(s);
    let s = open(dir.path(), 5, io);
    rt(async {
        assert!(s.lookup(b"a").await.is_none(), "a removed object stays removed after a restart");
        assert!(s.lookup(b"big").await.is_none() && s.lookup(b"probe").await.is_none());
        // The metadata update was persisted.
        expect_object(&s, b"b", b"meta-b2", &b).await;
        expect_body(&s, b"c", &body(4, 300_000)).await;
        assert_eq!(s.stats().objects, 2, "{:?}", s.stats());
    });
}
both!(a_volume_header_that_cannot_be_written_admits_nothing, header_faults);
