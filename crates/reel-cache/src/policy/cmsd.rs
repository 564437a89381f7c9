//! CTA-5006 Common Media Server Data: the object type (`ot`) of a response, told from its
//! path or, when the path says nothing, its media type, and the `CMSD-Static` and
//! `CMSD-Dynamic` values serialised as RFC 8941 structured fields. Pure: the answer path
//! adds the fields (`path/answer/cmsd.rs`).
//!
//! `d` (the object's duration) is left out: a segment's duration is in the playlist that
//! lists it, not in the segment's own request or response, and reel does not keep it.

/// A CMSD object type (`ot`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ObjectType {
    /// `m`: an HLS playlist or a DASH manifest.
    Manifest,
    /// `a`: audio only.
    Audio,
    /// `v`: video only (or an fMP4 segment whose tracks its path does not tell).
    Video,
    /// `av`: muxed audio and video (MPEG-TS segments).
    Muxed,
    /// `i`: an initialisation segment.
    Init,
    /// `k`: a key.
    Key,
    /// `c`: captions or subtitles.
    Caption,
    /// `o`: anything else.
    Other,
}

impl ObjectType {
    /// Every type, in index order.
    pub const ALL: [ObjectType; 8] = [
        ObjectType::Manifest,
        ObjectType::Audio,
        ObjectType::Video,
        ObjectType::Muxed,
        ObjectType::Init,
        ObjectType::Key,
        ObjectType::Caption,
        ObjectType::Other,
    ];

    /// The `ot` token.
    pub fn token(self) -> &'static str {
        match self {
            ObjectType::Manifest => "m",
            ObjectType::Audio => "a",
            ObjectType::Video => "v",
            ObjectType::Muxed => "av",
            ObjectType::Init => "i",
            ObjectType::Key => "k",
            ObjectType::Caption => "c",
            ObjectType::Other => "o",
        }
    }
}

/// The object type of a response to `path` (without the query); `content_type` is asked
/// only when the extension does not settle it (an fMP4 segment, an unknown extension).
pub fn object_type<'a>(path: &[u8], content_type: impl FnOnce() -> Option<&'a [u8]>) -> ObjectType {
    let name = path.rsplit(|&b| b == b'/').next().unwrap_or(path);
    let ext = match name.iter().rposition(|&b| b == b'.') {
        Some(i) => name.get(i + 1..).unwrap_or_default(),
        None => &[],
    };
    let is = |e: &[&str]| e.iter().any(|x| ext.eq_ignore_ascii_case(x.as_bytes()));
    if is(&["m3u8", "m3u", "mpd"]) {
        return ObjectType::Manifest;
    }
    if is(&["key"]) {
        return ObjectType::Key;
    }
    if is(&["vtt", "webvtt", "srt", "ttml", "dfxp"]) {
        return ObjectType::Caption;
    }
    let fmp4 = is(&["mp4", "m4s", "cmfv", "cmfa", "m4v", "m4a", "m4i"]);
    if fmp4 && (is(&["m4i"]) || contains_ignore_case(name, b"init")) {
        return ObjectType::Init;
    }
    if is(&["aac", "m4a", "cmfa", "mp3", "ac3", "ec3"]) {
        return ObjectType::Audio;
    }
    if is(&["ts"]) {
        return ObjectType::Muxed;
    }
    if is(&["cmfv", "m4v"]) {
        return ObjectType::Video;
    }
    let media = content_type().map(media_type).unwrap_or_default();
    let starts = |p: &[u8]| media.get(..p.len()).is_some_and(|m| m.eq_ignore_ascii_case(p));
    let media_is = |e: &[&str]| e.iter().any(|x| media.eq_ignore_ascii_case(x.as_bytes()));
    if starts(b"audio/") && !media_is(&["audio/mpegurl", "audio/x-mpegurl"]) {
        return ObjectType::Audio;
    }
    if fmp4 {
        return ObjectType::Video;
    }
    if media_is(&[
        "application/vnd.apple.mpegurl",
        "application/x-mpegurl",
        "audio/mpegurl",
        "audio/x-mpegurl",
        "application/dash+xml",
    ]) {
        return ObjectType::Manifest;
    }
    if media_is(&["text/vtt", "application/ttml+xml"]) {
        return ObjectType::Caption;
    }
    if media_is(&["video/mp2t"]) {
        return ObjectType::Muxed;
    }
    if starts(b"video/") {
        return ObjectType::Video;
    }
    ObjectType::Other
}

