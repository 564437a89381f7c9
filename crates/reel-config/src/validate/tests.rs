//! Unit tests of the validation rules.

use std::net::SocketAddr;

use super::cache::check_site_host;
use super::listener::{check_cert_name, collide};
use super::server::{check_level, is_cdn_id, is_sf_token};

#[test]
fn cdn_ids_and_cache_status_names() {
    for ok in ["reel", "cdn.example.com", "cdn.example.com:8443", "192.0.2.1", "a_b-c"] {
        assert!(is_cdn_id(ok), "{ok}");
    }
    for no in ["", "a b", "a,b", "a;b", "a=b", "\"q\"", "[::1]"] {
        assert!(!is_cdn_id(no), "{no}");
    }
    for ok in ["reel", "reel-shield", "edge/1", "*x", "a:b"] {
        assert!(is_sf_token(ok), "{ok}");
    }
    for no in ["", "1edge", "-x", "a b", "a;b", "a,b"] {
        assert!(!is_sf_token(no), "{no}");
    }
}

#[test]
fn levels() {
    for ok in ["info", "WARN", "info,reel_cache=debug", "reel=trace, hyper=off"] {
        assert_eq!(check_level(ok), Ok(()), "{ok}");
    }
    for badl in ["", "inof", "reel=verbose", "=info", "info,,"] {
        assert!(check_level(badl).is_err(), "{badl}");
    }
}

#[test]
fn site_hosts() {
    assert_eq!(check_site_host("Live.Example.com"), Ok("live.example.com".into()));
    assert!(check_site_host("*.example.com").is_ok());
    assert!(check_site_host("127.0.0.1").is_ok());
    assert!(check_site_host("[::1]").is_ok());
    assert_eq!(check_site_host("*"), Ok("*".into()), "the catch-all");
    for b in ["**", "example.com:80", "::1", "a b", "*.[::1]", "", "*."] {
        assert!(check_site_host(b).is_err(), "{b}");
    }
}

#[test]
fn certificate_names() {
    assert_eq!(check_cert_name("Video.Example.com"), Ok("video.example.com".into()));
    assert_eq!(check_cert_name("*.cdn.example.com"), Ok("*.cdn.example.com".into()));
    for b in ["*", "*.", "a.*.example.com", "10.0.0.1", "example.com:443", "[::1]", "", "**.x"] {
        assert!(check_cert_name(b).is_err(), "{b}");
    }
}

#[test]
fn collisions() {
    let p = |s: &str| s.parse::<SocketAddr>().expect("addr");
    assert!(collide(p("127.0.0.1:80"), p("127.0.0.1:80")));
    assert!(collide(p("0.0.0.0:80"), p("127.0.0.1:80")));
    assert!(!collide(p("127.0.0.1:80"), p("127.0.0.2:80")));
    assert!(!collide(p("127.0.0.1:0"), p("127.0.0.1:0")));
}

#[test]
fn access_rules_and_limits() {
    let cfg = |site: &str, geo: &str| {
        let text = format!(
            "[[listener]]\nname = \"h\"\naddress = \"127.0.0.1:8080\"\n\n[[site]]\nhosts = [\"a.test\"]\n\
             origin_group = \"o\"\n{site}\n\n[[origin_group]]\nname = \"o\"\n\
             [[origin_group.tier]]\nhosts = [\"127.0.0.1:9\"]\n{geo}"
        );
        crate::Config::parse(&text, "t.toml").expect("parses").validate()
    };
    let keys = |p: Vec<crate::ConfigProblem>| p.into_iter().map(|p| p.key).collect::<Vec<_>>();
    let geo = "[geo]\ndatabase = \"/x.mmdb\"\n";
    let ok = "[site.access]\nallow = [\"10.0.0.0/8\"]\ndeny_countries = [\"DE\", \"FR\"]\n\
              geo_status = 451\n[site.limits]\nrate = 0.5\nburst = 3\nmax_clients = 64\n";
    assert_eq!(keys(cfg(ok, geo)), Vec::<String>::new());
    assert_eq!(keys(cfg("[site.limits]\nrate = 10\n", "")), Vec::<String>::new());
    assert_eq!(keys(cfg(ok, "")), ["site[0].access.deny_countries"], "a country rule needs [geo]");
    let bad = "[site.access]\nallow_countries = [\"de\", \"DEU\", \"D1\"]\ngeo_status = 404\n\
               [site.limits]\nrate = -2\nburst = 5\nmax_clients = 10\n";
    assert_eq!(
        keys(cfg(bad, geo)),
        [
            "site[0].access.allow_countries[0]",
            "site[0].access.allow_countries[1]",
            "site[0].access.allow_countries[2]",
            "site[0].access.geo_status",
            "site[0].limits.rate",
            "site[0].limits.max_clients",
        ]
    );
    assert_eq!(keys(cfg("[site.limits]\nburst = 5\n", "")), ["site[0].limits.burst"]);
    assert_eq!(keys(cfg("[site.limits]\nrate = 0.0001\n", "")), ["site[0].limits.rate"]);
}
