//! The stored-object responses: responses built from stored metadata ([`Prepared`], decoded
//! once per worker in [`MetaCache`]), and bodies streamed out of the store.
//!
//! A complete hit whose pages are in the page cache leaves as one `sendfile(2)` from the
//! store's volume file ([`LeasedRange`] keeps the volume's lease alive until the codec has
//! sent it). An object still being filled, or a cold one, is streamed by a small task on
//! the worker: file ranges as bytes become durable, or bytes read through the store's
//! io_uring when the pages are not resident, so a cold disk read never blocks the worker.
//! Over TLS and HTTP/2 the codec reads file ranges itself; pages it finds cold are read
//! through the store as well ([`LeasedRange`]'s `read_cold`).

use std::any::Any;
use std::cell::{Cell, RefCell};
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, BorrowedFd};
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::{BufMut, Bytes, BytesMut};
use reel_http::{Chunk, ColdRead, FileRange, Request, Response};
use reel_store::{Filling, Hit};
use tokio::sync::mpsc;

use reel_config::Coding;

use crate::path::worker::encoded::Rep;
use crate::policy::HeaderLookup;
use crate::policy::accept_encoding::{listed, transformable_type};
use crate::policy::meta::StoredMeta;

/// Read size for cold objects and the largest file range handed to the codec at once.
pub const STREAM_CHUNK: u64 = 256 * 1024;
/// How long a residency probe of an object is trusted before probing again. `cachestat(2)`
/// walks the range's pages: about 15 µs for 2 MiB, 2 µs for 256 KiB on the development VM,
/// some 4 % of a hit's CPU if paid on every hit. Trusting a probe for a second cut the
/// probes from 1.1 to 0.3 per hit with 400 distinct 2 MiB objects hit twice a second each
/// (benches/README.md, "Many distinct segments"), and to one per second on a hot object.
const RESIDENT_TRUST: Duration = Duration::from_secs(1);

/// The request's header section, for the policy functions.
pub struct ReqHeaders<'a>(pub &'a Request);

impl HeaderLookup for ReqHeaders<'_> {
    fn get_all<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a [u8]> + 'a {
        self.0.headers().filter(move |(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v)
    }
}

/// Unix seconds now.
pub fn unix_now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

/// Stored metadata decoded once per worker and ready to answer with: the stored header
/// section pre-encoded as one block, so a hit copies no header.
pub struct Prepared {
    /// The decoded metadata.
    pub meta: StoredMeta,
    /// `name: value\r\n` lines of the stored headers, minus those the codec generates
    /// and `Date`.
    pub raw: Bytes,
    /// The stored `Date`, sent as it is (only `Age` is added, RFC 9111 4).
    date: Option<Bytes>,
    /// When this worker last saw the object's pages resident.
    resident_at: Cell<Option<Instant>>,
    /// A copy of a small body, sent together with the head.
    small: std::cell::OnceCell<Bytes>,
    /// The stored `Cache-Status` field lines (the caches before us), kept out of `raw`:
    /// ours is appended to them as one field value.
    upstream_status: Vec<Bytes>,
    /// Those lines with one of our entries appended, keyed by our entry (a per-worker,
    /// per-generation value, kept alive here so its address identifies it): rendered once
    /// per object and entry, not per hit.
    chained: RefCell<Vec<(Bytes, Bytes)>>,
    /// The media type, if the response may be compressed (no coding of its own, no
    /// `no-transform`): decided once, so a hit of a segment only compares it.
    transformable: Option<Box<[u8]>>,
    /// This worker's handles on the compressed representations it served (`encode.rs`).
    encoded: RefCell<Vec<Arc<Rep>>>,
}

/// Most chained `Cache-Status` values a [`Prepared`] keeps (one per kind of answer a stored
/// object gets; a reload's new names start over).
const CHAINED_MAX: usize = 8;

/// Header fields never replayed from the store as they are: framing and connection
/// management are the codec's, `Age` is recomputed, `Date` goes to the codec separately
/// (it writes its own only when the response carries none).
pub(in crate::path) fn replayed(name: &[u8]) -> bool {
    const SKIP: &[&[u8]] = &[
        b"content-length",
        b"transfer-encoding",
        b"connection",
        b"keep-alive",
        b"date",
        b"age",
        b"cache-status",
    ];
    !SKIP.iter().any(|s| s.eq_ignore_ascii_case(name))
}

