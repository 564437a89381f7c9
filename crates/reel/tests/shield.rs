//! A shield tier of real `reel` processes on loopback: three parents (shields) in front of
//! one counting origin, and edges whose origin group is the parents, balanced by rendezvous
//! hashing of the cache key. Each parent names itself `shield-<i>` in `Cache-Status` and
//! each edge `edge-<i>`; every node shares `cdn_id = "reel"`.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::time::Duration;

use reel_cache::key::{CacheKey, KeyConfig};
use reel_origin::{Affinity, GroupSpec, HostSpec, Origins};

use crate::common::{Conf, Conn, Object, Origin, Reel, Resp, eventually, get};

/// The Host every client request names.
const HOST: &str = "127.0.0.1";

/// Parents and edges over one origin.
struct Tier {
    origin: Origin,
    parents: Vec<Reel>,
    edges: Vec<Reel>,
    /// Each node's `CDN-Loop` entry, from its start-up log line.
    parent_entries: Vec<String>,
    edge_entries: Vec<String>,
    /// The parents' addresses as the edges name them.
    parent_addrs: Vec<SocketAddr>,
    _dirs: Vec<tempfile::TempDir>,
}

/// The `CDN-Loop` entry a node logged at start-up (`reel; t=<token>`).
fn loop_entry(r: &Reel) -> String {
    let v = r.logs.wait_for("reel is serving", |v| v["fields"]["message"] == "reel is serving");
    let e = v["fields"]["cdn_loop"].as_str().expect("cdn_loop logged").to_string();
    assert!(e.starts_with("reel; t="), "{e}");
    e
}

impl Tier {
    /// `parents` shields (each store `parent_store`) and `edges` edges over a fresh origin
    /// serving a small cacheable segment at every path.
    fn start(parents: usize, edges: usize, parent_store: &str) -> Tier {
        let origin = Origin::start("origin");
        origin.put_default(
            Object::ok("segment bytes")
                .header("cache-control", "max-age=3600")
                .header("etag", "\"s\""),
        );
        let mut dirs = Vec::new();
        let mut ps = Vec::new();
        for i in 0..parents {
            let dir = tempfile::tempdir().expect("tempdir");
            let mut c = Conf::new(dir.path(), &origin);
            c.server = format!("cdn_id = \"reel\"\ncache_status_name = \"shield-{i}\"\n");
            c.store_size = parent_store.into();
            ps.push(Reel::start(&c));
            dirs.push(dir);
        }
        let parent_addrs: Vec<SocketAddr> = ps.iter().map(|p| p.data).collect();
        let mut es = Vec::new();
        for i in 0..edges {
            let dir = tempfile::tempdir().expect("tempdir");
            let mut c = Conf::new(dir.path(), &origin);
            c.origins = parent_addrs.clone();
            c.origin_group = "balance = \"rendezvous\"\n".into();
            // A retry before any byte goes to the next-ranked parent.
            c.retries = 2;
            c.server = format!("cdn_id = \"reel\"\ncache_status_name = \"edge-{i}\"\n");
            es.push(Reel::start(&c));
            dirs.push(dir);
        }
        let parent_entries = ps.iter().map(loop_entry).collect();
        let edge_entries = es.iter().map(loop_entry).collect();
        Tier {
            origin,
            parents: ps,
            edges: es,
            parent_entries,
            edge_entries,
            parent_addrs,
            _dirs: dirs,
        }
    }

    /// The parents in the order the edges rank them for `path`, as indexes: computed here
    /// from the cache key, as every edge computes it.
    fn ranking(&self, path: &str) -> Vec<usize> {
        let hosts = self.parent_addrs.iter().map(|a| HostSpec::new(a.to_string())).collect();
        let origins = Origins::new(vec![GroupSpec::new("p", vec![hosts])]).expect("group");
        let key =
            CacheKey::build(HOST.as_bytes(), path.as_bytes(), &KeyConfig::default()).expect("key");
        let order = origins.rendezvous_order("p", 0, Affinity::of(key.as_bytes())).expect("tier");
        order
            .iter()
            .map(|a| self.parent_addrs.iter().position(|p| p.to_string() == *a).expect("parent"))
            .collect()
    }
}

