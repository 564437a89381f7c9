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
