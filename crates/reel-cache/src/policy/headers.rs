//! Generic header access and the small RFC 9110 field-syntax helpers shared by the policy
//! modules: list splitting (RFC 9110 5.6.1), OWS trimming (5.6.3), quoted-strings (5.6.4),
//! HTTP-dates (5.6.7) and delta-seconds (RFC 9111 1.2.2).

use std::time::{Duration, UNIX_EPOCH};

/// Read-only access to a header section, so the cache path can call the policy with its own
/// header storage.
///
/// `name` is always passed in lowercase ASCII; implementations compare names
/// case-insensitively (RFC 9110 5.1) and yield every field line with that name, in order.
pub trait HeaderLookup {
    /// Every field value received under `name`, in message order.
    fn get_all<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a [u8]> + 'a;

    /// The first field value under `name`.
    fn get_first<'a>(&'a self, name: &'a str) -> Option<&'a [u8]> {
        self.get_all(name).next()
    }

    /// Whether any field line with `name` is present.
    fn has(&self, name: &str) -> bool {
        self.get_all(name).next().is_some()
    }

    /// Every list member of every field line under `name` (RFC 9110 5.6.1), trimmed of OWS,
    /// empty members skipped. Commas inside quoted-strings do not split.
    fn list_members<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a [u8]> + 'a {
        self.get_all(name).flat_map(split_list)
    }
}

impl HeaderLookup for http::HeaderMap {
    fn get_all<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a [u8]> + 'a {
        http::HeaderMap::get_all(self, name).iter().map(http::HeaderValue::as_bytes)
    }
}

impl<N: AsRef<[u8]>, V: AsRef<[u8]>> HeaderLookup for [(N, V)] {
    fn get_all<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a [u8]> + 'a {
        self.iter()
            .filter(move |(n, _)| n.as_ref().eq_ignore_ascii_case(name.as_bytes()))
            .map(|(_, v)| v.as_ref())
    }
}

impl<N: AsRef<[u8]>, V: AsRef<[u8]>> HeaderLookup for Vec<(N, V)> {
    fn get_all<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a [u8]> + 'a {
        self.as_slice().get_all(name)
    }
}

impl<T: HeaderLookup + ?Sized> HeaderLookup for &T {
    fn get_all<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a [u8]> + 'a {
        (**self).get_all(name)
    }
}

/// Optional whitespace (RFC 9110 5.6.3).
pub(crate) fn is_ows(b: u8) -> bool {
    b == b' ' || b == b'\t'
}

/// Trims OWS from both ends.
pub fn trim_ows(mut s: &[u8]) -> &[u8] {
    while let [first, rest @ ..] = s {
        if is_ows(*first) { s = rest } else { break }
    }
    while let [rest @ .., last] = s {
        if is_ows(*last) { s = rest } else { break }
    }
    s
}

/// Splits one field value into its list members (RFC 9110 5.6.1), honouring quoted-strings
/// (5.6.4) so that `a="x, y", b` yields two members. Members are OWS-trimmed; empty ones
/// (`a,,b`) are skipped as 5.6.1 requires of recipients.
pub fn split_list(value: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut rest = value;
    std::iter::from_fn(move || {
        loop {
            if rest.is_empty() {
                return None;
            }
            let mut in_quote = false;
            let mut escaped = false;
            let mut end = rest.len();
            for (i, &b) in rest.iter().enumerate() {
                if in_quote {
                    if escaped {
                        escaped = false;
                    } else if b == b'\\' {
                        escaped = true;
                    } else if b == b'"' {
                        in_quote = false;
                    }
                } else if b == b'"' {
                    in_quote = true;
                } else if b == b',' {
                    end = i;
                    break;
                }
            }
            let member = trim_ows(&rest[..end]);
            rest = if end < rest.len() { &rest[end + 1..] } else { &[] };
            if !member.is_empty() {
                return Some(member);
            }
        }
    })
}

/// `tchar` of RFC 9110 5.6.2.
pub(crate) fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// Whether `s` is a non-empty `token` (RFC 9110 5.6.2).
pub(crate) fn is_token(s: &[u8]) -> bool {
    !s.is_empty() && s.iter().all(|&b| is_tchar(b))
}

/// Unquotes a quoted-string (RFC 9110 5.6.4), resolving quoted-pairs. Returns `None` when
/// `s` is not a well-formed quoted-string.
pub(crate) fn unquote(s: &[u8]) -> Option<Vec<u8>> {
    let inner = s.strip_prefix(b"\"")?.strip_suffix(b"\"")?;
    let mut out = Vec::with_capacity(inner.len());
    let mut it = inner.iter();
    while let Some(&b) = it.next() {
        match b {
            b'\\' => out.push(*it.next()?),
            b'"' => return None,
            _ => out.push(b),
        }
    }
    Some(out)
}

