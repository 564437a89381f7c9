//! Routing: only configured sites are served, and the origin is chosen by the config, never
//! by the request (no open proxy).

use crate::client::{Conn, get};
use crate::origin::{Origin, Route};

#[test]
fn an_unknown_host_gets_421_and_the_origin_is_never_contacted() {
    let (o, s) = crate::setup();
    o.route("/x", Route::ok("x", &[("cache-control", "max-age=600")]));
    let r = get(&s, "/x", &[("Host", "evil.example")]);
    assert_eq!(r.status, 421);
    let r = crate::client::request(s.addr, "POST", "/x", &[("Host", "evil.example")]);
    assert_eq!(r.status, 421);
    assert!(o.all_seen().is_empty(), "nothing reached the origin");
}

#[test]
fn an_absolute_form_target_for_another_host_never_reaches_that_host() {
    let (o, s) = crate::setup();
    let other = Origin::start();
    other.route("/secret", Route::ok("secret", &[]));
    o.route("/secret", Route::ok("ours", &[("cache-control", "max-age=600")]));
    let mut c = Conn::open(s.addr);
    c.send(
        format!(
            "GET http://{}/secret HTTP/1.1\r\nHost: test.local\r\nConnection: close\r\n\r\n",
            other.addr
        )
        .as_bytes(),
    );
    let r = c.read_response(false);
    assert_eq!(r.status, 421, "the target's authority names no site");
    assert_eq!(other.all_seen().len(), 0);
    assert_eq!(other.connections(), 0);
    // An absolute-form target naming our site goes to our origin whatever Host says.
    let mut c = Conn::open(s.addr);
    c.send(
        format!(
            "GET http://test.local/secret HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
            other.addr
        )
        .as_bytes(),
    );
    let r = c.read_response(false);
    assert_eq!(r.status, 200);
    assert_eq!(r.body, b"ours");
    assert_eq!(other.connections(), 0);
    assert_eq!(o.count("/secret"), 1);
}
