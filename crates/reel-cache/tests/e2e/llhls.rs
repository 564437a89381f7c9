//! LL-HLS blocking playlist reloads: requests waiting on the same `_HLS_msn` / `_HLS_part`
//! collapse into one origin request; different parameters are different objects.

use std::sync::mpsc;
use std::time::Duration;

use reel_test_support::wait_until;

use crate::client::{Conn, GUARD};
use crate::origin::{Gate, Route};
use crate::server::HOST;

#[test]
fn blocking_playlist_requests_coalesce_per_hls_parameters() {
    let (o, s) = crate::setup();
    let gate = Gate::new();
    let playlist =
        b"#EXTM3U\n#EXT-X-VERSION:9\n#EXT-X-PART:DURATION=0.2,URI=\"p.m4s\"\n".repeat(20);
    let mut r = Route::ok(
        playlist.clone(),
        &[("cache-control", "max-age=1"), ("content-type", "application/vnd.apple.mpegurl")],
    );
    // The origin holds a blocking reload until the part exists.
    r.delay = Duration::from_millis(200);
    r.chunked = true;
    r.pieces = 2;
    r.gate = Some(gate.clone());
    o.route("/ll/p.m3u8", r);
    let t1 = "/ll/p.m3u8?_HLS_msn=5&_HLS_part=1";
    let t2 = "/ll/p.m3u8?_HLS_msn=5&_HLS_part=2";
    let (tx, rx) = mpsc::channel();
    let addr = s.addr;
    let clients: Vec<_> = (0..40)
        .map(|i| {
            let tx = tx.clone();
            let t = if i % 2 == 0 { t1 } else { t2 };
            std::thread::spawn(move || {
                let mut c = Conn::open(addr);
                c.send(
                    format!("GET {t} HTTP/1.1\r\nHost: {HOST}\r\nConnection: close\r\n\r\n")
                        .as_bytes(),
                );
                let (st, h) = c.read_head();
                tx.send(()).unwrap();
                let (b, ok) = c.read_body(&h, false);
                (st, b, ok)
            })
        })
        .collect();
    drop(tx);
    for _ in 0..40 {
        rx.recv_timeout(GUARD).expect("head while the reload is held");
    }
    gate.open(2);
    for c in clients {
        let (st, b, ok) = c.join().unwrap();
        assert_eq!(st, 200);
        assert!(ok && b == playlist);
    }
    assert_eq!(o.count(t1), 1, "one origin request for msn=5 part=1");
    assert_eq!(o.count(t2), 1, "one origin request for msn=5 part=2");
}

/// `n` concurrent GETs of `target`, each on its own connection: status and Cache-Status.
fn concurrent(addr: std::net::SocketAddr, target: &str, n: usize) -> Vec<(u16, String)> {
    let start = std::sync::Arc::new(std::sync::Barrier::new(n));
    let clients: Vec<_> = (0..n)
        .map(|_| {
            let (t, start) = (target.to_string(), start.clone());
            std::thread::spawn(move || {
                let mut c = Conn::open(addr);
                start.wait();
                c.send(
                    format!("GET {t} HTTP/1.1\r\nHost: {HOST}\r\nConnection: close\r\n\r\n")
                        .as_bytes(),
                );
                let r = c.read_response(false);
                (r.status, r.cache_status().to_string())
            })
        })
        .collect();
    clients.into_iter().map(|c| c.join().unwrap()).collect()
}

fn held(body: &[u8], delay: Duration) -> Route {
    let mut r = Route::ok(
        body.to_vec(),
        &[
            // Longer than any test: freshness counts whole seconds.
            ("cache-control", "public, max-age=60"),
            ("content-type", "application/vnd.apple.mpegurl"),
            ("etag", "\"v1\""),
        ],
    );
    r.delay = delay;
    r
}