/// Parses `delta-seconds` (RFC 9111 1.2.2): 1*DIGIT. Values beyond 2^31 saturate to 2^31 as
/// the RFC requires; anything else (sign, fraction, empty) is invalid.
pub fn parse_delta_seconds(s: &[u8]) -> Option<u64> {
    const CAP: u64 = 1 << 31;
    if s.is_empty() || !s.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let mut v: u64 = 0;
    for &d in s {
        v = v.saturating_mul(10).saturating_add(u64::from(d - b'0'));
        if v > CAP {
            return Some(CAP);
        }
    }
    Some(v)
}

/// Parses an HTTP-date (RFC 9110 5.6.7, all three accepted formats) into unix seconds.
/// Dates before the epoch and garbage yield `None`.
pub fn parse_http_date(s: &[u8]) -> Option<u64> {
    let s = std::str::from_utf8(trim_ows(s)).ok()?;
    let t = httpdate::parse_http_date(s).ok()?;
    t.duration_since(UNIX_EPOCH).ok().map(|d| d.as_secs())
}

/// Formats unix seconds as an IMF-fixdate (RFC 9110 5.6.7).
pub fn format_http_date(unix_secs: u64) -> String {
    httpdate::fmt_http_date(UNIX_EPOCH + Duration::from_secs(unix_secs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_list_table() {
        let cases: &[(&[u8], &[&[u8]])] = &[
            (b"", &[]),
            (b"a", &[b"a"]),
            (b"a,b", &[b"a", b"b"]),
            (b" a , b ", &[b"a", b"b"]),
            (b"a,,b,", &[b"a", b"b"]),
            (b",,,", &[]),
            (b"a=\"x, y\", b", &[b"a=\"x, y\"", b"b"]),
            (b"a=\"x\\\", y\", b", &[b"a=\"x\\\", y\"", b"b"]),
            (b"a=\"unterminated, b", &[b"a=\"unterminated, b"]),
            (b"\t a \t", &[b"a"]),
        ];
        for (input, want) in cases {
            let got: Vec<&[u8]> = split_list(input).collect();
            assert_eq!(&got, want, "input {:?}", String::from_utf8_lossy(input));
        }
    }

    #[test]
    fn delta_seconds_table() {
        let cases: &[(&[u8], Option<u64>)] = &[
            (b"0", Some(0)),
            (b"60", Some(60)),
            (b"007", Some(7)),
            (b"2147483648", Some(1 << 31)),
            (b"99999999999999999999999999", Some(1 << 31)),
            (b"", None),
            (b"-1", None),
            (b"1.5", None),
            (b" 1", None),
            (b"1a", None),
            (b"+5", None),
        ];
        for (input, want) in cases {
            assert_eq!(parse_delta_seconds(input), *want, "{:?}", String::from_utf8_lossy(input));
        }
    }

    #[test]
    fn http_dates() {
        let t = 784111777;
        assert_eq!(parse_http_date(b"Sun, 06 Nov 1994 08:49:37 GMT"), Some(t));
        assert_eq!(parse_http_date(b"Sunday, 06-Nov-94 08:49:37 GMT"), Some(t));
        assert_eq!(parse_http_date(b"Sun Nov  6 08:49:37 1994"), Some(t));
        assert_eq!(parse_http_date(b" Sun, 06 Nov 1994 08:49:37 GMT "), Some(t));
        assert_eq!(parse_http_date(b"0"), None);
        assert_eq!(parse_http_date(b"\xff\xfe"), None);
        assert_eq!(parse_http_date(b""), None);
        assert_eq!(format_http_date(t), "Sun, 06 Nov 1994 08:49:37 GMT");
    }

    #[test]
    fn lookup_impls_agree() {
        let slice: Vec<(Vec<u8>, Vec<u8>)> = vec![
            (b"Cache-Control".to_vec(), b"max-age=1".to_vec()),
            (b"x".to_vec(), b"y".to_vec()),
            (b"cache-control".to_vec(), b"public, no-transform".to_vec()),
        ];
        let mut map = http::HeaderMap::new();
        map.append("cache-control", http::HeaderValue::from_static("max-age=1"));
        map.append("x", http::HeaderValue::from_static("y"));
        map.append("cache-control", http::HeaderValue::from_static("public, no-transform"));
        let a: Vec<&[u8]> = slice.list_members("cache-control").collect();
        let b: Vec<&[u8]> = map.list_members("cache-control").collect();
        assert_eq!(a, b);
        assert_eq!(a, vec![&b"max-age=1"[..], b"public", b"no-transform"]);
        assert!(slice.has("x") && map.has("x"));
        assert!(!slice.has("z") && !map.has("z"));
        assert_eq!(slice.get_first("X"), Some(&b"y"[..]), "names compare case-insensitively");
    }

    #[test]
    fn unquote_table() {
        assert_eq!(unquote(b"\"abc\""), Some(b"abc".to_vec()));
        assert_eq!(unquote(b"\"a\\\"b\""), Some(b"a\"b".to_vec()));
        assert_eq!(unquote(b"\"a\"b\""), None);
        assert_eq!(unquote(b"\"abc"), None);
        assert_eq!(unquote(b"abc"), None);
        assert_eq!(unquote(b"\"\\\""), None);
    }
}
