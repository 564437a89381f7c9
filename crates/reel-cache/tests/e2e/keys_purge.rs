//! Cache keys (dot-segments normalised) and purge (exact, prefix, soft) through
//! `SharedCache::purge`, seen by every worker.

use crate::client::{body_of, get};
use crate::origin::Route;

#[test]
fn dot_segments_resolve_to_the_same_object() {
    let (o, s) = crate::setup();
    o.route("/b", Route::ok("b", &[("cache-control", "max-age=600")]));
    get(&s, "/b", &[]);
    let r = get(&s, "/a/../b", &[]);
    assert_eq!(r.body, b"b");
    assert!(r.cache_status().contains("hit"), "{}", r.cache_status());
    assert_eq!(o.all_seen().len(), 1);
}

/// `Host: test.local.` (the absolute spelling, one trailing dot) is the same site and the
/// same object as `test.local`: one origin fetch, asked with `Host: test.local`, and a
/// purge of `http://test.local/...`, exact or by prefix, reaches it.
#[test]
fn a_trailing_dot_in_host_is_the_same_key_and_purge_reaches_it() {
    let (o, s) = crate::setup();
    let cc = ("cache-control", "max-age=600");
    for p in ["/dot/a", "/dot/b"] {
        o.route(p, Route::ok(body_of(500, 2), &[cc]));
        get(&s, p, &[("Host", "test.local.")]);
        let r = get(&s, p, &[]);
        assert!(r.cache_status().contains("hit"), "{p}: {}", r.cache_status());
        let r = get(&s, p, &[("Host", "TEST.local.:8080")]);
        assert!(r.cache_status().contains("hit"), "{p}: {}", r.cache_status());
        assert_eq!(o.count(p), 1, "{p}: one origin fetch");
        assert_eq!(o.seen(p)[0].header("host"), Some("test.local"));
    }
    let n = s.block_on(s.shared.purge(&s.settings, "http://test.local/dot/a", false, false));
    assert_eq!(n.unwrap(), 1);
    let r = get(&s, "/dot/a", &[("Host", "test.local.")]);
    assert!(r.cache_status().contains("fwd=miss"), "{}", r.cache_status());
    let n = s.block_on(s.shared.purge(&s.settings, "http://test.local/dot/", true, false));
    assert_eq!(n.unwrap(), 2);
    let r = get(&s, "/dot/b", &[("Host", "test.local.")]);
    assert!(r.cache_status().contains("fwd=miss"), "{}", r.cache_status());
    // Two trailing dots (an empty label) name no site.
    assert_eq!(get(&s, "/dot/b", &[("Host", "test.local..")]).status, 421);
    assert_eq!(o.count("/dot/b"), 2);
}

fn hits_on_many_connections(s: &crate::server::Server, path: &str) {
    // Several connections, so both workers answer some of them.
    for _ in 0..8 {
        let r = get(s, path, &[]);
        assert!(r.cache_status().contains("hit"), "{path}: {}", r.cache_status());
    }
}

#[test]
fn purge_exact_prefix_and_soft_is_seen_by_every_worker() {
    let (o, s) = crate::setup();
    let cc = ("cache-control", "max-age=600");
    for p in ["/p1", "/pp/a", "/pp/b", "/ps"] {
        o.route(p, Route::ok(body_of(1000, 1), &[cc, ("etag", "\"p\"")]));
        get(&s, p, &[]);
        hits_on_many_connections(&s, p);
    }
    let n = s.block_on(s.shared.purge(&s.settings, "http://test.local/p1", false, false)).unwrap();
    assert_eq!(n, 1);
    assert!(get(&s, "/p1", &[]).cache_status().contains("fwd=miss"));
    hits_on_many_connections(&s, "/p1");
    assert_eq!(o.count("/p1"), 2);

    let n = s.block_on(s.shared.purge(&s.settings, "http://test.local/pp/", true, false)).unwrap();
    assert_eq!(n, 2);
    for p in ["/pp/a", "/pp/b"] {
        assert!(get(&s, p, &[]).cache_status().contains("fwd=miss"));
        hits_on_many_connections(&s, p);
        assert_eq!(o.count(p), 2);
    }

    let n = s.block_on(s.shared.purge(&s.settings, "http://test.local/ps", false, true)).unwrap();
    assert_eq!(n, 1);
    let r = get(&s, "/ps", &[]);
    assert!(r.cache_status().contains("fwd=stale; fwd-status=304"), "{}", r.cache_status());
    assert_eq!(o.seen("/ps")[1].header("if-none-match"), Some("\"p\""));
    hits_on_many_connections(&s, "/ps");
    assert_eq!(o.count("/ps"), 2);

    assert!(s.block_on(s.shared.purge(&s.settings, "http://test.local/pp/", true, true)).is_err());
    assert!(s.block_on(s.shared.purge(&s.settings, "http://evil/x", false, false)).is_err());
}

/// The variants of a URL are listed in its Vary marker: a soft purge marks each stale (it
/// is revalidated, and stays available to stale-if-error), a hard one removes them all.
#[test]
fn purge_of_a_varying_url_reaches_each_of_its_variants() {
    let (o, s) = crate::setup();
    o.route(
        "/sv",
        Route::ok(
            "v",
            &[("cache-control", "max-age=600"), ("vary", "Accept-Encoding"), ("etag", "\"sv\"")],
        ),
    );
    for e in ["gzip", "br"] {
        get(&s, "/sv", &[("Accept-Encoding", e)]);
        assert!(get(&s, "/sv", &[("Accept-Encoding", e)]).cache_status().contains("hit"));
    }
    let n = s.block_on(s.shared.purge(&s.settings, "http://test.local/sv", false, true)).unwrap();
    assert_eq!(n, 2, "both variants marked stale");
    for e in ["gzip", "br"] {
        let r = get(&s, "/sv", &[("Accept-Encoding", e)]);
        assert!(
            r.cache_status().contains("fwd=stale; fwd-status=304"),
            "{e}: {}",
            r.cache_status()
        );
        assert!(get(&s, "/sv", &[("Accept-Encoding", e)]).cache_status().contains("hit"));
    }
    assert_eq!(o.count("/sv"), 4);
    let n = s.block_on(s.shared.purge(&s.settings, "http://test.local/sv", false, false)).unwrap();
    assert_eq!(n, 3, "the marker and both variants");
    for e in ["gzip", "br"] {
        let r = get(&s, "/sv", &[("Accept-Encoding", e)]);
        assert!(r.cache_status().contains("fwd=miss"), "{e}: {}", r.cache_status());
    }
    assert_eq!(o.count("/sv"), 6);
}
