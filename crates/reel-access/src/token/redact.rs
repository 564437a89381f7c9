//! A request target with the token parameter's value hidden, for the access log: a token
//! in a log shipped to a collector is a credential anyone reading it can replay until it
//! expires.

use std::borrow::Cow;

/// What a hidden value is written as.
pub const HIDDEN: &[u8] = b"REDACTED";

/// `target` with the value of every `param=` query pair replaced by [`HIDDEN`]; borrowed
/// as it is when it has none (no allocation).
pub fn redact<'a>(target: &'a [u8], param: &str) -> Cow<'a, [u8]> {
    let Some(q) = target.iter().position(|&b| b == b'?') else {
        return Cow::Borrowed(target);
    };
    let (path, query) = target.split_at(q + 1);
    let named = |pair: &[u8]| {
        pair.len() > param.len()
            && pair.starts_with(param.as_bytes())
            && pair.get(param.len()) == Some(&b'=')
    };
    if !query.split(|&b| b == b'&').any(named) {
        return Cow::Borrowed(target);
    }
    let mut out = Vec::with_capacity(target.len());
    out.extend_from_slice(path);
    for (i, pair) in query.split(|&b| b == b'&').enumerate() {
        if i > 0 {
            out.push(b'&');
        }
        if named(pair) {
            out.extend_from_slice(&pair[..=param.len()]);
            out.extend_from_slice(HIDDEN);
        } else {
            out.extend_from_slice(pair);
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(t: &str) -> String {
        String::from_utf8(redact(t.as_bytes(), "hdnts").into_owned()).unwrap()
    }

    #[test]
    fn only_the_token_parameters_value_is_hidden() {
        assert_eq!(r("/v/a.ts"), "/v/a.ts");
        assert_eq!(r("/v/a.ts?x=1"), "/v/a.ts?x=1");
        assert!(matches!(redact(b"/v/a.ts?x=1", "hdnts"), Cow::Borrowed(_)));
        assert_eq!(r("/v/a.ts?hdnts=exp=1~acl=/*~hmac=ab"), "/v/a.ts?hdnts=REDACTED");
        assert_eq!(
            r("/v/a.ts?a=1&hdnts=x&b=2&hdnts=y&xhdnts=z&hdnts"),
            "/v/a.ts?a=1&hdnts=REDACTED&b=2&hdnts=REDACTED&xhdnts=z&hdnts"
        );
        assert_eq!(r("/v/a.ts?hdnts="), "/v/a.ts?hdnts=REDACTED");
        assert_eq!(r("?&&"), "?&&");
    }
}
