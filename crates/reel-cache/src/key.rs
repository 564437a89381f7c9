//! The primary cache key: normalised host + path + query (RFC 9111 2: the key is the
//! method-independent target URI; only GET is cached, so the method is implicit).
//!
//! Normalisation (RFC 3986 6.2.2), chosen so that equivalent URIs share one entry and no
//! request can address an entry outside its own path:
//!
//! * host: lowercased (RFC 3986 6.2.2.1), one trailing dot removed (`raw.example.` is the
//!   absolute spelling of `raw.example`: one copy, one purge, one origin `Host`), any port
//!   (at most 65535; a larger one is an error, answer 400) removed: a port in `Host` names the
//!   edge's listener the viewer reached (HTTP or HTTPS, 80 or 8443), not the resource.
//!   Sites are chosen without it, so the viewers of one site share every object whatever
//!   listener they came through; an LL-HLS playlist seen over HTTPS announces the parts
//!   HTTP viewers ask for;
//! * percent-encoding: `%XX` of unreserved characters decoded (6.2.2.2), other escapes
//!   kept with uppercase hex; `%2F` therefore stays encoded and distinct from `/`;
//!   bytes that are not allowed raw in a URI (space, `"`, `<`, `\`, non-ASCII, ...) are
//!   percent-encoded, so `/a b` and `/a%20b` are one key; `%00`, control characters and
//!   malformed escapes are errors (answer 400);
//! * dot-segments removed (RFC 3986 5.2.4) after decoding, so `/a/%2E%2E/b` is `/b` and
//!   `..` can never climb above `/`; then repeated slashes merged into one, as nginx does
//!   by default (`merge_slashes on`): `/live//a.ts` is `/live/a.ts` in the key and in the
//!   origin request alike, so spelling a path with extra slashes cannot bust the cache
//!   (an origin that gives `//` a meaning of its own cannot be cached through reel);
//! * query: split on `&`, each parameter percent-normalised like the path, empty
//!   parameters dropped, ignored names removed. Order is kept, not sorted: origins (and
//!   signed-URL schemes) may give order meaning, and clients of one stream send a stable
//!   order anyway. With `drop_query`, only the LL-HLS parameters `_HLS_msn`, `_HLS_part`,
//!   `_HLS_skip` remain (they select different playlist contents); with a keep-list
//!   (`[site.key] query`), only those and the listed ones. `CMCD` (CTA-5004 client data,
//!   different on every request of a session) never enters the key. An empty query is the
//!   same key as no query.
//!
//! The key bytes are `host` immediately followed by the path (which starts with `/`), so
//! they are unambiguous: a host cannot contain `/`.
//!
//! The origin is asked for exactly the resource the key names: [`origin_target`] normalises
//! a target the same way (dot-segments, escapes, empty parameters) but keeps every query
//! parameter, so `/lit/upload/../victim.txt` is fetched as `/lit/victim.txt`, never as the
//! literal path under the key of another. Building the key from the origin target gives
//! the same key (a property test holds this).

use xxhash_rust::xxh3::xxh3_128;

/// Query parameters that always stay in the key (LL-HLS, RFC 8216bis 6.2.5.2).
pub const LL_HLS_PARAMS: [&str; 3] = ["_HLS_msn", "_HLS_part", "_HLS_skip"];

/// The query parameter of CTA-5004 Common Media Client Data: player telemetry for the
/// origin or its logs, never part of what is asked for, so never part of the key.
pub const CMCD_PARAM: &str = "CMCD";

/// Key-building options. Names are compared after percent-normalisation, case-sensitively;
/// the LL-HLS parameters always stay and [`CMCD_PARAM`] always goes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KeyConfig {
    /// Query parameter names removed from the key, e.g. session tokens (`ignore_query` and
    /// `[site.key] drop`).
    pub ignore_query: Vec<String>,
    /// Drop the whole query except the LL-HLS parameters.
    pub drop_query: bool,
    /// Keep only these parameters (and the LL-HLS ones); empty = no such rule
    /// (`[site.key] query`).
    pub keep_query: Vec<String>,
}

