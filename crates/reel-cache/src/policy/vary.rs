//! `Vary` (RFC 9110 12.5.5) and secondary cache keys (RFC 9111 4.1).
//!
//! A stored response carries a [`VaryKey`]: for each field name its `Vary` listed, the
//! normalised value the original request had (or its absence). A later request may reuse the
//! stored response only if its own normalised values are identical. Normalisation (allowed by
//! RFC 9111 4.1): field names lowercased; all field lines combined as one list, each member
//! OWS-trimmed, empty members dropped, joined with `,`. Values keep their case, because for
//! an arbitrary field we cannot know whether case is significant.

use super::headers::{HeaderLookup, is_token, split_list};
use xxhash_rust::xxh3::Xxh3;

/// A parsed `Vary` response field.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Vary {
    /// No `Vary`: one variant for all requests.
    #[default]
    None,
    /// `Vary: *`: a stored response never matches a later request (RFC 9111 4.1).
    Star,
    /// The listed request field names, lowercased, deduplicated, in first-seen order.
    Fields(Vec<String>),
}

impl Vary {
    /// Parses every `Vary` field line of a response. Members that are not tokens are
    /// ignored; a `*` anywhere makes the whole field `*`.
    pub fn parse<H: HeaderLookup + ?Sized>(resp: &H) -> Self {
        let mut names: Vec<String> = Vec::new();
        for m in resp.list_members("vary") {
            if m == b"*" {
                return Vary::Star;
            }
            if !is_token(m) {
                continue;
            }
            let mut n = String::from_utf8_lossy(m).into_owned();
            n.make_ascii_lowercase();
            if !names.contains(&n) {
                names.push(n);
            }
        }
        if names.is_empty() { Vary::None } else { Vary::Fields(names) }
    }
}

/// The secondary cache key of a stored response (RFC 9111 4.1).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VaryKey {
    star: bool,
    entries: Vec<(String, Option<Vec<u8>>)>,
}

/// The normalised, combined value of `name` in `req`, `None` when absent.
pub fn normalized_value<H: HeaderLookup + ?Sized>(req: &H, name: &str) -> Option<Vec<u8>> {
    let mut present = false;
    let mut out = Vec::new();
    for line in req.get_all(name) {
        present = true;
        for m in split_list(line) {
            if !out.is_empty() {
                out.push(b',');
            }
            out.extend_from_slice(m);
        }
    }
    present.then_some(out)
}

impl VaryKey {
    /// Captures the request's values for the fields `vary` lists.
    pub fn from_request<H: HeaderLookup + ?Sized>(vary: &Vary, req: &H) -> Self {
        match vary {
            Vary::None => Self::default(),
            Vary::Star => Self { star: true, entries: Vec::new() },
            Vary::Fields(names) => Self {
                star: false,
                entries: names.iter().map(|n| (n.clone(), normalized_value(req, n))).collect(),
            },
        }
    }

    /// Rebuilds a key from its parts (used by the metadata decoder).
    pub fn from_parts(star: bool, entries: Vec<(String, Option<Vec<u8>>)>) -> Self {
        Self { star, entries }
    }

    /// Whether the stored response had `Vary: *`.
    pub fn is_star(&self) -> bool {
        self.star
    }

    /// Whether the response did not vary at all.
    pub fn is_empty(&self) -> bool {
        !self.star && self.entries.is_empty()
    }

    /// The `(lowercase name, normalised value or absent)` pairs.
    pub fn entries(&self) -> &[(String, Option<Vec<u8>>)] {
        &self.entries
    }

    /// Whether a new request selects this stored variant (RFC 9111 4.1). `Vary: *` never
    /// matches. Comparison does not allocate.
    pub fn matches<H: HeaderLookup + ?Sized>(&self, req: &H) -> bool {
        if self.star {
            return false;
        }
        self.entries.iter().all(|(name, stored)| {
            let mut lines = req.get_all(name).peekable();
            match stored {
                None => lines.peek().is_none(),
                Some(stored) => {
                    if lines.peek().is_none() {
                        return false;
                    }
                    let mut want = split_list(stored);
                    for m in lines.flat_map(split_list) {
                        if want.next() != Some(m) {
                            return false;
                        }
                    }
                    want.next().is_none()
                }
            }
        })
    }