#[test]
fn lock_timeout_does_not_cut_blocking_reloads_short() {
    let (o, s) = crate::setup_with(|o| {
        o.lock_timeout = Duration::from_millis(50);
        o.blocking_timeout = Duration::from_secs(20);
    });
    let body = b"#EXTM3U\n#EXT-X-VERSION:9\n";
    // The origin holds every request for longer than lock_timeout.
    o.route("/lt/p.m3u8", held(body, Duration::from_millis(500)));
    let blocking = "/lt/p.m3u8?_HLS_msn=9&_HLS_part=0";
    let r = concurrent(s.addr, blocking, 20);
    assert!(r.iter().all(|(st, _)| *st == 200), "{r:?}");
    assert_eq!(o.count(blocking), 1, "the blocking waiters waited for the one request");
    // Without a delivery directive the same wait is an ordinary miss's: lock_timeout cuts
    // it and the followers fetch on their own.
    let plain = "/lt/p.m3u8?v=1";
    let r = concurrent(s.addr, plain, 20);
    assert!(r.iter().all(|(st, _)| *st == 200), "{r:?}");
    assert!(r.iter().any(|(_, cs)| cs.contains("lock-timeout")), "{r:?}");
    assert!(o.count(plain) > 1);
}

#[test]
fn blocking_timeout_bounds_a_blocking_reload_with_one_origin_request() {
    let (o, s) = crate::setup_with(|o| {
        o.lock_timeout = Duration::from_secs(20);
        o.blocking_timeout = Duration::from_millis(300);
    });
    // Far longer than blocking_timeout, far shorter than first_byte_timeout (30 s).
    o.route("/bt/p.m3u8", held(b"#EXTM3U\n", Duration::from_secs(5)));
    let target = "/bt/p.m3u8?_HLS_msn=3";
    let r = concurrent(s.addr, target, 20);
    assert!(r.iter().all(|(st, _)| *st == 504), "{r:?}");
    assert!(
        r.iter().all(|(_, cs)| cs.contains("origin-error") || cs.contains("blocking-timeout")),
        "{r:?}"
    );
    assert_eq!(o.count(target), 1, "the waiters gave up with the leader, no second round");
    // An ordinary request to the same origin still waits for it (first_byte_timeout).
    o.route("/bt/slow.ts", held(b"x", Duration::from_millis(800)));
    assert_eq!(crate::client::get(&s, "/bt/slow.ts", &[]).status, 200);
}

#[test]
fn a_hinted_part_is_a_blocking_request_and_prefetch_sends_no_viewer_credentials() {
    let (o, s) = crate::setup_with(|o| {
        o.lock_timeout = Duration::from_millis(50);
        o.prefetch = reel_cache::Prefetch::Hinted;
    });
    let playlist = b"#EXTM3U\n#EXT-X-TARGETDURATION:2\n#EXT-X-PART-INF:PART-TARGET=0.5\n\
        #EXT-X-PART:DURATION=0.5,URI=\"p8.ts\"\n\
        #EXT-X-PRELOAD-HINT:TYPE=PART,URI=\"p9.ts\"\n";
    o.route("/h/index.m3u8", held(playlist, Duration::ZERO));
    // The origin holds the hinted part (longer than lock_timeout), then streams it.
    let part_headers = [("cache-control", "public, max-age=600"), ("etag", "\"p\"")];
    let mut part = Route::ok(vec![7u8; 100_000], &part_headers);
    part.chunked = true;
    part.pieces = 2;
    part.delay = Duration::from_millis(600);
    o.route("/h/p9.ts", part);
    o.route("/h/p8.ts", Route::ok(vec![8u8; 1000], &part_headers));
    // Not `get`: it would wait for the prefetch to finish.
    let r = crate::client::request(
        s.addr,
        "GET",
        "/h/index.m3u8",
        &[("cookie", "session=1"), ("authorization", "Bearer x"), ("user-agent", "player/1")],
    );
    assert_eq!(r.status, 200);
    wait_until("the hinted part to be prefetched", || o.count("/h/p9.ts") > 0);
    assert!(s.shared.streams.is_hinted(format!("{HOST}/h/p9.ts").as_bytes()));
    // Viewers wait on the prefetch, longer than lock_timeout, until it streams.
    let r = concurrent(s.addr, "/h/p9.ts", 20);
    // A viewer whose request the loaded machine delayed past the part's arrival finds it
    // stored (a hit); the rest wait on the prefetch. Either way, one origin fetch (below).
    assert!(
        r.iter().all(|(st, cs)| *st == 200 && (cs.contains("collapsed") || cs == "reel; hit")),
        "{r:?}"
    );
    assert!(r.iter().any(|(_, cs)| cs.contains("collapsed")), "{r:?}");
    s.settle();
    assert_eq!(o.count("/h/p9.ts"), 1);
    assert_eq!(o.count("/h/p8.ts"), 1, "the listed part was prefetched too");
    for seen in o.seen("/h/p9.ts").iter().chain(o.seen("/h/p8.ts").iter()) {
        assert_eq!(seen.header("cookie"), None);
        assert_eq!(seen.header("authorization"), None);
        assert_eq!(seen.header("user-agent"), Some("player/1"));
    }
}