impl Prepared {
    /// Pre-encodes `meta`'s headers.
    pub fn new(meta: StoredMeta) -> Rc<Prepared> {
        let mut raw = BytesMut::with_capacity(256);
        let mut date = None;
        let mut upstream_status = Vec::new();
        for (n, v) in meta.headers() {
            if date.is_none() && n.eq_ignore_ascii_case(b"date") {
                date = Some(Bytes::copy_from_slice(v));
            }
            if n.eq_ignore_ascii_case(b"cache-status") {
                upstream_status.push(Bytes::copy_from_slice(v));
            }
            if replayed(n) {
                raw.put_slice(n);
                raw.put_slice(b": ");
                raw.put_slice(v);
                raw.put_slice(b"\r\n");
            }
        }
        let transformable = transformable_type(&meta).map(Box::from);
        Rc::new(Prepared {
            transformable,
            encoded: RefCell::default(),
            meta,
            raw: raw.freeze(),
            date,
            resident_at: Cell::new(None),
            small: std::cell::OnceCell::new(),
            upstream_status,
            chained: RefCell::default(),
        })
    }

    /// Bytes of memory this entry holds besides its blob and a small-body copy: the
    /// decoded headers and the pre-encoded block, with a fixed allowance for the rest.
    pub fn footprint(&self) -> usize {
        let headers: usize = self.meta.headers().iter().map(|(n, v)| n.len() + v.len() + 48).sum();
        let upstream: usize = self.upstream_status.iter().map(|v| v.len() + 2).sum();
        let chained = if upstream == 0 { 0 } else { CHAINED_MAX * (upstream + 96) };
        256 + headers + self.raw.len() + self.date.as_ref().map_or(0, Bytes::len) + chained
    }

    /// The `Cache-Status` value of an answer from this object: the stored entries of the
    /// caches before us, then `ours` (a pre-rendered entry of [`super::StatusNames`]).
    pub(in crate::path) fn cache_status(&self, ours: &Bytes) -> Bytes {
        if self.upstream_status.is_empty() {
            return ours.clone();
        }
        let mut chained = self.chained.borrow_mut();
        let same = |(o, _): &&(Bytes, Bytes)| o.as_ptr() == ours.as_ptr() && o.len() == ours.len();
        if let Some((_, v)) = chained.iter().find(same) {
            return v.clone();
        }
        if chained.len() >= CHAINED_MAX {
            chained.clear();
        }
        let v = super::chain(self.upstream_status.iter().map(|b| &b[..]), ours);
        chained.push((ours.clone(), v.clone()));
        v
    }

    /// The in-memory copy of the body, if this worker made one.
    pub fn small_body(&self) -> Option<Bytes> {
        self.small.get().cloned()
    }

    /// Keeps a copy of the (small) body; the caller accounted for it in its [`MetaCache`].
    pub fn set_small_body(&self, b: Bytes) {
        let _ = self.small.set(b);
    }

    /// Whether the response is of one of `types` (lowercase) and may be compressed.
    pub fn compressible(&self, types: &[String]) -> bool {
        self.transformable.as_deref().is_some_and(|mt| listed(mt, types))
    }

    /// This worker's handle on the representation in `c`, if it served it before.
    pub fn encoded(&self, c: Coding) -> Option<Arc<Rep>> {
        self.encoded.borrow().iter().find(|r| r.coding == c).cloned()
    }

    /// Keeps a handle on a representation; the caller accounted for its body in its
    /// [`MetaCache`] (the small-body budget).
    pub fn set_encoded(&self, rep: Arc<Rep>) {
        let mut e = self.encoded.borrow_mut();
        if !e.iter().any(|r| r.coding == rep.coding) {
            e.push(rep);
        }
    }

    /// A response head for this object: stored status (or `status`), stored headers
    /// with the stored `Date`, `Age` and `Cache-Status`: the stored entries, then `ours`.
    pub(in crate::path) fn head(&self, status: u16, now: u64, ours: &Bytes) -> Response {
        self.head_with(&self.raw, status, now, ours)
    }

    /// [`Prepared::head`] with `raw` as the stored header block (a compressed
    /// representation's).
    pub(in crate::path) fn head_with(
        &self,
        raw: &Bytes,
        status: u16,
        now: u64,
        ours: &Bytes,
    ) -> Response {
        let age = self.meta.current_age(now).as_secs();
        let mut buf = itoa::Buffer::new();
        let mut r = self.with_date(Response::new(status).raw_headers(raw.clone()));
        r = r.header("age", Bytes::copy_from_slice(buf.format(age).as_bytes()));
        r.header("cache-status", self.cache_status(ours))
    }

    /// `r` with the stored `Date`, if there is one.
    pub fn with_date(&self, r: Response) -> Response {
        match &self.date {
            Some(d) => r.header("date", d.clone()),
            None => r,
        }
    }

