//! Compressed representations of stored text responses ([`Encodings`]), shared by the
//! workers: made once per object version and coding by the first request that wants it,
//! kept in memory beside the identity body the store holds (which is never touched), and
//! counted for `/metrics`.
//!
//! Entries are keyed, like small bodies (`small.rs`), by the identity of the stored
//! metadata blob (one `Bytes` per object version, kept with its entry so an address is
//! never reused while it names one) and the coding. While one request makes a
//! representation, the others that want it find it [`Slot::Making`] and wait for it (a
//! compression of at most `max_size`, usually a playlist of a few KiB: microseconds), so
//! the waiters an LL-HLS blocking reload releases at once are all answered compressed and
//! it is made once. Beyond the byte bound
//! (`[cache] compressed_memory`) the oldest go first; each worker keeps the ones it served
//! in its decoded metadata within its small-body budget, so a hit takes no lock.

use std::collections::{HashMap, VecDeque};
use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard};

use bytes::{BufMut, Bytes, BytesMut};
use reel_config::Coding;
use reel_ops::metrics::{Kind, PromWriter};
use tokio::sync::Notify;

use crate::policy::accept_encoding::CodingName;

/// A site's compression settings (`[site.compress]`), `None` on a [`super::settings::Site`]
/// when it is off.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Compress {
    /// Media types compressed, lowercase, without parameters.
    pub types: Vec<String>,
    /// Codings made, the preferred first.
    pub encodings: Vec<Coding>,
    /// Smallest body compressed.
    pub min_size: u64,
    /// Largest body compressed.
    pub max_size: u64,
    /// Brotli quality (0-11).
    pub brotli_quality: u32,
    /// gzip level (1-9).
    pub gzip_level: u32,
}

/// One compressed representation: its body and the stored header block rewritten for it.
#[derive(Debug)]
pub struct Rep {
    /// The compressed body.
    pub body: Bytes,
    /// The stored `name: value\r\n` lines with this representation's `ETag` (the stored
    /// one with `-br` or `-gz` inside its quotes), `Content-Encoding` and `Vary`.
    pub raw: Bytes,
    /// That `ETag` value, if the stored response had one.
    pub etag: Option<Bytes>,
    /// The coding.
    pub coding: Coding,
}

/// What is kept for one object version and coding.
#[derive(Clone)]
pub enum Slot {
    /// A request is making it; it notifies when it is done (or gave up).
    Making(Arc<Notify>),
    /// Made.
    Ready(Arc<Rep>),
    /// Compression did not make it smaller: identity is answered.
    NotSmaller,
}

type Id = (usize, usize, Coding);

fn id(blob: &Bytes, c: Coding) -> Id {
    (blob.as_ptr() as usize, blob.len(), c)
}

#[derive(Default)]
struct Inner {
    map: HashMap<Id, (Bytes, Slot)>,
    order: VecDeque<Id>,
    bytes: usize,
}

fn cost(blob: &Bytes, slot: &Slot) -> usize {
    blob.len() + if let Slot::Ready(r) = slot { r.body.len() + r.raw.len() } else { 0 }
}

/// Counters by coding (index: [`ix`]).
#[derive(Default)]
struct ByCoding([AtomicU64; 2]);

fn ix(c: Coding) -> usize {
    match c {
        Coding::Br => 0,
        Coding::Gzip => 1,
    }
}

impl ByCoding {
    fn add(&self, c: Coding, n: u64) {
        self.0[ix(c)].fetch_add(n, Relaxed);
    }
    fn get(&self, c: Coding) -> u64 {
        self.0[ix(c)].load(Relaxed)
    }
}

/// The compressed representations, shared by the workers, and their counters.
#[derive(Default)]
pub struct Encodings {
    inner: Mutex<Inner>,
    made: ByCoding,
    identity_bytes: ByCoding,
    made_bytes: ByCoding,
    served: ByCoding,
}

/// Removes a [`Slot::Making`] its maker left without finishing (its client went away while
/// the body was read, or the read failed), so the next request makes it.
pub struct Making<'a> {
    enc: &'a Encodings,
    blob: Bytes,
    coding: Coding,
    done: bool,
    waiters: Arc<Notify>,
}

