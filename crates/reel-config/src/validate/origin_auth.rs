//! `[[origin_group]]` origin authentication: `request_headers` and `auth = "s3"` with its
//! credentials, each read from the environment here as the server will read it, so
//! `reel check` refuses a variable that is missing (naming the key that needs it).

use std::collections::HashMap;

use super::{Found, bad, is_header_value, is_tchar};
use crate::schema::{OriginAuth, OriginGroupConfig, env_value};

/// Fields reel frames or sets itself on every origin request: a configured value would
/// break the exchange or loop detection.
const RESERVED: [&str; 10] = [
    "host",
    "content-length",
    "transfer-encoding",
    "connection",
    "keep-alive",
    "proxy-connection",
    "te",
    "trailer",
    "upgrade",
    "cdn-loop",
];

/// `key` (a key path) names environment variable `name`, which must be set.
fn check_env(found: &mut Found, key: String, name: &str) -> Option<String> {
    match env_value(name) {
        Ok(v) => Some(v),
        Err(why) => {
            bad(found, key, why);
            None
        }
    }
}

/// One group's `request_headers`, `auth` and credential keys (`key` is its path).
pub(super) fn check_origin_auth(found: &mut Found, key: &str, g: &OriginGroupConfig) {
    let s3 = g.auth == OriginAuth::S3;
    let mut lower: HashMap<String, &str> = HashMap::new();
    for (name, value) in &g.request_headers {
        let at = format!("{key}.request_headers.{name}");
        let l = name.to_ascii_lowercase();
        if name.is_empty() || !name.bytes().all(is_tchar) {
            bad(found, at, format!("{name:?} is not a header field name"));
            continue;
        }
        if RESERVED.contains(&l.as_str()) {
            bad(found, at, format!("{name} is set by reel itself on every origin request"));
            continue;
        }
        if s3 && (l == "authorization" || l.starts_with("x-amz-")) {
            bad(found, at, format!("{name} is part of the signature auth = \"s3\" computes"));
            continue;
        }
        if let Some(first) = lower.insert(l, name) {
            bad(
                found,
                at,
                format!("names the same field as {first:?} (names are case-insensitive)"),
            );
            continue;
        }
        if let Some(v) = check_env(found, format!("{at}.env"), &value.env)
            && !is_header_value(&v)
        {
            bad(
                found,
                format!("{at}.env"),
                format!("environment variable {:?} is not a valid field value", value.env),
            );
        }
    }
    let creds = [
        ("region", g.region.as_str()),
        ("access_key_env", g.access_key_env.as_str()),
        ("secret_key_env", g.secret_key_env.as_str()),
        ("session_token_env", g.session_token_env.as_str()),
    ];
    if !s3 {
        for (k, v) in creds {
            if !v.is_empty() {
                bad(found, format!("{key}.{k}"), "has no effect without auth = \"s3\"");
            }
        }
        return;
    }
    if g.region.is_empty() {
        bad(found, format!("{key}.region"), "auth = \"s3\" needs the region (e.g. \"us-east-1\")");
    } else if !g.region.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_') {
        bad(found, format!("{key}.region"), format!("{:?} is not a region name", g.region));
    }
    for k in ["access_key_env", "secret_key_env"] {
        let name = if k == "access_key_env" { &g.access_key_env } else { &g.secret_key_env };
        if name.is_empty() {
            bad(
                found,
                format!("{key}.{k}"),
                "auth = \"s3\" needs it: the environment variable to read",
            );
        } else if let Some(v) = check_env(found, format!("{key}.{k}"), name)
            && !is_header_value(&v)
        {
            bad(
                found,
                format!("{key}.{k}"),
                format!("environment variable {name:?} holds a control character"),
            );
        }
    }
    if !g.session_token_env.is_empty()
        && let Some(v) = check_env(found, format!("{key}.session_token_env"), &g.session_token_env)
        && !is_header_value(&v)
    {
        bad(
            found,
            format!("{key}.session_token_env"),
            format!("environment variable {:?} is not a valid field value", g.session_token_env),
        );
    }
}
