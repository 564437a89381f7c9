//! CTA-5004 Common Media Client Data (CMCD v1): what a player says about itself on each
//! request, parsed from the `CMCD-Request`, `CMCD-Object`, `CMCD-Status` and
//! `CMCD-Session` fields and from the `CMCD=` query parameter (percent-decoded). Each
//! is an RFC 8941 dictionary; the keys CTA-5004 defines get their typed value, others
//! are kept as text.
//!
//! The input comes from the network: a field that is not a dictionary, or a known key
//! with a value of the wrong type, marks the data `malformed` (the request is served all
//! the same); what is kept is bounded ([`MAX_KEYS`] keys, [`MAX_STRING`] bytes of a
//! text value, [`MAX_FIELD`] bytes of one field parsed), and beyond that `truncated`.
//! A request without CMCD pays for [`is_field`] on its header names and one substring
//! search of its query ([`query_value`]), nothing else.

/// Keys kept at most, all fields together.
pub const MAX_KEYS: usize = 32;
/// Bytes of one text value kept (a session id is at most 64 characters).
pub const MAX_STRING: usize = 256;
/// Bytes of one field (or the decoded query value) parsed at all.
pub const MAX_FIELD: usize = 4096;

/// The query parameter that carries CMCD.
pub const QUERY_PARAM: &str = "CMCD";

/// The request fields that carry CMCD, lowercase.
pub const FIELDS: [&str; 4] = ["cmcd-request", "cmcd-object", "cmcd-status", "cmcd-session"];

/// One value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// An integer (kbps, milliseconds, a version).
    Int(i64),
    /// A decimal (`pr`, the playback rate).
    Dec(f64),
    /// A boolean (`bs`, `su`): a key without a value is `true`.
    Bool(bool),
    /// A string (`sid`, `cid`, `nor`, `nrr`), and any value of a key CTA-5004 does not
    /// define, as text.
    Str(String),
    /// A token (`ot`, `sf`, `st`).
    Token(String),
}

/// The CMCD of one request: its keys in the order first seen, each with its latest value.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Cmcd {
    /// Keys and values.
    pub pairs: Vec<(String, Value)>,
    /// A field was not a dictionary, the query value's escapes were broken, or a known
    /// key had a value of the wrong type (that key is left out).
    pub malformed: bool,
    /// Keys, text or a field were cut at the bounds.
    pub truncated: bool,
}

/// The type CTA-5004 gives a key.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Ty {
    Int,
    Dec,
    Bool,
    Str,
    Token,
}

fn key_type(k: &str) -> Option<Ty> {
    Some(match k {
        "br" | "bl" | "d" | "dl" | "mtp" | "rtp" | "tb" | "v" => Ty::Int,
        "pr" => Ty::Dec,
        "bs" | "su" => Ty::Bool,
        "cid" | "nor" | "nrr" | "sid" => Ty::Str,
        "ot" | "sf" | "st" => Ty::Token,
        _ => return None,
    })
}

/// Whether the header name `name` is one of [`FIELDS`] (any case). Cheap enough for
/// every header of every request: a length test first.
pub fn is_field(name: &str) -> bool {
    (11..=12).contains(&name.len()) && FIELDS.iter().any(|f| f.eq_ignore_ascii_case(name))
}

/// The raw (still percent-encoded) value of the `CMCD` parameter of `query`, if any.
pub fn query_value(query: &str) -> Option<&str> {
    if !query.contains(QUERY_PARAM) {
        return None;
    }
    query.split('&').find_map(|p| match p.split_once('=') {
        Some((QUERY_PARAM, v)) => Some(v),
        None if p == QUERY_PARAM => Some(""),
        _ => None,
    })
}

