//! `Cache-Control` parsing (RFC 9111 5.2) for responses and requests, the RFC 5861
//! extensions `stale-while-revalidate` / `stale-if-error`, `Pragma: no-cache` on requests
//! (RFC 9111 5.4), and targeted cache control for responses (RFC 9213: `CDN-Cache-Control`
//! and our own field, which override `Cache-Control` and `Expires` for this cache only).
//!
//! Directive names compare case-insensitively; all field lines are combined as one list
//! (RFC 9110 5.3); arguments are accepted in token and quoted-string form (RFC 9111 5.2).
//! When a directive repeats, the first occurrence wins (RFC 9111 4.2.1). Parsing allocates
//! only for the field-name lists of qualified `no-cache` / `private`.

use super::headers::{HeaderLookup, is_token, parse_delta_seconds, split_list, trim_ows, unquote};

/// A directive that is either absent, unqualified, or qualified with field names
/// (`no-cache` and `private`, RFC 9111 5.2.2.4 and 5.2.2.7).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum FieldDirective {
    /// The directive is not present.
    #[default]
    Absent,
    /// The directive is present without an argument: it applies to the whole response.
    All,
    /// The directive lists header fields (lowercased) that it applies to.
    Fields(Vec<String>),
}

impl FieldDirective {
    /// Whether the directive applies to the whole response.
    pub fn is_all(&self) -> bool {
        matches!(self, FieldDirective::All)
    }

    /// The listed field names, empty unless qualified.
    pub fn fields(&self) -> &[String] {
        match self {
            FieldDirective::Fields(f) => f,
            _ => &[],
        }
    }

    /// Merge a new occurrence: an unqualified occurrence is the most restrictive and wins
    /// (RFC 9111 4.2.1, "the most restrictive directive should be honored").
    fn merge(&mut self, new: FieldDirective) {
        match (&mut *self, new) {
            (FieldDirective::All, _) => {}
            (_, FieldDirective::All) => *self = FieldDirective::All,
            (FieldDirective::Fields(a), FieldDirective::Fields(b)) => a.extend(b),
            (s @ FieldDirective::Absent, n) => *s = n,
            (_, FieldDirective::Absent) => {}
        }
    }
}

/// Response cache directives (RFC 9111 5.2.2, RFC 5861).
///
/// Delta-seconds are in seconds. An invalid `max-age` / `s-maxage` argument is recorded as
/// `Some(0)`, so the response is stale (RFC 9111 4.2.1 encourages treating invalid freshness
/// information as stale). An invalid `stale-while-revalidate` / `stale-if-error` argument is
/// ignored (it can only grant permission, so dropping it is the safe reading).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResponseCacheControl {
    /// `max-age` (5.2.2.1).
    pub max_age: Option<u64>,
    /// `s-maxage` (5.2.2.10); also implies `proxy-revalidate` semantics for us.
    pub s_maxage: Option<u64>,
    /// `no-store` (5.2.2.5).
    pub no_store: bool,
    /// `no-cache` (5.2.2.4), unqualified or with field names.
    pub no_cache: FieldDirective,
    /// `private` (5.2.2.7), unqualified or with field names.
    pub private: FieldDirective,
    /// `public` (5.2.2.9).
    pub public: bool,
    /// `must-revalidate` (5.2.2.2).
    pub must_revalidate: bool,
    /// `proxy-revalidate` (5.2.2.8).
    pub proxy_revalidate: bool,
    /// `no-transform` (5.2.2.6).
    pub no_transform: bool,
    /// `immutable` (RFC 8246).
    pub immutable: bool,
    /// `stale-while-revalidate=N` (RFC 5861 3).
    pub stale_while_revalidate: Option<u64>,
    /// `stale-if-error=N` (RFC 5861 4).
    pub stale_if_error: Option<u64>,
}

/// The `max-stale` request directive (RFC 9111 5.2.1.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MaxStale {
    /// `max-stale` without a value: any staleness is acceptable.
    Any,
    /// `max-stale=N`: staleness of at most N seconds is acceptable.
    Secs(u64),
}