impl Drop for Making<'_> {
    fn drop(&mut self) {
        if !self.done {
            let mut g = self.enc.lock();
            let k = id(&self.blob, self.coding);
            if matches!(g.map.get(&k), Some((_, Slot::Making(_)))) {
                g.map.remove(&k);
                g.order.retain(|o| *o != k);
                g.bytes -= self.blob.len();
            }
        }
        // Done or not: the waiters look again (and one of them makes it).
        self.waiters.notify_waiters();
    }
}

impl Making<'_> {
    /// Compresses `body` (the whole identity body) with `cfg`'s level, keeps the result
    /// within `memory` bytes of all representations, and returns what was kept.
    pub fn make(mut self, body: &[u8], prep_raw: &[u8], cfg: &Compress, memory: usize) -> Slot {
        let c = self.coding;
        let slot = match compress(c, body, cfg) {
            Some(z) if z.len() < body.len() => {
                self.enc.made.add(c, 1);
                self.enc.identity_bytes.add(c, body.len() as u64);
                self.enc.made_bytes.add(c, z.len() as u64);
                let (raw, etag) = rewrite_head(prep_raw, c);
                Slot::Ready(Arc::new(Rep { body: z, raw, etag, coding: c }))
            }
            _ => Slot::NotSmaller,
        };
        self.done = true;
        self.enc.put(&self.blob, c, slot.clone(), memory);
        slot
    }
}

impl Encodings {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        // Each operation leaves the map consistent, so a poisoned lock is still usable.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// What is kept for `blob`'s version in `c`; when nothing is, this caller becomes its
    /// maker (`Err`), the others find [`Slot::Making`] until it is done.
    pub fn get_or_make(&self, blob: &Bytes, c: Coding) -> Result<Slot, Making<'_>> {
        let k = id(blob, c);
        let mut g = self.lock();
        if let Some((_, s)) = g.map.get(&k) {
            return Ok(s.clone());
        }
        let waiters = Arc::new(Notify::new());
        g.map.insert(k, (blob.clone(), Slot::Making(waiters.clone())));
        g.order.push_back(k);
        g.bytes += blob.len();
        Err(Making { enc: self, blob: blob.clone(), coding: c, done: false, waiters })
    }

    /// What is kept for `blob`'s version in `c` once no request is making it (waiting for
    /// the one that is); `Err`: this caller makes it.
    pub async fn get_or_make_waiting(&self, blob: &Bytes, c: Coding) -> Result<Slot, Making<'_>> {
        loop {
            let n = match self.get_or_make(blob, c)? {
                Slot::Making(n) => n,
                s => return Ok(s),
            };
            // Registered before the second look: a notification after it is not lost.
            let woken = n.notified();
            if matches!(self.get_or_make(blob, c)?, Slot::Making(_)) {
                woken.await;
            }
        }
    }

    fn put(&self, blob: &Bytes, c: Coding, slot: Slot, memory: usize) {
        let k = id(blob, c);
        let add = cost(blob, &slot);
        let mut g = self.lock();
        let inner = &mut *g;
        if let Some((b, old)) = inner.map.remove(&k) {
            inner.bytes -= cost(&b, &old);
            inner.order.retain(|o| *o != k);
        }
        if add > memory {
            return;
        }
        while inner.bytes + add > memory {
            let Some(old) = inner.order.pop_front() else { break };
            if let Some((b, s)) = inner.map.remove(&old) {
                inner.bytes -= cost(&b, &s);
            }
        }
        inner.map.insert(k, (blob.clone(), slot));
        inner.order.push_back(k);
        inner.bytes += add;
    }

    /// Counts one response sent with a compressed body (or its HEAD or 304).
    pub fn served(&self, c: Coding) {
        self.served.add(c, 1);
    }

    /// Bytes kept (representations, their head blocks and the metadata blobs they name).
    pub fn bytes(&self) -> usize {
        self.lock().bytes
    }

    /// Writes the counters in the Prometheus text format.
    pub fn render_prometheus(&self, p: &mut PromWriter) {
        let all = [Coding::Br, Coding::Gzip];
        let fam = "reel_compress_made_total";
        p.family(fam, Kind::Counter, "Compressed representations made, by coding.");
        for c in all {
            p.sample(fam, &[("encoding", c.token())], self.made.get(c));
        }
        let fam = "reel_compress_bytes_total";
        p.family(fam, Kind::Counter, "Bytes of the representations made, by coding and side.");
        for c in all {
            p.sample(
                fam,
                &[("encoding", c.token()), ("side", "identity")],
                self.identity_bytes.get(c),
            );
            p.sample(
                fam,
                &[("encoding", c.token()), ("side", "compressed")],
                self.made_bytes.get(c),
            );
        }
        let fam = "reel_compress_served_total";
        p.family(fam, Kind::Counter, "Responses answered with a compressed representation.");
        for c in all {
            p.sample(fam, &[("encoding", c.token())], self.served.get(c));
        }
        p.single(
            "reel_compress_memory_bytes",
            Kind::Gauge,
            "Bytes of compressed representations kept in memory.",
            self.bytes() as u64,
        );
    }
}

