//! Site routing and cache-key rules: the catch-all site (`hosts = ["*"]`), `[site.key]`
//! keep and drop lists, and CMCD, which never enters a key nor (without `forward_cmcd`)
//! reaches the origin.

use crate::common::*;

/// `[[site]]` tables appended to the test config: a keep-list site and a drop-list site on
/// the test's origin group `o`.
const KEYED_SITES: &str = r#"
[[site]]
hosts = ["keep.test"]
origin_group = "o"
  [site.key]
  query = ["v", "bitrate"]

[[site]]
hosts = ["drop.test"]
origin_group = "o"
  [site.key]
  drop = ["session"]
"#;

#[test]
fn key_rules_keep_or_drop_named_parameters_and_cmcd_never_keys() {
    let origin = Origin::start("main");
    origin.put_default(Object::ok("segment").header("cache-control", "max-age=600"));
    let dir = tempfile::tempdir().unwrap();
    let mut conf = Conf::new(dir.path(), &origin);
    conf.extra = KEYED_SITES.into();
    let reel = Reel::start(&conf);
    let mut c = Conn::open(reel.data).unwrap();
    // Asks `host` for `target` and says whether the origin was asked (a new key).
    let mut fetched = |host: &str, target: &str| {
        let path = target.split('?').next().unwrap_or(target);
        let before = origin.hits(path);
        let r = c.get(host, target).unwrap();
        assert_eq!(r.status, 200, "{host}{target}: {}", r.text());
        origin.hits(path) > before
    };

    // keep-list: only v and bitrate key; the rest reach the origin only, CMCD not even
    // that (it is the edge's to read, `forward_cmcd`).
    assert!(fetched("keep.test", "/k.ts?v=2&session=a&CMCD=bl%3D100"));
    assert_eq!(origin.target("/k.ts").as_deref(), Some("/k.ts?v=2&session=a"));
    assert!(!fetched("keep.test", "/k.ts?session=b&v=2&CMCD=bl%3D900"), "same v");
    assert!(fetched("keep.test", "/k.ts?v=3&session=a"), "another v is another object");
    assert!(fetched("keep.test", "/k.ts?v=2&bitrate=800"), "bitrate keys too");

    // drop-list: session leaves the key, everything else stays.
    assert!(fetched("drop.test", "/d.ts?session=a&q=1"));
    assert!(!fetched("drop.test", "/d.ts?q=1&session=b"));
    assert!(fetched("drop.test", "/d.ts?q=2&session=b"));

    // A site with no rules: CMCD still never keys, nor reaches the origin.
    assert!(fetched("127.0.0.1", "/c.ts?CMCD=sid%3D%22a%22&x=1"));
    assert_eq!(origin.target("/c.ts").as_deref(), Some("/c.ts?x=1"));
    assert!(!fetched("127.0.0.1", "/c.ts?x=1&CMCD=sid%3D%22b%22"));
    assert!(!fetched("127.0.0.1", "/c.ts?x=1"));
    assert!(fetched("127.0.0.1", "/c.ts?x=2"));
}

#[test]
fn the_catch_all_site_serves_unknown_hosts_and_named_sites_keep_theirs() {
    let main = Origin::start("main");
    let other = Origin::start("other");
    for o in [&main, &other] {
        o.put("/x.ts", Object::ok("x"));
    }
    let dir = tempfile::tempdir().unwrap();
    let mut conf = Conf::new(dir.path(), &main);
    let mut reel = Reel::start(&conf);
    // Without a catch-all an unknown Host is refused.
    assert_eq!(request(reel.data, "GET", "nobody.invalid", "/x.ts", &[]).status, 421);

    conf.extra = format!(
        "\n[[site]]\nhosts = [\"*\"]\norigin_group = \"any\"\n\n[[origin_group]]\nname = \"any\"\n  [origin_group.health]\n  enabled = false\n  [[origin_group.tier]]\n  hosts = [\"{}\"]\n",
        other.addr
    );
    reel.rewrite(&conf);
    let st = reel.sighup_reload();
    assert_eq!(st["reload"]["last_ok"], true, "{st}");
    for host in ["nobody.invalid", "nobody.invalid:8080", "10.1.2.3", "example.test"] {
        let r = request(reel.data, "GET", host, "/x.ts", &[]);
        assert_eq!(r.status, 200, "{host}: {}", r.text());
        assert_eq!(r.header("x-origin"), Some("other"), "{host}");
    }
    // Names and wildcards of other sites keep their own site.
    for host in ["127.0.0.1", "localhost", "a.example.test"] {
        let r = request(reel.data, "GET", host, "/x.ts", &[]);
        assert_eq!(r.header("x-origin"), Some("main"), "{host}");
    }
    // Each Host is its own object, whatever the port: the catch-all keys by the Host.
    assert_eq!(
        other.hits("/x.ts"),
        3,
        "nobody.invalid (once, port or not), 10.1.2.3, example.test"
    );
    assert_eq!(main.hits("/x.ts"), 3);
}
