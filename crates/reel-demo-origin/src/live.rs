//! The live timeline and its media playlists, with Low-Latency HLS (draft-pantos-hls-
//! rfc8216bis-17): which parts and segments exist at a given time, the playlist version that
//! lists them, delta updates (§6.2.5.1) and the blocking-reload rules (§6.2.5.2). Pure
//! functions of time; the service does the waiting.
//!
//! Time is Unix milliseconds. Segment `n` covers `[n·d, (n+1)·d)`; it is cut into `parts`
//! parts (part `p` starts at `n·d + ⌊p·d/parts⌋`), numbered globally `g = n·parts + p`. A part
//! is *complete* at its end, and the part in production is the one the playlist hints
//! (EXT-X-PRELOAD-HINT). A playlist *version* is named by its newest complete part, and is
//! released when that part completes. With `parts == 0` the playlist is classic (no part
//! tags) and the version is the newest complete segment.

use std::fmt::Write as _;

/// How far from the live edge `EXT-X-PART` tags stay listed, in target durations (§4.4.4.9:
/// parts SHOULD be removed once more than three target durations from the end).
const PART_RETENTION_TDS: u64 = 3;
/// `CAN-SKIP-UNTIL` in target durations: the least the spec allows (§4.4.3.8).
const SKIP_TDS: u64 = 6;
/// `PART-HOLD-BACK` in part targets: the SHOULD of §4.4.3.8.
const PART_HOLD_BACK_PARTS: u64 = 3;

/// The live stream's shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Timeline {
    /// Segment duration in ms (at least 1).
    pub seg_ms: u64,
    /// Parts per segment; 0 for a classic playlist.
    pub parts: u32,
    /// Segments listed in a full playlist (at least 1).
    pub window: u64,
}

/// A refusal of a blocking request: status and reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Refusal(pub u16, pub &'static str);

/// What the client asked of the playlist (the `_HLS_*` delivery directives, §6.2.5).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Directives {
    pub msn: Option<u64>,
    pub part: Option<u64>,
    pub skip: bool,
}

impl Directives {
    /// Parses the query string; every malformed directive is a 400 reason.
    pub(crate) fn parse(query: Option<&str>) -> Result<Self, Refusal> {
        let mut d = Self::default();
        let num = |v: &str, what| {
            if v.is_empty() || v.len() > 19 || !v.bytes().all(|b| b.is_ascii_digit()) {
                return Err(Refusal(400, what));
            }
            v.parse::<u64>().map_err(|_| Refusal(400, what))
        };
        for kv in query.unwrap_or("").split('&') {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            match k {
                "_HLS_msn" => d.msn = Some(num(v, "_HLS_msn: not a decimal integer")?),
                "_HLS_part" => d.part = Some(num(v, "_HLS_part: not a decimal integer")?),
                "_HLS_skip" => match v {
                    "YES" | "v2" => d.skip = true,
                    _ => return Err(Refusal(400, "_HLS_skip: expected YES or v2")),
                },
                _ => {}
            }
        }
        // §6.2.5.2: _HLS_part without _HLS_msn MUST be a Bad Request.
        if d.part.is_some() && d.msn.is_none() {
            return Err(Refusal(400, "_HLS_part without _HLS_msn"));
        }
        Ok(d)
    }
}

/// A rendered playlist version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Playlist {
    pub text: String,
    /// Unix ms when this version was released (its newest part or segment completed).
    pub release_ms: u64,
}

impl Timeline {
    fn units(&self) -> u64 {
        u64::from(self.parts.max(1))
    }

    /// Whether LL-HLS tags are produced.
    pub(crate) fn low_latency(&self) -> bool {
        self.parts > 0
    }

    /// `#EXT-X-TARGETDURATION`: every EXTINF rounded to the nearest integer must not exceed
    /// it (RFC 8216 §4.3.3.1).
    pub(crate) fn target_secs(&self) -> u64 {
        self.seg_ms.div_ceil(1000).max(1)
    }

