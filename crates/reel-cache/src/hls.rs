//! What the cache needs to know of Low-Latency HLS (draft-pantos-hls-rfc8216bis), as pure
//! functions: whether a path names a playlist (HLS, or a DASH manifest), whether a request
//! is a blocking playlist reload, and which parts a media
//! playlist announces (its preload hint and its listed parts), as targets on the
//! playlist's own host.
//!
//! Nothing here performs I/O; the cache path (`path::llhls`) acts on the answers.

/// The delivery directive that makes a playlist request block (§6.2.5.2).
const MSN: &[u8] = b"_HLS_msn";

/// Whether the normalised target `path_and_query` (a cache key's, see
/// [`crate::key::CacheKey::path_and_query`]) is a blocking playlist reload: it carries
/// `_HLS_msn` (§6.2.5.2), so the origin holds it until that media sequence number (and
/// `_HLS_part`) exists. Parameters of a key are percent-normalised, so the name has one
/// spelling.
pub fn is_blocking_reload(path_and_query: &[u8]) -> bool {
    let Some(q) = path_and_query.iter().position(|&b| b == b'?') else { return false };
    path_and_query[q + 1..].split(|&b| b == b'&').any(|p| {
        let name = p.iter().position(|&b| b == b'=').map_or(p, |i| &p[..i]);
        name == MSN
    })
}

/// Whether `path` (without the query) names a playlist: an HLS playlist (`.m3u8`) or a
/// DASH manifest (`.mpd`), in any case. Blocking reloads are playlists too (the same path
/// with `_HLS_msn` in the query). Counted apart from segments because a live playlist is
/// fetched again every target duration, so its hit ratio says nothing of the segments'.
pub fn is_playlist(path: &[u8]) -> bool {
    let ends = |ext: &[u8]| {
        path.len() >= ext.len()
            && path.get(path.len() - ext.len()..).is_some_and(|e| e.eq_ignore_ascii_case(ext))
    };
    ends(b".m3u8") || ends(b".mpd")
}

/// The parts a media playlist announces.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Announced<'a> {
    /// The URI of `EXT-X-PRELOAD-HINT` with `TYPE=PART` (§4.4.5.3), unless it names a byte
    /// range (the hint is then a part of a larger resource, not an object of its own).
    pub hint: Option<&'a str>,
    /// The URIs of `EXT-X-PART` tags (§4.4.4.9), in playlist order, without the byte-range
    /// parts and those marked `GAP=YES` (not available).
    pub parts: Vec<&'a str>,
}

/// The parts `text` announces; `None` when it is not an HLS playlist (no `#EXTM3U` first
/// line, §4.4.1.1). A multivariant playlist announces nothing.
pub fn announced(text: &str) -> Option<Announced<'_>> {
    let mut lines = text.lines();
    if lines.next()?.trim_end() != "#EXTM3U" {
        return None;
    }
    let mut a = Announced::default();
    for line in lines {
        let line = line.trim_end();
        if let Some(attrs) = line.strip_prefix("#EXT-X-PRELOAD-HINT:") {
            let list = Attributes(attrs);
            if list.get("TYPE") == Some("PART")
                && list.get("BYTERANGE-START").is_none()
                && list.get("BYTERANGE-LENGTH").is_none()
            {
                a.hint = list.quoted("URI");
            }
        } else if let Some(attrs) = line.strip_prefix("#EXT-X-PART:") {
            let list = Attributes(attrs);
            if list.get("BYTERANGE").is_none()
                && list.get("GAP") != Some("YES")
                && let Some(uri) = list.quoted("URI")
            {
                a.parts.push(uri);
            }
        }
    }
    Some(a)
}

/// An attribute list (§4.2): `NAME=value` pairs separated by commas, where a quoted string
/// value may itself contain commas.
struct Attributes<'a>(&'a str);

