//! `Balance::Rendezvous` against real origins on 127.0.0.1: each key goes to the host that
//! ranks it highest, an unhealthy host's keys (and only those) go to their next-ranked host,
//! and a retry before any byte goes down the same ranking.

mod common;

use std::collections::HashMap;

use common::{Behavior, Fault, Server, fast_health_checks, group};
use http::uri::PathAndQuery;
use reel_origin::{Affinity, Balance, ErrorKind, GroupSpec, OriginRequest, Origins, WorkerClient};
use reel_test_support::wait_until_async;

fn cache_key(i: usize) -> String {
    format!("video.example.com/live/720p/seg-{i}.ts")
}

fn req(i: usize) -> OriginRequest {
    let pq = PathAndQuery::try_from(format!("/live/720p/seg-{i}.ts")).unwrap();
    OriginRequest::get(pq, "video.example.com")
}

fn parents(servers: &[&Server]) -> GroupSpec {
    let mut g = group("shield", vec![servers.iter().map(|s| s.host()).collect()]);
    g.balance = Balance::Rendezvous;
    g
}

/// Sends key `i` and returns the host that answered.
async fn fetch(client: &WorkerClient, i: usize) -> String {
    let key = Affinity::of(cache_key(i).as_bytes());
    let mut r = client.send_keyed("shield", req(i), Some(key)).await.unwrap();
    while r.next_chunk().await.unwrap().is_some() {}
    r.host.clone()
}

/// Requests in flight at once in [`fetch_many`], as on a busy worker.
const LANES: usize = 8;

/// Sends keys `0..n` over [`LANES`] concurrent tasks and returns who answered each.
async fn fetch_many(client: &WorkerClient, n: usize) -> Vec<String> {
    let local = tokio::task::LocalSet::new();
    let lanes: Vec<_> = (0..LANES)
        .map(|lane| {
            let c = client.clone();
            local.spawn_local(async move {
                let mut out = Vec::new();
                for i in (lane..n).step_by(LANES) {
                    out.push((i, fetch(&c, i).await));
                }
                out
            })
        })
        .collect();
    local
        .run_until(async {
            let mut hosts = vec![String::new(); n];
            for l in lanes {
                for (i, h) in l.await.unwrap() {
                    hosts[i] = h;
                }
            }
            hosts
        })
        .await
}

fn owner(origins: &Origins, tier: usize, i: usize) -> Vec<String> {
    origins.rendezvous_order("shield", tier, Affinity::of(cache_key(i).as_bytes())).unwrap()
}

#[tokio::test]
async fn thirty_thousand_keys_spread_evenly_over_three_origins() {
    let s: Vec<Server> = start_servers(3).await;
    let origins = Origins::new(vec![parents(&[&s[0], &s[1], &s[2]])]).unwrap();
    let client = origins.worker_client();
    const KEYS: usize = 30_000;
    let owners: Vec<String> = (0..KEYS).map(|i| owner(&origins, 0, i).remove(0)).collect();
    let hosts = fetch_many(&client, KEYS).await;
    for i in 0..KEYS {
        assert_eq!(hosts[i], owners[i], "key {i} went to its owner");
    }
    for srv in &s {
        let n = srv.requests();
        assert!((9_000..=11_000).contains(&n), "{} got {n} of {KEYS}", srv.host());
        assert!(srv.connections() <= LANES, "keep-alive: {} connections", srv.connections());
    }
    assert_eq!(s.iter().map(Server::requests).sum::<usize>(), KEYS);
}

#[tokio::test]
async fn weights_set_the_shares() {
    let s: Vec<Server> = start_servers(3).await;
    let mut g = parents(&[&s[0], &s[1], &s[2]]);
    g.tiers[0][1].weight = 2;
    let origins = Origins::new(vec![g]).unwrap();
    let client = origins.worker_client();
    fetch_many(&client, 12_000).await;
    // Shares 1/4, 1/2, 1/4, each within 10 %.
    for (srv, want) in s.iter().zip([3_000.0, 6_000.0, 3_000.0]) {
        let n = srv.requests() as f64;
        assert!((n - want).abs() <= want * 0.1, "{} got {n}, want about {want}", srv.host());
    }
}