/// `GET`s every path on `addr` from `threads` keep-alive connections; the responses in the
/// order of `paths`. `progress` counts completed requests.
fn fetch_all(
    addr: SocketAddr,
    paths: &[String],
    threads: usize,
    progress: &AtomicUsize,
) -> Vec<Resp> {
    let mut out: Vec<Option<Resp>> = (0..paths.len()).map(|_| None).collect();
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                s.spawn(move || {
                    let mut conn = Conn::open(addr).expect("connect");
                    let mut got = Vec::new();
                    for i in (t..paths.len()).step_by(threads) {
                        let r = conn.get(HOST, &paths[i]).unwrap_or_else(|e| {
                            panic!("{} on {addr}: {e}", paths[i]);
                        });
                        progress.fetch_add(1, Ordering::SeqCst);
                        got.push((i, r));
                    }
                    got
                })
            })
            .collect();
        for h in handles {
            for (i, r) in h.join().expect("client thread") {
                out[i] = Some(r);
            }
        }
    });
    out.into_iter().map(|r| r.expect("every path fetched")).collect()
}

/// The index of the parent named first in a `Cache-Status` value (`shield-<i>; ...`).
fn served_by(cache_status: &str) -> usize {
    cache_status
        .strip_prefix("shield-")
        .and_then(|r| r.split(';').next())
        .and_then(|i| i.parse().ok())
        .unwrap_or_else(|| panic!("no parent entry first in {cache_status:?}"))
}

fn check_body(path: &str, r: &Resp) {
    assert_eq!(r.status, 200, "{path}: {} {}", r.cache_status(), r.text());
    assert_eq!(r.body, b"segment bytes", "{path}");
}

/// 30,000 keys through one edge, then through another: each key is owned by exactly the
/// parent its rendezvous ranking puts first, the parents share the keys within ±10 % of
/// even, the origin sees each key exactly once, and both hops show in `Cache-Status` and in
/// the `CDN-Loop` the origin receives.
#[test]
fn edges_fill_each_key_from_its_one_parent_and_the_origin_sees_it_once() {
    const KEYS: usize = 30_000;
    let t = Tier::start(3, 2, "512MiB");
    let paths: Vec<String> = (0..KEYS).map(|i| format!("/k/{i}.ts")).collect();
    let none = AtomicUsize::new(0);

    let first = fetch_all(t.edges[0].data, &paths, 8, &none);
    let mut per_parent = [0usize; 3];
    for (path, r) in paths.iter().zip(&first) {
        check_body(path, r);
        let owner = t.ranking(path)[0];
        per_parent[owner] += 1;
        assert_eq!(
            r.cache_status(),
            format!("shield-{owner}; fwd=miss; stored, edge-0; fwd=miss; stored"),
            "{path}"
        );
    }
    for n in per_parent {
        assert!((9_000..=11_000).contains(&n), "keys per parent {per_parent:?}");
    }

    let second = fetch_all(t.edges[1].data, &paths, 8, &none);
    for (path, r) in paths.iter().zip(&second) {
        check_body(path, r);
        let owner = t.ranking(path)[0];
        assert_eq!(r.cache_status(), format!("shield-{owner}; hit, edge-1; fwd=miss; stored"));
    }
    // A hit at the edge keeps the parent's entry as it was stored. A key of its own: the
    // edge's small store has let many of the 30,000 go, and which ones depends on how its
    // workers shared the eight connections (one worker's connections can finish long
    // before the other's, so even the last key can be among the oldest writes).
    let extra = "/k/extra.ts";
    let owner = t.ranking(extra)[0];
    let r = get(t.edges[0].data, extra);
    assert_eq!(
        r.cache_status(),
        format!("shield-{owner}; fwd=miss; stored, edge-0; fwd=miss; stored")
    );
    // The client has the whole body before the fill's commit: until then a request joins
    // the fill ("collapsed").
    let hit = format!("shield-{owner}; fwd=miss; stored, edge-0; hit");
    let collapsed = format!("shield-{owner}; fwd=miss; stored, edge-0; fwd=miss; collapsed");
    eventually("the edge's hit", || {
        let r = get(t.edges[0].data, extra);
        assert!(
            [&hit, &collapsed].contains(&&r.cache_status().to_string()),
            "{}",
            r.cache_status()
        );
        (r.cache_status() == hit).then_some(())
    });

    let hits = t.origin.all_hits();
    let per_key: Vec<u64> = paths.iter().map(|p| hits.get(p).copied().unwrap_or(0)).collect();
    assert!(per_key.iter().all(|&n| n == 1), "a key reached the origin other than once");
    assert_eq!(hits.values().sum::<u64>(), KEYS as u64 + 1, "{:?}", hits.keys().take(5));

    // What the origin received: the edge's CDN-Loop entry, then the owning parent's.
    for path in paths.iter().take(50) {
        let owner = t.ranking(path)[0];
        let want = format!("{}, {}", t.edge_entries[0], t.parent_entries[owner]);
        assert_eq!(t.origin.cdn_loop(path).as_deref(), Some(want.as_str()), "{path}");
    }
    assert_eq!(t.parents.len(), 3);
}