impl<'a> Attributes<'a> {
    /// The raw value of `name` (quotes included for a quoted string).
    fn get(&self, name: &str) -> Option<&'a str> {
        let mut rest = self.0;
        while !rest.is_empty() {
            let eq = rest.find('=')?;
            let key = rest[..eq].trim();
            let after = &rest[eq + 1..];
            let end = if let Some(quoted) = after.strip_prefix('"') {
                // The closing quote, then up to the next comma.
                let close = quoted.find('"')? + 2;
                close + after[close..].find(',').unwrap_or(after.len() - close)
            } else {
                after.find(',').unwrap_or(after.len())
            };
            if key == name {
                return Some(&after[..end]);
            }
            rest = after.get(end + 1..).unwrap_or("");
        }
        None
    }

    /// The value of `name` when it is a non-empty quoted string, without its quotes.
    fn quoted(&self, name: &str) -> Option<&'a str> {
        let v = self.get(name)?.strip_prefix('"')?.strip_suffix('"')?;
        (!v.is_empty()).then_some(v)
    }
}

/// The origin-form target (`/path?query`) a URI found in the playlist at `base` (the
/// playlist's own normalised path, no query) names on the playlist's host `host`
/// (normalised, as a cache key holds it), resolved as RFC 3986 §5.2 says; `None` for a URI
/// on another host or scheme (the cache only fetches what the playlist's site serves).
/// Dot-segments are left for [`crate::key::CacheKey::build`] and
/// [`crate::key::origin_target`], which remove them.
pub fn resolve(base: &[u8], host: &[u8], uri: &str) -> Option<String> {
    // §5.2: the fragment is never part of a request.
    let uri = uri.split('#').next()?;
    if uri.is_empty() {
        return None;
    }
    let rest = if let Some(r) = uri.strip_prefix("//") {
        Some(r)
    } else {
        let scheme_end = uri.find(':').filter(|&i| {
            let s = &uri[..i];
            !s.is_empty()
                && s.as_bytes()[0].is_ascii_alphabetic()
                && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"+-.".contains(&b))
                && !uri[..i].contains('/')
        });
        match scheme_end {
            Some(i) => {
                let scheme = &uri[..i];
                if !scheme.eq_ignore_ascii_case("http") && !scheme.eq_ignore_ascii_case("https") {
                    return None;
                }
                Some(uri[i + 1..].strip_prefix("//")?)
            }
            None => None,
        }
    };
    if let Some(rest) = rest {
        // An absolute URI: only on the playlist's own host.
        let (auth, path) = match rest.find(['/', '?']) {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/"),
        };
        // Ports aside: a site is matched by name whatever the port.
        let named = crate::key::normalize_host(auth.as_bytes()).ok()?;
        if !strip_port(named.as_bytes()).eq_ignore_ascii_case(strip_port(host)) {
            return None;
        }
        return Some(if path.starts_with('?') { format!("/{path}") } else { path.to_string() });
    }
    if uri.starts_with('/') {
        return Some(uri.to_string());
    }
    // A relative path (or a query only, §5.2.2): against the playlist's directory.
    let base = std::str::from_utf8(base).ok()?;
    if let Some(q) = uri.strip_prefix('?') {
        return Some(format!("{base}?{q}"));
    }
    let dir = &base[..base.rfind('/').map_or(0, |i| i + 1)];
    let dir = if dir.is_empty() { "/" } else { dir };
    Some(format!("{dir}{uri}"))
}