    /// `PART-TARGET` in ms: the longest part.
    pub(crate) fn part_target_ms(&self) -> u64 {
        self.seg_ms.div_ceil(self.units()).max(1)
    }

    /// Start of part `g` (Unix ms).
    pub(crate) fn part_start_ms(&self, g: u64) -> u64 {
        let u = self.units();
        (g / u) * self.seg_ms + (g % u) * self.seg_ms / u
    }

    /// End of part `g`: when it is complete.
    pub(crate) fn part_end_ms(&self, g: u64) -> u64 {
        self.part_start_ms(g + 1)
    }

    /// The part in production at `now_ms`.
    pub(crate) fn current_part(&self, now_ms: u64) -> u64 {
        let u = self.units();
        let (n, off) = (now_ms / self.seg_ms, now_ms % self.seg_ms);
        // The largest p with ⌊p·d/u⌋ ≤ off, i.e. p·d < (off+1)·u.
        n * u + ((off + 1) * u).div_ceil(self.seg_ms) - 1
    }

    /// The global number of part `p` of segment `msn`.
    pub(crate) fn part_index(&self, msn: u64, p: u64) -> u64 {
        msn.saturating_mul(self.units()).saturating_add(p)
    }

    /// `(segment, part)` of global part `g`.
    pub(crate) fn split(&self, g: u64) -> (u64, u64) {
        (g / self.units(), g % self.units())
    }

    /// The playlist version (newest complete part) at `now_ms`.
    pub(crate) fn version(&self, now_ms: u64) -> u64 {
        self.current_part(now_ms).saturating_sub(1)
    }

    /// The newest complete segment in version `g_last`.
    pub(crate) fn last_segment(&self, g_last: u64) -> u64 {
        ((g_last + 1) / self.units()).saturating_sub(1)
    }

    /// Decides a blocking reload (§6.2.5.2) at `now_ms`: `Ok(None)` answers at once,
    /// `Ok(Some(t))` holds the request until Unix ms `t`, `Err` refuses it (400).
    pub(crate) fn block(&self, d: &Directives, now_ms: u64) -> Result<Option<u64>, Refusal> {
        let Some(msn) = d.msn else { return Ok(None) };
        let g_last = self.version(now_ms);
        // "If the _HLS_msn is greater than the Media Sequence Number of the last Media
        // Segment in the current Playlist plus two ... the server SHOULD immediately return
        // Bad Request, such as HTTP 400."
        if msn > self.last_segment(g_last).saturating_add(2) {
            return Err(Refusal(400, "_HLS_msn more than two segments past the playlist"));
        }
        let u = self.units();
        let need = match d.part {
            // Without _HLS_part, or with no parts at all: the whole segment.
            Some(p) if self.low_latency() => {
                // "If the Client requests a Part Index greater than that of the final Partial
                // Segment of the Parent Segment, the Server MUST treat the request as one for
                // Part Index 0 of the following Parent Segment."
                if p >= u { self.part_index(msn + 1, 0) } else { self.part_index(msn, p) }
            }
            _ => self.part_index(msn, u - 1),
        };
        if need <= g_last {
            return Ok(None);
        }
        if d.part.is_some() && self.low_latency() {
            // "... or if the _HLS_part exceeds the last Partial Segment in the current
            // Playlist by the Advance Part Limit": 3 / PART-TARGET below one second, else 3.
            let pt = self.part_target_ms();
            let limit = if pt < 1000 { 3000 / pt } else { 3 };
            if need - g_last > limit {
                return Err(Refusal(400, "_HLS_part beyond the Advance Part Limit"));
            }
        }
        // These limits bound every wait below two target durations, so the 503 that §6.2.5.2
        // asks for after three target durations of blocking never applies: the timeline
        // never stalls.
        Ok(Some(self.part_end_ms(need)))
    }

