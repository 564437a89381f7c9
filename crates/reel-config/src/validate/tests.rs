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