impl KeyConfig {
    /// Whether the parameter named `name` leaves the key.
    fn drops(&self, name: &[u8]) -> bool {
        if LL_HLS_PARAMS.iter().any(|n| n.as_bytes() == name) {
            return false;
        }
        name == CMCD_PARAM.as_bytes()
            || self.drop_query
            || self.ignore_query.iter().any(|n| n.as_bytes() == name)
            || (!self.keep_query.is_empty()
                && !self.keep_query.iter().any(|n| n.as_bytes() == name))
    }
}

/// Why a request target cannot be keyed (the request should get a 400).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    /// Empty host or a byte not allowed in a host.
    #[error("invalid host")]
    BadHost,
    /// The target is not in origin-form (`/path?query`, RFC 9112 3.2.1).
    #[error("request target is not in origin-form")]
    NotOriginForm,
    /// `%` not followed by two hex digits.
    #[error("invalid percent-encoding")]
    BadEscape,
    /// `%00` or a raw control character.
    #[error("NUL or control character in request target")]
    ControlChar,
}

/// A normalised cache key.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CacheKey {
    bytes: Vec<u8>,
    host_len: usize,
}

/// RFC 3986 2.3 unreserved.
fn is_unreserved(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~')
}

/// Bytes that may appear raw in a normalised path or query: unreserved, sub-delims, `:`
/// `@` `/` (RFC 3986 3.3 pchar) and `?` (3.4). `%` is handled separately.
fn is_raw_ok(b: u8) -> bool {
    is_unreserved(b)
        || matches!(
            b,
            b'!' | b'$'
                | b'&'
                | b'\''
                | b'('
                | b')'
                | b'*'
                | b'+'
                | b','
                | b';'
                | b'='
                | b':'
                | b'@'
                | b'/'
                | b'?'
        )
}