    /// The playlist of version `g_last`, a delta update (§6.2.5.1) when `skip`.
    pub(crate) fn render(&self, g_last: u64, skip: bool) -> Playlist {
        let u = self.units();
        let ll = self.low_latency();
        let td = self.target_secs();
        let last = self.last_segment(g_last);
        let first = last.saturating_sub(self.window - 1);
        let end_ms = self.part_end_ms(g_last);
        let seg_end = |n: u64| (n + 1) * self.seg_ms;
        let skip_ms = SKIP_TDS * td * 1000;
        // Segments further from the end than the Skip Boundary are replaced by EXT-X-SKIP.
        let skipped = if skip {
            (first..=last).take_while(|&n| end_ms - seg_end(n) > skip_ms).count()
        } else {
            0
        };
        let pt = self.part_target_ms();
        let mut s = String::with_capacity(256 + 64 * self.window as usize * (1 + u as usize));
        // EXT-X-SKIP needs protocol version 9 (§7); the rest fits version 6.
        let version = if skipped > 0 { 9 } else { 6 };
        let _ = write!(
            s,
            "#EXTM3U\n#EXT-X-VERSION:{version}\n#EXT-X-TARGETDURATION:{td}\n\
             #EXT-X-INDEPENDENT-SEGMENTS\n#EXT-X-SERVER-CONTROL:CAN-BLOCK-RELOAD=YES,\
             CAN-SKIP-UNTIL={}.0",
            SKIP_TDS * td
        );
        if ll {
            let _ = write!(
                s,
                ",PART-HOLD-BACK={}\n#EXT-X-PART-INF:PART-TARGET={}",
                secs(PART_HOLD_BACK_PARTS * pt),
                secs(pt)
            );
        }
        let _ = write!(s, "\n#EXT-X-MEDIA-SEQUENCE:{first}\n");
        if skipped > 0 {
            let _ = writeln!(s, "#EXT-X-SKIP:SKIPPED-SEGMENTS={skipped}");
        }
        let listed = first + skipped as u64;
        let _ = writeln!(s, "#EXT-X-PROGRAM-DATE-TIME:{}", iso8601(listed * self.seg_ms));
        let part_line = |s: &mut String, g: u64| {
            let (n, p) = self.split(g);
            let dur = self.part_end_ms(g) - self.part_start_ms(g);
            // Every part starts with an IDR picture.
            let _ = writeln!(
                s,
                "#EXT-X-PART:DURATION={},URI=\"seg_{n}.part{p}.ts\",INDEPENDENT=YES",
                secs(dur)
            );
        };
        for n in listed..=last {
            if ll && seg_end(n) + PART_RETENTION_TDS * td * 1000 > end_ms {
                for g in self.part_index(n, 0)..self.part_index(n + 1, 0) {
                    part_line(&mut s, g);
                }
            }
            let _ = write!(s, "#EXTINF:{},\nseg_{n}.ts\n", secs(self.seg_ms));
        }
        if ll {
            for g in self.part_index(last + 1, 0)..=g_last {
                part_line(&mut s, g);
            }
            let (n, p) = self.split(g_last + 1);
            let _ = writeln!(s, "#EXT-X-PRELOAD-HINT:TYPE=PART,URI=\"seg_{n}.part{p}.ts\"");
        }
        Playlist { text: s, release_ms: end_ms }
    }
}

/// Milliseconds as decimal seconds with three decimals.
fn secs(ms: u64) -> String {
    format!("{}.{:03}", ms / 1000, ms % 1000)
}