/// A `Content-Type` value without its parameters, trimmed.
fn media_type(v: &[u8]) -> &[u8] {
    v.split(|&b| b == b';').next().unwrap_or(v).trim_ascii()
}

fn contains_ignore_case(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w.eq_ignore_ascii_case(needle))
}

/// The `CMSD-Static` value for `ot` (an sf-dictionary: `ot=v`).
pub fn static_value(ot: ObjectType) -> String {
    let mut d = sfv::DictSerializer::new();
    let _ = d.bare_item(sfv::KeyRef::constant("ot"), sfv::TokenRef::constant(ot.token()));
    d.finish().unwrap_or_default()
}

/// The `CMSD-Dynamic` value naming this edge `id` (an sf-list of one string item), with
/// `du` (duress) when `duress`; `None` when `id` cannot be an sf-string (not printable
/// ASCII).
pub fn dynamic_value(id: &str, duress: bool) -> Option<String> {
    let id = sfv::StringRef::from_str(id).ok()?;
    let mut l = sfv::ListSerializer::new();
    let item = l.bare_item(id);
    if duress {
        let _ = item.parameter(sfv::KeyRef::constant("du"), true);
    }
    l.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ot(path: &str, ct: Option<&str>) -> &'static str {
        object_type(path.as_bytes(), || ct.map(str::as_bytes)).token()
    }

    #[test]
    fn object_types_from_paths() {
        assert_eq!(ot("/live/index.m3u8", None), "m");
        assert_eq!(ot("/vod/manifest.MPD", None), "m");
        assert_eq!(ot("/live/seg_12.ts", None), "av");
        assert_eq!(ot("/v/720p/init.mp4", None), "i");
        assert_eq!(ot("/v/720p/init-v1.m4s", None), "i");
        assert_eq!(ot("/v/720p/seg-5.m4s", None), "v");
        assert_eq!(ot("/v/720p/seg-5.m4s", Some("video/iso.segment")), "v");
        assert_eq!(ot("/v/aac/seg-5.m4s", Some("audio/mp4")), "a");
        assert_eq!(ot("/v/aac/seg-5.aac", None), "a");
        assert_eq!(ot("/v/seg.cmfa", None), "a");
        assert_eq!(ot("/k/key1.key", None), "k");
        assert_eq!(ot("/subs/en/1.vtt", None), "c");
        assert_eq!(ot("/", None), "o");
        assert_eq!(ot("", None), "o");
        assert_eq!(ot("/a.b/noext", None), "o");
        assert_eq!(ot("/img/poster.jpg", Some("image/jpeg")), "o");
    }

    #[test]
    fn object_types_from_media_types_when_the_path_says_nothing() {
        assert_eq!(ot("/p/live", Some("application/vnd.apple.mpegurl")), "m");
        assert_eq!(ot("/p/live", Some("Application/Dash+XML; charset=utf-8")), "m");
        assert_eq!(ot("/p/live", Some("audio/x-mpegurl")), "m");
        assert_eq!(ot("/s/1", Some("text/vtt")), "c");
        assert_eq!(ot("/s/1", Some("video/MP2T")), "av");
        assert_eq!(ot("/s/1", Some("video/mp4")), "v");
        assert_eq!(ot("/s/1", Some("audio/mpeg")), "a");
        assert_eq!(ot("/s/1", Some("")), "o");
        assert_eq!(ot("/s/1", Some("\u{1}\u{2}")), "o");
    }

    #[test]
    fn values_are_structured_fields() {
        let all: Vec<String> = ObjectType::ALL.iter().map(|&t| static_value(t)).collect();
        assert_eq!(all, ["ot=m", "ot=a", "ot=v", "ot=av", "ot=i", "ot=k", "ot=c", "ot=o"]);
        for v in &all {
            let d: sfv::Dictionary = sfv::Parser::new(v).parse().expect("a dictionary");
            assert_eq!(d.len(), 1);
        }
        assert_eq!(dynamic_value("edge-1", false).as_deref(), Some("\"edge-1\""));
        assert_eq!(dynamic_value("a \"b\"", true).as_deref(), Some("\"a \\\"b\\\"\";du"));
        let l: sfv::List = sfv::Parser::new("\"a \\\"b\\\"\";du").parse().expect("a list");
        let sfv::ListEntry::Item(item) = &l[0] else { panic!("an item") };
        assert_eq!(
            item.bare_item,
            sfv::BareItem::String(sfv::StringRef::constant("a \"b\"").to_owned())
        );
        assert_eq!(item.params.get("du"), Some(&sfv::BareItem::Boolean(true)));
        assert_eq!(dynamic_value("é", false), None);
    }
}
