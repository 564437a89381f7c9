//! Conditional requests (RFC 9110 13) evaluated against a stored response, and the
//! validators a revalidation request sends to the origin (RFC 9111 4.3.1).
//!
//! RFC 9111 4.3.2 notes that `If-Match` / `If-Unmodified-Since` are meant for the origin;
//! we evaluate them against the stored representation anyway, which is the representation
//! this request would be served, so the answer is the one the origin would give for it.

use super::headers::{HeaderLookup, is_ows, parse_http_date, trim_ows};
use super::meta::StoredMeta;

/// The result of evaluating preconditions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Preconditions hold (or do not apply): serve the response normally.
    Proceed,
    /// Answer 304 Not Modified (RFC 9110 15.4.5).
    NotModified,
    /// Answer 412 Precondition Failed (RFC 9110 15.5.13).
    PreconditionFailed,
}

/// The validators of the selected representation.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Validators<'a> {
    /// The `ETag` field value, as sent (`"x"` or `W/"x"`).
    pub etag: Option<&'a [u8]>,
    /// `Last-Modified`, unix seconds.
    pub last_modified: Option<u64>,
    /// `Date` of the stored response, used in place of a missing Last-Modified when
    /// evaluating `If-Modified-Since` (RFC 9111 4.3.2).
    pub date: Option<u64>,
}

impl<'a> Validators<'a> {
    /// The validators of a stored response.
    pub fn of(meta: &'a StoredMeta) -> Self {
        Self { etag: meta.etag(), last_modified: meta.last_modified(), date: Some(meta.date()) }
    }
}

/// A parsed entity-tag (RFC 9110 8.8.3): `opaque` includes the double quotes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EntityTag<'a> {
    /// `W/` prefix present.
    pub weak: bool,
    /// The opaque-tag including its quotes.
    pub opaque: &'a [u8],
}

impl<'a> EntityTag<'a> {
    /// Parses one entity-tag; `None` when malformed.
    pub fn parse(s: &'a [u8]) -> Option<Self> {
        let s = trim_ows(s);
        let (weak, rest) = match s.strip_prefix(b"W/") {
            Some(r) => (true, r),
            None => (false, s),
        };
        let (tag, tail) = take_opaque(rest)?;
        tail.is_empty().then_some(Self { weak, opaque: tag })
    }

    /// Strong comparison (RFC 9110 8.8.3.2): both strong and identical.
    pub fn strong_eq(&self, other: &EntityTag<'_>) -> bool {
        !self.weak && !other.weak && self.opaque == other.opaque
    }

    /// Weak comparison (RFC 9110 8.8.3.2): opaque tags identical.
    pub fn weak_eq(&self, other: &EntityTag<'_>) -> bool {
        self.opaque == other.opaque
    }
}

/// `etagc` (RFC 9110 8.8.3): `!` / `#`..`~` / obs-text.
fn is_etagc(b: u8) -> bool {
    b == 0x21 || (0x23..=0x7e).contains(&b) || b >= 0x80
}

/// Splits a leading opaque-tag off `s`.
fn take_opaque(s: &[u8]) -> Option<(&[u8], &[u8])> {
    if s.first() != Some(&b'"') {
        return None;
    }
    let close = s[1..].iter().position(|&b| b == b'"')? + 1;
    if !s[1..close].iter().all(|&b| is_etagc(b)) {
        return None;
    }
    Some((&s[..=close], &s[close + 1..]))
}

/// A parsed `If-Match` / `If-None-Match` field (all lines combined).
enum TagList {
    Absent,
    Any,
    /// `true` when some member satisfies the comparison.
    Tags(bool),
}

