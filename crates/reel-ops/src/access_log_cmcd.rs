//! A request's CMCD in its access-log line: the JSON format's typed `cmcd` object, and
//! the combined format's `cmcd_KEY=value` pairs for the keys `[access_log] cmcd_keys`
//! names.

use std::io::Write as _;

use crate::cmcd::{Cmcd, Value};

/// What a line says of the request's CMCD.
#[derive(Debug, Clone, Copy)]
pub struct CmcdLine<'a> {
    /// The request's CMCD.
    pub data: &'a Cmcd,
    /// The keys the combined format appends, in order (`[access_log] cmcd_keys`).
    pub combined_keys: &'a [String],
}

/// Appends `,"cmcd":{...}`: each key with its typed value, then `"malformed":true` and
/// `"truncated":true` when they apply.
pub(crate) fn json(s: &mut Vec<u8>, c: &CmcdLine<'_>) {
    s.extend_from_slice(b",\"cmcd\":{");
    let mut first = true;
    let mut sep = |s: &mut Vec<u8>| {
        if !std::mem::replace(&mut first, false) {
            s.push(b',');
        }
    };
    for (k, v) in &c.data.pairs {
        sep(s);
        // Keys and text values are serialized by serde_json (never fails into a Vec).
        let _ = serde_json::to_writer(&mut *s, k);
        s.push(b':');
        match v {
            Value::Int(n) => {
                let _ = write!(s, "{n}");
            }
            Value::Dec(d) if d.is_finite() => {
                let _ = write!(s, "{d}");
            }
            Value::Dec(_) => s.extend_from_slice(b"null"),
            Value::Bool(b) => {
                let _ = write!(s, "{b}");
            }
            Value::Str(t) | Value::Token(t) => {
                let _ = serde_json::to_writer(&mut *s, t);
            }
        }
    }
    for (flag, name) in [(c.data.malformed, "malformed"), (c.data.truncated, "truncated")] {
        if flag {
            sep(s);
            let _ = write!(s, "\"{name}\":true");
        }
    }
    s.push(b'}');
}

/// Appends ` cmcd_KEY=value` for each chosen key the request carries (text quoted as the
/// combined format quotes), then ` cmcd=malformed` when it applies.
pub(crate) fn combined(s: &mut Vec<u8>, c: &CmcdLine<'_>) {
    for k in c.combined_keys {
        let Some(v) = c.data.get(k) else { continue };
        let _ = write!(s, " cmcd_{k}=");
        match v {
            Value::Int(n) => {
                let _ = write!(s, "{n}");
            }
            Value::Dec(d) => {
                let _ = write!(s, "{d}");
            }
            Value::Bool(b) => {
                let _ = write!(s, "{b}");
            }
            Value::Token(t) => quoted_bare(s, t.as_bytes()),
            Value::Str(t) => {
                s.push(b'"');
                quoted_bare(s, t.as_bytes());
                s.push(b'"');
            }
        }
    }
    if c.data.malformed {
        s.extend_from_slice(b" cmcd=malformed");
    }
}

/// Printable ASCII as is, `"`, `\` and anything else as `\xNN` (the combined format's
/// escaping).
fn quoted_bare(s: &mut Vec<u8>, b: &[u8]) {
    for &c in b {
        match c {
            b'"' | b'\\' => {
                let _ = write!(s, "\\x{c:02x}");
            }
            0x20..=0x7e => s.push(c),
            _ => {
                let _ = write!(s, "\\x{c:02x}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Cmcd {
        let mut c = Cmcd::default();
        c.add_field(b"br=3200,bs,sid=\"6e\\\"2f\",ot=v,pr=1.5,com.x-y=7,bl=\"x\"");
        c
    }

    #[test]
    fn json_is_typed_and_valid() {
        let c = sample();
        let mut s = b"{\"a\":1".to_vec();
        json(&mut s, &CmcdLine { data: &c, combined_keys: &[] });
        s.push(b'}');
        let v: serde_json::Value = serde_json::from_slice(&s).unwrap();
        let m = &v["cmcd"];
        assert_eq!(m["br"], 3200);
        assert_eq!(m["bs"], true);
        assert_eq!(m["sid"], "6e\"2f");
        assert_eq!(m["ot"], "v");
        assert_eq!(m["pr"], 1.5);
        assert_eq!(m["com.x-y"], "7");
        assert_eq!(m["malformed"], true, "bl was text");
        assert!(m.get("bl").is_none());
    }

    #[test]
    fn combined_appends_the_chosen_keys_present() {
        let c = sample();
        let keys = ["sid".to_string(), "br".into(), "mtp".into(), "ot".into()];
        let mut s = Vec::new();
        combined(&mut s, &CmcdLine { data: &c, combined_keys: &keys });
        assert_eq!(
            String::from_utf8(s).unwrap(),
            " cmcd_sid=\"6e\\x222f\" cmcd_br=3200 cmcd_ot=v cmcd=malformed"
        );
    }
}
