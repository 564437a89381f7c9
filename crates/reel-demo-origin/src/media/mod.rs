//! Playable media for live and VOD segments: MPEG-2 TS (RFC 8216 §3.2) carrying H.264
//! pictures that show a clock, the sequence and part numbers and a moving box.
//!
//! A segment is cut into units (the LL-HLS parts of a live segment, one unit for VOD). Every
//! unit starts with PAT and PMT and every picture is an IDR access unit, so any unit plays
//! on its own, and the units concatenated byte for byte are the segment. The configured
//! segment size is a budget: the frame rate is the highest (up to 25 fps, at least one frame
//! per unit) whose pictures fit it, and null packets fill each unit up to its share. A
//! segment is never shorter than its pictures, and its size is a whole number of TS packets.
//!
//! Bytes are a pure function of the seed-independent layout, the stream or title and the
//! sequence number. Building a segment costs a few ms (I_PCM is a copy of the samples), so
//! [`MediaCache`] keeps the recent ones and concurrent requests build each one once.

mod h264;
mod picture;
mod ts;

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, OnceLock};

use bytes::Bytes;

pub use picture::{HEIGHT, WIDTH};
pub use ts::PACKET as TS_PACKET;

use picture::{Canvas, Scene};
use ts::{Counters, Muxer, packets_for};

/// Highest frame rate used, frames per second.
const MAX_FPS: u64 = 25;
/// PAT and PMT at the start of every unit.
const TABLE_PACKETS: usize = 2;
/// Segments kept by [`MediaCache`] at most ...
const CACHE_SEGMENTS: usize = 16;
/// ... and bytes (but at least two segments).
const CACHE_BYTES: u64 = 64 << 20;

/// Why a segment could not be built (an internal error, answered 500).
#[derive(Debug, Clone, thiserror::Error)]
#[error("building media: {0}")]
pub struct MediaError(String);

/// How segments of one kind (live or VOD) are cut and filled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Layout {
    seg_ms: u64,
    units: u32,
    frames: u32,
    frame_packets: usize,
    /// TS packets of each unit, filler included.
    unit_packets: Vec<usize>,
}

impl Layout {
    /// The layout for segments of `seg_ms` cut into `units`, within `size` bytes.
    pub(crate) fn new(seg_ms: u64, units: u32, size: u64) -> Result<Self, MediaError> {
        let units = units.max(1);
        let au = h264::access_unit(&Canvas::new()).map_err(|e| MediaError(e.to_string()))?;
        let frame_packets = packets_for(au.len());
        // Packets per unit: the budget split evenly, the remainder spread over the units.
        let budget = size / TS_PACKET as u64;
        let n = u64::from(units);
        let share = |u: u64| (budget * (u + 1) / n - budget * u / n) as usize;
        let smallest = (0..n).map(share).min().unwrap_or(0);
        let unit_ms = (seg_ms / u64::from(units)).max(1);
        let max_frames = (unit_ms * MAX_FPS).div_ceil(1000).max(1);
        let fit = (smallest.saturating_sub(TABLE_PACKETS) / frame_packets) as u64;
        let frames = fit.clamp(1, max_frames) as u32;
        let media = TABLE_PACKETS + frames as usize * frame_packets;
        let unit_packets = (0..n).map(|u| share(u).max(media)).collect();
        Ok(Self { seg_ms, units, frames, frame_packets, unit_packets })
    }

    /// Units per segment.
    pub(crate) fn units(&self) -> u32 {
        self.units
    }

    /// Frames per unit.
    pub(crate) fn frames(&self) -> u32 {
        self.frames
    }

    /// Bytes of every segment.
    pub(crate) fn segment_len(&self) -> u64 {
        (self.unit_packets.iter().sum::<usize>() * TS_PACKET) as u64
    }

    /// Start of unit `u` in ms from the segment start.
    pub(crate) fn unit_start_ms(&self, u: u32) -> u64 {
        u64::from(u) * self.seg_ms / u64::from(self.units)
    }

    /// When frame `k` of unit `u` has been captured, in ms from the segment start: the
    /// earliest its bytes exist.
    pub(crate) fn frame_ready_ms(&self, u: u32, k: u32) -> u64 {
        let (a, b) = (self.unit_start_ms(u), self.unit_start_ms(u + 1));
        a + ((b - a) * u64::from(k + 1)).div_ceil(u64::from(self.frames))
    }

    /// Presentation time of frame `k` of unit `u`, in 90 kHz ticks from the segment start.
    fn frame_ticks(&self, u: u32, k: u32) -> u64 {
        let (a, b) = (self.unit_start_ms(u), self.unit_start_ms(u + 1));
        a * 90 + (b - a) * 90 * u64::from(k) / u64::from(self.frames)
    }

