//! Connections closed at accept because a connection limit was reached
//! (`http.max_connections_per_worker`, `http.max_connections_per_client`, the descriptor
//! budget of `http.reserved_fds`): the request the client sent gets a 503 with
//! `Connection: close` and `Retry-After`, so a balancer's health probe learns the node is
//! full and a viewer's player retries, instead of either waiting in a backlog until it
//! times out. Short timeouts bound how long such a connection holds its descriptor.

use std::net::SocketAddr;
use std::rc::Rc;
use std::time::Duration;

use bytes::Bytes;
use reel_http::{Handler, Request, RequestBody, Response};
use reel_runtime::Refusal;
use tokio::net::TcpStream;

/// How long a refused connection may take to send its request head.
const HEAD_WAIT: Duration = Duration::from_secs(2);

struct Refuse {
    body: Bytes,
}

impl Handler for Refuse {
    async fn handle(&self, _req: &Request, _body: &mut RequestBody<'_>) -> Response {
        Response::new(503)
            .header("content-type", Bytes::from_static(b"application/json"))
            .header("cache-control", Bytes::from_static(b"no-store"))
            .header("retry-after", Bytes::from_static(b"1"))
            .bytes(self.body.clone())
    }

    fn keep_alive(&self) -> bool {
        false
    }
}

/// The JSON body of a refusal: the shape of a `/healthz` answer, status `overloaded`.
pub(crate) fn body(why: Refusal) -> Bytes {
    let reason = match why {
        Refusal::Worker => "connection limit: http.max_connections_per_worker",
        Refusal::Client => "connection limit: http.max_connections_per_client",
        Refusal::Process => "connection limit: descriptors (http.reserved_fds)",
    };
    Bytes::from(format!("{{\"status\":\"overloaded\",\"reasons\":[\"{reason}\"]}}\n"))
}

/// Answers the refused connection's request (whatever its path) and closes it.
pub(crate) async fn answer(stream: TcpStream, peer: SocketAddr, why: Refusal) {
    let limits = reel_http::Limits {
        header_timeout: HEAD_WAIT,
        idle_timeout: HEAD_WAIT,
        max_body_bytes: 0,
        ..reel_http::Limits::default()
    };
    // A dropped sender means "never drain".
    let (_, drain) = tokio::sync::watch::channel(false);
    let h = Rc::new(Refuse { body: body(why) });
    reel_http::serve_connection(stream, peer, h, Rc::new(limits), drain).await;
}
