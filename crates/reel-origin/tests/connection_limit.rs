//! `max_connections`: the origin connections to one host that carry requests at once are
//! bounded across the process; a request beyond the bound waits up to `connect_timeout` for
//! one to free, then fails with `ErrorKind::ConnectionLimit` (503 to a viewer), which is
//! not held against the host. Health checks are not counted.

mod common;

use std::time::Duration;

use common::{Behavior, Server, group};
use http::uri::PathAndQuery;
use reel_origin::{ErrorKind, OriginRequest, Origins};

fn get(path: &'static str) -> OriginRequest {
    OriginRequest::get(PathAndQuery::from_static(path), "edge.example")
}

#[tokio::test]
async fn requests_beyond_max_connections_wait_then_fail_without_a_socket() {
    let s =
        Server::start(Behavior { head_delay: Duration::from_millis(1500), ..Behavior::default() })
            .await;
    let mut g = group("g", vec![vec![s.host()]]);
    g.max_connections = 2;
    g.connect_timeout = Duration::from_millis(300);
    g.retries = 0;
    let origins = Origins::new(vec![g]).unwrap();
    // Two workers' clients share the bound.
    let (a, b) = (origins.worker_client(), origins.worker_client());
    let sends = (0..5).map(|i| {
        let c = if i % 2 == 0 { a.clone() } else { b.clone() };
        async move { c.send("g", get("/slow")).await }
    });
    let results = futures_join(sends).await;
    let ok = results.iter().filter(|r| r.is_ok()).count();
    let limited: Vec<_> = results
        .iter()
        .filter_map(|r| r.as_ref().err())
        .filter(|e| e.kind() == ErrorKind::ConnectionLimit)
        .collect();
    assert_eq!(ok, 2, "two requests reach the origin");
    assert_eq!(limited.len(), 3, "{results:?}");
    assert!(limited.iter().all(|e| e.client_status() == 503));
    assert_eq!(s.connections(), 2, "no socket beyond the bound");
    // The limit says nothing of the host's health.
    let snap = origins.snapshot();
    assert!(snap.groups[0].hosts[0].healthy);
    drop(results);
    // Connections that finished (or were dropped) free their places.
    let r = a.send("g", get("/again")).await;
    assert!(r.is_ok(), "{r:?}");
}

/// All of `futs`, run together on this task.
async fn futures_join<F: std::future::Future>(futs: impl Iterator<Item = F>) -> Vec<F::Output> {
    let futs: Vec<_> = futs.map(Box::pin).collect();
    let mut outs: Vec<Option<F::Output>> = futs.iter().map(|_| None).collect();
    let mut futs: Vec<Option<_>> = futs.into_iter().map(Some).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (f, out) in futs.iter_mut().zip(outs.iter_mut()) {
            if let Some(fut) = f {
                match fut.as_mut().poll(cx) {
                    std::task::Poll::Ready(v) => {
                        *out = Some(v);
                        *f = None;
                    }
                    std::task::Poll::Pending => pending = true,
                }
            }
        }
        if pending { std::task::Poll::Pending } else { std::task::Poll::Ready(()) }
    })
    .await;
    outs.into_iter().map(|o| o.expect("every future finished")).collect()
}