    /// Continuity counters at the start of segment `n`: every segment holds the same number
    /// of packets per PID, so segment `n` continues where `n - 1` ended.
    fn counters(&self, n: u64) -> Counters {
        let tables = u64::from(self.units);
        let video = tables * u64::from(self.frames) * self.frame_packets as u64;
        let cc = |per_segment: u64| (n.wrapping_mul(per_segment) % 16) as u8;
        Counters { pat: cc(tables), pmt: cc(tables), video: cc(video) }
    }

    /// A fingerprint of the layout, mixed into entity tags.
    pub(crate) fn fingerprint(&self) -> u64 {
        let mut h = self.seg_ms ^ u64::from(self.units) << 32 ^ u64::from(self.frames) << 48;
        for (i, p) in self.unit_packets.iter().enumerate() {
            h = crate::latency::mix64(h ^ (*p as u64) << (i % 8));
        }
        h
    }
}

/// One unit's place in its segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Unit {
    /// Byte range of the unit within the segment.
    pub start: usize,
    pub end: usize,
    /// Where the bytes of each frame (and the filler after it) end, from the segment start.
    pub frame_ends: Vec<usize>,
}

/// A built segment.
#[derive(Debug)]
pub(crate) struct Segment {
    pub bytes: Bytes,
    pub units: Vec<Unit>,
}

/// What a segment shows and where its media time starts.
pub(crate) struct Spec<'a> {
    /// Top line of the picture.
    pub label: &'a str,
    /// `SEQ` for live, `SEG` for VOD.
    pub counter: &'static str,
    /// Sequence number (selects the continuity counters too).
    pub n: u64,
    /// Media time of the segment start in ms (Unix time for live).
    pub start_ms: u64,
    /// Background colour selector.
    pub background: u64,
}

/// Builds the segment described by `spec` with `layout`.
pub(crate) fn build(layout: &Layout, spec: &Spec<'_>) -> Result<Segment, MediaError> {
    let fail = |e: &dyn std::fmt::Display| MediaError(e.to_string());
    let len = usize::try_from(layout.segment_len()).map_err(|e| fail(&e))?;
    let mut mux = Muxer::new(Vec::with_capacity(len), layout.counters(spec.n));
    let mut canvas = Canvas::new();
    let mut units = Vec::with_capacity(layout.units as usize);
    let frames = layout.frames;
    for u in 0..layout.units {
        let start = mux.len();
        mux.tables().map_err(|e| fail(&e))?;
        let filler = layout.unit_packets[u as usize]
            - TABLE_PACKETS
            - frames as usize * layout.frame_packets;
        let mut frame_ends = Vec::with_capacity(frames as usize);
        for k in 0..frames {
            let ticks = spec.start_ms * 90 + layout.frame_ticks(u, k);
            let counter = if layout.units > 1 {
                format!("{} {} P{u} F{k}", spec.counter, spec.n)
            } else {
                format!("{} {} F{k}", spec.counter, spec.n)
            };
            canvas.draw(&Scene {
                label: spec.label,
                media_ms: ticks / 90,
                counter: &counter,
                background: spec.background,
            });
            let au = h264::access_unit(&canvas).map_err(|e| fail(&e))?;
            mux.access_unit(&au, ticks).map_err(|e| fail(&e))?;
            let (k, f) = (k as usize, frames as usize);
            mux.filler(filler * (k + 1) / f - filler * k / f);
            frame_ends.push(mux.len());
        }
        units.push(Unit { start, end: mux.len(), frame_ends });
    }
    let bytes = mux.into_inner();
    if bytes.len() != len {
        return Err(MediaError(format!("segment is {} bytes, layout says {len}", bytes.len())));
    }
    Ok(Segment { bytes: Bytes::from(bytes), units })
}

/// What identifies a cached segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Key {
    /// Live stream (name, empty for the default stream) and media sequence number.
    Live(String, u64),
    /// VOD title index and segment number.
    Vod(usize, u64),
}

type Slot = Arc<OnceLock<Result<Arc<Segment>, MediaError>>>;

/// The most recently used segments; each is built once even under concurrent requests.
#[derive(Debug)]
pub(crate) struct MediaCache {
    slots: Mutex<VecDeque<(Key, Slot)>>,
    capacity: usize,
}

impl MediaCache {
    /// A cache for segments of at most `segment_len` bytes.
    pub(crate) fn new(segment_len: u64) -> Self {
        let fit = CACHE_BYTES / segment_len.max(1);
        let capacity = (fit as usize).clamp(2, CACHE_SEGMENTS);
        Self { slots: Mutex::new(VecDeque::with_capacity(capacity)), capacity }
    }

