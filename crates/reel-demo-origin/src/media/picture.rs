//! Synthetic pictures: a YCbCr 4:2:0 frame showing what a viewer needs to see the stream is
//! live: a label (stream or title), the media clock (wall-clock time of the frame for live,
//! position for VOD), the sequence/part/frame numbers, and a box sweeping once a second.
//!
//! Every sample stays within `[16, 240]`: no sample is ever `0x00`, so the I_PCM slice data
//! the encoder writes never holds two zero bytes in a row, needs no emulation-prevention
//! bytes (H.264 §7.4.1) and every encoded frame has the same size.

use font8x8::legacy::BASIC_LEGACY;

/// Picture width in pixels (16 macroblocks).
pub const WIDTH: usize = 256;
/// Picture height in pixels (9 macroblocks).
pub const HEIGHT: usize = 144;

/// A colour as (Y, Cb, Cr), each within `[16, 240]`.
pub(crate) type Ycc = (u8, u8, u8);

const WHITE: Ycc = (235, 128, 128);
const YELLOW: Ycc = (210, 16, 146);
const TRACK: Ycc = (60, 128, 128);

/// Background colours a stream picks from by its name, so two streams look different.
const BACKGROUNDS: [Ycc; 6] =
    [(41, 180, 110), (50, 150, 90), (45, 110, 160), (55, 170, 150), (40, 128, 128), (60, 100, 110)];

/// The frame buffers: full-resolution luma and quarter-resolution chroma planes.
pub(crate) struct Canvas {
    pub(crate) y: Vec<u8>,
    pub(crate) cb: Vec<u8>,
    pub(crate) cr: Vec<u8>,
}

/// What one frame shows.
pub(crate) struct Scene<'a> {
    /// Top line, e.g. `LIVE news` or `VOD title_002`.
    pub label: &'a str,
    /// Media time of the frame in ms (Unix time for live, position for VOD).
    pub media_ms: u64,
    /// Bottom line, e.g. `SEQ 123 P2 F3`.
    pub counter: &'a str,
    /// Background colour index (any value; reduced modulo the palette).
    pub background: u64,
}

impl Canvas {
    pub(crate) fn new() -> Self {
        Self {
            y: vec![16; WIDTH * HEIGHT],
            cb: vec![128; WIDTH * HEIGHT / 4],
            cr: vec![128; WIDTH * HEIGHT / 4],
        }
    }

    /// Draws `scene` over the whole canvas.
    pub(crate) fn draw(&mut self, scene: &Scene<'_>) {
        let bg = BACKGROUNDS[(scene.background % BACKGROUNDS.len() as u64) as usize];
        self.rect(0, 0, WIDTH, HEIGHT, bg);
        self.text(8, 8, 2, scene.label, WHITE);
        self.text(32, 48, 2, &clock(scene.media_ms), YELLOW);
        self.text(8, 120, 1, scene.counter, WHITE);
        // A 16×16 box sweeping the track once per second: motion at a glance.
        let travel = WIDTH - 16 - 16;
        let x = 8 + (scene.media_ms % 1000) as usize * travel / 1000;
        self.rect(8, 88, WIDTH - 16, 16, TRACK);
        self.rect(x, 88, 16, 16, WHITE);
    }

    /// Fills `w × h` at `(x, y)` (clipped; chroma at 2×2 granularity).
    fn rect(&mut self, x: usize, y: usize, w: usize, h: usize, c: Ycc) {
        let (x1, y1) = ((x + w).min(WIDTH), (y + h).min(HEIGHT));
        for row in y.min(HEIGHT)..y1 {
            self.y[row * WIDTH + x.min(x1)..row * WIDTH + x1].fill(c.0);
        }
        let cw = WIDTH / 2;
        for row in y / 2..y1.div_ceil(2).min(HEIGHT / 2) {
            let (a, b) = (row * cw + (x / 2).min(cw), row * cw + x1.div_ceil(2).min(cw));
            self.cb[a..b.max(a)].fill(c.1);
            self.cr[a..b.max(a)].fill(c.2);
        }
    }

    /// Draws ASCII `text` with the 8×8 font scaled by `scale`; other characters are blanks.
    fn text(&mut self, x: usize, y: usize, scale: usize, text: &str, c: Ycc) {
        for (i, ch) in text.chars().enumerate() {
            let glyph = BASIC_LEGACY.get(ch as usize).copied().unwrap_or([0; 8]);
            let gx = x + i * 8 * scale;
            for (row, bits) in glyph.iter().enumerate() {
                for col in 0..8 {
                    // font8x8 rows: bit 0 is the leftmost pixel.
                    if bits >> col & 1 == 1 {
                        self.rect(gx + col * scale, y + row * scale, scale, scale, c);
                    }
                }
            }
        }
    }
}

/// `HH:MM:SS.mmm` of `ms` modulo a day (UTC for Unix times).
pub(crate) fn clock(ms: u64) -> String {
    let s = ms / 1000;
    format!("{:02}:{:02}:{:02}.{:03}", s / 3600 % 24, s / 60 % 60, s % 60, ms % 1000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_stay_nonzero_and_in_range() {
        let mut c = Canvas::new();
        for ms in [0, 999, 1_700_000_123_456] {
            c.draw(&Scene {
                label: "LIVE news",
                media_ms: ms,
                counter: "SEQ 1 P2 F3",
                background: 5,
            });
            for p in [&c.y, &c.cb, &c.cr] {
                assert!(p.iter().all(|&v| (16..=240).contains(&v)));
            }
        }
    }

    #[test]
    fn the_picture_changes_with_time_and_label() {
        let mut a = Canvas::new();
        let mut b = Canvas::new();
        let scene = |ms, label| Scene { label, media_ms: ms, counter: "F0", background: 0 };
        a.draw(&scene(1000, "LIVE"));
        b.draw(&scene(1250, "LIVE"));
        assert_ne!(a.y, b.y);
        b.draw(&scene(1000, "LIVE"));
        assert_eq!(a.y, b.y);
        b.draw(&scene(1000, "VOD"));
        assert_ne!(a.y, b.y);
    }

    #[test]
    fn clock_format() {
        assert_eq!(clock(0), "00:00:00.000");
        assert_eq!(clock(86_400_000 + 3_723_004), "01:02:03.004");
    }
}