    /// Whether the range `off..off+len` of `hit` is in the page cache, trusting a recent
    /// positive probe for [`RESIDENT_TRUST`] (one `cachestat(2)` per object per second, not
    /// per request; see `reel_store`'s residency check).
    pub fn resident(&self, hit: &Hit, off: u64, len: u64) -> bool {
        let now = Instant::now();
        if self.resident_at.get().is_some_and(|t| now.duration_since(t) < RESIDENT_TRUST) {
            return true;
        }
        let r = hit.is_resident(off, len);
        self.resident_at.set(r.then_some(now));
        r
    }
}

/// A per-worker cache of decoded metadata, keyed by the identity of the store's metadata
/// blob (the store hands out clones of one `Bytes` per object version). Bounded by entries
/// ([`META_CACHE_MAX`]) and by bytes ([`META_CACHE_BYTES`]), small-body copies by their own
/// budget.
#[derive(Default)]
pub struct MetaCache {
    // The blob is kept with its entry: the pointer identity is only valid while the blob
    // lives, so a freed and reused address can never alias another object's metadata.
    map: std::collections::HashMap<(usize, usize), (Bytes, Rc<Prepared>)>,
    /// Bytes of small bodies copied into entries (bounded by [`SMALL_BUDGET`]).
    small_bytes: u64,
    /// What the entries hold besides small bodies (bounded by [`META_CACHE_BYTES`]).
    meta_bytes: usize,
}

/// Per-worker budget for in-memory copies of small bodies.
const SMALL_BUDGET: u64 = 16 << 20;

const META_CACHE_MAX: usize = 4096;

/// Per-worker bound of the bytes the decoded-metadata cache holds ([`MetaCache::bytes`]).
pub const META_CACHE_BYTES: usize = 16 << 20;

impl MetaCache {
    /// The prepared form of `blob`, decoding it on first use.
    pub fn get(&mut self, blob: &Bytes) -> Option<Rc<Prepared>> {
        let id = (blob.as_ptr() as usize, blob.len());
        if let Some((_, p)) = self.map.get(&id) {
            return Some(p.clone());
        }
        let meta = StoredMeta::decode(blob).ok()?;
        let p = Prepared::new(meta);
        let cost = blob.len() + p.footprint();
        if self.map.len() >= META_CACHE_MAX || self.meta_bytes + cost > META_CACHE_BYTES {
            // Entries are cheap to rebuild; a full reset keeps both bounds without an LRU.
            self.map.clear();
            self.small_bytes = 0;
            self.meta_bytes = 0;
        }
        self.meta_bytes += cost;
        self.map.insert(id, (blob.clone(), p.clone()));
        Some(p)
    }
}

impl MetaCache {
    /// Bytes of memory the cached metadata holds (blobs, decoded metadata, pre-encoded
    /// headers), at most [`META_CACHE_BYTES`]. Small-body copies have their own budget.
    pub fn bytes(&self) -> usize {
        self.meta_bytes
    }

    /// Accounts `n` bytes of a small-body copy; false when the worker's budget is spent
    /// (the body is then sent from the store as usual).
    pub fn admit_small(&mut self, n: u64) -> bool {
        if self.small_bytes + n > SMALL_BUDGET {
            return false;
        }
        self.small_bytes += n;
        true
    }
}

/// A region of a volume file handed to the codec for `sendfile` (or, over TLS and
/// HTTP/2, for page-cache reads). It keeps the store handle (and so the volume's lease)
/// alive until the codec drops it.
pub struct LeasedRange {
    keep: Keep,
    /// The volume (or spill) file, held open: the range lends its descriptor.
    file: Arc<File>,
    offset: u64,
    len: u64,
    /// Body offset of the region's first byte.
    body_off: u64,
}

enum Keep {
    /// A complete object: cold bytes are read through the store (io_uring).
    Hit(Rc<Hit>),
    /// An object being filled; its bytes were just written through the page cache.
    Other(#[allow(dead_code)] Rc<dyn Any>),
}

impl FileRange for LeasedRange {
    fn fd(&self) -> BorrowedFd<'_> {
        self.file.as_fd()
    }
    fn offset(&self) -> u64 {
        self.offset
    }
    fn len(&self) -> u64 {
        self.len
    }
    fn read_cold(&self, offset: u64, len: usize) -> ColdRead<'_> {
        match &self.keep {
            Keep::Hit(hit) => {
                let at = self.body_off + offset.saturating_sub(self.offset);
                Box::pin(
                    async move { hit.read(at, len as u64).await.map_err(|e| gone(&e.to_string())) },
                )
            }
            // Just written: resident, so the codec's non-blocking read rarely gets here;
            // when it does, a plain read of recently written pages.
            Keep::Other(_) => {
                let fd = self.file.as_fd();
                Box::pin(std::future::ready(reel_http::pread_bytes(fd, offset, len)))
            }
        }
    }
}