/// `host` without a port (keeping IPv6 brackets).
fn strip_port(host: &[u8]) -> &[u8] {
    match host.iter().rposition(|&b| b == b':') {
        Some(i) if !host[i..].contains(&b']') => &host[..i],
        _ => host,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn playlists_are_hls_and_dash_manifests() {
        for p in ["/live/index.m3u8", "/a/B.M3U8", "/dash/stream.mpd", "/x.MPD", ".m3u8"] {
            assert!(is_playlist(p.as_bytes()), "{p}");
        }
        for p in ["/live/seg1.ts", "/v/init.mp4", "/m3u8", "/index.m3u8x", "/", "", "/a.m4s"] {
            assert!(!is_playlist(p.as_bytes()), "{p}");
        }
    }

    #[test]
    fn blocking_reloads_are_the_targets_with_an_msn() {
        assert!(is_blocking_reload(b"/live/index.m3u8?_HLS_msn=7"));
        assert!(is_blocking_reload(b"/live/index.m3u8?a=1&_HLS_msn=7&_HLS_part=2&_HLS_skip=YES"));
        assert!(!is_blocking_reload(b"/live/index.m3u8"));
        assert!(!is_blocking_reload(b"/live/index.m3u8?_HLS_skip=YES"));
        assert!(!is_blocking_reload(b"/live/index.m3u8?x_HLS_msn=7&_HLS_msnx=1"));
        assert!(!is_blocking_reload(b"/live/_HLS_msn=1/index.m3u8"));
    }

    const LL: &str = "#EXTM3U\n\
        #EXT-X-TARGETDURATION:2\n\
        #EXT-X-PART-INF:PART-TARGET=0.500\n\
        #EXTINF:2.000,\n\
        seg_9.ts\n\
        #EXT-X-PART:DURATION=0.500,URI=\"seg_10.part0.ts\",INDEPENDENT=YES\n\
        #EXT-X-PART:DURATION=0.500,URI=\"seg_10.part1.ts\",GAP=YES\n\
        #EXT-X-PART:DURATION=0.500,URI=\"all.ts\",BYTERANGE=\"1000@0\"\n\
        #EXT-X-PART:DURATION=0.500,INDEPENDENT=YES,URI=\"a,b.ts\"\r\n\
        #EXT-X-PRELOAD-HINT:TYPE=PART,URI=\"seg_10.part3.ts\"\n";

    #[test]
    fn a_playlist_announces_its_hint_and_listed_parts() {
        let a = announced(LL).unwrap();
        assert_eq!(a.hint, Some("seg_10.part3.ts"));
        assert_eq!(a.parts, vec!["seg_10.part0.ts", "a,b.ts"]);
        // A hint of a byte range, a map hint, a classic playlist, not a playlist.
        let t = "#EXTM3U\n#EXT-X-PRELOAD-HINT:TYPE=PART,URI=\"x.ts\",BYTERANGE-START=100\n";
        assert_eq!(announced(t).unwrap().hint, None);
        let t = "#EXTM3U\n#EXT-X-PRELOAD-HINT:TYPE=MAP,URI=\"init.mp4\"\n";
        assert_eq!(announced(t).unwrap().hint, None);
        assert_eq!(announced("#EXTM3U\n#EXTINF:2,\nseg_1.ts\n"), Some(Announced::default()));
        assert_eq!(announced("<html>"), None);
        assert_eq!(announced(""), None);
        // Malformed attribute lists announce nothing rather than fail.
        for bad in ["#EXT-X-PART:URI=\"unterminated", "#EXT-X-PART:URI=\"\"", "#EXT-X-PART:,,="] {
            assert_eq!(announced(&format!("#EXTM3U\n{bad}\n")).unwrap().parts.len(), 0, "{bad}");
        }
    }

    #[test]
    fn uris_resolve_on_the_playlist_s_host_only() {
        let base = b"/live/a/index.m3u8";
        let h = b"cdn.example";
        assert_eq!(resolve(base, h, "seg_1.part0.ts").as_deref(), Some("/live/a/seg_1.part0.ts"));
        assert_eq!(resolve(base, h, "../b/p.ts?t=1#f").as_deref(), Some("/live/a/../b/p.ts?t=1"));
        assert_eq!(resolve(base, h, "/abs/p.ts").as_deref(), Some("/abs/p.ts"));
        assert_eq!(resolve(base, h, "?x=1").as_deref(), Some("/live/a/index.m3u8?x=1"));
        assert_eq!(resolve(base, h, "http://CDN.example:80/p.ts").as_deref(), Some("/p.ts"));
        assert_eq!(resolve(base, h, "https://cdn.example/p.ts").as_deref(), Some("/p.ts"));
        assert_eq!(resolve(base, h, "//cdn.example/q?a").as_deref(), Some("/q?a"));
        assert_eq!(resolve(base, h, "http://cdn.example?a").as_deref(), Some("/?a"));
        assert_eq!(
            resolve(base, b"cdn.example:8080", "http://cdn.example/p.ts").as_deref(),
            Some("/p.ts")
        );
        assert_eq!(resolve(base, h, "http://other.example/p.ts"), None);
        assert_eq!(resolve(base, h, "//other.example/p.ts"), None);
        assert_eq!(resolve(base, h, "ftp://cdn.example/p.ts"), None);
        assert_eq!(resolve(base, h, "data:text/plain,x"), None);
        assert_eq!(resolve(base, h, "#frag"), None);
        assert_eq!(resolve(b"/", h, "p.ts").as_deref(), Some("/p.ts"));
    }
}