/// Parses the entity-tag list of `name` and reports whether any member compares equal to
/// `current` with `cmp`. Commas may appear inside opaque-tags, so this is a real parser
/// rather than a comma split. Parsing of a line stops at the first malformed member.
fn tag_list<H: HeaderLookup + ?Sized>(
    req: &H,
    name: &str,
    current: Option<EntityTag<'_>>,
    cmp: impl Fn(&EntityTag<'_>, &EntityTag<'_>) -> bool,
) -> TagList {
    let mut present = false;
    let mut matched = false;
    for line in req.get_all(name) {
        present = true;
        if trim_ows(line) == b"*" {
            return TagList::Any;
        }
        let mut s = line;
        loop {
            while let [b, rest @ ..] = s {
                if is_ows(*b) || *b == b',' { s = rest } else { break }
            }
            if s.is_empty() {
                break;
            }
            let (weak, rest) = match s.strip_prefix(b"W/") {
                Some(r) => (true, r),
                None => (false, s),
            };
            let Some((opaque, tail)) = take_opaque(rest) else { break };
            if let Some(cur) = &current
                && cmp(&EntityTag { weak, opaque }, cur)
            {
                matched = true;
            }
            s = tail;
            let t = trim_ows(s);
            if !(t.is_empty() || t[0] == b',') {
                break;
            }
        }
    }
    if present { TagList::Tags(matched) } else { TagList::Absent }
}

/// A single HTTP-date field: ignored (None) when absent, repeated, or invalid
/// (RFC 9110 13.1.3, 13.1.4).
fn single_date<H: HeaderLookup + ?Sized>(req: &H, name: &str, now: u64) -> Option<u64> {
    let mut it = req.get_all(name);
    let first = it.next()?;
    if it.next().is_some() {
        return None;
    }
    parse_http_date(first, now)
}

/// Evaluates the preconditions of a request against the selected representation in the
/// order of RFC 9110 13.2.2:
///
/// 1. `If-Match` (13.1.1, strong comparison; `*` matches) false -> 412;
/// 2. else `If-Unmodified-Since` (13.1.4) false -> 412 (ignored without Last-Modified);
/// 3. `If-None-Match` (13.1.2, weak comparison; `*` matches) false -> 304 for GET/HEAD,
///    412 otherwise;
/// 4. else for GET/HEAD `If-Modified-Since` (13.1.3) false -> 304. It is ignored when
///    invalid, repeated, or later than `now`; without Last-Modified the stored `Date` is
///    used (RFC 9111 4.3.2).
///
/// Preconditions apply only when the response would otherwise be 2xx (13.2.1): for any
/// other `status` the result is [`Outcome::Proceed`]. `If-Range` is handled by
/// [`if_range_holds`].
pub fn evaluate<H: HeaderLookup + ?Sized>(
    method: &[u8],
    status: u16,
    req: &H,
    v: &Validators<'_>,
    now: u64,
) -> Outcome {
    if !(200..300).contains(&status) {
        return Outcome::Proceed;
    }
    let current = v.etag.and_then(EntityTag::parse);
    let get_or_head = method == b"GET" || method == b"HEAD";
    match tag_list(req, "if-match", current, |a, b| a.strong_eq(b)) {
        TagList::Tags(false) => return Outcome::PreconditionFailed,
        TagList::Any | TagList::Tags(true) => {}
        TagList::Absent => {
            if let (Some(since), Some(lm)) =
                (single_date(req, "if-unmodified-since", now), v.last_modified)
                && lm > since
            {
                return Outcome::PreconditionFailed;
            }
        }
    }
    match tag_list(req, "if-none-match", current, |a, b| a.weak_eq(b)) {
        TagList::Any | TagList::Tags(true) => {
            return if get_or_head { Outcome::NotModified } else { Outcome::PreconditionFailed };
        }
        TagList::Tags(false) => {}
        TagList::Absent => {
            if get_or_head
                && let Some(since) =
                    single_date(req, "if-modified-since", now).filter(|&s| s <= now)
                && let Some(lm) = v.last_modified.or(v.date)
                && lm <= since
            {
                return Outcome::NotModified;
            }
        }
    }
    Outcome::Proceed
}

/// Whether a `Range` request may be answered partially given its `If-Range` (RFC 9110
/// 13.1.5): `true` when there is no If-Range; with an entity-tag, when it strongly matches;
/// with an HTTP-date, when it equals Last-Modified exactly. A false result means: ignore
/// Range and send the whole representation (200).
pub fn if_range_holds<H: HeaderLookup + ?Sized>(req: &H, v: &Validators<'_>, now: u64) -> bool {
    let Some(value) = req.get_first("if-range") else { return true };
    let value = trim_ows(value);
    if value.first() == Some(&b'"') || value.starts_with(b"W/") {
        return match (EntityTag::parse(value), v.etag.and_then(EntityTag::parse)) {
            (Some(a), Some(b)) => a.strong_eq(&b),
            _ => false,
        };
    }
    match (parse_http_date(value, now), v.last_modified) {
        (Some(d), Some(lm)) => d == lm,
        _ => false,
    }
}