impl Cmcd {
    /// The CMCD of a request from its header fields (any; the CMCD ones are picked) and
    /// its query; `None` when it carries none.
    pub fn from_request<'a>(
        headers: impl IntoIterator<Item = (&'a str, &'a [u8])>,
        query: Option<&str>,
    ) -> Option<Cmcd> {
        let mut c = Cmcd::default();
        let mut any = false;
        for (name, value) in headers {
            if is_field(name) {
                any = true;
                c.add_field(value);
            }
        }
        if let Some(v) = query.and_then(query_value) {
            any = true;
            match percent_decode(v.as_bytes()) {
                Some(decoded) => c.add_field(&decoded),
                None => c.malformed = true,
            }
        }
        any.then_some(c)
    }

    /// Adds the members of one dictionary field.
    pub fn add_field(&mut self, field: &[u8]) {
        if field.len() > MAX_FIELD {
            self.truncated = true;
            return;
        }
        if field.trim_ascii().is_empty() {
            return;
        }
        let dict: sfv::Dictionary = match sfv::Parser::new(field).parse() {
            Ok(d) => d,
            Err(_) => {
                self.malformed = true;
                return;
            }
        };
        for (key, entry) in &dict {
            let sfv::ListEntry::Item(item) = entry else {
                self.malformed = true;
                continue;
            };
            let k = key.as_str();
            match typed(k, &item.bare_item) {
                Some(v) => self.put(k, v),
                None => self.malformed = true,
            }
        }
    }

    fn put(&mut self, k: &str, mut v: Value) {
        if let Value::Str(s) | Value::Token(s) = &mut v
            && s.len() > MAX_STRING
        {
            let mut end = MAX_STRING;
            while !s.is_char_boundary(end) {
                end -= 1;
            }
            s.truncate(end);
            self.truncated = true;
        }
        if let Some(slot) = self.pairs.iter_mut().find(|(n, _)| n == k) {
            slot.1 = v;
        } else if self.pairs.len() < MAX_KEYS {
            self.pairs.push((k.to_owned(), v));
        } else {
            self.truncated = true;
        }
    }

    /// The value of `k`.
    pub fn get(&self, k: &str) -> Option<&Value> {
        self.pairs.iter().find(|(n, _)| n == k).map(|(_, v)| v)
    }

    /// The integer value of `k`.
    pub fn int(&self, k: &str) -> Option<i64> {
        match self.get(k) {
            Some(Value::Int(n)) => Some(*n),
            _ => None,
        }
    }

    /// Whether the boolean `k` is present and true (`bs`, `su`).
    pub fn flag(&self, k: &str) -> bool {
        matches!(self.get(k), Some(Value::Bool(true)))
    }

    /// The string value of `k` (`sid`, `nor`, ...).
    pub fn text(&self, k: &str) -> Option<&str> {
        match self.get(k) {
            Some(Value::Str(s)) => Some(s),
            _ => None,
        }
    }
}

/// `item` as the value of key `k`: typed for a CTA-5004 key (`None`: the wrong type), as
/// text for another.
fn typed(k: &str, item: &sfv::BareItem) -> Option<Value> {
    use sfv::BareItem as B;
    let Some(ty) = key_type(k) else {
        return Some(Value::Str(match item {
            B::String(s) => s.as_str().to_owned(),
            B::Token(t) => t.as_str().to_owned(),
            B::Integer(n) => i64::from(*n).to_string(),
            B::Decimal(d) => d.to_string(),
            B::Boolean(b) => b.to_string(),
            _ => return None,
        }));
    };
    match (ty, item) {
        // CTA-5004's integers are never negative: a negative one is as wrong as text.
        (Ty::Int, B::Integer(n)) if i64::from(*n) >= 0 => Some(Value::Int(i64::from(*n))),
        (Ty::Dec, B::Decimal(d)) => Some(Value::Dec(f64::from(*d))),
        (Ty::Dec, B::Integer(n)) => Some(Value::Dec(i64::from(*n) as f64)),
        (Ty::Bool, B::Boolean(b)) => Some(Value::Bool(*b)),
        (Ty::Str, B::String(s)) => Some(Value::Str(s.as_str().to_owned())),
        (Ty::Token, B::Token(t)) => Some(Value::Token(t.as_str().to_owned())),
        _ => None,
    }
}

/// `%XX` decoded (`+` stays: players encode with `encodeURIComponent`); `None` for a
/// broken escape.
fn percent_decode(b: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while let Some(&c) = b.get(i) {
        if c == b'%' {
            let hi = hex(*b.get(i + 1)?)?;
            let lo = hex(*b.get(i + 2)?)?;
            out.push(hi << 4 | lo);
            i += 3;
        } else {
            out.push(c);
            i += 1;
        }
    }
    Some(out)
}