#[tokio::test]
async fn an_unhealthy_parent_moves_only_its_keys_to_their_next_host() {
    let s: Vec<Server> = start_servers(3).await;
    let origin = Server::start(Behavior::default()).await;
    let mut g = parents(&[&s[0], &s[1], &s[2]]);
    // The tier after the parents is the origin itself.
    g.tiers.push(vec![reel_origin::HostSpec::new(origin.host())]);
    fast_health_checks(&mut g);
    let origins = Origins::new(vec![g]).unwrap();
    origins.start_health_checks().unwrap();
    let client = origins.worker_client();
    const KEYS: usize = 600;
    let mut before = HashMap::new();
    for i in 0..KEYS {
        before.insert(i, fetch(&client, i).await);
    }
    let lost = s[1].host();
    let lost_keys: Vec<usize> = (0..KEYS).filter(|i| before[i] == lost).collect();
    assert!(!lost_keys.is_empty());

    s[1].set(|b| b.health_status = 503);
    wait_until_async("parent down", || origins.is_healthy("shield", &lost) == Some(false)).await;
    let served_by_lost = s[1].requests();
    let mut moved = 0;
    for i in 0..KEYS {
        let now = fetch(&client, i).await;
        if before[&i] == lost {
            moved += 1;
            assert_eq!(now, owner(&origins, 0, i)[1], "key {i} went to its second choice");
        } else {
            assert_eq!(now, before[&i], "key {i} of a healthy parent moved");
        }
    }
    assert_eq!(moved, lost_keys.len(), "exactly the lost parent's keys moved");
    assert_eq!(s[1].requests(), served_by_lost, "the unhealthy parent got nothing");

    // Every parent down: the origin tier serves.
    for p in [&s[0], &s[2]] {
        p.set(|b| b.health_status = 503);
    }
    for p in &s {
        wait_until_async("all parents down", || {
            origins.is_healthy("shield", &p.host()) == Some(false)
        })
        .await;
    }
    assert_eq!(fetch(&client, 1).await, origin.host());

    // The parent comes back and takes its keys back.
    s[1].set(|b| b.health_status = 200);
    wait_until_async("parent up", || origins.is_healthy("shield", &lost) == Some(true)).await;
    assert_eq!(fetch(&client, lost_keys[0]).await, lost);
    origins.stop_health_checks();
}

#[tokio::test]
async fn a_retry_before_any_byte_goes_to_the_next_ranked_host() {
    for fault in [Fault::ResetBeforeHeaders, Fault::CloseBeforeHeaders] {
        let s: Vec<Server> = start_servers(3).await;
        let mut g = parents(&[&s[0], &s[1], &s[2]]);
        g.health.fall = 1000; // keep the faulty host in the ranking
        let origins = Origins::new(vec![g]).unwrap();
        let client = origins.worker_client();
        let bad = &s[0];
        bad.set(|b| b.fault = fault);
        // Keys the faulty host owns.
        let keys: Vec<usize> =
            (0..300).filter(|&i| owner(&origins, 0, i)[0] == bad.host()).take(20).collect();
        assert_eq!(keys.len(), 20);
        for &i in &keys {
            let host = fetch(&client, i).await;
            assert_eq!(host, owner(&origins, 0, i)[1], "{fault:?}: key {i}");
        }
        assert_eq!(bad.requests(), keys.len(), "{fault:?}: each key tried its owner first");
        let snap = origins.snapshot();
        let errors = &snap.groups[0].hosts[0].errors;
        assert_eq!(errors.get(ErrorKind::Reset), keys.len() as u64, "{fault:?}");

        // Without retries the owner's failure is the answer.
        let mut g = parents(&[&s[0], &s[1], &s[2]]);
        g.retries = 0;
        g.health.fall = 1000;
        let origins = Origins::new(vec![g]).unwrap();
        let key = Affinity::of(cache_key(keys[0]).as_bytes());
        let e = origins.worker_client().send_keyed("shield", req(keys[0]), Some(key)).await;
        assert_eq!(e.unwrap_err().kind(), ErrorKind::Reset, "{fault:?}");
    }
}

#[tokio::test]
async fn without_an_affinity_the_path_is_the_key() {
    let s: Vec<Server> = start_servers(3).await;
    let origins = Origins::new(vec![parents(&[&s[0], &s[1], &s[2]])]).unwrap();
    let client = origins.worker_client();
    for i in 0..50 {
        let mut r = client.send("shield", req(i)).await.unwrap();
        while r.next_chunk().await.unwrap().is_some() {}
        let path = format!("/live/720p/seg-{i}.ts");
        let want = origins.rendezvous_order("shield", 0, Affinity::of(path.as_bytes())).unwrap();
        assert_eq!(r.host, want[0]);
        // The same key again: the same host.
        let mut r = client.send("shield", req(i)).await.unwrap();
        while r.next_chunk().await.unwrap().is_some() {}
        assert_eq!(r.host, want[0]);
    }
}

async fn start_servers(n: usize) -> Vec<Server> {
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        out.push(Server::start(Behavior::default()).await);
    }
    out
}