#[test]
fn a_small_playlist_is_read_whole_then_released_to_every_waiter_at_once() {
    use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
    let (o, s) = crate::setup();
    let body = b"#EXTM3U\n#EXT-X-VERSION:9\n#EXT-X-TARGETDURATION:2\n".repeat(40);
    let gate = Gate::new();
    let mut r = held(&body, Duration::ZERO);
    // Content-Length, the second half held until the gate opens.
    r.pieces = 2;
    r.gate = Some(gate.clone());
    o.route("/w/p.m3u8", r);
    let target = "/w/p.m3u8?_HLS_msn=4&_HLS_part=0";
    let opened = std::sync::Arc::new(AtomicBool::new(false));
    let (tx, rx) = mpsc::channel();
    let clients: Vec<_> = (0..30)
        .map(|_| {
            let (opened, tx, addr) = (opened.clone(), tx.clone(), s.addr);
            std::thread::spawn(move || {
                let mut c = Conn::open(addr);
                c.send(
                    format!("GET {target} HTTP/1.1\r\nHost: {HOST}\r\nConnection: close\r\n\r\n")
                        .as_bytes(),
                );
                tx.send(()).unwrap();
                let (st, h) = c.read_head();
                // No waiter is answered before the whole body reached the cache.
                assert!(opened.load(SeqCst), "a head left before the body was whole");
                let (b, ok) = c.read_body(&h, false);
                (st, b, ok)
            })
        })
        .collect();
    drop(tx);
    for _ in 0..30 {
        rx.recv_timeout(GUARD).expect("request sent");
    }
    // The leader's origin request is under way and its body half sent.
    wait_until("the origin request", || o.count(target) > 0);
    // Every other viewer is still waiting on the leader, none answered: an early head
    // would have ended its wait.
    wait_until("29 viewers waiting on the leader", || s.coalesced_waiters() == 29);
    opened.store(true, SeqCst);
    gate.open(1);
    for c in clients {
        let (st, b, ok) = c.join().unwrap();
        assert_eq!(st, 200);
        assert!(ok && b == body);
    }
    assert_eq!(o.count(target), 1);
    // Once stored, requests are hits of the same bytes.
    s.settle();
    let _ = crate::client::get(&s, target, &[]);
    let hit = crate::client::get(&s, target, &[]);
    assert!(hit.cache_status().contains("hit") && hit.body == body, "{}", hit.cache_status());
}

#[test]
fn playlists_are_cached_per_hls_target_whatever_the_query_options_say() {
    let (o, s) = crate::setup_with(|o| {
        o.key = reel_cache::key::KeyConfig {
            ignore_query: vec!["_HLS_msn".into(), "_HLS_part".into()],
            drop_query: true,
            ..reel_cache::key::KeyConfig::default()
        };
    });
    o.route("/dq/p.m3u8", held(b"#EXTM3U\n#EXT-X-VERSION:9\n", Duration::from_millis(200)));
    let a = "/dq/p.m3u8?token=a&_HLS_msn=5&_HLS_part=1";
    let b = "/dq/p.m3u8?token=b&_HLS_msn=5&_HLS_part=1";
    let other = "/dq/p.m3u8?token=a&_HLS_msn=5&_HLS_part=2";
    // Waiters on one target with different tokens share its one origin request; another
    // part is another target.
    let mut r = concurrent(s.addr, a, 10);
    r.extend(concurrent(s.addr, other, 10));
    assert!(r.iter().all(|(st, _)| *st == 200), "{r:?}");
    assert_eq!(o.count(a), 1);
    assert_eq!(o.count(other), 1);
    // Within the playlist's TTL the target is a hit, whatever the token.
    let hit = crate::client::get(&s, b, &[]);
    assert!(hit.cache_status().contains("hit"), "{}", hit.cache_status());
    assert_eq!(o.count(b), 0);
}

