//! Just enough of an HLS media playlist parser (RFC 8216 §4.3) for viewers:
//! target duration, media sequence, end list, and the segment URIs with their
//! durations and media sequence numbers, resolved against the playlist path.

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
        } else if line.starts_with('#') {
            // Other tags and comments do not matter to a load-generating viewer.
        } else {
            raw.push((pending_duration.take().unwrap_or(0.0), line));
        }
    }
    let target_duration = target.ok_or(PlaylistError::NoTargetDuration)?;
    if !(target_duration.is_finite() && target_duration >= 0.0) {
        return Err(PlaylistError::BadTag("EXT-X-TARGETDURATION"));
    }
    let segments = raw
        .into_iter()
        .enumerate()
        .map(|(i, (duration, uri))| {
            Ok(Segment {
                msn: media_sequence + i as u64,
                duration,
                path: resolve(playlist_path, authority, uri)?,
            })
        })
        .collect::<Result<_, PlaylistError>>()?;
    Ok(MediaPlaylist { target_duration, media_sequence, ended, segments })
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

    #[test]
    fn resolve_relative() {
        assert_eq!(resolve("/index.m3u8", "h", "a.ts").unwrap(), "/a.ts");
        assert_eq!(resolve("/x/y/p.m3u8", "h", "../a.ts").unwrap(), "/x/y/../a.ts");
        assert_eq!(resolve("p.m3u8", "h", "a.ts").unwrap(), "/a.ts");
    }
}