/// `body` compressed in `c` at `cfg`'s level; `None` if the encoder failed.
pub fn compress(c: Coding, body: &[u8], cfg: &Compress) -> Option<Bytes> {
    let mut out = Vec::with_capacity(body.len() / 4 + 64);
    match c {
        Coding::Br => {
            let params = brotli::enc::BrotliEncoderParams {
                quality: cfg.brotli_quality.min(11) as i32,
                // A 4 MiB window at most: playlists and manifests are far smaller.
                lgwin: 22,
                size_hint: body.len(),
                ..Default::default()
            };
            brotli::BrotliCompress(&mut &body[..], &mut out, &params).ok()?;
        }
        Coding::Gzip => {
            let level = flate2::Compression::new(cfg.gzip_level.clamp(1, 9));
            let mut w = flate2::write::GzEncoder::new(out, level);
            w.write_all(body).ok()?;
            out = w.finish().ok()?;
        }
    }
    Some(Bytes::from(out))
}

/// The stored header block for a representation in `c`: the stored lines without `ETag`,
/// then the representation's `ETag` (the stored one with a suffix inside its quotes, so it
/// is strong and distinct per coding), `Content-Encoding` and `Vary: Accept-Encoding`.
fn rewrite_head(raw: &[u8], c: Coding) -> (Bytes, Option<Bytes>) {
    let mut out = BytesMut::with_capacity(raw.len() + 64);
    let mut etag = None;
    for line in raw.split_inclusive(|&b| b == b'\n') {
        let name = line.split(|&b| b == b':').next().unwrap_or_default();
        if name.eq_ignore_ascii_case(b"etag") {
            let v = line.get(name.len() + 1..).unwrap_or_default().trim_ascii();
            etag = suffixed(v, c);
        } else {
            out.put_slice(line);
        }
    }
    if let Some(e) = &etag {
        out.put_slice(b"etag: ");
        out.put_slice(e);
        out.put_slice(b"\r\n");
    }
    out.put_slice(b"content-encoding: ");
    out.put_slice(c.token().as_bytes());
    out.put_slice(b"\r\nvary: Accept-Encoding\r\n");
    (out.freeze(), etag.map(Bytes::from))
}

/// `"x"` -> `"x-br"` (`W/"x"` -> `W/"x-br"`); `None` for a malformed tag.
fn suffixed(tag: &[u8], c: Coding) -> Option<Vec<u8>> {
    let inner = tag.strip_suffix(b"\"")?;
    if !(inner.starts_with(b"\"") || inner.starts_with(b"W/\"")) {
        return None;
    }
    let suffix: &[u8] = match c {
        Coding::Br => b"-br\"",
        Coding::Gzip => b"-gz\"",
    };
    Some([inner, suffix].concat())
}

#[cfg(test)]
mod tests {
    use std::io::Read;

    use super::*;

    fn cfg() -> Compress {
        Compress {
            types: vec!["text/vtt".into()],
            encodings: vec![Coding::Br, Coding::Gzip],
            min_size: 256,
            max_size: 1 << 20,
            brotli_quality: 5,
            gzip_level: 6,
        }
    }

