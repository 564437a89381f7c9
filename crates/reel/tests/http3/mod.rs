//! HTTP/3 against the real binary: QUIC on the UDP side of a TLS listener, the same cache
//! behind it (hit, miss, coalesced miss, range, 304, HEAD, byte-exact), `Alt-Svc` on the
//! TCP side, metrics and the access log by protocol; connections that move to a new
//! client port keep their worker, and concurrent misses on many connections ask the origin
//! once (2 and 4 workers); Retry for every new connection, and
//! under a flood of Initials that never complete, with the amplification limit counted
//! byte for byte; Initials with a forged address take none of its places; clients that
//! stop acknowledging pin bounded memory and are closed at the send timeout; a reload
//! that turns HTTP/3 on and off.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use reel_test_support::h3;

use crate::common::{Conf, Gate, Object, Origin, Reel, eventually, metric};
use crate::tls::{Pki, h2_client, h2_get, https11_get, rt, tls_conf};

fn body(n: usize, seed: u8) -> Vec<u8> {
    (0..n).map(|i| ((i * 31 + i / 977) as u8).wrapping_add(seed)).collect()
}

fn cached(b: &[u8]) -> Object {
    Object::ok(b.to_vec()).header("etag", "\"v1\"").header("cache-control", "max-age=3600")
}

/// A TLS listener `https` serving HTTP/3 too, with `more` listener lines.
fn h3_conf(dir: &std::path::Path, origin: &Origin, pki: &Pki, more: &str) -> Conf {
    let mut c = tls_conf(dir, origin, pki);
    c.listener_lines
        .get_mut("https")
        .expect("https lines")
        .push_str(&format!("http3 = true\n{more}"));
    c
}

async fn get(
    c: &mut h3::SendRequest,
    path: &str,
    fields: &[(&str, &str)],
) -> reel_test_support::h2::Reply {
    h3::request_at(c, "edge.example.test", "GET", path, fields, None).await.expect("h3 request")
}

mod access;
mod cmsd;
mod compress;
mod cors;
mod handshakes;
mod lifecycle;
mod limits;
mod memory;
mod serving;
