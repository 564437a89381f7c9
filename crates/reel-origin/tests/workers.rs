//! Thread-per-core use: one `Origins` shared by worker threads, each with its own
//! current_thread runtime, `LocalSet` and `WorkerClient`.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{Behavior, Server, group};
use http::uri::PathAndQuery;
use reel_origin::{ErrorKind, OriginRequest, Origins};

fn worker(origins: Arc<Origins>, requests: usize) -> std::thread::JoinHandle<Vec<String>> {
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let local = tokio::task::LocalSet::new();
        local.block_on(&rt, async move {
            let client = origins.worker_client();
            let mut hosts = Vec::new();
            for _ in 0..requests {
                let req = OriginRequest::get(PathAndQuery::from_static("/seg.ts"), "edge");
                let mut r = client.send("g", req).await.unwrap();
                while r.next_chunk().await.unwrap().is_some() {}
                hosts.push(r.host.clone());
            }
            hosts
        })
    })
}

#[test]
fn pools_are_per_worker_and_health_is_shared() {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let s = Server::start(Behavior::default()).await;
        let origins = Arc::new(Origins::new(vec![group("g", vec![vec![s.host()]])]).unwrap());
        let (a, b) = (worker(origins.clone(), 3), worker(origins.clone(), 3));
        // Join without blocking the runtime that serves the test origin.
        let (a, b) = tokio::task::spawn_blocking(move || (a.join(), b.join())).await.unwrap();
        assert_eq!(a.unwrap().len(), 3);
        assert_eq!(b.unwrap().len(), 3);
        assert_eq!(s.requests(), 6);
        assert_eq!(s.connections(), 2, "one keep-alive connection per worker");
        let snap = origins.snapshot();
        assert_eq!(snap.groups[0].hosts[0].requests, 6, "statistics are shared");
    });
}

#[test]
fn connect_timeout_when_the_accept_queue_is_full() {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        // A listener that never accepts, with the smallest backlog: once its queue is full the
        // kernel drops further SYNs and connects hang.
        let sock =
            socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
        sock.bind(&"127.0.0.1:0".parse::<std::net::SocketAddr>().unwrap().into()).unwrap();
        sock.listen(0).unwrap();
        let addr = sock.local_addr().unwrap().as_socket().unwrap();
        let mut fillers = Vec::new();
        let mut saturated = false;
        for _ in 0..16 {
            match tokio::time::timeout(
                Duration::from_millis(300),
                tokio::net::TcpStream::connect(addr),
            )
            .await
            {
                Ok(Ok(c)) => fillers.push(c),
                _ => {
                    saturated = true;
                    break;
                }
            }
        }
        assert!(saturated, "the accept queue never filled");
        let mut g = group("g", vec![vec![addr.to_string()]]);
        g.connect_timeout = Duration::from_millis(200);
        g.retries = 0;
        let origins = Origins::new(vec![g]).unwrap();
        let req = OriginRequest::get(PathAndQuery::from_static("/x"), "edge");
        let e = origins.worker_client().send("g", req).await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::ConnectTimeout);
        assert_eq!(e.client_status(), 504);
        assert!(e.is_retryable());
        drop(sock);
    });
}
