//! Percent-escapes around tokens: a token sent escaped in a query or a cookie
//! (`acl=%2flive%2f%2a`) is decoded before it is parsed, and the generators' `escape_early`
//! (Python's `quote_plus`, then the escapes' hex lowercased) is redone on a URL token's
//! path before it is hashed.

use std::borrow::Cow;

/// The value of one hex digit, either case.
pub(super) fn hex_val(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// `s` with its `%XX` escapes decoded (borrowed when it has none); `None` when an escape is
/// malformed or the result is not UTF-8. `+` stays `+`.
pub fn decode(s: &str) -> Option<Cow<'_, str>> {
    if !s.contains('%') {
        return Some(Cow::Borrowed(s));
    }
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while let Some(&c) = b.get(i) {
        if c == b'%' {
            let h = b.get(i + 1).copied().and_then(hex_val)?;
            let l = b.get(i + 2).copied().and_then(hex_val)?;
            out.push(h << 4 | l);
            i += 3;
        } else {
            out.push(c);
            i += 1;
        }
    }
    String::from_utf8(out).ok().map(Cow::Owned)
}

/// The token as its generator made it from the value a query parameter or cookie
/// carried: as it came when its `~hmac=` is there to see (a token's own fields may hold
/// escapes, `data=a%2fb`, which its HMAC covers as they are), else decoded (a token sent
/// escaped whole, `%7Ehmac%3D`).
pub fn token_as_sent(raw: &str) -> Option<Cow<'_, str>> {
    if raw.contains("~hmac=") { Some(Cow::Borrowed(raw)) } else { decode(raw) }
}

/// Python's `quote_plus(s)` with the escapes' hex in lowercase (what the generators hash
/// with `escape_early`): letters, digits and `_.-~` as they are, space as `+`, every other
/// byte `%xx`. Hands the output to `out` in runs, without allocating.
pub fn quote_plus_lower(s: &[u8], mut out: impl FnMut(&[u8])) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut buf = [0u8; 96];
    let mut n = 0;
    for &c in s {
        if n + 3 > buf.len() {
            out(&buf[..n]);
            n = 0;
        }
        if c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.' | b'-' | b'~') {
            buf[n] = c;
            n += 1;
        } else if c == b' ' {
            buf[n] = b'+';
            n += 1;
        } else {
            buf[n..n + 3].copy_from_slice(&[
                b'%',
                HEX[usize::from(c >> 4)],
                HEX[usize::from(c & 15)],
            ]);
            n += 3;
        }
    }
    out(&buf[..n]);
}
