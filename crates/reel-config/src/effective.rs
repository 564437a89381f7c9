//! The effective configuration as TOML, for `reel check --print` and `GET /status/config`:
//! every key with the value in force (defaults filled in), durations and sizes in the form
//! the file accepts, secrets replaced by [`REDACTED`].
//!
//! Secrets are found by key name ([`is_secret_key`]), not by a list of today's keys, so a
//! secret a new section adds is redacted without a change here. Redaction keeps the value's
//! kind: the printed file still parses and validates (a redacted token is still a token).

use crate::Config;

/// What a secret's value prints as.
pub const REDACTED: &str = "<redacted>";

/// Why the configuration could not be printed (a value TOML cannot hold).
#[derive(Debug, thiserror::Error)]
#[error("cannot print the configuration as TOML: {0}")]
pub struct PrintError(String);

/// Whether a key holds a secret: `token`, `secret`, `secrets`, `password`, `passphrase`,
/// `credentials`, or a name ending in `_token`, `_secret`, `_secrets`, `_password`,
/// `_passphrase` or `_hmac_key`; never a name ending in `_env`, `_file` or `_path` (where a
/// secret is, not the secret), nor `tls_key` and `key`, which name PEM files: a private
/// key's contents never appear in the config.
pub fn is_secret_key(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    if n.ends_with("_env") || n.ends_with("_file") || n.ends_with("_path") || n == "tls_key" {
        return false;
    }
    const WHOLE: [&str; 5] = ["token", "secret", "password", "passphrase", "credentials"];
    const SUFFIX: [&str; 6] =
        ["_token", "_secret", "_secrets", "_password", "_passphrase", "_hmac_key"];
    WHOLE.contains(&n.as_str()) || SUFFIX.iter().any(|s| n.ends_with(s)) || n == "secrets"
}

/// Replaces every non-empty string under a secret key (or in an array under one) by
/// [`REDACTED`]. An empty string stays empty: it says no secret is set. Other values (a
/// flag such as `insecure_no_token`) are no secrets and print as they are.
fn redact(v: &mut toml::Value, secret: bool) {
    match v {
        toml::Value::String(s) if secret && !s.is_empty() => *s = REDACTED.to_owned(),
        toml::Value::Array(items) => items.iter_mut().for_each(|i| redact(i, secret)),
        toml::Value::Table(t) => {
            for (k, item) in t.iter_mut() {
                redact(item, secret || is_secret_key(k));
            }
        }
        _ => {}
    }
}

impl Config {
    /// The configuration in force as TOML ([module docs](self)): what [`Config::parse`]
    /// reads back into the same values, secrets aside.
    pub fn to_effective_toml(&self) -> Result<String, PrintError> {
        let mut v = toml::Value::try_from(self).map_err(|e| PrintError(e.to_string()))?;
        redact(&mut v, false);
        toml::to_string_pretty(&v).map_err(|e| PrintError(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = r#"
[[listener]]
name = "http"
address = "127.0.0.1:8080"

[admin]
token = "s3cret-value"

[cache]
negative_ttl = "90s"

[store]
size = "3GiB"
"#;

    #[test]
    fn defaults_are_filled_in_and_the_token_redacted() {
        let cfg = Config::parse_and_validate(FILE, "t.toml").expect("valid");
        let text = cfg.to_effective_toml().expect("prints");
        assert!(!text.contains("s3cret-value"), "{text}");
        assert!(text.contains(&format!("token = \"{REDACTED}\"")), "{text}");
        // Defaults the file left out are there, in the file's units.
        assert!(text.contains("[server]") && text.contains("shutdown_timeout = "), "{text}");
        assert!(text.contains("size = \"3GiB\""), "{text}");
        assert!(text.contains("negative_ttl = \"90s\""), "{text}");
    }

    #[test]
    fn the_printed_config_reads_back_to_the_same_values() {
        let cfg = Config::parse_and_validate(FILE, "t.toml").expect("valid");
        let text = cfg.to_effective_toml().expect("prints");
        let back = Config::parse_and_validate(&text, "printed.toml").expect("the print is valid");
        assert_eq!(back.to_effective_toml().expect("prints"), text, "a fixed point");
        assert_eq!(back.admin.token, REDACTED);
        assert_eq!(back.cache, cfg.cache);
        assert_eq!(back.store, cfg.store);
        assert_eq!(back.listener, cfg.listener);
        // The default config of the repository, with every section, prints and reads back.
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../config/reel.toml");
        let text = std::fs::read_to_string(path).expect("config/reel.toml");
        let cfg = Config::parse_and_validate(&text, path).expect("valid");
        let printed = cfg.to_effective_toml().expect("prints");
        let back = Config::parse_and_validate(&printed, "printed.toml").expect("valid");
        assert_eq!(back.site, cfg.site);
        assert_eq!(back.origin_group, cfg.origin_group);
        assert_eq!(back.to_effective_toml().expect("prints"), printed);
    }

    #[test]
    fn secrets_are_found_by_name() {
        for k in
            ["token", "secret", "origin_secret", "url_signing_secrets", "password", "api_token"]
        {
            assert!(is_secret_key(k), "{k}");
        }
        for k in ["token_env", "secret_file", "tls_key", "key", "cache_key"] {
            assert!(!is_secret_key(k), "{k}");
        }
        let mut v: toml::Value = toml::from_str(
            "[a]\ntoken = \"x\"\nempty_token = \"\"\nsecrets = [\"k1\", \"k2\"]\n\
             token_env = \"VAR\"\ninsecure_no_token = true\n[a.b]\nsigning_secret = \"y\"\n",
        )
        .expect("toml");
        redact(&mut v, false);
        let a = &v["a"];
        assert_eq!(a["token"].as_str(), Some(REDACTED));
        assert_eq!(a["empty_token"].as_str(), Some(""));
        assert_eq!(a["secrets"][1].as_str(), Some(REDACTED));
        assert_eq!(a["token_env"].as_str(), Some("VAR"));
        // Only strings are secrets: a flag named like one prints as it is.
        assert_eq!(a["insecure_no_token"].as_bool(), Some(true));
        assert_eq!(a["b"]["signing_secret"].as_str(), Some(REDACTED));
    }
}