fn hex(c: u8) -> Option<u8> {
    (c as char).to_digit(16).and_then(|d| u8::try_from(d).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn from(headers: &[(&'static str, &'static str)], query: Option<&str>) -> Option<Cmcd> {
        Cmcd::from_request(headers.iter().map(|(n, v)| (*n, v.as_bytes())), query)
    }

    #[test]
    fn hls_js_header_mode_is_typed() {
        let c = from(
            &[
                ("Host", "e.com"),
                ("CMCD-Request", "bl=21300,dl=18500,mtp=48100,nor=\"seg2.ts\",su"),
                ("CMCD-Object", "br=3200,d=4004,ot=v,tb=6000"),
                ("CMCD-Status", "bs,rtp=15000"),
                ("CMCD-Session", "cid=\"movie\",pr=1.25,sf=h,sid=\"6e2fb550\",st=v,v=1"),
            ],
            None,
        )
        .unwrap();
        assert!(!c.malformed && !c.truncated, "{c:?}");
        assert_eq!(c.int("bl"), Some(21300));
        assert_eq!(c.int("br"), Some(3200));
        assert_eq!(c.int("mtp"), Some(48100));
        assert_eq!(c.text("nor"), Some("seg2.ts"));
        assert_eq!(c.text("sid"), Some("6e2fb550"));
        assert!(c.flag("su") && c.flag("bs"));
        assert_eq!(c.get("ot"), Some(&Value::Token("v".into())));
        assert_eq!(c.get("pr"), Some(&Value::Dec(1.25)));
        assert_eq!(c.pairs.len(), 17);
    }

    #[test]
    fn the_query_form_is_decoded_and_unknown_keys_are_text() {
        let q = "v=2&CMCD=br%3D800%2Ccom.example-x%3D5%2Csid%3D%22a%20b%22&z";
        let c = from(&[], Some(q)).unwrap();
        assert_eq!(c.int("br"), Some(800));
        assert_eq!(c.text("com.example-x"), Some("5"));
        assert_eq!(c.text("sid"), Some("a b"));
        assert!(!c.malformed);
        assert!(from(&[("cmcd-x", "br=1")], Some("a=CMCDx")).is_none(), "no CMCD at all");
        assert_eq!(from(&[], Some("CMCD")).unwrap(), Cmcd::default(), "present, empty");
    }

    #[test]
    fn wrong_types_and_broken_fields_are_malformed() {
        let c = from(&[("cmcd-object", "br=\"fast\",d=4004")], None).unwrap();
        assert!(c.malformed);
        assert_eq!(c.get("br"), None, "the wrong-typed key is left out");
        assert_eq!(c.int("d"), Some(4004), "the rest is kept");
        assert!(from(&[("cmcd-request", "bl=-5")], None).unwrap().malformed);
        assert!(from(&[("cmcd-request", "bl==5,")], None).unwrap().malformed);
        assert!(from(&[], Some("CMCD=br%3")).unwrap().malformed);
    }

    #[test]
    fn what_is_kept_is_bounded() {
        let many: String = (0..100).map(|i| format!("k{i}={i}")).collect::<Vec<_>>().join(",");
        let mut c = Cmcd::default();
        c.add_field(many.as_bytes());
        assert_eq!(c.pairs.len(), MAX_KEYS);
        assert!(c.truncated);
        let long = format!("sid=\"{}\"", "x".repeat(1000));
        let mut c = Cmcd::default();
        c.add_field(long.as_bytes());
        assert_eq!(c.text("sid").map(str::len), Some(MAX_STRING));
        let huge = format!("sid=\"{}\"", "x".repeat(MAX_FIELD));
        let mut c = Cmcd::default();
        c.add_field(huge.as_bytes());
        assert!(c.truncated && c.pairs.is_empty());
    }

    #[test]
    fn field_names_are_recognised_in_any_case() {
        assert!(is_field("CMCD-Session") && is_field("cmcd-status"));
        assert!(!is_field("cmcd-other") && !is_field("content-type"));
    }

    proptest::proptest! {
        /// Whatever arrives, parsing ends, never panics and keeps within the bounds.
        #[test]
        fn any_input_is_parsed_within_bounds(
            field in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..700),
            shaped in "([a-z.-]{1,5}(=([0-9]{1,17}|-?[0-9]{1,4}\\.[0-9]{1,4}|\"[ -~]{0,300}\"|[a-z*][a-z0-9/:]{0,3}|\\?[01]|\\([a-z ]{0,5}\\)))?(;[a-z]=1)?, ?){0,40}",
            query in "[ -~]{0,200}",
        ) {
            let q = format!("{query}&CMCD={}", shaped.replace(',', "%2C").replace('=', "%3D"));
            let headers = [("cmcd-request", &field[..]), ("CMCD-Object", shaped.as_bytes())];
            for c in [
                Cmcd::from_request(headers, Some(&q)),
                Cmcd::from_request([], Some(&query)),
            ]
            .into_iter()
            .flatten()
            {
                proptest::prop_assert!(c.pairs.len() <= MAX_KEYS);
                for (_, v) in &c.pairs {
                    if let Value::Str(t) | Value::Token(t) = v {
                        proptest::prop_assert!(t.len() <= MAX_STRING);
                    }
                }
            }
        }
    }
}