/// Unix ms as an ISO 8601 UTC date-time with milliseconds (RFC 3339), for
/// `EXT-X-PROGRAM-DATE-TIME` (RFC 8216 §4.3.2.6). Civil date from days since the epoch by
/// Howard Hinnant's `civil_from_days` algorithm.
pub(crate) fn iso8601(unix_ms: u64) -> String {
    let days = (unix_ms / 86_400_000) as i64;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    let t = unix_ms % 86_400_000;
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
        t / 3_600_000,
        t / 60_000 % 60,
        t / 1000 % 60,
        t % 1000
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const LL: Timeline = Timeline { seg_ms: 2000, parts: 4, window: 10 };

    fn d(msn: Option<u64>, part: Option<u64>) -> Directives {
        Directives { msn, part, skip: false }
    }

    #[test]
    fn part_boundaries_and_the_part_in_production() {
        assert_eq!(LL.part_start_ms(0), 0);
        assert_eq!(LL.part_start_ms(5), 2500);
        assert_eq!(LL.part_end_ms(7), 4000);
        for (now, g) in [(0, 0), (499, 0), (500, 1), (1999, 3), (2000, 4), (2501, 5)] {
            assert_eq!(LL.current_part(now), g, "{now}");
        }
        let odd = Timeline { seg_ms: 1000, parts: 3, window: 3 };
        for now in 0..3000 {
            let g = odd.current_part(now);
            assert!(odd.part_start_ms(g) <= now && now < odd.part_end_ms(g), "{now} {g}");
        }
        assert_eq!(LL.split(4 * 7 + 2), (7, 2));
        assert_eq!(LL.last_segment(4 * 7 + 3), 7);
        assert_eq!(LL.last_segment(4 * 7 + 2), 6);
    }

    #[test]
    fn full_playlist_lists_window_recent_parts_and_the_hint() {
        // Version: part 2 of segment 100 complete, part 3 in production.
        let g = LL.part_index(100, 2);
        let p = LL.render(g, false);
        assert_eq!(p.release_ms, 100 * 2000 + 1500);
        let t = &p.text;
        assert!(t.starts_with("#EXTM3U\n#EXT-X-VERSION:6\n#EXT-X-TARGETDURATION:2\n"), "{t}");
        assert!(
            t.contains(
                "#EXT-X-SERVER-CONTROL:CAN-BLOCK-RELOAD=YES,CAN-SKIP-UNTIL=12.0,\
                 PART-HOLD-BACK=1.500\n#EXT-X-PART-INF:PART-TARGET=0.500\n"
            ),
            "{t}"
        );
        assert!(t.contains("#EXT-X-MEDIA-SEQUENCE:90\n"), "{t}");
        assert!(t.contains("#EXT-X-PROGRAM-DATE-TIME:1970-01-01T00:03:00.000Z\n"), "{t}");
        assert_eq!(t.matches("#EXTINF:2.000,\n").count(), 10);
        assert!(t.contains("\nseg_99.ts\n") && !t.contains("seg_100.ts\n"));
        // Parts of segments ending within 6 s of the end (97, 98, 99) and 100's first three.
        assert_eq!(t.matches("#EXT-X-PART:").count(), 3 * 4 + 3, "{t}");
        assert!(t.contains("#EXT-X-PART:DURATION=0.500,URI=\"seg_97.part0.ts\",INDEPENDENT=YES\n"));
        assert!(!t.contains("seg_96.part"));
        assert!(t.ends_with(
            "#EXT-X-PART:DURATION=0.500,URI=\"seg_100.part2.ts\",INDEPENDENT=YES\n\
             #EXT-X-PRELOAD-HINT:TYPE=PART,URI=\"seg_100.part3.ts\"\n"
        ));
    }

    #[test]
    fn delta_update_skips_segments_beyond_the_skip_boundary() {
        let g = LL.part_index(100, 2);
        let t = LL.render(g, true).text;
        // End at 201.5 s; segments ending more than 12 s before: 90..=93 (end ≤ 188 s).
        assert!(t.contains("#EXT-X-VERSION:9\n"), "{t}");
        assert!(t.contains("#EXT-X-MEDIA-SEQUENCE:90\n#EXT-X-SKIP:SKIPPED-SEGMENTS=4\n"), "{t}");
        assert_eq!(t.matches("#EXTINF:").count(), 6);
        assert!(
            t.contains("#EXT-X-PROGRAM-DATE-TIME:1970-01-01T00:03:08.000Z\n#EXTINF:2.000,\n"),
            "{t}"
        );
        assert!(t.contains("\nseg_94.ts\n") && !t.contains("seg_93.ts"), "{t}");
        // With a short window nothing is skipped, and the version stays 6.
        let short = Timeline { window: 6, ..LL };
        let t = short.render(g, true).text;
        assert!(!t.contains("EXT-X-SKIP") && t.contains("#EXT-X-VERSION:6\n"), "{t}");
    }

    #[test]
    fn classic_playlists_have_no_part_tags() {
        let c = Timeline { seg_ms: 200, parts: 0, window: 6 };
        let t = c.render(c.version(10_000), false).text;
        assert!(t.contains("#EXT-X-SERVER-CONTROL:CAN-BLOCK-RELOAD=YES,CAN-SKIP-UNTIL=6.0\n"));
        assert!(!t.contains("PART"), "{t}");
        assert_eq!(t.matches("#EXTINF:0.200,").count(), 6);
        // At 10 s segment 49 (9.8-10 s) has just completed.
        assert!(t.ends_with("\nseg_49.ts\n") && !t.contains("seg_50"), "{t}");
    }

    #[test]
    fn blocking_rules() {
        // At 201.6 s: segment 99 complete, parts 0..=2 of 100 complete, part 3 in production.
        let now = 201_600;
        assert_eq!(LL.version(now), LL.part_index(100, 2));
        assert_eq!(LL.block(&d(None, None), now), Ok(None));
        assert_eq!(LL.block(&d(Some(99), None), now), Ok(None));
        assert_eq!(LL.block(&d(Some(100), Some(2)), now), Ok(None));
        assert_eq!(LL.block(&d(Some(100), Some(3)), now), Ok(Some(202_000)));
        assert_eq!(LL.block(&d(Some(100), None), now), Ok(Some(202_000)));
        // A part index past the last part of 100 means part 0 of 101.
        assert_eq!(LL.block(&d(Some(100), Some(4)), now), Ok(Some(202_500)));
        // The last segment (99) plus two is the furthest one may ask for.
        assert_eq!(LL.block(&d(Some(101), None), now), Ok(Some(204_000)));
        assert_eq!(LL.block(&d(Some(102), None), now).unwrap_err().0, 400);
        assert_eq!(LL.block(&d(Some(103), Some(0)), now).unwrap_err().0, 400);
        // Just after segment 99 completed: six parts (3 s at 0.5 s parts) ahead is the
        // Advance Part Limit.
        let now = 200_100;
        assert_eq!(LL.block(&d(Some(101), Some(1)), now), Ok(Some(203_000)));
        assert_eq!(LL.block(&d(Some(101), Some(2)), now).unwrap_err().0, 400);
        // Classic: _HLS_part is ignored, the segment is awaited.
        let c = Timeline { parts: 0, ..LL };
        assert_eq!(c.block(&d(Some(100), Some(0)), 201_600), Ok(Some(202_000)));
    }

    #[test]
    fn directives_parse_and_refuse_malformed_values() {
        assert_eq!(Directives::parse(None), Ok(Directives::default()));
        let x = Directives::parse(Some("_HLS_msn=5&_HLS_part=2&_HLS_skip=YES&x=1")).unwrap();
        assert_eq!(x, Directives { msn: Some(5), part: Some(2), skip: true });
        assert!(Directives::parse(Some("_HLS_skip=v2")).unwrap().skip);
        for bad in [
            "_HLS_part=1",
            "_HLS_msn=abc",
            "_HLS_msn=",
            "_HLS_msn=-1",
            "_HLS_skip=NO",
            "_HLS_msn=1&_HLS_part=+1",
            "_HLS_msn=99999999999999999999",
        ] {
            assert_eq!(Directives::parse(Some(bad)).map_err(|r| r.0), Err(400), "{bad}");
        }
    }

    #[test]
    fn iso8601_dates() {
        assert_eq!(iso8601(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(iso8601(951_782_400_000 + 1), "2000-02-29T00:00:00.001Z");
        assert_eq!(iso8601(1_794_916_800_123), "2026-11-17T12:00:00.123Z");
    }
}
