//! `[site.token]`: a parameter name the query and cookies can carry, at least one key, every
//! key hex of at least 16 bytes (those of `keys_env` too: the variable must be set), a
//! leeway of at most five minutes.

use super::{Found, bad};
use crate::schema::TokenConfig;

/// The longest clock skew a token's times are allowed.
const MAX_LEEWAY_SECS: u64 = 300;

/// Whether `k` is the hex of a key the verifier takes: an even number of hex digits, at
/// least 32 of them.
fn is_hex_key(k: &str) -> bool {
    k.len().is_multiple_of(2) && k.len() >= 32 && k.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Checks `[site.token]` of `[[site]]` `i`.
pub(super) fn check_token(found: &mut Found, i: usize, t: &TokenConfig) {
    let at = |k: &str| format!("site[{i}].token.{k}");
    let p = &t.param;
    if p.is_empty() || !p.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b)) {
        bad(
            found,
            at("param"),
            format!("{p:?} is not a parameter name (letters, digits, '-', '_', '.')"),
        );
    }
    for (j, k) in t.keys.iter().enumerate() {
        if !is_hex_key(k) {
            bad(
                found,
                format!("site[{i}].token.keys[{j}]"),
                "not a key: hex, at least 32 digits (16 bytes), an even number",
            );
        }
    }
    match t.key_texts() {
        Err(e) => bad(found, at("keys_env"), e),
        Ok(all) => {
            let from_env = &all[t.keys.len()..];
            if from_env.iter().any(|k| !is_hex_key(k)) {
                bad(
                    found,
                    at("keys_env"),
                    "a key in the variable is not hex of at least 32 digits (16 bytes)",
                );
            }
            if all.is_empty() {
                bad(
                    found,
                    at("keys"),
                    "at least one key is required (keys, or keys_env naming a variable that holds some)",
                );
            }
        }
    }
    if t.leeway.get().as_secs() > MAX_LEEWAY_SECS {
        bad(found, at("leeway"), "at most 5m: a longer leeway keeps expired tokens valid");
    }
    if t.salt.as_deref().is_some_and(str::is_empty) {
        bad(found, at("salt"), "an empty salt; leave the key out for none");
    }
}
