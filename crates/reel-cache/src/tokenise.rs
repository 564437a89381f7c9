//! An HLS playlist as one viewer is served it when its token follows it in the query
//! (`[site.token] propagate = "query"`): every URI line, and the `URI="..."` attribute of
//! the tags that name resources a player fetches, carry `param=TOKEN`, so the segments,
//! parts, keys and renditions the player asks for next carry the token it came with.
//!
//! Only relative URIs are touched: an absolute URI (`https://keys.example/...`, `skd://`,
//! `data:`) points at another server, which must never be handed the viewer's token. The
//! stored playlist is never changed; this makes a new body per response. Pure: no I/O.

/// The tags whose `URI` attribute names something the player fetches from us.
const URI_TAGS: [&str; 9] = [
    "#EXT-X-MAP:",
    "#EXT-X-KEY:",
    "#EXT-X-PART:",
    "#EXT-X-PRELOAD-HINT:",
    "#EXT-X-RENDITION-REPORT:",
    "#EXT-X-MEDIA:",
    "#EXT-X-I-FRAME-STREAM-INF:",
    "#EXT-X-SESSION-KEY:",
    "#EXT-X-SESSION-DATA:",
];

/// Whether `uri` is relative (no scheme, not network-path `//host`): one of ours.
fn is_relative(uri: &str) -> bool {
    if uri.starts_with("//") {
        return false;
    }
    // RFC 3986 3.1: a scheme is a letter then letters, digits, `+`, `-`, `.`, up to `:`,
    // before any `/`, `?` or `#`.
    let head = uri.split(['/', '?', '#']).next().unwrap_or("");
    match head.split_once(':') {
        Some((scheme, _)) => {
            let mut b = scheme.bytes();
            !(b.next().is_some_and(|c| c.is_ascii_alphabetic())
                && b.all(|c| c.is_ascii_alphanumeric() || matches!(c, b'+' | b'-' | b'.')))
        }
        None => true,
    }
}

/// Appends `uri` with `param=token` added to its query (before any `#fragment`).
fn push_with_token(out: &mut String, uri: &str, param: &str, token: &str) {
    let (base, frag) = match uri.find('#') {
        Some(i) => uri.split_at(i),
        None => (uri, ""),
    };
    out.push_str(base);
    out.push(if base.contains('?') { '&' } else { '?' });
    out.push_str(param);
    out.push('=');
    out.push_str(token);
    out.push_str(frag);
}

/// `playlist` with `param=token` on every relative URI; `None` when it is not an HLS
/// playlist (its first line is not `#EXTM3U`). Line endings are kept as they are.
pub fn tokenise(playlist: &str, param: &str, token: &str) -> Option<String> {
    if !playlist.trim_start_matches('\u{feff}').starts_with("#EXTM3U") {
        return None;
    }
    let mut out = String::with_capacity(playlist.len() + playlist.len() / 4);
    for line in playlist.split_inclusive('\n') {
        let body = line.trim_end_matches(['\r', '\n']);
        let end = &line[body.len()..];
        let trimmed = body.trim();
        if trimmed.is_empty() {
            out.push_str(line);
        } else if !trimmed.starts_with('#') {
            if is_relative(trimmed) {
                push_with_token(&mut out, body, param, token);
                out.push_str(end);
            } else {
                out.push_str(line);
            }
        } else if URI_TAGS.iter().any(|t| body.starts_with(t)) {
            push_tag(&mut out, body, param, token);
            out.push_str(end);
        } else {
            out.push_str(line);
        }
    }
    Some(out)
}