impl LeasedRange {
    /// `len` bytes of `hit`'s body from `off`.
    pub fn of_hit(hit: Rc<Hit>, off: u64, len: u64) -> Option<LeasedRange> {
        let r = hit.file_range(off, len).ok()?;
        let (file, offset, len) = (r.shared_file(), r.offset, r.len);
        Some(LeasedRange { keep: Keep::Hit(hit), file, offset, len, body_off: off })
    }

    /// `len` bytes of a filling object's body from `off` (already written).
    pub fn of_filling(f: Rc<RefCell<Filling>>, off: u64, len: u64) -> Option<LeasedRange> {
        let (file, offset, len) = {
            let b = f.borrow();
            let r = b.file_range(off, len).ok()?;
            (r.shared_file(), r.offset, r.len)
        };
        Some(LeasedRange { keep: Keep::Other(f), file, offset, len, body_off: off })
    }
}

fn gone(what: &str) -> io::Error {
    io::Error::other(format!("stored object {what}"))
}

/// Streams `start..end` of a cold (not resident) complete object: resident pieces by
/// sendfile, others read through the store's io_uring (or I/O threads).
pub fn stream_cold_hit(hit: Rc<Hit>, start: u64, end: u64) -> mpsc::Receiver<io::Result<Chunk>> {
    stream_hit_probed(hit, start, end, Hit::is_resident)
}

/// [`stream_cold_hit`] with the residency probe as a parameter, so tests can force either
/// branch on a real store.
fn stream_hit_probed(
    hit: Rc<Hit>,
    start: u64,
    end: u64,
    resident: impl Fn(&Hit, u64, u64) -> bool + 'static,
) -> mpsc::Receiver<io::Result<Chunk>> {
    let (tx, rx) = mpsc::channel(2);
    tokio::task::spawn_local(async move {
        let mut pos = start;
        while pos < end {
            let n = (end - pos).min(STREAM_CHUNK);
            let chunk = if resident(&hit, pos, n) {
                LeasedRange::of_hit(hit.clone(), pos, n)
                    .map(|r| Chunk::File(Box::new(r)))
                    .ok_or_else(|| gone("vanished"))
            } else {
                hit.read(pos, n).await.map(Chunk::Bytes).map_err(|e| gone(&e.to_string()))
            };
            let failed = chunk.is_err();
            if tx.send(chunk).await.is_err() || failed {
                return;
            }
            pos += n;
        }
    });
    rx
}

