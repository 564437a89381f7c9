//! A token split into its `~`-separated `name=value` fields, borrowed from the token.

/// The fields of one token. Every field at most once, `exp` and `hmac` required, `hmac`
/// last; a name the format does not know makes the token malformed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Fields<'a> {
    /// Everything before `~hmac=`: what the HMAC covers, byte for byte.
    pub signed: &'a str,
    pub ip: Option<&'a str>,
    pub st: Option<u64>,
    pub exp: u64,
    pub acl: Option<&'a str>,
    pub hmac: &'a str,
}

impl<'a> Fields<'a> {
    /// Splits `token`; `None` when a field is missing, repeated, unknown or malformed.
    pub(super) fn parse(token: &'a str) -> Option<Fields<'a>> {
        let cut = token.rfind("~hmac=")?;
        let (signed, hmac) = (token.get(..cut)?, token.get(cut + "~hmac=".len()..)?);
        if signed.is_empty() || hmac.contains('~') {
            return None;
        }
        let (mut ip, mut st, mut exp, mut acl, mut id, mut data) =
            (None, None, None, None, None, None);
        for field in signed.split('~') {
            let (name, value) = field.split_once('=')?;
            let slot = match name {
                "ip" => &mut ip,
                "st" => &mut st,
                "exp" => &mut exp,
                "acl" => &mut acl,
                "id" => &mut id,
                "data" => &mut data,
                _ => return None,
            };
            if slot.replace(value).is_some() {
                return None;
            }
        }
        let exp = seconds(exp?)?;
        let st = match st {
            Some(s) => Some(seconds(s)?),
            None => None,
        };
        if acl.is_some_and(str::is_empty) || ip.is_some_and(str::is_empty) {
            return None;
        }
        Some(Fields { signed, ip, st, exp, acl, hmac })
    }
}

/// A time field: decimal Unix seconds, at most 20 digits.
fn seconds(v: &str) -> Option<u64> {
    if v.is_empty() || v.len() > 20 || !v.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    v.parse().ok()
}