/// A tag line with its `URI="..."` attribute tokenised (if relative).
fn push_tag(out: &mut String, tag: &str, param: &str, token: &str) {
    // The attribute starts the list (after `:`) or follows a `,`; a quoted value of
    // another attribute cannot hold `"`, so the first `URI="` at such a place is it.
    let mut from = 0;
    let found = loop {
        let Some(i) = tag[from..].find("URI=\"").map(|i| i + from) else { break None };
        let before = tag[..i].chars().next_back();
        if matches!(before, Some(':') | Some(',')) {
            break Some(i);
        }
        from = i + 1;
    };
    let Some(i) = found else {
        out.push_str(tag);
        return;
    };
    let start = i + "URI=\"".len();
    let Some(len) = tag[start..].find('"') else {
        out.push_str(tag);
        return;
    };
    let uri = &tag[start..start + len];
    if !is_relative(uri) {
        out.push_str(tag);
        return;
    }
    out.push_str(&tag[..start]);
    push_with_token(out, uri, param, token);
    out.push_str(&tag[start + len..]);
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: &str = "exp=9~acl=/*~hmac=ab";

    #[test]
    fn a_low_latency_media_playlist() {
        let p = "#EXTM3U\n#EXT-X-TARGETDURATION:2\n#EXT-X-SERVER-CONTROL:CAN-BLOCK-RELOAD=YES,PART-HOLD-BACK=1.0\n\
                 #EXT-X-MAP:URI=\"init.mp4\"\n#EXT-X-KEY:METHOD=AES-128,URI=\"https://keys.example/k\",IV=0x1\n\
                 #EXTINF:2.0,\nseg_1.m4s\n#EXT-X-PART:DURATION=0.5,URI=\"seg_2.0.m4s\",INDEPENDENT=YES\n\
                 #EXT-X-PRELOAD-HINT:TYPE=PART,URI=\"seg_2.1.m4s?x=1\"\n\
                 #EXT-X-RENDITION-REPORT:URI=\"../hi/index.m3u8\",LAST-MSN=2\r\n/abs/seg_3.m4s#f\n";
        let out = tokenise(p, "hdnts", T).unwrap();
        let want = format!(
            "#EXTM3U\n#EXT-X-TARGETDURATION:2\n#EXT-X-SERVER-CONTROL:CAN-BLOCK-RELOAD=YES,PART-HOLD-BACK=1.0\n\
             #EXT-X-MAP:URI=\"init.mp4?hdnts={T}\"\n#EXT-X-KEY:METHOD=AES-128,URI=\"https://keys.example/k\",IV=0x1\n\
             #EXTINF:2.0,\nseg_1.m4s?hdnts={T}\n#EXT-X-PART:DURATION=0.5,URI=\"seg_2.0.m4s?hdnts={T}\",INDEPENDENT=YES\n\
             #EXT-X-PRELOAD-HINT:TYPE=PART,URI=\"seg_2.1.m4s?x=1&hdnts={T}\"\n\
             #EXT-X-RENDITION-REPORT:URI=\"../hi/index.m3u8?hdnts={T}\",LAST-MSN=2\r\n/abs/seg_3.m4s?hdnts={T}#f\n"
        );
        assert_eq!(out, want);
    }

    #[test]
    fn a_multivariant_playlist() {
        let p = "#EXTM3U\n#EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID=\"a\",NAME=\"en\",URI=\"audio/en.m3u8\"\n\
                 #EXT-X-STREAM-INF:BANDWIDTH=1000,CODECS=\"avc1\"\nlow/index.m3u8\n\
                 #EXT-X-I-FRAME-STREAM-INF:BANDWIDTH=100,URI=\"low/iframes.m3u8\"\nhttp://other/x.m3u8";
        let out = tokenise(p, "t", "v").unwrap();
        assert_eq!(
            out,
            "#EXTM3U\n#EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID=\"a\",NAME=\"en\",URI=\"audio/en.m3u8?t=v\"\n\
             #EXT-X-STREAM-INF:BANDWIDTH=1000,CODECS=\"avc1\"\nlow/index.m3u8?t=v\n\
             #EXT-X-I-FRAME-STREAM-INF:BANDWIDTH=100,URI=\"low/iframes.m3u8?t=v\"\nhttp://other/x.m3u8"
        );
    }

    #[test]
    fn only_playlists_and_only_relative_uris() {
        assert_eq!(tokenise("not a playlist\nseg.ts\n", "t", "v"), None);
        assert!(is_relative("seg.ts") && is_relative("/a/b.ts") && !is_relative("a:b/c"));
        assert!(is_relative("./a:b") && is_relative("seg.ts?u=http://x"));
        assert!(!is_relative("//cdn/x.ts") && !is_relative("skd://k") && !is_relative("data:,x"));
        let keyed =
            "#EXTM3U\n#EXT-X-KEY:METHOD=SAMPLE-AES,KEYFORMAT=\"com.apple\",URI=\"skd://k\"\n";
        assert_eq!(tokenise(keyed, "t", "v").unwrap(), keyed);
        // An attribute whose name ends in URI is not URI.
        let odd = "#EXTM3U\n#EXT-X-MAP:XURI=\"a\",URI=\"init.mp4\"\n";
        assert_eq!(
            tokenise(odd, "t", "v").unwrap(),
            "#EXTM3U\n#EXT-X-MAP:XURI=\"a\",URI=\"init.mp4?t=v\"\n"
        );
    }
}
