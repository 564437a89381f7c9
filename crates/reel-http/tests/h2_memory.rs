//! One HTTP/2 connection's memory over many requests. A browser or a player keeps its
//! connection for hours and thousands of segments, so what the server keeps per connection
//! must not grow with the requests served (each finished stream's task used to stay in the
//! connection's task set until the connection closed).
//!
//! A test binary of its own: a counting global allocator measures the bytes live in the
//! whole process, so no other test may run beside it.

#[allow(dead_code)]
#[path = "common.rs"]
mod common;

use bytes::Bytes;
use reel_http::{H2Settings, Limits};
use tokio::net::TcpStream;

use common::Server;
use reel_test_support::CountingAlloc;

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

async fn client(server: &Server) -> h2::client::SendRequest<Bytes> {
    let tcp = TcpStream::connect(server.addr).await.unwrap();
    let name = rustls::pki_types::ServerName::try_from("test.example").unwrap();
    let cfg = server.ca.as_ref().unwrap().client_config(&[b"h2"]);
    let s = tokio_rustls::TlsConnector::from(cfg).connect(name, tcp).await.unwrap();
    reel_test_support::h2::client(s).await
}

/// `n` requests, 16 streams at a time.
async fn requests(c: &h2::client::SendRequest<Bytes>, n: usize) {
    let mut left = n;
    while left > 0 {
        let k = left.min(16);
        let batch: Vec<_> = (0..k)
            .map(|_| {
                let c = c.clone();
                tokio::spawn(async move {
                    let req = http::Request::builder()
                        .uri("https://test.example/hello")
                        .body(())
                        .unwrap();
                    reel_test_support::h2::exchange(&c, req, None).await.unwrap().status
                })
            })
            .collect();
        for t in batch {
            assert_eq!(t.await.unwrap(), 200);
        }
        left -= k;
    }
}

#[tokio::test(flavor = "current_thread")]
async fn a_long_http2_connection_does_not_grow_with_its_requests() {
    let server = Server::start_h2(Limits::default(), H2Settings::default());
    let c = client(&server).await;
    requests(&c, 1_000).await;
    let before = CountingAlloc::live();
    requests(&c, 6_000).await;
    let grown = CountingAlloc::live() - before;
    // Even a 100-byte remainder per request would be 600 kB.
    assert!(grown < 128 * 1024, "{grown} bytes more live after 6000 requests on one connection");
}
