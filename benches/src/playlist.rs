//! Just enough of an HLS media playlist parser (RFC 8216 §4.3) for viewers:
//! target duration, media sequence, end list, and the segment URIs with their
//! durations and media sequence numbers, resolved against the playlist path; and for
//! Low-Latency HLS (draft-pantos-hls-rfc8216bis §4.4): parts, the preload hint, the
//! server's delivery directives and the segments a delta update skipped.

/// Why a playlist could not be used.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PlaylistError {
    /// Not starting with `#EXTM3U` (RFC 8216 §4.3.1.1).
    #[error("not an M3U8 playlist")]
    NotM3u8,
    /// A tag value that should be a number was not.
    #[error("bad value in {0}")]
    BadTag(&'static str),
    /// No `#EXT-X-TARGETDURATION` (required, RFC 8216 §4.3.3.1).
    #[error("missing #EXT-X-TARGETDURATION")]
    NoTargetDuration,
    /// A segment URI pointing at another server.
    #[error("segment URI on another host: {0}")]
    ForeignUri(String),
}

/// One media segment.
#[derive(Debug, Clone, PartialEq)]
pub struct Segment {
    /// Media sequence number (RFC 8216 §6.3.2: first segment's is `EXT-X-MEDIA-SEQUENCE`).
    pub msn: u64,
    /// `#EXTINF` duration in seconds.
    pub duration: f64,
    /// Absolute path (and query) on the same server.
    pub path: String,
}

/// One partial segment (`EXT-X-PART`, rfc8216bis §4.4.4.9).
#[derive(Debug, Clone, PartialEq)]
pub struct Part {
    /// Media sequence number of its parent segment.
    pub msn: u64,
    /// Index within the parent segment, from 0.
    pub index: u64,
    /// `DURATION` in seconds.
    pub duration: f64,
    /// Absolute path (and query) on the same server.
    pub path: String,
}

/// `EXT-X-SERVER-CONTROL` (rfc8216bis §4.4.3.8).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ServerControl {
    /// `CAN-BLOCK-RELOAD=YES`.
    pub can_block_reload: bool,
    /// `CAN-SKIP-UNTIL`, seconds: delta updates are offered.
    pub can_skip_until: Option<f64>,
    /// `PART-HOLD-BACK`, seconds.
    pub part_hold_back: Option<f64>,
}

/// A parsed media playlist.
#[derive(Debug, Clone, PartialEq)]
pub struct MediaPlaylist {
    /// `#EXT-X-TARGETDURATION` in seconds.
    pub target_duration: f64,
    /// `#EXT-X-MEDIA-SEQUENCE` (0 when absent).
    pub media_sequence: u64,
    /// `#EXT-X-ENDLIST` present (VOD or ended event).
    pub ended: bool,
    /// Segments in playlist order.
    pub segments: Vec<Segment>,
    /// Segments replaced by `EXT-X-SKIP` in a delta update (rfc8216bis §4.4.5.2).
    pub skipped: u64,
    /// Parts in playlist order; those after the last segment belong to the next one.
    pub parts: Vec<Part>,
    /// `EXT-X-PART-INF:PART-TARGET`, seconds.
    pub part_target: Option<f64>,
    /// `EXT-X-PRELOAD-HINT:TYPE=PART` URI, resolved, with the `(msn, index)` it stands for.
    pub preload_hint: Option<Part>,
    /// `EXT-X-SERVER-CONTROL`.
    pub server_control: ServerControl,
}