    /// The segment for `key`, built with `make` on a miss.
    pub(crate) fn get(
        &self,
        key: Key,
        make: impl FnOnce() -> Result<Segment, MediaError>,
    ) -> Result<Arc<Segment>, MediaError> {
        let slot = {
            // A panic while holding the lock cannot leave the deque inconsistent.
            let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
            match slots.iter().position(|(k, _)| *k == key) {
                Some(i) => {
                    let entry = slots.remove(i).unwrap_or_else(|| (key, Slot::default()));
                    let slot = entry.1.clone();
                    slots.push_back(entry);
                    slot
                }
                None => {
                    if slots.len() >= self.capacity {
                        slots.pop_front();
                    }
                    let slot = Slot::default();
                    slots.push_back((key, slot.clone()));
                    slot
                }
            }
        };
        slot.get_or_init(|| make().map(Arc::new)).clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(n: u64) -> Spec<'static> {
        Spec { label: "LIVE", counter: "SEQ", n, start_ms: n * 2000, background: 0 }
    }

    #[test]
    fn default_live_layout_fits_one_mebibyte_at_8_fps() {
        let l = Layout::new(2000, 4, 1 << 20).unwrap();
        assert_eq!(l.units(), 4);
        assert_eq!(l.frames(), 4, "{l:?}");
        assert_eq!(l.segment_len(), (1 << 20) / 188 * 188);
        assert_eq!(l.frame_ready_ms(0, 0), 125);
        assert_eq!(l.frame_ready_ms(3, 3), 2000);
        assert_eq!(l.unit_start_ms(2), 1000);
    }

    #[test]
    fn a_small_budget_still_gets_one_frame_per_unit() {
        let l = Layout::new(200, 4, 10_000).unwrap();
        assert_eq!(l.frames(), 1);
        assert!(l.segment_len() > 10_000);
        assert_eq!(l.segment_len() % 188, 0);
        // A large budget is capped at 25 fps.
        let big = Layout::new(2000, 1, 100 << 20).unwrap();
        assert_eq!(big.frames(), 50);
    }

    #[test]
    fn segments_are_deterministic_and_units_tile_them() {
        let l = Layout::new(2000, 4, 1 << 20).unwrap();
        let a = build(&l, &spec(7)).unwrap();
        let b = build(&l, &spec(7)).unwrap();
        assert_eq!(a.bytes, b.bytes);
        assert_ne!(a.bytes, build(&l, &spec(8)).unwrap().bytes);
        assert_eq!(a.units.len(), 4);
        let mut at = 0;
        for u in &a.units {
            assert_eq!(u.start, at);
            assert_eq!(*u.frame_ends.last().unwrap(), u.end);
            assert_eq!(u.end % 188, 0);
            // Each unit starts with a PAT packet.
            assert_eq!(&a.bytes[u.start..u.start + 3], &[0x47, 0x40, 0x00]);
            at = u.end;
        }
        assert_eq!(at as u64, l.segment_len());
    }

    #[test]
    fn continuity_counters_run_on_across_segments() {
        let l = Layout::new(200, 4, 10_000).unwrap();
        let cc_of = |seg: &Segment, pid: u16| -> Vec<u8> {
            seg.bytes
                .chunks(188)
                .filter(|p| u16::from_be_bytes([p[1] & 0x1F, p[2]]) == pid)
                .map(|p| p[3] & 0x0F)
                .collect()
        };
        for pid in [0, ts::PMT_PID, ts::VIDEO_PID] {
            let mut all = cc_of(&build(&l, &spec(41)).unwrap(), pid);
            all.extend(cc_of(&build(&l, &spec(42)).unwrap(), pid));
            for w in all.windows(2) {
                assert_eq!(w[1], (w[0] + 1) % 16, "pid {pid}");
            }
        }
    }

    #[test]
    fn the_cache_builds_once_and_evicts_the_oldest() {
        let l = Layout::new(200, 1, 1000).unwrap();
        let c = MediaCache::new(l.segment_len());
        let mut builds = 0;
        for _ in 0..3 {
            c.get(Key::Vod(0, 1), || {
                builds += 1;
                build(&l, &spec(1))
            })
            .unwrap();
        }
        assert_eq!(builds, 1);
        for n in 0..CACHE_SEGMENTS as u64 {
            c.get(Key::Vod(1, n), || build(&l, &spec(n))).unwrap();
        }
        c.get(Key::Vod(0, 1), || {
            builds += 1;
            build(&l, &spec(1))
        })
        .unwrap();
        assert_eq!(builds, 2);
    }
}
