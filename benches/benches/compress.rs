//! Criterion micro-benchmarks of compressed playlists (`[site.compress]`): the CPU of making
//! one representation of an LL-HLS live playlist and of a long VOD playlist, per brotli
//! quality and gzip level, with the sizes printed once per setting (the ratio the choice of
//! default trades against). A representation is made once per playlist version; this is the
//! cost of that one request.
use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use reel_cache::Compress;
use reel_cache::path::worker::encoded::compress;
use reel_config::Coding;

/// An LL-HLS live playlist as the demo origin writes one: six 2 s segments of four parts,
/// the parts of the last two listed, a preload hint and rendition reports.
fn live_playlist() -> Vec<u8> {
    let mut p = String::from(
        "#EXTM3U\n#EXT-X-VERSION:9\n#EXT-X-TARGETDURATION:2\n#EXT-X-PART-INF:PART-TARGET=0.5\n\
         #EXT-X-SERVER-CONTROL:CAN-BLOCK-RELOAD=YES,PART-HOLD-BACK=1.5,CAN-SKIP-UNTIL=12.0\n\
         #EXT-X-MEDIA-SEQUENCE:1180\n#EXT-X-PROGRAM-DATE-TIME:2026-12-07T20:00:00.000Z\n",
    );
    for s in 1180..1186 {
        if s >= 1184 {
            for part in 0..4 {
                p.push_str(&format!(
                    "#EXT-X-PART:DURATION=0.50000,URI=\"seg_{s}.part{part}.ts\"{}\n",
                    if part == 0 { ",INDEPENDENT=YES" } else { "" }
                ));
            }
        }
        p.push_str(&format!("#EXTINF:2.00000,\nseg_{s}.ts\n"));
    }
    p.push_str("#EXT-X-PART:DURATION=0.50000,URI=\"seg_1186.part0.ts\",INDEPENDENT=YES\n");
    p.push_str("#EXT-X-PRELOAD-HINT:TYPE=PART,URI=\"seg_1186.part1.ts\"\n");
    for r in ["720p", "480p"] {
        p.push_str(&format!(
            "#EXT-X-RENDITION-REPORT:URI=\"../{r}/index.m3u8\",LAST-MSN=1186,LAST-PART=0\n"
        ));
    }
    p.into_bytes()
}

/// A two-hour VOD playlist of 4 s segments with absolute URIs.
fn vod_playlist() -> Vec<u8> {
    let mut p = String::from(
        "#EXTM3U\n#EXT-X-VERSION:7\n#EXT-X-TARGETDURATION:4\n#EXT-X-PLAYLIST-TYPE:VOD\n",
    );
    for i in 0..1800 {
        p.push_str(&format!(
            "#EXTINF:4.000,\nhttps://media.example.test/vod/title_001/1080p/seg_{i:05}.ts\n"
        ));
    }
    p.push_str("#EXT-X-ENDLIST\n");
    p.into_bytes()
}

fn cfg(brotli_quality: u32, gzip_level: u32) -> Compress {
    Compress {
        types: Vec::new(),
        encodings: vec![Coding::Br, Coding::Gzip],
        min_size: 0,
        max_size: u64::MAX,
        brotli_quality,
        gzip_level,
    }
}

fn make(c: &mut Criterion) {
    for (name, body) in [("live", live_playlist()), ("vod", vod_playlist())] {
        let settings = [
            (Coding::Br, 1),
            (Coding::Br, 5),
            (Coding::Br, 9),
            (Coding::Br, 11),
            (Coding::Gzip, 1),
            (Coding::Gzip, 6),
            (Coding::Gzip, 9),
        ];
        for (coding, level) in settings {
            let cfg = cfg(level, level.clamp(1, 9));
            let out = compress(coding, &body, &cfg).map_or(0, |b| b.len());
            let tag = if coding == Coding::Br { "br" } else { "gzip" };
            eprintln!("{name} {tag} {level}: {} -> {out} bytes", body.len());
            c.bench_function(&format!("compress_{name}_{tag}_{level}"), |b| {
                b.iter(|| compress(coding, black_box(&body), &cfg))
            });
        }
    }
}

criterion_group!(benches, make);
criterion_main!(benches);