    /// A 64-bit digest of the key, for naming variants in the store alongside the primary
    /// [`crate::key::CacheKey`]. Distinguishes absent from empty values.
    pub fn hash64(&self) -> u64 {
        let mut h = Xxh3::new();
        h.update(&[u8::from(self.star)]);
        for (n, v) in &self.entries {
            h.update(&(n.len() as u64).to_le_bytes());
            h.update(n.as_bytes());
            match v {
                None => h.update(&[0]),
                Some(v) => {
                    h.update(&[1]);
                    h.update(&(v.len() as u64).to_le_bytes());
                    h.update(v);
                }
            }
        }
        h.digest()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type H = Vec<(&'static str, &'static str)>;

    #[test]
    fn parse_table() {
        let f = |v: &[&str]| Vary::Fields(v.iter().map(|s| s.to_string()).collect());
        let cases: Vec<(H, Vary)> = vec![
            (vec![], Vary::None),
            (vec![("Vary", "")], Vary::None),
            (vec![("Vary", "Accept-Encoding")], f(&["accept-encoding"])),
            (vec![("Vary", "Accept-Encoding, ORIGIN")], f(&["accept-encoding", "origin"])),
            (vec![("Vary", "a"), ("vary", "b, A")], f(&["a", "b"])),
            (vec![("Vary", "a, *")], Vary::Star),
            (vec![("Vary", "*")], Vary::Star),
            (vec![("Vary", "bad name, \"q\", ok")], f(&["ok"])),
        ];
        for (h, want) in cases {
            assert_eq!(Vary::parse(&h[..]), want, "{h:?}");
        }
    }

    #[test]
    fn match_table() {
        let vary = Vary::Fields(vec!["accept-encoding".into(), "origin".into()]);
        let stored: H = vec![("Accept-Encoding", "gzip,  br"), ("X", "1")];
        let key = VaryKey::from_request(&vary, &stored[..]);
        assert_eq!(
            key.entries(),
            &[
                ("accept-encoding".to_string(), Some(b"gzip,br".to_vec())),
                ("origin".to_string(), None)
            ]
        );
        let cases: Vec<(H, bool)> = vec![
            (vec![("accept-encoding", "gzip, br")], true),
            (vec![("Accept-Encoding", "gzip"), ("accept-encoding", "br")], true),
            (vec![("Accept-Encoding", " gzip ,br ,")], true),
            (vec![("Accept-Encoding", "br, gzip")], false),
            (vec![("Accept-Encoding", "gzip")], false),
            (vec![("Accept-Encoding", "gzip, br, zstd")], false),
            (vec![("Accept-Encoding", "GZIP, br")], false),
            (vec![], false),
            (vec![("Accept-Encoding", "gzip, br"), ("Origin", "x")], false),
        ];
        for (h, want) in cases {
            assert_eq!(key.matches(&h[..]), want, "{h:?}");
        }
    }

    #[test]
    fn empty_vs_absent_and_star() {
        let vary = Vary::Fields(vec!["x".into()]);
        let empty: H = vec![("x", "")];
        let absent: H = vec![];
        let k_empty = VaryKey::from_request(&vary, &empty[..]);
        let k_absent = VaryKey::from_request(&vary, &absent[..]);
        assert!(k_empty.matches(&empty[..]));
        assert!(!k_empty.matches(&absent[..]));
        assert!(k_absent.matches(&absent[..]));
        assert!(!k_absent.matches(&empty[..]));
        assert_ne!(k_empty.hash64(), k_absent.hash64());

        let star = VaryKey::from_request(&Vary::Star, &absent[..]);
        assert!(star.is_star() && !star.matches(&absent[..]));
        let none = VaryKey::from_request(&Vary::None, &absent[..]);
        assert!(none.is_empty() && none.matches(&empty[..]));
        assert_eq!(VaryKey::from_parts(false, k_empty.entries().to_vec()), k_empty);
    }
}
