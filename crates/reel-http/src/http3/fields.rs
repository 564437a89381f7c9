//! The checks of a request's field section that RFC 9114 requires and `h3` does not
//! make, so that HTTP/3 refuses what HTTP/2 (`h2`) refuses: a request with a repeated
//! pseudo-header, one after a regular field, one of a response (section 4.3), without
//! `:scheme` and `:path` (unless CONNECT), with a scheme other than `https`, or with a
//! connection-specific field (section 4.2) is malformed, a stream error
//! `H3_MESSAGE_ERROR`.
//!
//! `h3` hands over the decoded request as `http` types, where the order of the fields and
//! repeated pseudo-headers are lost, so the pseudo-headers are counted on the QPACK field
//! section itself ([`scan`]): only the names are read, and only a pseudo-header's in full.
//! The rest is checked on the decoded request ([`check`]).

use super::huffman;

/// Why a request's field section is malformed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Malformed(pub(crate) &'static str);

/// How many times each pseudo-header appears in a request's field section.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Pseudos {
    method: u8,
    scheme: u8,
    authority: u8,
    path: u8,
    protocol: u8,
}

#[derive(Clone, Copy)]
enum Name {
    Method,
    Scheme,
    Authority,
    Path,
    Protocol,
    /// `:status` or any other name starting with ':'.
    OtherPseudo,
    Regular,
}

/// Reads the names of a QPACK field section (RFC 9204 section 4.5) that refers to no
/// dynamic table (the server announces none; `h3` refuses one that does): counts the
/// pseudo-headers and checks that none is repeated, of a response, or after a regular
/// field (RFC 9114 section 4.3).
pub(crate) fn scan(section: &[u8]) -> Result<Pseudos, Malformed> {
    let mut r = Reader { buf: section };
    let undecodable = Malformed("undecodable field section");
    // Required Insert Count and Delta Base: 0 without a dynamic table.
    if r.int(8)? != 0 {
        return Err(undecodable);
    }
    r.int(7)?;
    let mut seen = Pseudos::default();
    let mut regular = false;
    while let Some(&first) = r.buf.first() {
        let name = if first & 0x80 != 0 {
            // Indexed field line; T (0x40) set: the static table.
            if first & 0x40 == 0 {
                return Err(undecodable);
            }
            static_name(r.int(6)?)?
        } else if first & 0x40 != 0 {
            // Literal field line with name reference, then the value.
            if first & 0x10 == 0 {
                return Err(undecodable);
            }
            let name = static_name(r.int(4)?)?;
            r.string(7)?;
            name
        } else if first & 0x20 != 0 {
            // Literal field line with literal name, then the value.
            let huffman = first & 0x08 != 0;
            let name = literal_name(r.string(3)?, huffman)?;
            r.string(7)?;
            name
        } else {
            // Post-base index or name reference: the dynamic table.
            return Err(undecodable);
        };
        let count = match name {
            Name::Regular => {
                regular = true;
                continue;
            }
            Name::OtherPseudo => return Err(Malformed("a response or unknown pseudo-header")),
            Name::Method => &mut seen.method,
            Name::Scheme => &mut seen.scheme,
            Name::Authority => &mut seen.authority,
            Name::Path => &mut seen.path,
            Name::Protocol => &mut seen.protocol,
        };
        if regular {
            return Err(Malformed("a pseudo-header after a regular field"));
        }
        if *count > 0 {
            return Err(Malformed("a repeated pseudo-header"));
        }
        *count = 1;
    }
    Ok(seen)
}

/// Checks the request `h3` decoded from a field section with `seen` pseudo-headers: the
/// pseudo-headers a request must have (RFC 9114 section 4.3.1; CONNECT, section 4.4), the
/// `https` scheme, and no connection-specific field (section 4.2).
pub(crate) fn check(parts: &http::request::Parts, seen: &Pseudos) -> Result<(), Malformed> {
    if seen.method != 1 {
        return Err(Malformed("no :method"));
    }
    let connect = parts.method == http::Method::CONNECT;
    if seen.protocol > 0 && !connect {
        return Err(Malformed(":protocol in a request other than CONNECT"));
    }
    let plain_connect = connect && seen.protocol == 0;
    if plain_connect {
        if seen.scheme + seen.path > 0 {
            return Err(Malformed(":scheme or :path in a CONNECT request"));
        }
    } else {
        if seen.scheme + seen.path != 2 {
            return Err(Malformed("no :scheme or :path"));
        }
        if parts.uri.scheme() != Some(&http::uri::Scheme::HTTPS) {
            return Err(Malformed("a scheme other than https"));
        }
    }
    for (name, value) in &parts.headers {
        let specific = match name.as_str() {
            "connection" | "keep-alive" | "proxy-connection" | "transfer-encoding" | "upgrade" => {
                true
            }
            "te" => value != "trailers",
            _ => false,
        };
        if specific {
            return Err(Malformed("a connection-specific field"));
        }
    }
    Ok(())
}