fn hex_val(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

const HEX: &[u8; 16] = b"0123456789ABCDEF";

fn push_escaped(out: &mut Vec<u8>, b: u8) {
    out.extend_from_slice(&[b'%', HEX[usize::from(b >> 4)], HEX[usize::from(b & 15)]]);
}

/// Percent-normalises `s` into `out` (RFC 3986 6.2.2.1, 6.2.2.2).
fn normalize_pct(s: &[u8], out: &mut Vec<u8>) -> Result<(), KeyError> {
    let mut i = 0;
    while i < s.len() {
        let b = s[i];
        if b == b'%' {
            let (Some(h), Some(l)) =
                (s.get(i + 1).copied().and_then(hex_val), s.get(i + 2).copied().and_then(hex_val))
            else {
                return Err(KeyError::BadEscape);
            };
            let v = (h << 4) | l;
            if v == 0 {
                return Err(KeyError::ControlChar);
            }
            if is_unreserved(v) {
                out.push(v);
            } else {
                push_escaped(out, v);
            }
            i += 3;
        } else if b < 0x20 || b == 0x7f {
            return Err(KeyError::ControlChar);
        } else {
            if is_raw_ok(b) {
                out.push(b);
            } else {
                push_escaped(out, b);
            }
            i += 1;
        }
    }
    Ok(())
}

/// Removes dot-segments from an absolute path (RFC 3986 5.2.4). Works on the output of
/// [`normalize_pct`], where `.` can only appear literally.
fn remove_dot_segments(path: &[u8]) -> Vec<u8> {
    // Segments between '/'; the input starts with '/'.
    let mut segs: Vec<&[u8]> = Vec::new();
    let parts: Vec<&[u8]> = path[1..].split(|&b| b == b'/').collect();
    let last = parts.len() - 1;
    let mut trailing_slash = false;
    for (i, seg) in parts.into_iter().enumerate() {
        match seg {
            b"." => trailing_slash = i == last,
            b".." => {
                segs.pop();
                trailing_slash = i == last;
            }
            s => {
                segs.push(s);
                trailing_slash = false;
            }
        }
    }
    let mut out = Vec::with_capacity(path.len());
    for s in &segs {
        out.push(b'/');
        out.extend_from_slice(s);
    }
    if trailing_slash || out.is_empty() {
        out.push(b'/');
    }
    out
}

/// Validates and normalises a host (RFC 3986 3.2.2, 6.2.2.1, 6.2.3), appending it to `out`.
fn push_host(host: &[u8], out: &mut Vec<u8>) -> Result<(), KeyError> {
    let host = super::policy::headers::trim_ows(host);
    let ok = |b: u8| {
        b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~' | b':' | b'[' | b']')
    };
    if host.is_empty() || !host.iter().all(|&b| ok(b)) {
        return Err(KeyError::BadHost);
    }
    let start = out.len();
    out.extend(host.iter().map(u8::to_ascii_lowercase));
    let h = &out[start..];
    // The port is after the last ':' unless that ':' is inside an IPv6 literal.
    if let Some(colon) = h.iter().rposition(|&b| b == b':')
        && !h[colon..].contains(&b']')
    {
        let port = &h[colon + 1..];
        // RFC 3986 3.2.3: digits, possibly none; a TCP port fits 16 bits.
        let value = port.iter().try_fold(0u32, |v, &b| {
            b.is_ascii_digit().then(|| v.saturating_mul(10).saturating_add(u32::from(b - b'0')))
        });
        if value.is_none_or(|v| v > u32::from(u16::MAX)) {
            return Err(KeyError::BadHost);
        }
        out.truncate(start + colon);
    }
    // One trailing dot names the same host (an absolute DNS name, RFC 1034 3.1): without
    // it `raw.example.` would be a second copy that a purge of `raw.example` misses.
    if out.len() > start + 1 && out.last() == Some(&b'.') {
        out.pop();
    }
    // No empty name and no empty label (`.example`, `a..b`, `raw.example..`).
    let h = &out[start..];
    if h.is_empty()
        || h[0] == b':'
        || h[0] == b'.'
        || h.last() == Some(&b'.')
        || h.windows(2).any(|w| w == b"..")
    {
        return Err(KeyError::BadHost);
    }
    Ok(())
}

/// Whether an origin-form path is already normal: only bytes that stay raw (so no `%`
/// escapes to normalise, no control bytes) and no `.` or `..` segment. The common case,
/// which then needs no copy beyond the key itself.
fn path_is_normal(path: &[u8]) -> bool {
    path.iter().all(|&b| is_raw_ok(b) && b != b'?')
        && !path.windows(2).any(|w| w == b"//")
        && !path.split(|&b| b == b'/').any(|seg| seg == b"." || seg == b"..")
}

/// Normalises an origin-form path (no query) into `out`.
fn normalize_path(path: &[u8]) -> Result<Vec<u8>, KeyError> {
    if path.first() != Some(&b'/') {
        return Err(KeyError::NotOriginForm);
    }
    let mut tmp = Vec::with_capacity(path.len() + 8);
    normalize_pct(path, &mut tmp)?;
    let mut out = remove_dot_segments(&tmp);
    // Repeated slashes are one, as nginx's default `merge_slashes on` has it.
    out.dedup_by(|b, a| *a == b'/' && *b == b'/');
    Ok(out)
}

impl CacheKey {
    /// Builds the key of a request. `target` is the origin-form request-target
    /// (`/path?query`); a `#fragment` is not allowed in a request-target and is rejected as
    /// not origin-form.
    pub fn build(host: &[u8], target: &[u8], cfg: &KeyConfig) -> Result<Self, KeyError> {
        if target.contains(&b'#') {
            return Err(KeyError::NotOriginForm);
        }
        let (path, query) = match target.iter().position(|&b| b == b'?') {
            Some(i) => (&target[..i], Some(&target[i + 1..])),
            None => (target, None),
        };
        let mut bytes = Vec::with_capacity(host.len() + target.len() + 1);
        push_host(host, &mut bytes)?;
        let host_len = bytes.len();
        if path.first() == Some(&b'/') && path_is_normal(path) {
            bytes.extend_from_slice(path);
        } else {
            bytes.extend_from_slice(&normalize_path(path)?);
        }
        if let Some(q) = query {
            let mut first = true;
            let mut param = Vec::new();
            for p in q.split(|&b| b == b'&') {
                param.clear();
                normalize_pct(p, &mut param)?;
                if param.is_empty() {
                    continue;
                }
                let name = match param.iter().position(|&b| b == b'=') {
                    Some(i) => &param[..i],
                    None => &param[..],
                };
                if cfg.drops(name) {
                    continue;
                }
                bytes.push(if first { b'?' } else { b'&' });
                first = false;
                bytes.extend_from_slice(&param);
            }
        }
        Ok(Self { bytes, host_len })
    }

    /// The key bytes for the store: host followed by path and query.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The normalised host.
    pub fn host(&self) -> &[u8] {
        &self.bytes[..self.host_len]
    }

    /// The normalised path and query (starts with `/`).
    pub fn path_and_query(&self) -> &[u8] {
        &self.bytes[self.host_len..]
    }

    /// The normalised path without the query.
    pub fn path(&self) -> &[u8] {
        let pq = self.path_and_query();
        match pq.iter().position(|&b| b == b'?') {
            Some(i) => &pq[..i],
            None => pq,
        }
    }

    /// XXH3-128 of the key bytes.
    pub fn hash128(&self) -> u128 {
        xxh3_128(&self.bytes)
    }
}

/// A Host value normalised as the key's host is (lowercase, no port), for
/// the origin request: the origin is asked with the Host the key names.
pub fn normalize_host(host: &[u8]) -> Result<String, KeyError> {
    let mut out = Vec::with_capacity(host.len());
    push_host(host, &mut out)?;
    // push_host admits ASCII only.
    String::from_utf8(out).map_err(|_| KeyError::BadHost)
}

/// The origin-form target sent to the origin for a request whose target is `target`
/// (`/path?query`): the path normalised exactly as [`CacheKey::build`] does (so no `..`
/// ever reaches the origin), and every non-empty query parameter percent-normalised and
/// kept in order, including those the key ignores.
pub fn origin_target(target: &[u8]) -> Result<String, KeyError> {
    if target.contains(&b'#') {
        return Err(KeyError::NotOriginForm);
    }
    let (path, query) = match target.iter().position(|&b| b == b'?') {
        Some(i) => (&target[..i], Some(&target[i + 1..])),
        None => (target, None),
    };
    let mut out = if path.first() == Some(&b'/') && path_is_normal(path) {
        path.to_vec()
    } else {
        normalize_path(path)?
    };
    if let Some(q) = query {
        let mut first = true;
        let mut param = Vec::new();
        for p in q.split(|&b| b == b'&') {
            param.clear();
            normalize_pct(p, &mut param)?;
            if param.is_empty() {
                continue;
            }
            out.push(if first { b'?' } else { b'&' });
            first = false;
            out.extend_from_slice(&param);
        }
    }
    // Normalised output is ASCII: raw bytes are unreserved, sub-delims or escapes.
    String::from_utf8(out).map_err(|_| KeyError::NotOriginForm)
}

/// A normalised key prefix for purges: every key of `host` whose path starts with the
/// normalised `path_prefix`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyPrefix {
    bytes: Vec<u8>,
}