/// The validator fields of a revalidation request to the origin (RFC 9111 4.3.1):
/// `If-None-Match` with the stored ETag and `If-Modified-Since` with the stored
/// Last-Modified, each when available.
pub fn revalidation_headers(stored: &StoredMeta) -> Vec<(&'static str, Vec<u8>)> {
    let mut out = Vec::with_capacity(2);
    if let Some(etag) = stored.etag() {
        out.push(("if-none-match", etag.to_vec()));
    }
    if let Some(lm) = stored.get_first("last-modified")
        && parse_http_date(lm, stored.response_time()).is_some()
    {
        out.push(("if-modified-since", trim_ows(lm).to_vec()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::headers::format_http_date;

    const LM: u64 = 1_700_000_000;
    const NOW: u64 = 1_700_100_000;

    fn v() -> Validators<'static> {
        Validators { etag: Some(b"\"v1\""), last_modified: Some(LM), date: Some(LM + 100) }
    }

    fn date(t: u64) -> &'static str {
        Box::leak(format_http_date(t).into_boxed_str())
    }

    #[test]
    fn etag_parse_table() {
        type Parsed = Option<(bool, &'static [u8])>;
        let cases: &[(&[u8], Parsed)] = &[
            (b"\"abc\"", Some((false, b"\"abc\""))),
            (b"W/\"abc\"", Some((true, b"\"abc\""))),
            (b"\"\"", Some((false, b"\"\""))),
            (b" \"a,b\" ", Some((false, b"\"a,b\""))),
            (b"abc", None),
            (b"\"abc", None),
            (b"w/\"abc\"", None),
            (b"\"a\"b", None),
            (b"\"a b\"", None),
            (b"", None),
        ];
        for (input, want) in cases {
            let got = EntityTag::parse(input).map(|t| (t.weak, t.opaque));
            assert_eq!(got, *want, "{:?}", String::from_utf8_lossy(input));
        }
        let s = EntityTag::parse(b"\"x\"").unwrap();
        let w = EntityTag::parse(b"W/\"x\"").unwrap();
        assert!(s.strong_eq(&s) && !s.strong_eq(&w) && !w.strong_eq(&w));
        assert!(s.weak_eq(&w) && w.weak_eq(&w));
    }

    #[test]
    fn evaluate_table() {
        use Outcome::*;
        type Case = (&'static str, Vec<(&'static str, &'static str)>, Outcome);
        let cases: Vec<Case> = vec![
            ("GET", vec![], Proceed),
            // If-None-Match (weak comparison)
            ("GET", vec![("If-None-Match", "\"v1\"")], NotModified),
            ("GET", vec![("If-None-Match", "W/\"v1\"")], NotModified),
            ("HEAD", vec![("If-None-Match", "\"v1\"")], NotModified),
            ("GET", vec![("If-None-Match", "\"v0\", \"v1\"")], NotModified),
            ("GET", vec![("If-None-Match", "\"v0\""), ("if-none-match", "\"v1\"")], NotModified),
            ("GET", vec![("If-None-Match", "\"v0\"")], Proceed),
            ("GET", vec![("If-None-Match", "*")], NotModified),
            ("POST", vec![("If-None-Match", "*")], PreconditionFailed),
            ("POST", vec![("If-None-Match", "\"v1\"")], PreconditionFailed),
            ("GET", vec![("If-None-Match", "garbage")], Proceed),
            ("GET", vec![("If-None-Match", "\"a\" junk, \"v1\"")], Proceed),
            // INM present (false) -> IMS ignored (13.1.3)
            ("GET", vec![("If-None-Match", "\"v0\""), ("If-Modified-Since", date(LM))], Proceed),
            // If-Match (strong comparison)
            ("GET", vec![("If-Match", "\"v1\"")], Proceed),
            ("GET", vec![("If-Match", "W/\"v1\"")], PreconditionFailed),
            ("GET", vec![("If-Match", "\"v0\"")], PreconditionFailed),
            ("GET", vec![("If-Match", "*")], Proceed),
            ("GET", vec![("If-Match", "\"v0\", \"v1\"")], Proceed),
            ("GET", vec![("If-Match", "nonsense")], PreconditionFailed),
            // If-Match beats If-None-Match ordering: IM false -> 412 even if INM would 304
            ("GET", vec![("If-Match", "\"v0\""), ("If-None-Match", "\"v1\"")], PreconditionFailed),
            ("GET", vec![("If-Match", "\"v1\""), ("If-None-Match", "\"v1\"")], NotModified),
            // If-Unmodified-Since
            ("GET", vec![("If-Unmodified-Since", date(LM))], Proceed),
            ("GET", vec![("If-Unmodified-Since", date(LM - 1))], PreconditionFailed),
            ("GET", vec![("If-Unmodified-Since", "not a date")], Proceed),
            // IUS ignored when If-Match present
            ("GET", vec![("If-Match", "\"v1\""), ("If-Unmodified-Since", date(LM - 1))], Proceed),
            // If-Modified-Since
            ("GET", vec![("If-Modified-Since", date(LM))], NotModified),
            ("GET", vec![("If-Modified-Since", date(LM + 10))], NotModified),
            ("GET", vec![("If-Modified-Since", date(LM - 1))], Proceed),
            ("GET", vec![("If-Modified-Since", "yesterday")], Proceed),
            ("GET", vec![("If-Modified-Since", date(NOW + 1000))], Proceed),
            (
                "GET",
                vec![("If-Modified-Since", date(LM)), ("If-Modified-Since", date(LM))],
                Proceed,
            ),
            ("POST", vec![("If-Modified-Since", date(LM))], Proceed),
        ];
        for (method, headers, want) in cases {
            assert_eq!(
                evaluate(method.as_bytes(), 200, &headers[..], &v(), NOW),
                want,
                "{method} {headers:?}"
            );
        }
    }

    #[test]
    fn preconditions_only_for_2xx_and_fallbacks() {
        let h = [("If-None-Match", "\"v1\"")];
        assert_eq!(evaluate(b"GET", 404, &h[..], &v(), NOW), Outcome::Proceed);
        assert_eq!(evaluate(b"GET", 206, &h[..], &v(), NOW), Outcome::NotModified);
        // No Last-Modified: IMS uses Date (RFC 9111 4.3.2)
        let nolm = Validators { etag: None, last_modified: None, date: Some(LM) };
        let h = [("If-Modified-Since", date(LM))];
        assert_eq!(evaluate(b"GET", 200, &h[..], &nolm, NOW), Outcome::NotModified);
        let none = Validators::default();
        assert_eq!(evaluate(b"GET", 200, &h[..], &none, NOW), Outcome::Proceed);
        let h = [("If-Match", "\"v1\"")];
        assert_eq!(evaluate(b"GET", 200, &h[..], &none, NOW), Outcome::PreconditionFailed);
        let h = [("If-Match", "*")];
        assert_eq!(evaluate(b"GET", 200, &h[..], &none, NOW), Outcome::Proceed);
    }

    #[test]
    fn if_range_table() {
        let cases: Vec<(Vec<(&str, &str)>, bool)> = vec![
            (vec![], true),
            (vec![("If-Range", "\"v1\"")], true),
            (vec![("If-Range", "\"v2\"")], false),
            (vec![("If-Range", "W/\"v1\"")], false),
            (vec![("If-Range", date(LM))], true),
            (vec![("If-Range", date(LM + 1))], false),
            (vec![("If-Range", "junk")], false),
        ];
        for (h, want) in cases {
            assert_eq!(if_range_holds(&h[..], &v(), NOW), want, "{h:?}");
        }
        let weak = Validators { etag: Some(b"W/\"v1\""), ..v() };
        assert!(!if_range_holds(&[("If-Range", "W/\"v1\"")][..], &weak, NOW));
    }
}
