//! Origin authentication keys, `[site.key]` and the catch-all site: what `reel check`
//! refuses, and where.

use super::*;

/// BASE with `lines` added to its `[[origin_group]]` table.
fn with_group(lines: &str) -> String {
    BASE.replace(
        "[[origin_group]]\nname = \"main\"\n",
        &format!("[[origin_group]]\nname = \"main\"\n{lines}"),
    )
}

#[test]
fn origin_authentication_needs_its_variables_and_sane_names() {
    // PATH is set wherever tests run; REEL_CFG_TEST_UNSET never is.
    let ok = with_group(
        "request_headers = { \"X-Origin-Secret\" = { env = \"PATH\" } }\nauth = \"s3\"\nregion = \"us-east-1\"\naccess_key_env = \"PATH\"\nsecret_key_env = \"PATH\"\n",
    );
    assert_eq!(problems(&ok), Vec::new());

    let text = with_group(
        "request_headers = { \"Host\" = { env = \"PATH\" }, \"Authorization\" = { env = \"PATH\" }, \"X-A\" = { env = \"REEL_CFG_TEST_UNSET\" } }\nauth = \"s3\"\naccess_key_env = \"REEL_CFG_TEST_UNSET\"\n",
    );
    let ps = problems(&text);
    assert!(find(&ps, "origin_group[0].request_headers.Host").message.contains("set by reel"));
    let p = find(&ps, "origin_group[0].request_headers.Authorization");
    assert!(p.message.contains("signature"), "{p}");
    let p = find(&ps, "origin_group[0].request_headers.X-A.env");
    assert!(p.message.contains("\"REEL_CFG_TEST_UNSET\" is not set"), "{p}");
    assert!(find(&ps, "origin_group[0].region").message.contains("needs the region"));
    let p = find(&ps, "origin_group[0].access_key_env");
    assert!(p.message.contains("is not set"), "{p}");
    assert_eq!(p.line, line_of(&text, "access_key_env"), "{p}");
    assert!(find(&ps, "origin_group[0].secret_key_env").message.contains("needs it"));

    let ps = problems(&with_group("region = \"us-east-1\"\n"));
    assert!(find(&ps, "origin_group[0].region").message.contains("without auth"));
}

#[test]
fn key_rules_and_the_catch_all() {
    let site = "[[site]]\nhosts = [\"example.com\"]\norigin_group = \"main\"\n";
    let with_site = |lines: &str| BASE.replacen(site, &format!("{site}{lines}"), 1);
    assert!(BASE.contains(site));
    assert_eq!(problems(&with_site("  [site.key]\n  query = [\"v\"]\n  \n")), Vec::new());
    let ps = problems(&with_site(
        "drop_query = true\nignore_query = [\"t\"]\n  [site.key]\n  query = [\"v\", \"a&b\"]\n",
    ));
    assert!(find(&ps, "site[0].key.query").message.contains("contradicts"), "{ps:#?}");
    assert!(find(&ps, "site[0].key.query[1]").message.contains("not a query parameter"));
    let ps = problems(&with_site("drop_query = true\n  [site.key]\n  drop = [\"s\"]\n"));
    assert!(find(&ps, "site[0].key.drop").message.contains("no effect"), "{ps:#?}");

    let two = format!("{BASE}\n[[site]]\nhosts = [\"*\"]\norigin_group = \"main\"\n");
    assert_eq!(problems(&two), Vec::new(), "one catch-all is fine");
    let ps = problems(&format!("{two}\n[[site]]\nhosts = [\"*\"]\norigin_group = \"main\"\n"));
    assert!(find(&ps, "site[2].hosts[0]").message.contains("already claimed by site[1]"));
    let cfg = Config::parse_and_validate(&two, "t.toml").expect("valid");
    assert_eq!(cfg.site_for_host("Example.com:80").map(|(i, _)| i), Some(0));
    assert_eq!(cfg.site_for_host("anything.example").map(|(i, _)| i), Some(1));
}