impl KeyPrefix {
    /// The prefix bytes, comparable with [`CacheKey::as_bytes`].
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// Whether `key` falls under this prefix.
    pub fn matches(&self, key: &CacheKey) -> bool {
        key.as_bytes().starts_with(&self.bytes)
    }
}

/// The purge prefix for `host` and `path_prefix`, normalised exactly like
/// [`CacheKey::build`] normalises paths (so `/live/../vod/` purges `/vod/...`). The prefix
/// must not contain a query.
pub fn prefix_for_purge(host: &[u8], path_prefix: &[u8]) -> Result<KeyPrefix, KeyError> {
    if path_prefix.contains(&b'?') || path_prefix.contains(&b'#') {
        return Err(KeyError::NotOriginForm);
    }
    let mut bytes = Vec::with_capacity(host.len() + path_prefix.len());
    push_host(host, &mut bytes)?;
    bytes.extend_from_slice(&normalize_path(path_prefix)?);
    Ok(KeyPrefix { bytes })
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// The fast path (a path already normal is copied as is) agrees with the full
        /// normalisation on every path it accepts.
        #[test]
        fn fast_path_agrees_with_full_normalisation(
            segs in proptest::collection::vec("[a-zA-Z0-9._~%:@!$&'()*+,;=-]{0,6}", 1..6)
        ) {
            let path = format!("/{}", segs.join("/"));
            if path_is_normal(path.as_bytes()) {
                proptest::prop_assert_eq!(normalize_path(path.as_bytes()).ok(), Some(path.into_bytes()));
            }
        }
    }

    #[test]
    fn fast_path_refuses_what_needs_normalising() {
        for p in ["/a/./b", "/a/../b", "/a/.", "/..", "/%41", "/a b", "/a\x01", "/a//b", "//"] {
            assert!(!path_is_normal(p.as_bytes()), "{p}");
        }
        for p in ["/", "/live/seg_1.ts", "/a/.b/..c", "/x;y=1"] {
            assert!(path_is_normal(p.as_bytes()), "{p}");
        }
    }

    fn key(host: &str, target: &str) -> Result<String, KeyError> {
        key_cfg(host, target, &KeyConfig::default())
    }
    fn key_cfg(host: &str, target: &str, cfg: &KeyConfig) -> Result<String, KeyError> {
        CacheKey::build(host.as_bytes(), target.as_bytes(), cfg)
            .map(|k| String::from_utf8(k.as_bytes().to_vec()).unwrap())
    }

    #[test]
    fn host_table() {
        let cases: &[(&str, Result<&str, KeyError>)] = &[
            ("Example.COM", Ok("example.com")),
            ("example.com:80", Ok("example.com")),
            ("example.com:080", Ok("example.com")),
            ("example.com:", Ok("example.com")),
            ("example.com:8080", Ok("example.com")),
            ("example.com:443", Ok("example.com")),
            ("[::1]:80", Ok("[::1]")),
            ("[::1]", Ok("[::1]")),
            ("[::1]:8080", Ok("[::1]")),
            ("", Err(KeyError::BadHost)),
            (":80", Err(KeyError::BadHost)),
            ("a/b", Err(KeyError::BadHost)),
            ("a b", Err(KeyError::BadHost)),
            ("user@host", Err(KeyError::BadHost)),
            ("host:port", Err(KeyError::BadHost)),
            ("example.com:65535", Ok("example.com")),
            ("example.com:65536", Err(KeyError::BadHost)),
            ("drop.test:99999999", Err(KeyError::BadHost)),
            ("drop.test:99999999999999999999999", Err(KeyError::BadHost)),
            ("[::1]:70000", Err(KeyError::BadHost)),
            ("h\0", Err(KeyError::BadHost)),
            // A trailing dot is the same host; only one is taken off.
            ("Raw.Example.", Ok("raw.example")),
            ("raw.example.:8080", Ok("raw.example")),
            ("raw.example..", Err(KeyError::BadHost)),
            (".", Err(KeyError::BadHost)),
            (".:80", Err(KeyError::BadHost)),
            (".example", Err(KeyError::BadHost)),
            ("a..example", Err(KeyError::BadHost)),
        ];
        for (host, want) in cases {
            let got = key(host, "/").map(|k| k.trim_end_matches('/').to_string());
            assert_eq!(got, want.clone().map(str::to_string), "{host:?}");
            // The origin request's Host is the key's.
            let origin = normalize_host(host.as_bytes());
            assert_eq!(origin, want.clone().map(str::to_string), "{host:?}");
        }
    }

    #[test]
    fn path_table() {
        let cases: &[(&str, Result<&str, KeyError>)] = &[
            ("/", Ok("/")),
            ("/a/b.ts", Ok("/a/b.ts")),
            ("/a//b.ts", Ok("/a/b.ts")),
            ("//live///x.ts", Ok("/live/x.ts")),
            ("/a/..//b", Ok("/b")),
            ("/a%2F%2Fb", Ok("/a%2F%2Fb")),
            ("/a/../b", Ok("/b")),
            ("/b", Ok("/b")),
            ("/../../etc/passwd", Ok("/etc/passwd")),
            ("/a/./b/./", Ok("/a/b/")),
            ("/a/b/..", Ok("/a/")),
            ("/a/b/.", Ok("/a/b/")),
            ("/..", Ok("/")),
            ("/.", Ok("/")),
            ("/a/%2E%2E/b", Ok("/b")),
            ("/a/%2e%2E/%2e/b", Ok("/b")),
            ("/a/.%2e/b", Ok("/b")),
            ("/a%2Fb", Ok("/a%2Fb")),
            ("/a%2fb", Ok("/a%2Fb")),
            ("/a%2F..%2Fb", Ok("/a%2F..%2Fb")),
            ("/%7Euser/%41%62", Ok("/~user/Ab")),
            ("/a%3ab", Ok("/a%3Ab")),
            ("/a b", Ok("/a%20b")),
            ("/a%20b", Ok("/a%20b")),
            ("/caf\u{e9}", Ok("/caf%C3%A9")),
            ("/a\\..\\b", Ok("/a%5C..%5Cb")),
            ("//a//b", Ok("/a/b")),
            ("/...", Ok("/...")),
            ("/a/...b/..", Ok("/a/")),
            ("/%00", Err(KeyError::ControlChar)),
            ("/a\0b", Err(KeyError::ControlChar)),
            ("/a\rb", Err(KeyError::ControlChar)),
            ("/a\x7fb", Err(KeyError::ControlChar)),
            ("/%", Err(KeyError::BadEscape)),
            ("/%4", Err(KeyError::BadEscape)),
            ("/%zz", Err(KeyError::BadEscape)),
            ("/%%41", Err(KeyError::BadEscape)),
            ("a/b", Err(KeyError::NotOriginForm)),
            ("", Err(KeyError::NotOriginForm)),
            ("http://h/a", Err(KeyError::NotOriginForm)),
            ("*", Err(KeyError::NotOriginForm)),
            ("/a#frag", Err(KeyError::NotOriginForm)),
        ];
        for (target, want) in cases {
            let got = key("h", target).map(|k| k[1..].to_string());
            assert_eq!(got, want.clone().map(str::to_string), "{target:?}");
        }
    }

    #[test]
    fn query_table() {
        let d = KeyConfig::default();
        let ign =
            KeyConfig { ignore_query: vec!["token".into(), "exp".into()], ..KeyConfig::default() };
        let drop = KeyConfig { drop_query: true, ..KeyConfig::default() };
        let keep =
            KeyConfig { keep_query: vec!["v".into(), "bitrate".into()], ..KeyConfig::default() };
        let cases: &[(&str, &KeyConfig, &str)] = &[
            ("/a?b=1&a=2", &d, "/a?b=1&a=2"),
            ("/a?", &d, "/a"),
            ("/a?&&", &d, "/a"),
            ("/a?x=1&&y=2", &d, "/a?x=1&y=2"),
            ("/a?x=%7e&y=%2f", &d, "/a?x=~&y=%2F"),
            ("/a?x=a b", &d, "/a?x=a%20b"),
            ("/a/../b?x=/../", &d, "/b?x=/../"),
            ("/s.ts?token=abc&exp=1&q=hi", &ign, "/s.ts?q=hi"),
            ("/s.ts?tok%65n=abc", &ign, "/s.ts"),
            ("/s.ts?token", &ign, "/s.ts"),
            ("/s.ts?Token=abc", &ign, "/s.ts?Token=abc"),
            ("/s.ts?token=abc&exp=1", &ign, "/s.ts"),
            ("/s.ts?x=1&token=2", &drop, "/s.ts"),
            (
                "/l.m3u8?token=x&_HLS_msn=12&_HLS_part=3&_HLS_skip=YES",
                &drop,
                "/l.m3u8?_HLS_msn=12&_HLS_part=3&_HLS_skip=YES",
            ),
            (
                "/l.m3u8?_HLS_part=3&_HLS_msn=12",
                &KeyConfig {
                    ignore_query: vec!["_HLS_msn".into()],
                    drop_query: true,
                    ..KeyConfig::default()
                },
                "/l.m3u8?_HLS_part=3&_HLS_msn=12",
            ),
            // CMCD leaves every key; the origin still gets it (origin_target).
            ("/s.ts?CMCD=bl%3D21300%2Csid%3D%226e2f%22&v=2", &d, "/s.ts?v=2"),
            ("/s.ts?CMCD", &d, "/s.ts"),
            ("/s.ts?cmcd=x", &d, "/s.ts?cmcd=x"),
            ("/s.ts?CMCD=x&token=1", &ign, "/s.ts"),
            // A keep-list keeps its names, in request order, and the LL-HLS ones.
            ("/s.ts?sess=9&bitrate=800&v=2&CMCD=x", &keep, "/s.ts?bitrate=800&v=2"),
            ("/l.m3u8?_HLS_msn=3&sess=9", &keep, "/l.m3u8?_HLS_msn=3"),
            ("/s.ts?b%69trate=1&vv=2", &keep, "/s.ts?bitrate=1"),
            ("/s.ts?sess=9", &keep, "/s.ts"),
        ];
        for (target, cfg, want) in cases {
            assert_eq!(
                key_cfg("h", target, cfg).map(|k| k[1..].to_string()),
                Ok(want.to_string()),
                "{target}"
            );
        }
        assert_eq!(key("h", "/a?x=%00"), Err(KeyError::ControlChar));
        assert_eq!(key("h", "/a?x=%g0"), Err(KeyError::BadEscape));
    }

    #[test]
    fn accessors_and_hash() {
        let k =
            CacheKey::build(b"Cdn.Example:80", b"/live/../vod/seg.ts?a=1", &KeyConfig::default())
                .unwrap();
        assert_eq!(k.host(), b"cdn.example");
        assert_eq!(k.path_and_query(), b"/vod/seg.ts?a=1");
        assert_eq!(k.path(), b"/vod/seg.ts");
        let k2 =
            CacheKey::build(b"cdn.example", b"/vod/seg.ts?a=1", &KeyConfig::default()).unwrap();
        assert_eq!(k, k2);
        assert_eq!(k.hash128(), k2.hash128());
        let k3 =
            CacheKey::build(b"cdn.example", b"/vod/seg.ts?a=2", &KeyConfig::default()).unwrap();
        assert_ne!(k.hash128(), k3.hash128());
        // host/path boundary cannot be forged
        let a = CacheKey::build(b"ab", b"/c", &KeyConfig::default()).unwrap();
        let b = CacheKey::build(b"a", b"/bc", &KeyConfig::default()).unwrap();
        assert_ne!(a.as_bytes(), b.as_bytes());
    }

    #[test]
    fn purge_prefix() {
        let p = prefix_for_purge(b"CDN.example:80", b"/live/../vod/").unwrap();
        assert_eq!(p.as_bytes(), b"cdn.example/vod/");
        let cfg = KeyConfig::default();
        assert!(p.matches(&CacheKey::build(b"cdn.example", b"/vod/a.ts", &cfg).unwrap()));
        assert!(p.matches(&CacheKey::build(b"cdn.example", b"/vod/x/../b.ts?q", &cfg).unwrap()));
        assert!(!p.matches(&CacheKey::build(b"cdn.example", b"/vodx/a.ts", &cfg).unwrap()));
        assert!(!p.matches(&CacheKey::build(b"other", b"/vod/a.ts", &cfg).unwrap()));
        assert_eq!(prefix_for_purge(b"h", b"/a?b"), Err(KeyError::NotOriginForm));
        assert_eq!(prefix_for_purge(b"h", b"/%00"), Err(KeyError::ControlChar));
        assert_eq!(prefix_for_purge(b"h", b"/").unwrap().as_bytes(), b"h/");
    }
}