/// Streams `start..end` (end `None`: to the end, whenever that is known) of an object
/// still being filled, waking on each durable write. An aborted fill ends the stream
/// with an error, so the connection closes instead of a short body.
pub fn stream_filling(
    f: Rc<RefCell<Filling>>,
    start: u64,
    end: Option<u64>,
) -> mpsc::Receiver<io::Result<Chunk>> {
    let (tx, rx) = mpsc::channel(4);
    // The borrow across `wait_for` is sound: the other holders of `f` (the ranges queued
    // for the codec) only keep it alive and never borrow it.
    #[allow(clippy::await_holding_refcell_ref)]
    tokio::task::spawn_local(async move {
        let mut pos = start;
        loop {
            if end.is_some_and(|e| pos >= e) {
                return;
            }
            // Wait for at least one byte past `pos` (or the end of the fill).
            let st = {
                let mut b = f.borrow_mut();
                b.wait_for(pos + 1).await
            };
            let st = match st {
                Ok(s) => s,
                Err(e) => {
                    let _ = tx.send(Err(gone(&e.to_string()))).await;
                    return;
                }
            };
            let mut avail = st.available;
            if let Some(e) = end {
                avail = avail.min(e);
            }
            if avail > pos {
                let n = (avail - pos).min(STREAM_CHUNK * 4);
                let Some(r) = LeasedRange::of_filling(f.clone(), pos, n) else {
                    let _ = tx.send(Err(gone("vanished while filling"))).await;
                    return;
                };
                if tx.send(Ok(Chunk::File(Box::new(r)))).await.is_err() {
                    return;
                }
                pos += n;
                continue;
            }
            if let Some(fin) = st.final_len
                && pos >= fin
            {
                return;
            }
        }
    });
    rx
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::FileExt;

    use reel_store::{IoMode, Lookup, Store, StoreConfig};

    use super::*;

    fn body(n: usize) -> Vec<u8> {
        (0..n).map(|i| (i * 31 % 251) as u8).collect()
    }

    /// Collects a hit stream: bytes as they are, file ranges read back from the volume.
    async fn collect(mut rx: mpsc::Receiver<io::Result<Chunk>>) -> (Vec<u8>, usize, usize) {
        let (mut out, mut files, mut reads) = (Vec::new(), 0, 0);
        while let Some(c) = rx.recv().await {
            match c.expect("chunk") {
                Chunk::Bytes(b) => {
                    reads += 1;
                    out.extend_from_slice(&b);
                }
                Chunk::File(f) => {
                    files += 1;
                    let file = std::fs::File::from(f.fd().try_clone_to_owned().unwrap());
                    let mut buf = vec![0u8; f.len() as usize];
                    file.read_exact_at(&mut buf, f.offset()).unwrap();
                    out.extend_from_slice(&buf);
                }
            }
        }
        (out, files, reads)
    }

    /// Entries were bounded by count only: 4,096 objects with large header sections held
    /// hundreds of megabytes per worker.
    #[test]
    fn the_metadata_cache_is_bounded_by_bytes() {
        use crate::policy::freshness::PolicyConfig;
        use crate::policy::meta::ResponseTimes;
        use crate::policy::vary::VaryKey;
        let mut cache = MetaCache::default();
        let big = "x".repeat(30_000);
        let times = ResponseTimes { request_time: 1, response_time: 1 };
        let mut blobs = Vec::new();
        for i in 0..600 {
            let h = [("x-big", big.as_str()), ("etag", &format!("\"{i}\""))];
            let meta = StoredMeta::from_response(
                200,
                &h,
                VaryKey::default(),
                times,
                Some(1),
                &PolicyConfig::default(),
                None,
            );
            let blob = Bytes::from(meta.encode());
            let p = cache.get(&blob).expect("decodes");
            assert_eq!(p.meta.headers().len(), 3, "x-big, etag and the added date");
            assert!(cache.bytes() <= META_CACHE_BYTES, "{} bytes after {i}", cache.bytes());
            // The entry just decoded is served from the cache the next time.
            assert!(Rc::ptr_eq(&p, &cache.get(&blob).expect("cached")));
            blobs.push(blob);
        }
    }

    #[test]
    fn cold_hits_stream_the_stored_bytes_by_reads_and_by_file_ranges() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(StoreConfig::single(
            dir.path().to_path_buf(),
            8 << 20,
            4 << 20,
            IoMode::Auto,
        ))
        .unwrap();
        let data = body(3 * STREAM_CHUNK as usize + 12_345);
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        tokio::task::LocalSet::new().block_on(&rt, async {
            let mut w = store
                .begin_fill(b"k", Bytes::from_static(b"m"), Some(data.len() as u64))
                .await
                .unwrap();
            w.append(Bytes::from(data.clone())).await.unwrap();
            w.commit().await.unwrap();
            let Some(Lookup::Hit(hit)) = store.lookup(b"k").await else { panic!("stored") };
            let hit = Rc::new(hit);
            let len = hit.body_len();
            // Never resident: every piece is read through the store's I/O.
            let (out, files, reads) =
                collect(stream_hit_probed(hit.clone(), 0, len, |_, _, _| false)).await;
            assert!(out == data);
            assert_eq!((files, reads), (0, 4));
            // A sub-range, cold.
            let (out, _, _) =
                collect(stream_hit_probed(hit.clone(), 1000, 300_000, |_, _, _| false)).await;
            assert!(out == data[1000..300_000]);
            // Alternating residency: both kinds of chunk, in order.
            let flip = Cell::new(false);
            let probe = move |_: &Hit, _, _| {
                flip.set(!flip.get());
                flip.get()
            };
            let (out, files, reads) = collect(stream_hit_probed(hit.clone(), 7, len, probe)).await;
            assert!(out == data[7..]);
            assert!(files > 0 && reads > 0);
            // The public entry point with the real probe.
            let (out, _, _) = collect(stream_cold_hit(hit.clone(), 0, len)).await;
            assert!(out == data);
            // A leased range reads its cold bytes through the store, at file offsets.
            let r = LeasedRange::of_hit(hit, 5000, 300_000).expect("range");
            let got = r.read_cold(r.offset() + 1000, 70_000).await.expect("cold read");
            assert!(got[..] == data[6000..76_000]);
        });
    }
}