/// Request cache directives (RFC 9111 5.2.1, RFC 5861 4).
///
/// An invalid request `max-age` is read as `max-age=0` (the restrictive reading); invalid
/// `max-stale`, `min-fresh` and `stale-if-error` arguments are ignored (they would relax or
/// tighten the freshness check in ways the client did not clearly ask for).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequestCacheControl {
    /// `max-age` (5.2.1.1).
    pub max_age: Option<u64>,
    /// `max-stale` (5.2.1.2).
    pub max_stale: Option<MaxStale>,
    /// `min-fresh` (5.2.1.3).
    pub min_fresh: Option<u64>,
    /// `no-cache` (5.2.1.4), or `Pragma: no-cache` without Cache-Control (5.4).
    pub no_cache: bool,
    /// `no-store` (5.2.1.5).
    pub no_store: bool,
    /// `no-transform` (5.2.1.6).
    pub no_transform: bool,
    /// `only-if-cached` (5.2.1.7).
    pub only_if_cached: bool,
    /// `stale-if-error=N` (RFC 5861 4).
    pub stale_if_error: Option<u64>,
}

/// Splits a directive into its lowercase-comparable name and optional raw argument.
fn directive(member: &[u8]) -> (&[u8], Option<&[u8]>) {
    match member.iter().position(|&b| b == b'=') {
        Some(i) => (trim_ows(&member[..i]), Some(trim_ows(&member[i + 1..]))),
        None => (member, None),
    }
}

/// Delta-seconds in token or quoted-string form (RFC 9111 5.2).
fn delta_arg(arg: Option<&[u8]>) -> Option<u64> {
    let arg = arg?;
    if arg.first() == Some(&b'"') {
        parse_delta_seconds(&unquote(arg)?)
    } else {
        parse_delta_seconds(arg)
    }
}

/// The argument of a qualified `no-cache` / `private`: a quoted list of field names (token
/// form of a single name is accepted too). A malformed argument degrades to the unqualified
/// directive, the most restrictive reading.
fn field_arg(arg: Option<&[u8]>) -> FieldDirective {
    let Some(arg) = arg else { return FieldDirective::All };
    let list = if arg.first() == Some(&b'"') {
        match unquote(arg) {
            Some(v) => v,
            None => return FieldDirective::All,
        }
    } else {
        arg.to_vec()
    };
    let mut names = Vec::new();
    for name in split_list(&list) {
        if !is_token(name) {
            return FieldDirective::All;
        }
        let mut s = String::from_utf8_lossy(name).into_owned();
        s.make_ascii_lowercase();
        names.push(s);
    }
    if names.is_empty() { FieldDirective::All } else { FieldDirective::Fields(names) }
}

fn first(slot: &mut Option<u64>, v: Option<u64>) {
    if slot.is_none() {
        *slot = v;
    }
}

impl ResponseCacheControl {
    /// Parses every `Cache-Control` field line of a response.
    pub fn parse<H: HeaderLookup + ?Sized>(headers: &H) -> Self {
        Self::parse_values(headers.get_all("cache-control"))
    }

    /// Parses the given `Cache-Control` field values as one combined list.
    pub fn parse_values<'a>(values: impl IntoIterator<Item = &'a [u8]>) -> Self {
        let mut cc = Self::default();
        for member in values.into_iter().flat_map(split_list) {
            let (name, arg) = directive(member);
            let is = |n: &str| name.eq_ignore_ascii_case(n.as_bytes());
            if is("max-age") {
                first(&mut cc.max_age, Some(delta_arg(arg).unwrap_or(0)));
            } else if is("s-maxage") {
                first(&mut cc.s_maxage, Some(delta_arg(arg).unwrap_or(0)));
            } else if is("no-store") {
                cc.no_store = true;
            } else if is("no-cache") {
                cc.no_cache.merge(field_arg(arg));
            } else if is("private") {
                cc.private.merge(field_arg(arg));
            } else if is("public") {
                cc.public = true;
            } else if is("must-revalidate") {
                cc.must_revalidate = true;
            } else if is("proxy-revalidate") {
                cc.proxy_revalidate = true;
            } else if is("no-transform") {
                cc.no_transform = true;
            } else if is("immutable") {
                cc.immutable = true;
            } else if is("stale-while-revalidate") {
                first(&mut cc.stale_while_revalidate, delta_arg(arg));
            } else if is("stale-if-error") {
                first(&mut cc.stale_if_error, delta_arg(arg));
            }
            // Unknown extension directives are ignored (RFC 9111 5.2.3).
        }
        cc
    }

    /// Whether the response carries explicit freshness (RFC 9111 4.2.1: `s-maxage` or
    /// `max-age`; `Expires` is checked by the freshness module).
    pub fn has_explicit_lifetime(&self) -> bool {
        self.max_age.is_some() || self.s_maxage.is_some()
    }

    /// Whether a shared cache must not serve this response stale (RFC 9111 4.2.4 with
    /// 5.2.2.2 `must-revalidate`, 5.2.2.8 `proxy-revalidate`, 5.2.2.10 `s-maxage`).
    pub fn forbids_stale(&self) -> bool {
        self.must_revalidate || self.proxy_revalidate || self.s_maxage.is_some()
    }
}

