//! The country database on real MaxMind DB files: one written by MaxMind's format with
//! `mmdb-writer`, replaced while in use (and by a broken file), and the real GeoLite2
//! City database.

use std::net::IpAddr;

use reel_access::{Geo, Refresh};
use reel_test_support::mmdb;

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

#[test]
fn countries_come_from_the_file_and_follow_its_replacement() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("countries.mmdb");
    let nets = [("127.0.0.2/32", "DE"), ("127.0.0.3/32", "US"), ("2001:db8::/32", "FR")];
    if mmdb::write_country_db(&path, &nets).is_none() {
        return;
    }
    let geo = Geo::open(&path).expect("opens");
    assert_eq!(geo.country(ip("127.0.0.2")), Some(*b"DE"));
    assert_eq!(geo.country(ip("127.0.0.3")), Some(*b"US"));
    assert_eq!(geo.country(ip("::ffff:127.0.0.2")), Some(*b"DE"), "IPv4-mapped");
    assert_eq!(geo.country(ip("2001:db8::7")), Some(*b"FR"));
    assert_eq!(geo.country(ip("127.0.0.4")), None);
    assert!(matches!(geo.refresh(), Refresh::Unchanged));

    // Replaced (written beside and renamed over it): the new mapping.
    mmdb::write_country_db(&path, &[("127.0.0.2/32", "US")]).expect("written");
    assert!(matches!(geo.refresh(), Refresh::Swapped));
    assert_eq!(geo.country(ip("127.0.0.2")), Some(*b"US"));
    assert_eq!(geo.country(ip("127.0.0.3")), None);

    // A broken file: the database in use stays.
    let tmp = dir.path().join("broken");
    std::fs::write(&tmp, b"not a maxmind database").unwrap();
    std::fs::rename(&tmp, &path).unwrap();
    assert!(matches!(geo.refresh(), Refresh::Kept(_)));
    assert_eq!(geo.country(ip("127.0.0.2")), Some(*b"US"));
    assert_eq!((geo.swaps(), geo.failures()), (1, 1));
    assert!(Geo::check(&path).is_err());
    assert!(Geo::open(dir.path().join("missing.mmdb")).is_err());
}

#[test]
fn the_real_geolite2_city_database_gives_countries() {
    let Some(path) = mmdb::geolite2_city() else { return };
    let geo = Geo::open(&path).expect("GeoLite2 City opens");
    // MaxMind's documented test addresses and well-known resolvers (2018 data).
    assert_eq!(geo.country(ip("81.2.69.142")), Some(*b"GB"));
    assert_eq!(geo.country(ip("8.8.8.8")), Some(*b"US"));
    assert_eq!(geo.country(ip("::ffff:81.2.69.142")), Some(*b"GB"));
    assert_eq!(geo.country(ip("10.1.2.3")), None, "private addresses have no country");
    assert_eq!(geo.country(ip("127.0.0.1")), None);
}
