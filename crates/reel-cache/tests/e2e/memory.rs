//! Memory reel holds per client: a client that stops reading a response passed through
//! from the origin must not make reel buffer the origin's body (RFC 9110 7.6 leaves flow
//! control to the transport: reel stops reading the origin instead).

use std::time::{Duration, Instant};

use reel_cache::PASS_BUFFER;

use crate::client::{Conn, body_of};
use crate::origin::Route;
use crate::server::HOST;

/// A stalled client cost about 3.5 MB of buffered origin body (80 stalled clients: +280 MB).
#[test]
fn stalled_clients_of_a_pass_through_body_hold_a_bounded_buffer_each() {
    let (o, s) = crate::setup();
    let body = body_of(24 << 20, 5);
    let mut r = Route::ok(body.clone(), &[("cache-control", "no-store")]);
    r.pieces = 96;
    o.route("/huge", r);
    let clients = 4;
    let mut conns: Vec<Conn> = (0..clients)
        .map(|i| {
            let mut c = Conn::open(s.addr);
            c.send(format!("GET /huge?c={i} HTTP/1.1\r\nHost: {HOST}\r\n\r\n").as_bytes());
            c
        })
        .collect();
    let heads: Vec<_> = conns.iter_mut().map(|c| c.read_head()).collect();
    assert!(heads.iter().all(|(st, _)| *st == 200));
    // The clients read nothing more. Watch what reel holds while the origin pushes.
    let mut most = 0;
    let until = Instant::now() + Duration::from_millis(1500);
    while Instant::now() < until {
        most = most.max(s.shared.pass_buffered.get());
        std::thread::sleep(Duration::from_millis(2));
    }
    assert!(most > 0, "the bodies were flowing");
    let bound = (clients * PASS_BUFFER) as u64;
    assert!(most <= bound, "{most} bytes held for {clients} stalled clients (bound {bound})");
    assert_eq!(o.finished("/huge"), 0, "the origin was held back, not read to the end");
    // A client that reads again gets the whole body.
    let (b, complete) = conns[0].read_body(&heads[0].1, false);
    assert!(complete && b == body);
}