/// The name of static table entry `index` (RFC 9204 appendix A).
fn static_name(index: u64) -> Result<Name, Malformed> {
    Ok(match index {
        0 => Name::Authority,
        1 => Name::Path,
        15..=21 => Name::Method,
        22 | 23 => Name::Scheme,
        24..=28 | 63..=71 => Name::OtherPseudo,
        2..=98 => Name::Regular,
        _ => return Err(Malformed("no such static table entry")),
    })
}

/// The longest pseudo-header name, `:authority`.
const LONGEST_PSEUDO: usize = 10;

/// Classifies a literal name; a Huffman-coded one is decoded only as far as needed.
fn literal_name(raw: &[u8], huffman: bool) -> Result<Name, Malformed> {
    let mut buf = [0u8; LONGEST_PSEUDO + 1];
    let name = if huffman {
        let n = huffman::decode_prefix(raw, &mut buf)
            .ok_or(Malformed("undecodable Huffman-coded name"))?;
        &buf[..n]
    } else {
        raw
    };
    Ok(match name {
        b":method" => Name::Method,
        b":scheme" => Name::Scheme,
        b":authority" => Name::Authority,
        b":path" => Name::Path,
        b":protocol" => Name::Protocol,
        [b':', ..] => Name::OtherPseudo,
        _ => Name::Regular,
    })
}