/// RFC 9213 2.1: the first field of `targets` (lowercase names, in precedence order) whose
/// value is a valid, non-empty Structured Fields Dictionary (RFC 9213 2.2, RFC 9651 3.2),
/// with the directives it carries. `None` when no targeted field applies, and then
/// `Cache-Control` and `Expires` govern as usual.
///
/// Members map to the `Cache-Control` directives of the same name (RFC 9213 2.1: same
/// semantics and precedence), each consumed only with the type RFC 9213 2.2 gives it:
/// delta-seconds (`max-age`, `s-maxage`, `stale-while-revalidate`, `stale-if-error`) as
/// non-negative Integers, the field-name lists of `no-cache` and `private` as Strings (or
/// `?1` bare), every other directive as `?1` (a bare key). A member of another type
/// (`max-age="10000"`, `no-store=?0`, `public=1`) is dropped ("SHOULD NOT consume"); a field
/// left with no member at all is treated as empty, so `Cache-Control` governs. Extension
/// directives are ignored but keep the field in force (RFC 9213 3.1's `none`); parameters
/// are ignored.
pub fn targeted<'t, H: HeaderLookup + ?Sized>(
    headers: &H,
    targets: &'t [String],
) -> Option<(&'t str, ResponseCacheControl)> {
    targets.iter().find_map(|t| Some((t.as_str(), parse_targeted(headers, t)?)))
}

/// One targeted field's directives, `None` if absent, empty, not a valid Dictionary, or
/// left with no member once those of the wrong type are dropped.
fn parse_targeted<H: HeaderLookup + ?Sized>(
    headers: &H,
    name: &str,
) -> Option<ResponseCacheControl> {
    // Field lines combine with commas before parsing (RFC 9651 4.2).
    let mut joined: Vec<u8> = Vec::new();
    for v in headers.get_all(name) {
        if !joined.is_empty() {
            joined.extend_from_slice(b", ");
        }
        joined.extend_from_slice(v);
    }
    if trim_ows(&joined).is_empty() {
        return None;
    }
    let dict: sfv::Dictionary = sfv::Parser::new(&joined).parse().ok()?;
    if dict.is_empty() {
        return None;
    }
    let mut members: Vec<Vec<u8>> = Vec::with_capacity(dict.len());
    let mut unknown = false;
    for (key, entry) in &dict {
        let k = key.as_str();
        let Some(kind) = directive_kind(k) else {
            // An extension directive: nothing to consume, but the field stays in force.
            unknown = true;
            continue;
        };
        let sfv::ListEntry::Item(item) = entry else { continue };
        match (kind, &item.bare_item) {
            (Kind::Flag | Kind::Fields, sfv::BareItem::Boolean(true)) => {
                members.push(k.as_bytes().to_vec())
            }
            (Kind::Delta, sfv::BareItem::Integer(n)) => {
                let n = i64::from(*n);
                if n >= 0 {
                    members.push(format!("{k}={n}").into_bytes());
                }
            }
            (Kind::Fields, sfv::BareItem::String(v)) => {
                let escaped = v.as_str().replace('\\', "\\\\").replace('"', "\\\"");
                members.push(format!("{k}=\"{escaped}\"").into_bytes());
            }
            // The wrong type for the directive: not consumed (RFC 9213 2.2).
            _ => {}
        }
    }
    if members.is_empty() && !unknown {
        // Nothing left but members this cache may not consume: as an empty field.
        return None;
    }
    Some(ResponseCacheControl::parse_values(members.iter().map(Vec::as_slice)))
}

