//! Unit tests of the schema's parsing and defaults.

use super::*;

#[test]
fn host_patterns() {
    let site = SiteConfig {
        hosts: vec!["live.example.com".into(), "*.cdn.example.com".into(), "[::1]".into()],
        ..SiteConfig::default()
    };
    assert!(site.matches_host("live.example.com"));
    assert!(site.matches_host("LIVE.example.com:8080"));
    assert!(site.matches_host("a.cdn.example.com"));
    assert!(site.matches_host("a.b.cdn.example.com."));
    assert!(site.matches_host("[::1]:8080"));
    assert!(!site.matches_host("cdn.example.com"));
    assert!(!site.matches_host("xcdn.example.com"));
    assert!(!site.matches_host("example.com"));
    assert_eq!(strip_port("127.0.0.1:8080"), "127.0.0.1");
    assert_eq!(strip_port("localhost"), "localhost");
}

#[test]
fn host_port_parsing() {
    let hp: HostPort = "10.0.0.1:80".parse().expect("v4");
    assert_eq!(hp.socket_addr(), Some("10.0.0.1:80".parse().expect("addr")));
    let hp: HostPort = "[2001:db8::1]:8080".parse().expect("v6");
    assert_eq!((hp.host.as_str(), hp.port), ("2001:db8::1", 8080));
    assert_eq!(hp.to_string(), "[2001:db8::1]:8080");
    let hp: HostPort = "origin-1.example.com:80".parse().expect("name");
    assert_eq!(hp.socket_addr(), None);
    for bad in ["10.0.0.1", "10.0.0.1:0", "x:99999", "2001:db8::1:80", "bad_name:80", ":80"] {
        assert!(bad.parse::<HostPort>().is_err(), "{bad}");
    }
}

#[test]
fn cpu_set_serde() {
    #[derive(Deserialize, Serialize)]
    struct W {
        c: CpuSet,
    }
    let w: W = toml::from_str("c = \"auto\"").expect("auto");
    assert_eq!(w.c, CpuSet::Auto);
    let w: W = toml::from_str("c = [1, 3]").expect("list");
    assert_eq!(w.c, CpuSet::List(vec![1, 3]));
    assert_eq!(toml::to_string(&w).expect("ser").trim(), "c = [1, 3]");
    let e = toml::from_str::<W>("c = \"all\"").err().map(|e| e.message().to_owned());
    assert!(e.is_some_and(|m| m.contains("expected \"auto\"")));
}

/// docs/demo-origin.md's settings table names exactly the keys `[demo_origin]` has: every
/// key it lists exists, every key exists in it, and no other backticked setting name in the
/// page is written as if it were a key.
#[test]
fn demo_origin_doc_names_only_real_keys() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/demo-origin.md");
    let doc = std::fs::read_to_string(path).expect("docs/demo-origin.md");
    let table = toml::Value::try_from(DemoOriginConfig::default()).expect("serializes");
    let keys: std::collections::BTreeSet<String> =
        table.as_table().expect("a table").keys().cloned().collect();
    let header = doc.find("| `[demo_origin]` key |").expect("the settings table");
    let listed: std::collections::BTreeSet<String> = doc[header..]
        .lines()
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .filter_map(|l| l.split('|').nth(2))
        .map(str::trim)
        .filter(|c| *c != "—")
        .map(|c| c.trim_matches('`').to_string())
        .collect();
    assert_eq!(listed, keys, "the table's `[demo_origin]` column");
    // A key-like name (`snake_case` with a `=`, as in a config line) must be a key.
    for (i, _) in doc.match_indices(" = ") {
        let before = &doc[..i];
        let name = before.rsplit(['`', ' ', '(']).next().unwrap_or("");
        if name.contains('_') && before.ends_with(name) {
            assert!(keys.contains(name), "docs/demo-origin.md names `{name} = ...`, not a key");
        }
    }
}
