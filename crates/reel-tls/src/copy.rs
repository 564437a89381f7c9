//! The one copy of plaintext into a record buffer, kept off the CPU's slow case.
//!
//! glibc's `memcpy` moves large blocks with `rep movsb`. On AMD Zen cores (the EPYCs of
//! many edge fleets, with glibc 2.36 as Debian 12 ships it) `rep movsb` runs at about
//! 2 GB/s instead of 30-45 GB/s when the destination lies 1 to 63 bytes after the source
//! modulo 4 KiB (4K aliasing). reel hits exactly that case: an HTTP/2 frame's payload sits
//! at the same page offset in its pooled buffer as in the record buffer, shifted by the
//! 5-byte record header and the 9-byte frame header. Measured on this project's 2-core
//! EPYC machine, that copy took a quarter of all CPU at 2 MiB over HTTP/2.
//!
//! In that window the bytes go in pieces below glibc's `rep movsb` threshold (2 KiB at
//! the lowest), which glibc copies with vector moves at full speed; elsewhere one `memcpy`.

/// Pieces of a copy in the slow window: below every glibc `rep movsb` threshold.
const PIECE: usize = 1024;

/// Whether `dst` lies 1 to 63 bytes after `src` modulo 4 KiB.
fn aliased(dst: *const u8, src: *const u8) -> bool {
    let delta = (dst as usize).wrapping_sub(src as usize) % 4096;
    (1..64).contains(&delta)
}

/// Appends `src` to `out` (within its capacity, like `extend_from_slice`).
pub(crate) fn extend(out: &mut Vec<u8>, src: &[u8]) {
    let at = out.len();
    if src.len() <= PIECE || !aliased(out.as_ptr().wrapping_add(at), src.as_ptr()) {
        out.extend_from_slice(src);
        return;
    }
    out.resize(at + src.len(), 0);
    for (d, s) in out[at..].chunks_mut(PIECE).zip(src.chunks(PIECE)) {
        d.copy_from_slice(s);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_offset_copies_every_byte() {
        let src: Vec<u8> = (0..24_000u32).map(|i| (i * 7 + i / 251) as u8).collect();
        let mut in_window = 0;
        for skip in [0usize, 9, 4095] {
            let s = &src[skip..skip + 16_375];
            // Every destination page offset, so both paths run.
            for pre in 0..4160 {
                let mut out = Vec::with_capacity(24_000);
                out.resize(pre, 0xAA);
                in_window += usize::from(aliased(out.as_ptr().wrapping_add(pre), s.as_ptr()));
                extend(&mut out, s);
                assert!(out[..pre].iter().all(|b| *b == 0xAA));
                assert_eq!(&out[pre..], s, "skip {skip} pre {pre}");
            }
        }
        assert!(in_window >= 3 * 63, "{in_window}");
    }

    #[test]
    fn the_window_is_one_to_sixty_three_bytes_after_modulo_4k() {
        let base = 4096 * 100;
        let p = |n: usize| n as *const u8;
        assert!(!aliased(p(base), p(base)));
        assert!(aliased(p(base + 5), p(base)));
        assert!(aliased(p(base + 4096 * 3 + 63), p(base)));
        assert!(!aliased(p(base + 64), p(base)));
        assert!(!aliased(p(base - 5), p(base)));
    }
}