/// Resolves a URI line against the playlist's path (RFC 3986 §5.2, the subset HLS uses):
/// absolute paths stay, `http://same-authority/...` is reduced to its path, anything
/// else is relative to the playlist's directory.
pub fn resolve(playlist_path: &str, authority: &str, uri: &str) -> Result<String, PlaylistError> {
    if let Some(rest) = uri.strip_prefix("http://").or_else(|| uri.strip_prefix("https://")) {
        let (auth, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
        if !auth.eq_ignore_ascii_case(authority) {
            return Err(PlaylistError::ForeignUri(uri.to_string()));
        }
        return Ok(if path.is_empty() { "/".into() } else { path.to_string() });
    }
    if uri.starts_with('/') {
        return Ok(uri.to_string());
    }
    let base = playlist_path.split(['?', '#']).next().unwrap_or("/");
    let dir = &base[..base.rfind('/').map_or(0, |i| i + 1)];
    let dir = if dir.is_empty() { "/" } else { dir };
    Ok(format!("{dir}{uri}"))
}

/// The value of `NAME=` in an attribute list (RFC 8216 §4.2), quotes removed.
fn attr<'a>(list: &'a str, name: &str) -> Option<&'a str> {
    let mut rest = list;
    while !rest.is_empty() {
        let (key, after) = rest.split_once('=')?;
        let (value, next) = if let Some(q) = after.strip_prefix('"') {
            let end = q.find('"')?;
            (&q[..end], q[end + 1..].strip_prefix(',').unwrap_or(""))
        } else {
            after.split_once(',').unwrap_or((after, ""))
        };
        if key.trim() == name {
            return Some(value);
        }
        rest = next;
    }
    None
}