/// One parent killed with SIGKILL while an edge fills from the parents: no client request
/// fails, and only the dead parent's keys move, each to its second-ranked parent.
#[test]
fn a_parent_killed_under_traffic_fails_no_request_and_moves_only_its_keys() {
    const KEYS: usize = 3_000;
    const VICTIM: usize = 1;
    let mut t = Tier::start(3, 2, "128MiB");
    let paths: Vec<String> = (0..KEYS).map(|i| format!("/kill/{i}.ts")).collect();
    let none = AtomicUsize::new(0);
    // The parents hold every key.
    for (path, r) in paths.iter().zip(fetch_all(t.edges[0].data, &paths, 4, &none)) {
        check_body(path, &r);
        assert_eq!(served_by(r.cache_status()), t.ranking(path)[0], "{path}");
    }

    // The other edge, cold, fills every key from the parents while one of them dies.
    let progress = AtomicUsize::new(0);
    let edge = t.edges[1].data;
    let responses = std::thread::scope(|s| {
        let traffic = s.spawn(|| fetch_all(edge, &paths, 4, &progress));
        eventually("a third of the traffic", || {
            (progress.load(Ordering::SeqCst) >= KEYS / 3).then_some(())
        });
        t.parents[VICTIM].signal(libc::SIGKILL);
        t.parents[VICTIM].wait_exit();
        traffic.join().expect("traffic")
    });

    let hits = t.origin.all_hits();
    let mut moved = 0;
    for (path, r) in paths.iter().zip(&responses) {
        check_body(path, r);
        let rank = t.ranking(path);
        let by = served_by(r.cache_status());
        if rank[0] != VICTIM {
            assert_eq!(by, rank[0], "{path}: a surviving parent's key moved");
            assert_eq!(r.cache_status(), format!("shield-{by}; hit, edge-1; fwd=miss; stored"));
            assert_eq!(hits[path], 1, "{path}");
        } else if by == VICTIM {
            // Served before the kill.
            assert_eq!(r.cache_status(), format!("shield-{by}; hit, edge-1; fwd=miss; stored"));
            assert_eq!(hits[path], 1, "{path}");
        } else {
            moved += 1;
            assert_eq!(by, rank[1], "{path}: moved, but not to its second-ranked parent");
            assert_eq!(
                r.cache_status(),
                format!("shield-{by}; fwd=miss; stored, edge-1; fwd=miss; stored")
            );
            assert_eq!(hits[path], 2, "{path}: fetched again by its new owner only");
        }
    }
    let victims = paths.iter().filter(|p| t.ranking(p)[0] == VICTIM).count();
    assert!(moved > 0 && moved <= victims, "moved {moved} of the victim's {victims} keys");
}