/// A cursor over a field section.
struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    /// A prefix integer (RFC 7541 section 5.1) in the low `bits` of the next byte (the
    /// bits above are the caller's flags).
    fn int(&mut self, bits: u32) -> Result<u64, Malformed> {
        let bad = Malformed("bad integer in the field section");
        let (&first, mut rest) = self.buf.split_first().ok_or(bad)?;
        let max = (1u64 << bits) - 1;
        let mut v = u64::from(first) & max;
        if v == max {
            let mut shift = 0u32;
            loop {
                let (&b, r) = rest.split_first().ok_or(bad)?;
                rest = r;
                // 62 bits are enough for any QUIC length; more is an attack or a mistake.
                if shift > 56 {
                    return Err(bad);
                }
                v += u64::from(b & 0x7f) << shift;
                shift += 7;
                if b & 0x80 == 0 {
                    break;
                }
            }
        }
        self.buf = rest;
        Ok(v)
    }

    /// A string literal whose length is a `bits`-bit prefix integer; its raw bytes.
    fn string(&mut self, bits: u32) -> Result<&'a [u8], Malformed> {
        let len = self.int(bits)?;
        let len = usize::try_from(len)
            .ok()
            .filter(|&l| l <= self.buf.len())
            .ok_or(Malformed("a string longer than the field section"))?;
        let (s, rest) = self.buf.split_at(len);
        self.buf = rest;
        Ok(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(method: &str, uri: &str, fields: &[(&str, &str)]) -> http::request::Parts {
        let mut b = http::Request::builder().method(method).uri(uri);
        for (n, v) in fields {
            b = b.header(*n, *v);
        }
        b.body(()).unwrap().into_parts().0
    }

    #[test]
    fn requests_are_checked_against_their_pseudo_headers_and_fields() {
        let all = Pseudos { method: 1, scheme: 1, authority: 1, path: 1, protocol: 0 };
        let get = parts("GET", "https://a.test/x", &[("te", "trailers"), ("x-a", "1")]);
        assert_eq!(check(&get, &all), Ok(()));
        let no_path = Pseudos { path: 0, ..all };
        assert!(check(&get, &no_path).is_err());
        assert!(check(&get, &Pseudos { protocol: 1, ..all }).is_err());
        assert!(check(&parts("GET", "http://a.test/x", &[]), &all).is_err());
        for f in ["connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade"] {
            assert!(check(&parts("GET", "https://a.test/", &[(f, "x")]), &all).is_err(), "{f}");
        }
        let te = parts("GET", "https://a.test/", &[("te", "trailers"), ("te", "gzip")]);
        assert!(check(&te, &all).is_err());
        // CONNECT names only an authority; extended CONNECT (:protocol) is a full request.
        let connect = parts("CONNECT", "a.test:443", &[]);
        let authority_only = Pseudos { scheme: 0, path: 0, ..all };
        assert_eq!(check(&connect, &authority_only), Ok(()));
        assert!(check(&connect, &all).is_err());
        let extended = parts("CONNECT", "https://a.test/chat", &[]);
        assert_eq!(check(&extended, &Pseudos { protocol: 1, ..all }), Ok(()));
    }

    fn lit(name: &str, value: &str, out: &mut Vec<u8>) {
        assert!(name.len() < 7 && value.len() < 127);
        out.push(0x20 | name.len() as u8);
        out.extend_from_slice(name.as_bytes());
        out.push(value.len() as u8);
        out.extend_from_slice(value.as_bytes());
    }

    #[test]
    fn names_are_read_from_every_kind_of_field_line() {
        // :method GET (indexed 17), :scheme https (indexed 23), :authority with a
        // literal value (name reference 0), a literal :path, then accept */* (indexed 29).
        let mut s = vec![0x00, 0x00, 0xc0 | 17, 0xc0 | 23, 0x50, 0x01, b'a'];
        lit(":path", "/", &mut s);
        s.push(0xc0 | 29);
        let p = scan(&s).unwrap();
        assert_eq!((p.method, p.scheme, p.authority, p.path, p.protocol), (1, 1, 1, 1, 0));
        // :path (indexed 1), then a Huffman-coded ":path" (its codes, padded with ones).
        let mut s = vec![0x00, 0x00, 0xc0 | 17, 0xc0 | 1, 0x28 | 4];
        s.extend_from_slice(&[0xb9, 0x58, 0xd3, 0x3f]);
        s.push(0x00);
        assert_eq!(scan(&s), Err(Malformed("a repeated pseudo-header")));
        // :status 200 (indexed 25) in a request.
        assert!(scan(&[0x00, 0x00, 0xc0 | 25]).is_err());
        // A regular field then :path (indexed 1).
        assert!(scan(&[0x00, 0x00, 0xc0 | 29, 0xc0 | 1]).is_err());
        // A dynamic reference, a truncated string, an integer that never ends.
        assert!(scan(&[0x00, 0x00, 0x80]).is_err());
        assert!(scan(&[0x00, 0x00, 0x50, 0x05, b'a']).is_err());
        assert!(
            scan(&[0x00, 0x00, 0x5f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff])
                .is_err()
        );
    }

    /// A field line for the property test: a pseudo-header or a regular name, as a
    /// static reference when it has one, else a literal name, plain or Huffman-coded.
    fn line(name: &str, how: u8, out: &mut Vec<u8>) {
        let index = match name {
            ":authority" => Some(0),
            ":path" => Some(1),
            ":method" => Some(17),
            ":scheme" => Some(23),
            ":status" => Some(25),
            "accept" => Some(29),
            _ => None,
        };
        match (index, how % 3) {
            (Some(i), 0) => out.push(0xc0 | i),
            (Some(i), 1) if i < 15 => out.extend_from_slice(&[0x50 | i, 0x01, b'v']),
            _ => {
                let (flags, coded) = if how & 1 == 0 {
                    (0x28, crate::http3::huffman::tests::encode(name.as_bytes()))
                } else {
                    (0x20, name.as_bytes().to_vec())
                };
                // The length as a 3-bit prefix integer, then an empty value.
                match coded.len() {
                    n @ 0..7 => out.push(flags | n as u8),
                    n => out.extend_from_slice(&[flags | 7, (n - 7) as u8]),
                }
                out.extend_from_slice(&coded);
                out.push(0x00);
            }
        }
    }

    proptest::proptest! {
        /// The verdict on any sequence of names, however each is coded, is the rule's:
        /// pseudo-headers known to requests, each at most once, before every regular
        /// field. Arbitrary bytes are refused or read, never a panic.
        #[test]
        fn the_verdict_is_the_rules_for_any_coding(
            names in proptest::collection::vec((0usize..9, proptest::num::u8::ANY), 0..12),
            junk in proptest::collection::vec(proptest::num::u8::ANY, 0..64),
        ) {
            const NAMES: [&str; 9] = [
                ":method", ":scheme", ":authority", ":path", ":protocol", ":status", ":x",
                "accept", "x-request-id",
            ];
            let mut section = vec![0x00, 0x00];
            let (mut ok, mut regular, mut seen) = (true, false, [0u8; 5]);
            for &(n, how) in &names {
                line(NAMES[n], how, &mut section);
                match n {
                    0..=4 => {
                        ok &= !regular && seen[n] == 0;
                        seen[n] += 1;
                    }
                    5 | 6 => ok = false,
                    _ => regular = true,
                }
            }
            let got = scan(&section);
            proptest::prop_assert_eq!(got.is_ok(), ok, "{:?} {:?}", names, got);
            if let Ok(p) = got {
                let counts = [p.method, p.scheme, p.authority, p.path, p.protocol];
                proptest::prop_assert_eq!(counts, seen);
            }
            let _ = scan(&junk);
        }
    }
}
