//! CMCD keys: `[site] forward_cmcd` and `prefetch_next` (off by default) and `[access_log]
//! cmcd_keys`, whose names `reel check` checks.

use super::*;

#[test]
fn cmcd_keys_default_off_and_bad_names_are_refused_where_they_are() {
    let cfg = Config::parse_and_validate(BASE, "t.toml").expect("valid");
    assert!(!cfg.site[0].forward_cmcd && !cfg.site[0].prefetch_next);
    assert!(cfg.access_log.cmcd_keys.is_empty());

    let on = BASE.replace(
        "origin_group = \"main\"\n",
        "origin_group = \"main\"\nforward_cmcd = true\nprefetch_next = true\n",
    );
    let text = format!("{on}\n[access_log]\ncmcd_keys = [\"sid\", \"br\", \"com.example-id\"]\n");
    let cfg = Config::parse_and_validate(&text, "t.toml").expect("valid");
    assert!(cfg.site[0].forward_cmcd && cfg.site[0].prefetch_next);
    assert_eq!(cfg.access_log.cmcd_keys, ["sid", "br", "com.example-id"]);

    let text =
        format!("{BASE}\n[access_log]\ncmcd_keys = [\"sid\", \"Br\", \"sid\", \"\", \"b r\"]\n");
    let ps = problems(&text);
    for (key, says) in [
        ("access_log.cmcd_keys[1]", "is not a CMCD key"),
        ("access_log.cmcd_keys[2]", "listed twice"),
        ("access_log.cmcd_keys[3]", "is not a CMCD key"),
        ("access_log.cmcd_keys[4]", "is not a CMCD key"),
    ] {
        let p = find(&ps, key);
        assert!(p.message.contains(says), "{key}: {p}");
        assert_eq!(p.line, line_of(&text, "cmcd_keys"), "{key}: {p}");
    }
    assert_eq!(ps.len(), 4, "{ps:#?}");
    let many: Vec<String> = (0..33).map(|i| format!("\"k{i}\"")).collect();
    let text = format!("{BASE}\n[access_log]\ncmcd_keys = [{}]\n", many.join(", "));
    assert!(find(&problems(&text), "access_log.cmcd_keys").message.contains("at most 32"));
}