/// 1,000 viewers spread over two edges ask for one cold segment at once: the edges
/// coalesce their viewers, the segment's parent coalesces the edges, the origin answers
/// once.
#[test]
fn a_herd_on_every_edge_costs_the_origin_one_request() {
    const VIEWERS: usize = 1_000;
    let t = Tier::start(3, 2, "64MiB");
    let path = "/live/herd.ts";
    let body = vec![b'h'; 200_000];
    // Slow enough that every viewer asks while the fill is under way.
    let obj = Object::ok(body.clone())
        .header("cache-control", "max-age=3600")
        .header("etag", "\"h\"")
        .delay(Duration::from_millis(500));
    t.origin.put(path, obj);
    let edges: Vec<SocketAddr> = t.edges.iter().map(|e| e.data).collect();
    let barrier = Arc::new(Barrier::new(VIEWERS));
    let viewers: Vec<_> = (0..VIEWERS)
        .map(|i| {
            let (barrier, addr) = (barrier.clone(), edges[i % edges.len()]);
            std::thread::Builder::new()
                .stack_size(256 * 1024)
                .spawn(move || {
                    let mut c = Conn::open(addr).expect("connect");
                    barrier.wait();
                    (i % 2, c.get(HOST, path).expect("response"))
                })
                .expect("viewer thread")
        })
        .collect();
    let mut shield_entries: HashMap<usize, Vec<String>> = HashMap::new();
    for v in viewers {
        let (edge, r) = v.join().expect("viewer");
        assert_eq!(r.status, 200, "{}", r.cache_status());
        assert!(r.body == body, "a viewer got {} bytes", r.body.len());
        let parent_entry = r.cache_status().split(", ").next().unwrap_or("").to_string();
        shield_entries.entry(edge).or_default().push(parent_entry);
    }
    assert_eq!(t.origin.hits(path), 1, "origin requests for one segment");
    // Each edge asked the parent once: one edge's copy says the parent fetched it, the
    // other's that it joined that fetch (or found it stored).
    let owner = t.ranking(path)[0];
    let mut per_edge: Vec<String> = shield_entries
        .values()
        .map(|e| {
            assert!(e.iter().all(|x| x == &e[0]), "one parent answer per edge: {e:?}");
            e[0].clone()
        })
        .collect();
    per_edge.sort();
    let fetched = format!("shield-{owner}; fwd=miss; stored");
    assert!(per_edge.contains(&fetched), "{per_edge:?}");
    assert!(
        per_edge.iter().filter(|e| **e != fetched).all(|e| {
            *e == format!("shield-{owner}; fwd=miss; collapsed")
                || *e == format!("shield-{owner}; hit")
        }),
        "{per_edge:?}"
    );
}

/// A node whose origin is itself: its fill comes back to it carrying its own token and is
/// refused at once, before the lookup that would have waited on that very fill.
#[test]
fn a_node_that_is_its_own_origin_answers_508_and_does_not_recurse() {
    let origin = Origin::start("unused");
    let dir = tempfile::tempdir().expect("tempdir");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port();
    let me: SocketAddr = ([127, 0, 0, 1], port).into();
    let mut c = Conf::new(dir.path(), &origin);
    c.listeners = vec![("http".into(), me.to_string())];
    c.origins = vec![me];
    let reel = Reel::start(&c);
    let r = get(reel.data, "/loop.ts");
    assert_eq!(r.status, 508, "{} {}", r.cache_status(), r.text());
    let r = get(reel.data, "/loop.ts?again");
    assert_eq!(r.status, 508);
    assert_eq!(origin.hits("/loop.ts"), 0);
    // Two requests, each answered after exactly one trip back: four access-log lines, the
    // two inner ones answered by reel itself.
    let log = dir.path().join("access.log");
    let lines = eventually("four access-log lines", || {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        let lines: Vec<serde_json::Value> =
            text.lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
        (lines.len() >= 4).then_some(lines)
    });
    let text = std::fs::read_to_string(&log).expect("access log");
    assert_eq!(lines.len(), 4, "{text}");
    let local = lines.iter().filter(|l| l["cache"] == "local" && l["status"] == 508).count();
    assert_eq!(local, 2, "{text}");
    // Exactly one trip back each: an origin attempt is counted as it is sent, so a deeper
    // recursion would have counted its own before the viewer got its answer.
    let m = reel.metrics();
    let attempts: f64 = m
        .lines()
        .filter(|l| l.starts_with("reel_origin_requests_total{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    assert_eq!(attempts, 2.0, "{m}");
}