#[test]
fn a_held_blocking_reload_is_not_aged_by_the_hold() {
    let (o, s) = crate::setup();
    let mut r = held(b"#EXTM3U\n#EXT-X-VERSION:9\n", Duration::from_millis(2500));
    r.headers = vec![
        ("cache-control".into(), "max-age=2".into()),
        ("content-type".into(), "application/vnd.apple.mpegurl".into()),
    ];
    o.route("/age/p.m3u8", r);
    // Held 2.5 s by the origin, released fresh (its Date is the release): the next viewer
    // gets the stored copy.
    let blocking = "/age/p.m3u8?_HLS_msn=3&_HLS_part=0";
    assert_eq!(concurrent(s.addr, blocking, 1)[0].0, 200);
    s.settle();
    let (st, cs) = &concurrent(s.addr, blocking, 1)[0];
    assert_eq!((*st, cs.contains("hit")), (200, true), "{cs}");
    assert_eq!(o.count(blocking), 1);
    // An ordinary request that took as long is aged by it (RFC 9111 4.2.3): stale on
    // arrival, fetched again.
    let plain = "/age/p.m3u8?v=1";
    assert_eq!(concurrent(s.addr, plain, 1)[0].0, 200);
    s.settle();
    let (st, cs) = &concurrent(s.addr, plain, 1)[0];
    assert_eq!((*st, cs.contains("hit")), (200, false), "{cs}");
    assert_eq!(o.count(plain), 2);
}

/// Issue 23.5: a playlist asked for under twenty `Host` ports and path spellings (extra
/// slashes) is one object: one origin request for it and one for each part its prefetch
/// fetches, not twenty of each; a `Host` port past 65535 is a 400 and reaches no origin.
#[test]
fn host_ports_and_repeated_slashes_cannot_bust_a_prefetching_playlist() {
    let (o, s) = crate::setup_with(|o| o.prefetch = reel_cache::Prefetch::Hinted);
    let playlist = b"#EXTM3U\n#EXT-X-TARGETDURATION:2\n#EXT-X-PART-INF:PART-TARGET=0.5\n\
        #EXT-X-PART:DURATION=0.5,URI=\"q1.ts\"\n#EXT-X-PART:DURATION=0.5,URI=\"q2.ts\"\n\
        #EXT-X-PRELOAD-HINT:TYPE=PART,URI=\"q3.ts\"\n";
    o.route("/bust/index.m3u8", held(playlist, Duration::ZERO));
    let part_headers = [("cache-control", "public, max-age=600")];
    for p in ["/bust/q1.ts", "/bust/q2.ts", "/bust/q3.ts"] {
        o.route(p, Route::ok(vec![1u8; 1000], &part_headers));
    }
    let host = HOST.split(':').next().unwrap_or(HOST);
    for i in 0..20 {
        let h = format!("{host}:{}", 10_000 + i);
        let target = if i % 2 == 0 { "/bust/index.m3u8" } else { "//bust///index.m3u8" };
        let r = crate::client::request(s.addr, "GET", target, &[("host", &h)]);
        assert_eq!(r.status, 200, "{h} {target}");
    }
    s.settle();
    assert_eq!(o.count("/bust/index.m3u8"), 1, "one playlist object");
    for p in ["/bust/q1.ts", "/bust/q2.ts", "/bust/q3.ts"] {
        assert_eq!(o.count(p), 1, "{p} prefetched once");
    }
    let r = crate::client::request(
        s.addr,
        "GET",
        "/bust/index.m3u8",
        &[("host", &format!("{host}:99999999"))],
    );
    assert_eq!(r.status, 400);
    assert_eq!(o.count("/bust/index.m3u8"), 1, "the invalid port reached no origin");
}
