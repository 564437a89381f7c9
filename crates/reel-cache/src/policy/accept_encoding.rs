//! Content negotiation by `Accept-Encoding` (RFC 9110 12.5.3) and what may be compressed:
//! which of the codings a site makes a request prefers, honouring q-values, and whether a
//! stored response is one to compress at all (its media type, no coding of its own, no
//! `no-transform`).

use reel_config::Coding;

use super::HeaderLookup;

impl CodingName for Coding {
    fn token(self) -> &'static str {
        match self {
            Coding::Br => "br",
            Coding::Gzip => "gzip",
        }
    }
}

/// The `Content-Encoding` token of a coding.
pub trait CodingName {
    /// `br` or `gzip`.
    fn token(self) -> &'static str;
}

/// A q-value (RFC 9110 12.4.2) in thousandths; `None` when malformed.
fn qvalue(v: &[u8]) -> Option<u16> {
    let (int, frac) = match v.iter().position(|&b| b == b'.') {
        Some(i) => (v.get(..i).unwrap_or_default(), v.get(i + 1..).unwrap_or_default()),
        None => (v, &b""[..]),
    };
    if frac.len() > 3 || !frac.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let mut thousandths = 0u16;
    for i in 0..3 {
        thousandths = thousandths * 10 + frac.get(i).map_or(0, |d| u16::from(d - b'0'));
    }
    match int {
        b"0" => Some(thousandths),
        b"1" if thousandths == 0 => Some(1000),
        _ => None,
    }
}

/// One element of the field: its coding token and q-value (1000 when absent). `None` for
/// an empty element or a malformed q-value (the element is then ignored).
fn element(e: &[u8]) -> Option<(&[u8], u16)> {
    let mut parts = e.split(|&b| b == b';');
    let name = parts.next()?.trim_ascii();
    if name.is_empty() {
        return None;
    }
    let mut q = 1000;
    for p in parts {
        let Some(eq) = p.iter().position(|&b| b == b'=') else { continue };
        let (k, v) = p.split_at(eq);
        if k.trim_ascii().eq_ignore_ascii_case(b"q") {
            q = qvalue(v.get(1..).unwrap_or_default().trim_ascii())?;
        }
    }
    Some((name, q))
}

/// The q-value `accept` gives `coding`: its own element (`x-gzip` counts as `gzip`), else
/// `*`'s, else 0 (not acceptable).
fn q_of<H: HeaderLookup + ?Sized>(accept: &H, coding: Coding) -> u16 {
    let (mut own, mut any) = (None, None);
    for v in accept.get_all("accept-encoding") {
        for (name, q) in v.split(|&b| b == b',').filter_map(element) {
            let is = name.eq_ignore_ascii_case(coding.token().as_bytes())
                || (coding == Coding::Gzip && name.eq_ignore_ascii_case(b"x-gzip"));
            if is {
                own = Some(own.map_or(q, |o: u16| o.max(q)));
            } else if name == b"*" {
                any = Some(q);
            }
        }
    }
    own.or(any).unwrap_or(0)
}

/// The coding of `offered` (in the site's order of preference) that `req` accepts with the
/// highest q-value, the first of those on a tie; `None`: identity (no `Accept-Encoding`,
/// or none of them acceptable).
pub fn choose<H: HeaderLookup + ?Sized>(req: &H, offered: &[Coding]) -> Option<Coding> {
    let mut best: Option<(Coding, u16)> = None;
    for &c in offered {
        let q = q_of(req, c);
        if q > 0 && best.is_none_or(|(_, b)| q > b) {
            best = Some((c, q));
        }
    }
    best.map(|(c, _)| c)
}

/// The media type (without parameters) of a stored response that may be compressed: it
/// has no `Content-Encoding` of its own (passed through as it is) and its `Cache-Control`
/// does not say `no-transform`. `None` for any other response.
pub fn transformable_type<H: HeaderLookup + ?Sized>(resp: &H) -> Option<&[u8]> {
    let ct = resp.get_first("content-type")?;
    let mt = ct.split(|&b| b == b';').next().unwrap_or(ct).trim_ascii();
    if mt.is_empty() || resp.get_all("content-encoding").any(|v| !v.trim_ascii().is_empty()) {
        return None;
    }
    let no_transform = resp.get_all("cache-control").any(|v| {
        v.split(|&b| b == b',').any(|d| d.trim_ascii().eq_ignore_ascii_case(b"no-transform"))
    });
    (!no_transform).then_some(mt)
}

