//! The HTTP/1.1 request head parser ([`reel_http::Request::parse_head`]), with the default
//! limits and with small ones, and what a handler then reads from the request.

use std::net::{Ipv4Addr, SocketAddr};

use reel_http::{HeadStatus, Limits, Request};

/// Parses `data` as the bytes a connection has read.
pub fn run(data: &[u8]) {
    let small =
        Limits { max_request_line: 64, max_header_bytes: 256, max_headers: 4, ..Limits::default() };
    for limits in [Limits::default(), small] {
        let mut req = Request::new(addr(), addr());
        if let Ok(HeadStatus::Complete(n)) = req.parse_head(data, &limits) {
            assert!(n <= data.len(), "head of {n} bytes in {} bytes", data.len());
            read_all(&req);
        }
    }
}

/// Everything a handler may ask of a parsed request.
pub(crate) fn read_all(req: &Request) {
    let _ = (req.method(), req.version(), req.target(), req.path(), req.query(), req.host());
    for (name, value) in req.headers() {
        assert!(req.header(name).is_some(), "header {name:?}: {value:?} not found by name");
    }
    let _ = (req.keep_alive(), req.body_framing(), req.expects_continue(), req.raw_head());
}

fn addr() -> SocketAddr {
    SocketAddr::from((Ipv4Addr::LOCALHOST, 8080))
}
