//! An index entry: where a complete object lives ([`Loc`]), packed into the 16 bytes of
//! an [`Entry`] with its accessed and refreshed flags, and the limits that packing sets
//! on volumes and bodies. Read by the index, the fills, the checkpoint and the scan.

use std::num::NonZeroU16;
use std::sync::atomic::{AtomicU8, Ordering};

use crate::format::{self, ALIGN, TRAILER_LEN};

/// Most volumes one disk may have: an entry names its volume in 16 bits.
pub(crate) const MAX_VOLUMES: u64 = u16::MAX as u64 - 1;
/// Largest body an entry can describe (40 bits).
pub(crate) const MAX_BODY: u64 = (1 << 40) - 1;

const _: () = assert!(std::mem::size_of::<Entry>() == 16);

/// Set on an entry read since it was written: earns a second chance at reclaim.
const ACCESSED: u8 = 1;
/// Set on an entry whose metadata was replaced: the newest is in a metadata record,
/// named in the shard's side table (`Disk::meta_at`).
const REFRESHED: u8 = 2;

/// Where a complete object lives, packed into 16 bytes.
pub(super) struct Entry {
    /// Volume number + 1.
    vol1: NonZeroU16,
    /// 4 KiB pages of the record header before the body.
    hdr_pages: u8,
    flags: AtomicU8,
    /// Record offset in 4 KiB pages.
    rec_page: u32,
    len_lo: u32,
    /// Low 24 bits: the volume's incarnation (its low bits); high 8: body length bits
    /// 32..40.
    seq_len: u32,
}

/// An [`Entry`] unpacked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Loc {
    pub(super) vol: u32,
    /// Low 24 bits of the incarnation.
    pub(super) seq24: u32,
    pub(super) rec_off: u64,
    pub(super) body_off: u64,
    pub(super) body_len: u64,
}

impl Loc {
    /// A location. It packs into an [`Entry`] when the volume and the body length are
    /// within [`MAX_VOLUMES`] and [`MAX_BODY`], which `Disk::open` ensures.
    pub(super) fn new(vol: u32, seq: u64, rec_off: u64, body_off: u64, body_len: u64) -> Loc {
        Loc { vol, seq24: seq24(seq), rec_off, body_off, body_len }
    }

    /// Disk bytes of the record (header pages, body, trailer, padding).
    pub(super) fn span(&self) -> u64 {
        format::align_up(self.body_off - self.rec_off + self.body_len + TRAILER_LEN as u64)
    }

    /// Whether this is the object at `rec_off` of incarnation `seq` of volume `vol`.
    pub(super) fn is(&self, vol: u32, seq: u64, rec_off: u64) -> bool {
        self.vol == vol && self.seq24 == seq24(seq) && self.rec_off == rec_off
    }
}

/// The low 24 bits of an incarnation, as entries keep it.
pub(super) fn seq24(seq: u64) -> u32 {
    (seq & 0xff_ffff) as u32
}

impl Entry {
    pub(super) fn new(l: Loc) -> Entry {
        debug_assert!(l.rec_off.is_multiple_of(ALIGN) && l.body_off.is_multiple_of(ALIGN));
        debug_assert!(u64::from(l.vol) < MAX_VOLUMES && l.body_len <= MAX_BODY);
        let hdr_pages = ((l.body_off - l.rec_off) / ALIGN) as u8;
        Entry {
            vol1: NonZeroU16::new((l.vol + 1) as u16).unwrap_or(NonZeroU16::MAX),
            hdr_pages,
            flags: AtomicU8::new(0),
            rec_page: (l.rec_off / ALIGN) as u32,
            len_lo: l.body_len as u32,
            seq_len: l.seq24 | (((l.body_len >> 32) as u32) << 24),
        }
    }

    pub(super) fn loc(&self) -> Loc {
        let rec_off = u64::from(self.rec_page) * ALIGN;
        Loc {
            vol: u32::from(self.vol1.get()) - 1,
            seq24: self.seq_len & 0xff_ffff,
            rec_off,
            body_off: rec_off + u64::from(self.hdr_pages) * ALIGN,
            body_len: u64::from(self.len_lo) | (u64::from(self.seq_len >> 24) << 32),
        }
    }

    pub(super) fn vol(&self) -> u32 {
        u32::from(self.vol1.get()) - 1
    }

    pub(super) fn span(&self) -> u64 {
        self.loc().span()
    }

    /// Marks the entry read (relaxed: a hint for reclaim).
    pub(super) fn touch(&self) {
        if self.flags.load(Ordering::Relaxed) & ACCESSED == 0 {
            self.flags.fetch_or(ACCESSED, Ordering::Relaxed);
        }
    }

    pub(super) fn accessed(&self) -> bool {
        self.flags.load(Ordering::Relaxed) & ACCESSED != 0
    }

    pub(super) fn refreshed(&self) -> bool {
        self.flags.load(Ordering::Relaxed) & REFRESHED != 0
    }

    pub(super) fn set_refreshed(&self) {
        self.flags.fetch_or(REFRESHED, Ordering::Relaxed);
    }
}