/// Whether media type `mt` is one of `types` (lowercase).
pub fn listed(mt: &[u8], types: &[String]) -> bool {
    types.iter().any(|t| mt.eq_ignore_ascii_case(t.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    struct H(Vec<(&'static str, &'static str)>);

    impl HeaderLookup for H {
        fn get_all<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a [u8]> + 'a {
            self.0
                .iter()
                .filter(move |(n, _)| n.eq_ignore_ascii_case(name))
                .map(|(_, v)| v.as_bytes())
        }
    }

    fn ae(v: &'static str) -> Option<Coding> {
        choose(&H(vec![("accept-encoding", v)]), &[Coding::Br, Coding::Gzip])
    }

    #[test]
    fn the_preferred_acceptable_coding_is_chosen_by_q_value() {
        assert_eq!(choose(&H(vec![]), &[Coding::Br, Coding::Gzip]), None, "no field: identity");
        assert_eq!(ae(""), None);
        assert_eq!(ae("gzip"), Some(Coding::Gzip));
        assert_eq!(ae("br"), Some(Coding::Br));
        assert_eq!(ae("gzip, deflate, br"), Some(Coding::Br), "a tie goes to the site's order");
        assert_eq!(ae("gzip;q=1.0, br;q=0.9"), Some(Coding::Gzip));
        assert_eq!(ae("br;q=0.001, gzip;q=0"), Some(Coding::Br));
        assert_eq!(ae("gzip;q=0, br;q=0"), None);
        assert_eq!(ae("gzip;q=0, br;q=0, identity"), None);
        assert_eq!(ae("*"), Some(Coding::Br));
        assert_eq!(ae("*;q=0.5, br;q=0"), Some(Coding::Gzip), "* stands for the unnamed ones");
        assert_eq!(ae("identity, *;q=0"), None);
        assert_eq!(ae("X-GZIP"), Some(Coding::Gzip));
        assert_eq!(ae("GZip ; Q=0.5 , deflate"), Some(Coding::Gzip));
        assert_eq!(ae("br;q=2, gzip;q=0.5"), Some(Coding::Gzip), "a malformed q is ignored");
        assert_eq!(ae("br;q=0.1234"), None);
        assert_eq!(ae("br;q=, gzip;q=1.000"), Some(Coding::Gzip));
        assert_eq!(ae(" , ,br"), Some(Coding::Br));
        assert_eq!(
            choose(&H(vec![("accept-encoding", "gzip, br")]), &[Coding::Gzip]),
            Some(Coding::Gzip)
        );
        let two = H(vec![("accept-encoding", "gzip;q=0.4"), ("accept-encoding", "br;q=0.5")]);
        assert_eq!(
            choose(&two, &[Coding::Gzip, Coding::Br]),
            Some(Coding::Br),
            "field lines combine"
        );
    }

    #[test]
    fn text_types_without_a_coding_or_no_transform_are_compressible() {
        let types: Vec<String> =
            reel_config::DEFAULT_COMPRESS_TYPES.iter().map(|s| s.to_string()).collect();
        let yes = |h: Vec<(&'static str, &'static str)>| {
            let h = H(h);
            transformable_type(&h).is_some_and(|mt| listed(mt, &types))
        };
        assert!(yes(vec![("content-type", "application/vnd.apple.mpegurl")]));
        assert!(yes(vec![("content-type", "Application/DASH+XML; charset=utf-8")]));
        assert!(yes(vec![("content-type", "text/vtt"), ("cache-control", "max-age=2")]));
        assert!(!yes(vec![]), "no type");
        assert!(!yes(vec![("content-type", "video/mp2t")]));
        assert!(!yes(vec![("content-type", "video/mp4")]));
        assert!(!yes(vec![("content-type", "application/json"), ("content-encoding", "gzip")]));
        assert!(!yes(vec![
            ("content-type", "application/json"),
            ("cache-control", "max-age=5, No-Transform")
        ]));
    }

    #[test]
    fn q_values_parse_as_rfc_9110_writes_them() {
        assert_eq!(qvalue(b"1"), Some(1000));
        assert_eq!(qvalue(b"1.000"), Some(1000));
        assert_eq!(qvalue(b"0.5"), Some(500));
        assert_eq!(qvalue(b"0.05"), Some(50));
        assert_eq!(qvalue(b"0"), Some(0));
        assert_eq!(qvalue(b"1.5"), None);
        assert_eq!(qvalue(b"2"), None);
        assert_eq!(qvalue(b".5"), None);
        assert_eq!(qvalue(b"0.5x"), None);
    }
}