/// The Structured Fields type a targeted member must have to be consumed (RFC 9213 2.2).
#[derive(Clone, Copy)]
enum Kind {
    /// `?1` (a bare key) only.
    Flag,
    /// A non-negative Integer: delta-seconds.
    Delta,
    /// `?1`, or a String listing field names (`no-cache`, `private`).
    Fields,
}

/// The type of a response directive this cache knows, by its (lowercase) name; `None` for
/// extension directives.
fn directive_kind(name: &str) -> Option<Kind> {
    Some(match name {
        "max-age" | "s-maxage" | "stale-while-revalidate" | "stale-if-error" => Kind::Delta,
        "no-cache" | "private" => Kind::Fields,
        "no-store" | "public" | "must-revalidate" | "proxy-revalidate" | "no-transform"
        | "immutable" | "must-understand" => Kind::Flag,
        _ => return None,
    })
}

impl ResponseCacheControl {
    /// The directives that govern this (shared, CDN) cache: the first applicable targeted
    /// field of `targets` (RFC 9213), else `Cache-Control`.
    pub fn for_cache<H: HeaderLookup + ?Sized>(headers: &H, targets: &[String]) -> Self {
        match targeted(headers, targets) {
            Some((_, cc)) => cc,
            None => Self::parse(headers),
        }
    }
}

impl RequestCacheControl {
    /// Parses a request's `Cache-Control`, falling back to `Pragma: no-cache` when no
    /// Cache-Control field is present (RFC 9111 5.4).
    pub fn parse<H: HeaderLookup + ?Sized>(headers: &H) -> Self {
        if headers.has("cache-control") {
            return Self::parse_values(headers.get_all("cache-control"));
        }
        let no_cache = headers
            .list_members("pragma")
            .any(|m| directive(m).0.eq_ignore_ascii_case(b"no-cache"));
        Self { no_cache, ..Self::default() }
    }

