//! Write coalescing for fills: the body bytes a fill has taken but not yet written, and
//! how much of them to write now.
//!
//! The kernel sizes a page-cache folio by the write that first creates it: a 4 KiB write
//! makes a 4 KiB folio, a 256 KiB write at a 256 KiB aligned offset one 256 KiB folio,
//! and those folios stay as they are for as long as the pages are cached. `sendfile` of
//! a body in large folios costs the kernel less than of the same bytes in small ones
//! (docs/store.md, "Fill writes"). So a fill writes its body in pieces that end on a
//! multiple of [`WRITE_UNIT`] of the file offset (the first piece from the body's start
//! to the first such boundary, the last piece at commit or when the caller flushes), one
//! gathered write (`pwritev`, io_uring `WRITEV`) of the chunks as the origin sent them.
//! Between writes at most one unit's worth of bytes waits here.

use std::collections::VecDeque;

use bytes::{Bytes, BytesMut};

/// Fills write their bodies in writes that end on a multiple of this many bytes of the
/// file offset (the largest folio the page cache makes on x86-64 is 2 MiB; see
/// docs/store.md for the sizes measured).
pub(super) const WRITE_UNIT: u64 = 256 << 10;

/// The write unit in use: [`WRITE_UNIT`], or `REEL_STORE_FILL_UNIT` (bytes, a power of
/// two of at least 4096; `0` writes every chunk as it comes, as before coalescing), for
/// measuring.
pub(super) fn write_unit() -> u64 {
    static UNIT: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *UNIT.get_or_init(|| {
        match std::env::var("REEL_STORE_FILL_UNIT").ok().and_then(|v| v.parse::<u64>().ok()) {
            Some(0) => 0,
            Some(u) if u >= 4096 && u.is_power_of_two() => u,
            _ => WRITE_UNIT,
        }
    })
}

/// More chunks than this pending are copied into one buffer (bounds the gathered
/// write's iovec count when an origin sends many tiny chunks).
const MAX_PIECES: usize = 64;

/// Body bytes taken by a fill and not yet written, in the order they came.
#[derive(Default)]
pub(super) struct Pending {
    bufs: VecDeque<Bytes>,
    len: u64,
}

impl Pending {
    /// Bytes pending.
    pub(super) fn len(&self) -> u64 {
        self.len
    }

    /// Adds the next chunk of the body.
    pub(super) fn push(&mut self, b: Bytes) {
        if b.is_empty() {
            return;
        }
        self.len += b.len() as u64;
        self.bufs.push_back(b);
        if self.bufs.len() > MAX_PIECES {
            let mut one = BytesMut::with_capacity(self.len as usize);
            for b in self.bufs.drain(..) {
                one.extend_from_slice(&b);
            }
            self.bufs.push_back(one.freeze());
        }
    }

    /// The pending bytes up to the last multiple of `unit` of the file offset, the first
    /// pending byte being at file offset `pos`; `None` when they do not reach one.
    pub(super) fn take_units(&mut self, pos: u64, unit: u64) -> Option<Vec<Bytes>> {
        if unit == 0 {
            return (self.len > 0).then(|| self.take_all());
        }
        let cut = (pos + self.len) / unit * unit;
        if cut <= pos {
            return None;
        }
        Some(self.take(cut - pos))
    }

    /// All pending bytes.
    pub(super) fn take_all(&mut self) -> Vec<Bytes> {
        self.len = 0;
        std::mem::take(&mut self.bufs).into()
    }

    /// The first `n` pending bytes (`n <= len`).
    fn take(&mut self, mut n: u64) -> Vec<Bytes> {
        let mut out = Vec::new();
        while n > 0 {
            let Some(b) = self.bufs.front_mut() else { break };
            let l = b.len() as u64;
            if l <= n {
                n -= l;
                self.len -= l;
                out.extend(self.bufs.pop_front());
            } else {
                out.push(b.split_to(n as usize));
                self.len -= n;
                n = 0;
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cat(v: &[Bytes]) -> Vec<u8> {
        v.iter().flat_map(|b| b.iter().copied()).collect()
    }

    #[test]
    fn writes_end_on_unit_boundaries_and_keep_the_order() {
        let body: Vec<u8> = (0..100_000u32).map(|i| (i * 7 + i / 251) as u8).collect();
        let mut p = Pending::default();
        let (unit, start) = (16_384u64, 4096u64);
        let (mut pos, mut out) = (start, Vec::new());
        for c in body.chunks(3001) {
            p.push(Bytes::copy_from_slice(c));
            if let Some(w) = p.take_units(pos, unit) {
                let n: u64 = w.iter().map(|b| b.len() as u64).sum();
                assert_eq!((pos + n) % unit, 0, "a write ends on a unit boundary");
                pos += n;
                out.extend(cat(&w));
            }
            assert!(p.len() < unit + 3001);
        }
        out.extend(cat(&p.take_all()));
        assert_eq!(p.len(), 0);
        assert_eq!(out, body);
    }

    #[test]
    fn many_tiny_chunks_are_merged() {
        let mut p = Pending::default();
        for i in 0..1000u32 {
            p.push(Bytes::from(vec![i as u8]));
        }
        assert!(p.bufs.len() <= MAX_PIECES);
        let all = cat(&p.take_all());
        assert_eq!(all, (0..1000u32).map(|i| i as u8).collect::<Vec<_>>());
    }

    #[test]
    fn nothing_to_write_below_the_next_boundary() {
        let mut p = Pending::default();
        p.push(Bytes::from(vec![1; 100]));
        assert!(p.take_units(4096, 8192).is_none());
        assert_eq!(p.len(), 100);
        let w = p.take_units(8100, 8192).unwrap();
        assert_eq!(cat(&w).len(), 92);
        assert_eq!(p.len(), 8);
    }
}
