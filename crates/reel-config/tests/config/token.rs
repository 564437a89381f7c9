//! `[site.token]`: defaults, and every bad value refused at its `file:line`.

use super::*;

#[test]
fn a_token_table_takes_its_defaults() {
    let text = format!(
        "{BASE}\n[site.token]\nformat = \"edgeauth\"\nkeys = [\"00112233445566778899aabbccddeeff\"]\n"
    );
    let cfg = Config::parse_and_validate(&text, "t.toml").expect("valid");
    let t = cfg.site[0].token.as_ref().expect("token");
    assert_eq!(t.param, "hdnts");
    assert_eq!(t.leeway.get(), std::time::Duration::from_secs(5));
    assert_eq!(t.propagate, reel_config::Propagate::Off);
    assert!(!t.escape_early);
    assert_eq!(t.key_texts().unwrap(), ["00112233445566778899aabbccddeeff"]);
}

#[test]
fn bad_token_values_are_refused_where_they_are() {
    let text = format!(
        "{BASE}\n[site.token]\nformat = \"edgeauth\"\nparam = \"a&b\"\nkeys = [\"0011\", \"xyz\"]\n\
         keys_env = \"REEL_TEST_TOKEN_UNSET_VARIABLE\"\nleeway = \"1h\"\nsalt = \"\"\n"
    );
    let ps = problems(&text);
    for (key, needle, says) in [
        ("site[0].token.param", "param = \"a&b\"", "not a parameter name"),
        ("site[0].token.keys[0]", "keys = [", "hex, at least 32 digits"),
        ("site[0].token.keys[1]", "keys = [", "hex, at least 32 digits"),
        ("site[0].token.keys_env", "keys_env", "REEL_TEST_TOKEN_UNSET_VARIABLE"),
        ("site[0].token.leeway", "leeway", "at most 5m"),
        ("site[0].token.salt", "salt", "empty salt"),
    ] {
        let p = find(&ps, key);
        assert_eq!(p.line, line_of(&text, needle), "{p}");
        assert!(p.to_string().contains(says), "{p}");
    }
    let text = format!("{BASE}\n[site.token]\nformat = \"edgeauth\"\n");
    let ps = problems(&text);
    let p = find(&ps, "site[0].token.keys");
    assert!(p.to_string().contains("at least one key"), "{p}");
    let text = format!("{BASE}\n[site.token]\nformat = \"jwt\"\nkeys = []\n");
    assert!(!problems(&text).is_empty(), "an unknown format is refused");
    let text = format!("{BASE}\n[site.token]\nformat = \"edgeauth\"\npropagate = \"header\"\n");
    assert!(!problems(&text).is_empty(), "an unknown propagate is refused");
}
