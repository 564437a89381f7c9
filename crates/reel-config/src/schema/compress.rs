//! `[site.compress]`: gzip and brotli representations of a site's text responses
//! (playlists, manifests, subtitles), made once per stored object version and answered by
//! `Accept-Encoding`.

use super::*;

/// The media types compressed by default: HLS playlists, DASH manifests, WebVTT, JSON and
/// XML (compared without parameters, case-insensitively).
pub const DEFAULT_COMPRESS_TYPES: [&str; 9] = [
    "application/vnd.apple.mpegurl",
    "application/x-mpegurl",
    "audio/mpegurl",
    "audio/x-mpegurl",
    "application/dash+xml",
    "text/vtt",
    "application/json",
    "application/xml",
    "text/xml",
];

/// A content coding reel can make.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Coding {
    /// Brotli (RFC 7932), `br`.
    Br,
    /// gzip (RFC 1952), `gzip`.
    Gzip,
}

/// `[site.compress]` of one `[[site]]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CompressConfig {
    /// Answer compressible responses compressed when the viewer accepts it. Default `true`.
    pub enabled: bool,
    /// Media types (the `Content-Type` without parameters) that are compressed. Default
    /// [`DEFAULT_COMPRESS_TYPES`].
    pub types: Vec<String>,
    /// The codings made, the preferred first when a viewer accepts several with the same
    /// q-value. Default `["br", "gzip"]`.
    pub encodings: Vec<Coding>,
    /// Bodies smaller than this are sent as they are. Default `"256B"`.
    pub min_size: ByteSize,
    /// Bodies larger than this are sent as they are (their compression would stall the
    /// worker that makes it). At most `"16MiB"`. Default `"1MiB"`.
    pub max_size: ByteSize,
    /// Brotli quality, 0 to 11. Default 5.
    pub brotli_quality: u32,
    /// gzip level, 1 to 9. Default 6.
    pub gzip_level: u32,
}

impl Default for CompressConfig {
    fn default() -> Self {
        CompressConfig {
            enabled: true,
            types: DEFAULT_COMPRESS_TYPES.iter().map(|s| s.to_string()).collect(),
            encodings: vec![Coding::Br, Coding::Gzip],
            min_size: ByteSize(256),
            max_size: ByteSize::mib(1),
            brotli_quality: 5,
            gzip_level: 6,
        }
    }
}