    fn playlist() -> Vec<u8> {
        let mut p = b"#EXTM3U\n#EXT-X-VERSION:9\n#EXT-X-TARGETDURATION:2\n".to_vec();
        for i in 0..200 {
            p.extend_from_slice(format!("#EXTINF:2.000,\nseg_{i}.ts\n").as_bytes());
        }
        p
    }

    #[test]
    fn representations_decompress_to_the_body_and_carry_their_own_fields() {
        let body = playlist();
        let raw = b"content-type: application/vnd.apple.mpegurl\r\netag: \"v1\"\r\ncache-control: max-age=1\r\n";
        let enc = Encodings::default();
        let blob = Bytes::from_static(b"meta of v1");
        let Err(m) = enc.get_or_make(&blob, Coding::Gzip) else { panic!("nothing kept yet") };
        assert!(matches!(enc.get_or_make(&blob, Coding::Gzip), Ok(Slot::Making(_))), "one maker");
        let Slot::Ready(gz) = m.make(&body, raw, &cfg(), 1 << 20) else { panic!("made") };
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(&gz.body[..]).read_to_end(&mut out).unwrap();
        assert!(out == body);
        assert!(gz.body.len() * 5 < body.len(), "{} of {}", gz.body.len(), body.len());
        assert_eq!(gz.etag.as_deref(), Some(&b"\"v1-gz\""[..]));
        assert_eq!(
            std::str::from_utf8(&gz.raw).unwrap(),
            "content-type: application/vnd.apple.mpegurl\r\ncache-control: max-age=1\r\n\
             etag: \"v1-gz\"\r\ncontent-encoding: gzip\r\nvary: Accept-Encoding\r\n"
        );
        let Err(m) = enc.get_or_make(&blob, Coding::Br) else { panic!("br is another slot") };
        let Slot::Ready(br) = m.make(&body, raw, &cfg(), 1 << 20) else { panic!("made") };
        let mut out = Vec::new();
        brotli::BrotliDecompress(&mut &br.body[..], &mut out).unwrap();
        assert!(out == body);
        assert_eq!(br.etag.as_deref(), Some(&b"\"v1-br\""[..]));
        assert!(matches!(enc.get_or_make(&blob, Coding::Br), Ok(Slot::Ready(_))));
        assert_eq!((enc.made.get(Coding::Br), enc.made.get(Coding::Gzip)), (1, 1));
    }

    #[test]
    fn an_abandoned_making_is_forgotten_and_memory_is_bounded() {
        let enc = Encodings::default();
        let blob = Bytes::from_static(b"m");
        drop(enc.get_or_make(&blob, Coding::Br));
        assert_eq!(enc.bytes(), 0);
        assert!(enc.get_or_make(&blob, Coding::Br).is_err(), "made by the next request");
        // Incompressible bytes: identity answered, nothing counted as made.
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let noise: Vec<u8> = (0..4096)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> 32) as u8
            })
            .collect();
        let Err(m) = enc.get_or_make(&Bytes::from_static(b"n"), Coding::Gzip) else { panic!() };
        assert!(matches!(m.make(&noise, b"", &cfg(), 1 << 20), Slot::NotSmaller));
        // Beyond the bound the oldest go first.
        let body = playlist();
        let blobs: Vec<Bytes> = (0..20).map(|i| Bytes::from(vec![i as u8; 8])).collect();
        for b in &blobs {
            let Err(m) = enc.get_or_make(b, Coding::Br) else { panic!() };
            m.make(&body, b"", &cfg(), 2000);
            assert!(enc.bytes() <= 2000, "{}", enc.bytes());
        }
        assert!(matches!(enc.get_or_make(&blobs[19], Coding::Br), Ok(Slot::Ready(_))));
        assert!(enc.get_or_make(&blobs[0], Coding::Br).is_err(), "evicted");
    }

    #[test]
    fn etags_get_a_suffix_inside_their_quotes() {
        assert_eq!(suffixed(b"\"abc\"", Coding::Br).as_deref(), Some(&b"\"abc-br\""[..]));
        assert_eq!(suffixed(b"W/\"abc\"", Coding::Gzip).as_deref(), Some(&b"W/\"abc-gz\""[..]));
        assert_eq!(suffixed(b"abc", Coding::Gzip), None);
        assert_eq!(suffixed(b"\"", Coding::Gzip), None);
    }
}