enum Entry<'a> {
    Segment(f64, &'a str),
    Part(f64, &'a str),
}

/// Parses a media playlist fetched from `playlist_path` on `authority` (the Host header value).
pub fn parse(
    text: &str,
    playlist_path: &str,
    authority: &str,
) -> Result<MediaPlaylist, PlaylistError> {
    let mut lines = text.lines().map(str::trim).filter(|l| !l.is_empty());
    if lines.next() != Some("#EXTM3U") {
        return Err(PlaylistError::NotM3u8);
    }
    let mut target = None;
    let mut media_sequence = 0u64;
    let mut ended = false;
    let mut pending_duration: Option<f64> = None;
    let mut raw = Vec::new();
    let mut skipped = 0u64;
    let mut part_target = None;
    let mut hint = None;
    let mut server_control = ServerControl::default();
    let float = |v: Option<&str>, tag| -> Result<Option<f64>, PlaylistError> {
        v.map(|v| v.trim().parse::<f64>().map_err(|_| PlaylistError::BadTag(tag))).transpose()
    };
    for line in lines {
        if let Some(v) = line.strip_prefix("#EXT-X-TARGETDURATION:") {
            target = Some(
                v.trim()
                    .parse::<f64>()
                    .map_err(|_| PlaylistError::BadTag("EXT-X-TARGETDURATION"))?,
            );
        } else if let Some(v) = line.strip_prefix("#EXT-X-MEDIA-SEQUENCE:") {
            media_sequence =
                v.trim().parse().map_err(|_| PlaylistError::BadTag("EXT-X-MEDIA-SEQUENCE"))?;
        } else if line == "#EXT-X-ENDLIST" {
            ended = true;
        } else if let Some(v) = line.strip_prefix("#EXTINF:") {
            let d = v.split(',').next().unwrap_or("").trim();
            pending_duration = Some(d.parse().map_err(|_| PlaylistError::BadTag("EXTINF"))?);
        } else if let Some(v) = line.strip_prefix("#EXT-X-SKIP:") {
            skipped = attr(v, "SKIPPED-SEGMENTS")
                .and_then(|n| n.trim().parse().ok())
                .ok_or(PlaylistError::BadTag("EXT-X-SKIP"))?;
        } else if let Some(v) = line.strip_prefix("#EXT-X-PART-INF:") {
            part_target = float(attr(v, "PART-TARGET"), "EXT-X-PART-INF")?;
        } else if let Some(v) = line.strip_prefix("#EXT-X-SERVER-CONTROL:") {
            server_control = ServerControl {
                can_block_reload: attr(v, "CAN-BLOCK-RELOAD") == Some("YES"),
                can_skip_until: float(attr(v, "CAN-SKIP-UNTIL"), "EXT-X-SERVER-CONTROL")?,
                part_hold_back: float(attr(v, "PART-HOLD-BACK"), "EXT-X-SERVER-CONTROL")?,
            };
        } else if let Some(v) = line.strip_prefix("#EXT-X-PART:") {
            let d = float(attr(v, "DURATION"), "EXT-X-PART")?.unwrap_or(0.0);
            raw.push(Entry::Part(d, attr(v, "URI").ok_or(PlaylistError::BadTag("EXT-X-PART"))?));
        } else if let Some(v) = line.strip_prefix("#EXT-X-PRELOAD-HINT:") {
            if attr(v, "TYPE") == Some("PART") {
                hint = attr(v, "URI");
            }
        } else if line.starts_with('#') {
            // Other tags and comments do not matter to a load-generating viewer.
        } else {
            raw.push(Entry::Segment(pending_duration.take().unwrap_or(0.0), line));
        }
    }
    let target_duration = target.ok_or(PlaylistError::NoTargetDuration)?;
    if !(target_duration.is_finite() && target_duration >= 0.0) {
        return Err(PlaylistError::BadTag("EXT-X-TARGETDURATION"));
    }
    let mut segments = Vec::new();
    let mut parts = Vec::new();
    // Parts precede their parent segment's URI line.
    let mut msn = media_sequence.saturating_add(skipped);
    let mut index = 0;
    for entry in raw {
        match entry {
            Entry::Segment(duration, uri) => {
                let path = resolve(playlist_path, authority, uri)?;
                segments.push(Segment { msn, duration, path });
                msn += 1;
                index = 0;
            }
            Entry::Part(duration, uri) => {
                let path = resolve(playlist_path, authority, uri)?;
                parts.push(Part { msn, index, duration, path });
                index += 1;
            }
        }
    }
    let preload_hint = match hint {
        Some(uri) => {
            Some(Part { msn, index, duration: 0.0, path: resolve(playlist_path, authority, uri)? })
        }
        None => None,
    };
    Ok(MediaPlaylist {
        target_duration,
        media_sequence,
        ended,
        segments,
        skipped,
        parts,
        part_target,
        preload_hint,
        server_control,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIVE: &str = "#EXTM3U\n#EXT-X-VERSION:3\n#EXT-X-TARGETDURATION:2\n#EXT-X-MEDIA-SEQUENCE:41\n\
        #EXTINF:2.000,\nseg_41.ts\n#EXTINF:2.000,\nseg_42.ts\n#EXTINF:1.5,title\n/abs/seg_43.ts?x=1\n";

    #[test]
    fn live_playlist() {
        let p = parse(LIVE, "/live/index.m3u8", "127.0.0.1:80").unwrap();
        assert_eq!(p.target_duration, 2.0);
        assert_eq!(p.media_sequence, 41);
        assert!(!p.ended);
        assert_eq!(p.segments.len(), 3);
        assert_eq!(p.segments[0].path, "/live/seg_41.ts");
        assert_eq!(p.segments[0].msn, 41);
        assert_eq!(p.segments[2].path, "/abs/seg_43.ts?x=1");
        assert_eq!(p.segments[2].msn, 43);
        assert_eq!(p.segments[2].duration, 1.5);
    }

    #[test]
    fn vod_playlist_crlf_and_absolute_url() {
        let t = "#EXTM3U\r\n#EXT-X-PLAYLIST-TYPE:VOD\r\n#EXT-X-TARGETDURATION:6\r\n\
                 #EXTINF:6,\r\nhttp://127.0.0.1:81/vod/t1/seg_0.ts\r\n#EXTINF:6,\r\nseg_1.ts\r\n#EXT-X-ENDLIST\r\n";
        let p = parse(t, "/vod/t1/index.m3u8?token=1", "127.0.0.1:81").unwrap();
        assert!(p.ended);
        assert_eq!(p.media_sequence, 0);
        assert_eq!(p.segments[0].path, "/vod/t1/seg_0.ts");
        assert_eq!(p.segments[1].path, "/vod/t1/seg_1.ts");
        assert_eq!(p.segments[1].msn, 1);
    }

    #[test]
    fn rejects_bad_playlists() {
        assert_eq!(parse("hello", "/a.m3u8", "h"), Err(PlaylistError::NotM3u8));
        assert_eq!(
            parse("#EXTM3U\n#EXTINF:2,\na.ts\n", "/a.m3u8", "h"),
            Err(PlaylistError::NoTargetDuration)
        );
        assert_eq!(
            parse("#EXTM3U\n#EXT-X-TARGETDURATION:x\n", "/a.m3u8", "h"),
            Err(PlaylistError::BadTag("EXT-X-TARGETDURATION"))
        );
        assert!(matches!(
            parse(
                "#EXTM3U\n#EXT-X-TARGETDURATION:2\n#EXTINF:2,\nhttp://evil.example/a.ts\n",
                "/a.m3u8",
                "h"
            ),
            Err(PlaylistError::ForeignUri(_))
        ));
    }

    const LL: &str = "#EXTM3U\n#EXT-X-VERSION:9\n#EXT-X-TARGETDURATION:2\n\
        #EXT-X-SERVER-CONTROL:CAN-BLOCK-RELOAD=YES,CAN-SKIP-UNTIL=12.0,PART-HOLD-BACK=1.500\n\
        #EXT-X-PART-INF:PART-TARGET=0.500\n#EXT-X-MEDIA-SEQUENCE:90\n\
        #EXT-X-SKIP:SKIPPED-SEGMENTS=4\n#EXTINF:2.000,\nseg_94.ts\n\
        #EXT-X-PART:DURATION=0.500,URI=\"seg_95.part0.ts\",INDEPENDENT=YES\n\
        #EXT-X-PART:DURATION=0.500,URI=\"seg_95.part1.ts\"\n#EXTINF:2.000,\nseg_95.ts\n\
        #EXT-X-PART:DURATION=0.500,URI=\"seg_96.part0.ts\",INDEPENDENT=YES\n\
        #EXT-X-PRELOAD-HINT:TYPE=PART,URI=\"seg_96.part1.ts\"\n";

    #[test]
    fn low_latency_playlist() {
        let p = parse(LL, "/live/index.m3u8?_HLS_msn=96&_HLS_part=0", "h").unwrap();
        assert_eq!(p.skipped, 4);
        assert_eq!(p.segments.iter().map(|s| s.msn).collect::<Vec<_>>(), vec![94, 95]);
        assert_eq!(p.part_target, Some(0.5));
        let sc = &p.server_control;
        assert!(sc.can_block_reload);
        assert_eq!((sc.can_skip_until, sc.part_hold_back), (Some(12.0), Some(1.5)));
        let keys: Vec<_> = p.parts.iter().map(|x| (x.msn, x.index)).collect();
        assert_eq!(keys, vec![(95, 0), (95, 1), (96, 0)]);
        assert_eq!(p.parts[2].path, "/live/seg_96.part0.ts");
        let h = p.preload_hint.unwrap();
        assert_eq!((h.msn, h.index, h.path.as_str()), (96, 1, "/live/seg_96.part1.ts"));
        // A classic playlist has none of it.
        let c = parse(LIVE, "/live/index.m3u8", "h").unwrap();
        assert!(c.parts.is_empty() && c.preload_hint.is_none() && c.skipped == 0);
        assert_eq!(c.server_control, ServerControl::default());
        assert_eq!(attr("A=1,B=\"x,y\",C=3", "B"), Some("x,y"));
        assert_eq!(attr("A=1,B=\"x,y\",C=3", "C"), Some("3"));
        assert_eq!(attr("A=1", "Z"), None);
    }

    #[test]
    fn resolve_relative() {
        assert_eq!(resolve("/index.m3u8", "h", "a.ts").unwrap(), "/a.ts");
        assert_eq!(resolve("/x/y/p.m3u8", "h", "../a.ts").unwrap(), "/x/y/../a.ts");
        assert_eq!(resolve("p.m3u8", "h", "a.ts").unwrap(), "/a.ts");
    }
}