    /// Parses the given `Cache-Control` field values as one combined list.
    pub fn parse_values<'a>(values: impl IntoIterator<Item = &'a [u8]>) -> Self {
        let mut cc = Self::default();
        for member in values.into_iter().flat_map(split_list) {
            let (name, arg) = directive(member);
            let is = |n: &str| name.eq_ignore_ascii_case(n.as_bytes());
            if is("max-age") {
                first(&mut cc.max_age, Some(delta_arg(arg).unwrap_or(0)));
            } else if is("max-stale") {
                if cc.max_stale.is_none() {
                    cc.max_stale = match arg {
                        None => Some(MaxStale::Any),
                        Some(_) => delta_arg(arg).map(MaxStale::Secs),
                    };
                }
            } else if is("min-fresh") {
                first(&mut cc.min_fresh, delta_arg(arg));
            } else if is("no-cache") {
                cc.no_cache = true;
            } else if is("no-store") {
                cc.no_store = true;
            } else if is("no-transform") {
                cc.no_transform = true;
            } else if is("only-if-cached") {
                cc.only_if_cached = true;
            } else if is("stale-if-error") {
                first(&mut cc.stale_if_error, delta_arg(arg));
            }
        }
        cc
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resp(v: &[&str]) -> ResponseCacheControl {
        ResponseCacheControl::parse_values(v.iter().map(|s| s.as_bytes()))
    }
    fn req(v: &[&str]) -> RequestCacheControl {
        RequestCacheControl::parse_values(v.iter().map(|s| s.as_bytes()))
    }
    fn fields(f: &[&str]) -> FieldDirective {
        FieldDirective::Fields(f.iter().map(|s| s.to_string()).collect())
    }

    #[test]
    fn response_table() {
        let d = ResponseCacheControl::default;
        let cases: Vec<(&[&str], ResponseCacheControl)> = vec![
            (&[], d()),
            (&[""], d()),
            (
                &["public, max-age=86400, stale-while-revalidate=30"],
                ResponseCacheControl {
                    public: true,
                    max_age: Some(86400),
                    stale_while_revalidate: Some(30),
                    ..d()
                },
            ),
            (&["MAX-AGE=5"], ResponseCacheControl { max_age: Some(5), ..d() }),
            (&["max-age=\"5\""], ResponseCacheControl { max_age: Some(5), ..d() }),
            (&["max-age = 5"], ResponseCacheControl { max_age: Some(5), ..d() }),
            // invalid freshness -> stale (4.2.1)
            (&["max-age=abc"], ResponseCacheControl { max_age: Some(0), ..d() }),
            (&["max-age=-1"], ResponseCacheControl { max_age: Some(0), ..d() }),
            (&["max-age"], ResponseCacheControl { max_age: Some(0), ..d() }),
            (&["max-age=1.5"], ResponseCacheControl { max_age: Some(0), ..d() }),
            (&["s-maxage=x"], ResponseCacheControl { s_maxage: Some(0), ..d() }),
            // first occurrence wins, across field lines too
            (&["max-age=10, max-age=20"], ResponseCacheControl { max_age: Some(10), ..d() }),
            (&["max-age=10", "max-age=20"], ResponseCacheControl { max_age: Some(10), ..d() }),
            (&["max-age=99999999999999"], ResponseCacheControl { max_age: Some(1 << 31), ..d() }),
            (
                &["s-maxage=60", "no-store"],
                ResponseCacheControl { s_maxage: Some(60), no_store: true, ..d() },
            ),
            (&["no-cache"], ResponseCacheControl { no_cache: FieldDirective::All, ..d() }),
            (
                &["no-cache=\"Set-Cookie, X-Foo\""],
                ResponseCacheControl { no_cache: fields(&["set-cookie", "x-foo"]), ..d() },
            ),
            (
                &["no-cache=set-cookie"],
                ResponseCacheControl { no_cache: fields(&["set-cookie"]), ..d() },
            ),
            (
                &["no-cache=\"a\", no-cache"],
                ResponseCacheControl { no_cache: FieldDirective::All, ..d() },
            ),
            (
                &["no-cache=\"a\", no-cache=\"b\""],
                ResponseCacheControl { no_cache: fields(&["a", "b"]), ..d() },
            ),
            (&["no-cache=\"\""], ResponseCacheControl { no_cache: FieldDirective::All, ..d() }),
            (
                &["no-cache=\"bad name\""],
                ResponseCacheControl { no_cache: FieldDirective::All, ..d() },
            ),
            (&["private"], ResponseCacheControl { private: FieldDirective::All, ..d() }),
            (
                &["private=\"authorization\""],
                ResponseCacheControl { private: fields(&["authorization"]), ..d() },
            ),
            (
                &["Must-Revalidate, PROXY-revalidate, no-transform, immutable"],
                ResponseCacheControl {
                    must_revalidate: true,
                    proxy_revalidate: true,
                    no_transform: true,
                    immutable: true,
                    ..d()
                },
            ),
            (
                &["stale-while-revalidate=x, stale-if-error=600"],
                ResponseCacheControl { stale_if_error: Some(600), ..d() },
            ),
            // unknown extensions and junk are ignored
            (&["foo, bar=\"baz, max-age=1\", =, ,,"], d()),
            (&["community=\"UCI\", max-age=3"], ResponseCacheControl { max_age: Some(3), ..d() }),
            (&["\u{1}\u{2}garbage\u{7f}"], d()),
        ];
        for (input, want) in cases {
            assert_eq!(resp(input), want, "input {input:?}");
        }
    }

    #[test]
    fn response_helpers() {
        assert!(resp(&["max-age=1"]).has_explicit_lifetime());
        assert!(resp(&["s-maxage=1"]).has_explicit_lifetime());
        assert!(!resp(&["public"]).has_explicit_lifetime());
        assert!(resp(&["s-maxage=1"]).forbids_stale());
        assert!(resp(&["must-revalidate"]).forbids_stale());
        assert!(resp(&["proxy-revalidate"]).forbids_stale());
        assert!(!resp(&["max-age=1"]).forbids_stale());
        assert!(resp(&["no-cache"]).no_cache.is_all());
        assert_eq!(resp(&["no-cache=a"]).no_cache.fields(), ["a".to_string()]);
        assert!(resp(&["public"]).no_cache.fields().is_empty());
    }

    #[test]
    fn request_table() {
        let d = RequestCacheControl::default;
        let cases: Vec<(&[&str], RequestCacheControl)> = vec![
            (&[], d()),
            (&["max-age=0"], RequestCacheControl { max_age: Some(0), ..d() }),
            (&["max-age=bogus"], RequestCacheControl { max_age: Some(0), ..d() }),
            (&["max-stale"], RequestCacheControl { max_stale: Some(MaxStale::Any), ..d() }),
            (&["max-stale=30"], RequestCacheControl { max_stale: Some(MaxStale::Secs(30)), ..d() }),
            (
                &["max-stale=\"30\""],
                RequestCacheControl { max_stale: Some(MaxStale::Secs(30)), ..d() },
            ),
            (&["max-stale=x"], d()),
            (&["min-fresh=10"], RequestCacheControl { min_fresh: Some(10), ..d() }),
            (&["min-fresh=-10"], d()),
            (&["No-Cache"], RequestCacheControl { no_cache: true, ..d() }),
            (&["no-store"], RequestCacheControl { no_store: true, ..d() }),
            (&["only-if-cached"], RequestCacheControl { only_if_cached: true, ..d() }),
            (&["no-transform"], RequestCacheControl { no_transform: true, ..d() }),
            (&["stale-if-error=5"], RequestCacheControl { stale_if_error: Some(5), ..d() }),
            (
                &["max-age=5", "min-fresh=1, max-stale=2"],
                RequestCacheControl {
                    max_age: Some(5),
                    min_fresh: Some(1),
                    max_stale: Some(MaxStale::Secs(2)),
                    ..d()
                },
            ),
        ];
        for (input, want) in cases {
            assert_eq!(req(input), want, "input {input:?}");
        }
    }

    fn targets() -> Vec<String> {
        vec!["reel-cache-control".to_string(), "cdn-cache-control".to_string()]
    }

    fn h(pairs: &[(&str, &str)]) -> Vec<(Vec<u8>, Vec<u8>)> {
        pairs.iter().map(|(n, v)| (n.as_bytes().to_vec(), v.as_bytes().to_vec())).collect()
    }

    #[test]
    fn targeted_field_overrides_cache_control() {
        let t = targets();
        let r = h(&[("cache-control", "no-store"), ("cdn-cache-control", "max-age=600")]);
        let (name, cc) = targeted(&r, &t).unwrap();
        assert_eq!(name, "cdn-cache-control");
        assert_eq!(cc.max_age, Some(600));
        assert!(!cc.no_store);
        assert_eq!(ResponseCacheControl::for_cache(&r, &t), cc);

        let r = h(&[("cache-control", "max-age=600"), ("CDN-Cache-Control", "no-store")]);
        let cc = ResponseCacheControl::for_cache(&r, &t);
        assert!(cc.no_store && cc.max_age.is_none());

        let r = h(&[("cache-control", "max-age=600"), ("cdn-cache-control", "private")]);
        assert!(ResponseCacheControl::for_cache(&r, &t).private.is_all());
        let r = h(&[("cdn-cache-control", r#"no-cache="set-cookie", max-age=5"#)]);
        let cc = ResponseCacheControl::for_cache(&r, &t);
        assert_eq!(cc.no_cache, FieldDirective::Fields(vec!["set-cookie".into()]));
        assert_eq!(cc.max_age, Some(5));
    }

    #[test]
    fn our_own_field_takes_precedence_over_cdn_cache_control() {
        let r = h(&[("cdn-cache-control", "max-age=10"), ("reel-cache-control", "max-age=99")]);
        let t = targets();
        let (name, cc) = targeted(&r, &t).unwrap();
        assert_eq!((name, cc.max_age), ("reel-cache-control", Some(99)));
    }

    #[test]
    fn invalid_or_empty_targeted_fields_fall_back_to_cache_control() {
        let t = targets();
        for bad in ["", "  ", "max-age=1.5.5", "Max-Age=60", "max-age=60,", "max-age=\"60"] {
            let r = h(&[("cache-control", "max-age=7"), ("cdn-cache-control", bad)]);
            assert!(targeted(&r, &t).is_none(), "{bad:?} must be ignored");
            assert_eq!(ResponseCacheControl::for_cache(&r, &t).max_age, Some(7), "{bad:?}");
        }
        // Wrong value types drop just that directive (RFC 9213 2.2).
        let r = h(&[("cdn-cache-control", "max-age=1.5, no-store=?0, s-maxage=-1, public")]);
        let cc = ResponseCacheControl::for_cache(&r, &t);
        assert_eq!((cc.max_age, cc.s_maxage, cc.no_store, cc.public), (None, None, false, true));
        // Two field lines combine.
        let r = h(&[("cdn-cache-control", "max-age=60"), ("cdn-cache-control", "must-revalidate")]);
        let cc = ResponseCacheControl::for_cache(&r, &t);
        assert!(cc.max_age == Some(60) && cc.must_revalidate);
        // Fields not on the target list change nothing.
        let r = h(&[("cache-control", "max-age=7"), ("other-cdn-cache-control", "no-store")]);
        assert_eq!(ResponseCacheControl::for_cache(&r, &t).max_age, Some(7));
    }

    #[test]
    fn targeted_members_of_the_wrong_type_are_not_consumed() {
        let t = targets();
        // RFC 9213 2.2: delta-seconds are Integers. A String is not consumed, and a field
        // left with no member is ignored like an empty one: Cache-Control governs.
        for bad in [
            r#"max-age="10000""#,
            r#"s-maxage="10000""#,
            r#"stale-while-revalidate="60""#,
            r#"stale-if-error="60""#,
            "max-age=?1",
            "max-age=abc",
            "no-store=1",
            r#"public="yes""#,
            "must-revalidate=10",
            "immutable=1.5",
            "no-cache=5",
            "private=:AAA=:",
            "no-store=?0",
        ] {
            let r = h(&[("cache-control", "max-age=7"), ("cdn-cache-control", bad)]);
            assert!(targeted(&r, &t).is_none(), "{bad:?} must be ignored");
            assert_eq!(ResponseCacheControl::for_cache(&r, &t).max_age, Some(7), "{bad:?}");
        }
        // Beside members of the right type, a wrong one is just dropped.
        let r =
            h(&[("cache-control", "max-age=7"), ("cdn-cache-control", r#"max-age="9", public"#)]);
        let (_, cc) = targeted(&r, &t).expect("public applies");
        assert_eq!((cc.max_age, cc.public), (None, true));
        // The right types: Integers, Strings for field lists, bare keys (true).
        let r = h(&[(
            "cdn-cache-control",
            r#"max-age=60, s-maxage=30, private="set-cookie", no-cache, must-revalidate"#,
        )]);
        let (_, cc) = targeted(&r, &t).unwrap();
        assert_eq!((cc.max_age, cc.s_maxage), (Some(60), Some(30)));
        assert_eq!(cc.private, FieldDirective::Fields(vec!["set-cookie".into()]));
        assert!(cc.no_cache.is_all() && cc.must_revalidate);
        // An unknown directive, of any type, keeps the field (RFC 9213 3.1's `none`).
        for unknown in ["none", r#"x-ext="a""#, "x-ext=5"] {
            let r = h(&[("cache-control", "max-age=7"), ("cdn-cache-control", unknown)]);
            let (_, cc) = targeted(&r, &t).expect(unknown);
            assert_eq!(cc, ResponseCacheControl::default(), "{unknown:?}");
        }
    }

    #[test]
    fn pragma_only_without_cache_control() {
        let h: Vec<(&str, &str)> = vec![("Pragma", "no-cache")];
        assert!(RequestCacheControl::parse(&h[..]).no_cache);
        let h: Vec<(&str, &str)> = vec![("pragma", "foo, NO-CACHE")];
        assert!(RequestCacheControl::parse(&h[..]).no_cache);
        // 5.4: Cache-Control present -> Pragma ignored
        let h: Vec<(&str, &str)> = vec![("Pragma", "no-cache"), ("Cache-Control", "max-age=5")];
        let cc = RequestCacheControl::parse(&h[..]);
        assert!(!cc.no_cache);
        assert_eq!(cc.max_age, Some(5));
        let h: Vec<(&str, &str)> = vec![("Pragma", "x-no-cache")];
        assert!(!RequestCacheControl::parse(&h[..]).no_cache);
    }
}
