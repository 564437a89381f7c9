//! Admin credentials: the token as `Authorization: Bearer TOKEN` (scripts, Prometheus) or
//! as the password of HTTP Basic authentication, `Basic base64(USER:TOKEN)` with any user
//! (what a browser sends once it has asked for it, so the dashboard opens in one), compared
//! in constant time either way.

use base64::Engine as _;

/// The challenge on a `401` of the dashboard page: the browser asks for a user and a
/// password once (the token is the password) and sends them on the page's own requests.
pub(crate) const BASIC_CHALLENGE: &[u8] = b"Basic realm=\"reel\"";

/// Whether an `Authorization` header value carries `token`, as a bearer token or as Basic
/// authentication's password (the user is ignored). The scheme name of Basic is matched
/// without regard to case (RFC 9110, 11.1).
pub(crate) fn carries_token(header: &[u8], token: &[u8]) -> bool {
    if let Some(given) = header.strip_prefix(b"Bearer ") {
        return constant_time_eq(given, token);
    }
    let Some((scheme, rest)) = header.split_once_byte(b' ') else { return false };
    if !scheme.eq_ignore_ascii_case(b"basic") {
        return false;
    }
    let Ok(decoded) = base64::engine::general_purpose::STANDARD.decode(rest.trim_ascii()) else {
        return false;
    };
    let mut parts = decoded.splitn(2, |&b| b == b':');
    let (Some(_user), Some(password)) = (parts.next(), parts.next()) else { return false };
    constant_time_eq(password, token)
}

/// Equality whose time depends on the lengths only, not on where the bytes differ.
pub(crate) fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// `split_once` for byte strings.
trait SplitOnceByte {
    fn split_once_byte(&self, at: u8) -> Option<(&[u8], &[u8])>;
}

impl SplitOnceByte for [u8] {
    fn split_once_byte(&self, at: u8) -> Option<(&[u8], &[u8])> {
        let mut parts = self.splitn(2, |&b| b == at);
        Some((parts.next()?, parts.next()?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn basic(user_pass: &str) -> Vec<u8> {
        let b64 = base64::engine::general_purpose::STANDARD.encode(user_pass);
        format!("Basic {b64}").into_bytes()
    }

    #[test]
    fn bearer_and_basic_carry_the_token() {
        let t = b"s3cret";
        assert!(carries_token(b"Bearer s3cret", t));
        assert!(carries_token(&basic("admin:s3cret"), t));
        assert!(carries_token(&basic(":s3cret"), t), "any user, an empty one too");
        let mut upper = basic("x:s3cret");
        upper[..5].make_ascii_uppercase();
        assert!(carries_token(&upper, t), "BASIC: the scheme in any case");
        // A colon in the token belongs to the password: only the first one splits.
        assert!(carries_token(&basic("u:a:b"), b"a:b"));
    }

    #[test]
    fn anything_else_is_refused() {
        let t = b"s3cret";
        for bad in [
            b"Bearer s3cre".to_vec(),
            b"Bearer  s3cret".to_vec(),
            b"bearer".to_vec(),
            basic("s3cret:admin"),
            basic("s3cret"),
            basic("admin:s3cret2"),
            b"Basic".to_vec(),
            b"Basic !!!notbase64".to_vec(),
            b"Digest username=\"s3cret\"".to_vec(),
            Vec::new(),
        ] {
            assert!(!carries_token(&bad, t), "{}", String::from_utf8_lossy(&bad));
        }
    }
}
