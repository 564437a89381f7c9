//! Timeouts, draining and clients that vanish mid-response.

use std::io::{Read, Write};
use std::thread::sleep;
use std::time::{Duration, Instant};

use reel_http::{CloseReason, Limits};
use reel_test_support::wait_until;

use crate::common::{Server, get};

fn short_timeouts() -> Limits {
    Limits {
        header_timeout: Duration::from_millis(400),
        idle_timeout: Duration::from_millis(400),
        ..Limits::default()
    }
}

#[test]
fn slowloris_head_gets_408_and_close() {
    let server = Server::with_limits(short_timeouts());
    let mut c = server.connect();
    let start = Instant::now();
    // Keep trickling bytes (each within the idle timeout) but never finish the head.
    let raw = b"GET /hello HTTP/1.1\r\nHost: t\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    let mut closed_early = false;
    for b in raw.iter() {
        if c.stream.write_all(std::slice::from_ref(b)).is_err() {
            closed_early = true;
            break;
        }
        sleep(Duration::from_millis(50));
        if start.elapsed() > Duration::from_secs(3) {
            break;
        }
    }
    let _ = closed_early;
    let r = c.response(false);
    assert_eq!(r.status, 408);
    assert!(r.closes());
    c.assert_closed();
    assert_eq!(server.outcome().close, CloseReason::HeaderTimeout);
}

#[test]
fn a_handler_that_stops_keep_alive_closes_after_the_next_response_not_while_idle() {
    let server = Server::start();
    let mut c = server.connect();
    c.send(&get("/hello"));
    let r = c.response(false);
    assert!(!r.closes(), "keep-alive until the handler says otherwise");
    // An idle connection is left alone: the client's next request is answered, and
    // that answer tells it to go.
    server.close_after_responses();
    sleep(Duration::from_millis(200));
    c.send(&get("/hello"));
    let r = c.response(false);
    assert_eq!(r.status, 200);
    assert!(r.closes(), "connection: close on the next response");
    c.assert_closed();
    let o = server.outcome();
    assert_eq!((o.requests, o.close), (2, CloseReason::NotKeepAlive));
}

#[test]
fn idle_keep_alive_connection_closes_silently() {
    let server = Server::with_limits(short_timeouts());
    let mut c = server.connect();
    c.send(&get("/hello"));
    assert_eq!(c.response(false).status, 200);
    // Nothing more is sent; the server closes without a response.
    c.assert_closed();
    let o = server.outcome();
    assert_eq!((o.requests, o.close), (1, CloseReason::IdleTimeout));
    // A connection that never sends anything is idle too.
    let c = server.connect();
    c.assert_closed();
    assert_eq!(server.outcome().close, CloseReason::IdleTimeout);
}

#[test]
fn drain_closes_idle_connections_and_finishes_in_flight_ones() {
    let server = Server::start();
    let mut idle = server.connect();
    idle.send(&get("/hello"));
    assert_eq!(idle.response(false).status, 200);
    let mut busy = server.connect();
    busy.send(&get("/slow"));
    // /slow is in flight when the drain begins.
    wait_until("the /slow handler to start", || server.slow_started() == 1);
    server.drain();
    idle.assert_closed();
    let r = busy.response(false);
    assert_eq!((r.status, &r.body[..]), (200, &b"slow done"[..]));
    assert!(r.closes());
    busy.assert_closed();
    let mut reasons = vec![server.outcome().close, server.outcome().close];
    reasons.sort_by_key(|r| format!("{r:?}"));
    assert_eq!(reasons, vec![CloseReason::Drain, CloseReason::Drain]);
    // A connection that has not sent its first request yet (accepted just before a drain
    // or an upgrade's hand-over) gets a short grace to send it, answered with close...
    let mut late = server.connect();
    sleep(Duration::from_millis(200));
    late.send(&get("/hello"));
    let r = late.response(false);
    assert_eq!((r.status, r.closes()), (200, true));
    late.assert_closed();
    assert_eq!(server.outcome().close, CloseReason::Drain);
    // ...and one that sends nothing is closed when the grace ends, with nothing written.
    let started = std::time::Instant::now();
    let silent = server.connect();
    silent.assert_closed();
    assert!(started.elapsed() >= Duration::from_millis(900), "closed before the grace");
    assert_eq!(server.outcome().close, CloseReason::Drain);
}

#[test]
fn client_vanishing_mid_file_body_does_not_hurt_others() {
    let server = Server::start();
    for _ in 0..3 {
        let mut c = server.connect();
        c.send(&get("/file"));
        let mut some = [0u8; 4096];
        let n = c.stream.read(&mut some).unwrap();
        assert!(n > 0);
        // Reset (SO_LINGER 0) so the server sees ECONNRESET/EPIPE on its next write.
        let sock = socket2::SockRef::from(c.stream.tcp());
        sock.set_linger(Some(Duration::ZERO)).unwrap();
        drop(c);
        let o = server.outcome();
        assert!(matches!(o.close, CloseReason::WriteError(_)), "unexpected close reason {o:?}");
        assert!(o.bytes_written < crate::common::FILE_LEN);
    }
    let mut c = server.connect();
    c.send(&get("/hello"));
    assert_eq!(c.response(false).body, b"hello world");
    c.stream.write_all(&get("/file?off=5&len=5")).unwrap();
    assert_eq!(c.response(false).body.len(), 5);
}

#[test]
fn client_that_stops_reading_is_dropped_after_the_stall_timeout() {
    let server = Server::with_limits(short_timeouts());
    let mut c = server.connect();
    // 24 MiB never read: the socket buffers fill and the server's sendfile stalls.
    c.send(&get("/file"));
    let o = server.outcome();
    assert_eq!(o.close, CloseReason::WriteError(std::io::ErrorKind::TimedOut));
    assert!(o.bytes_written < crate::common::FILE_LEN);
    // Others are still served.
    let mut d = server.connect();
    d.send(&get("/hello"));
    assert_eq!(d.response(false).status, 200);
    drop(c);
}

#[test]
fn stalled_request_body_gets_408_and_close() {
    let server = Server::with_limits(short_timeouts());
    let mut c = server.connect();
    c.send(b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 10\r\n\r\nabc");
    let r = c.response(false);
    assert_eq!(r.status, 408);
    assert!(r.closes());
    c.assert_closed();
    assert_eq!(server.outcome().close, CloseReason::Body(reel_http::BodyError::Timeout));
}

#[test]
fn a_body_dripped_within_the_idle_timeout_is_cut_at_the_body_timeout() {
    let server = Server::with_limits(Limits {
        idle_timeout: Duration::from_secs(5),
        body_timeout: Duration::from_millis(600),
        ..Limits::default()
    });
    let mut c = server.connect();
    c.send(b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 1000\r\n\r\n");
    // A byte every 20 ms: each read is well within the idle timeout; the server answers
    // while the client is still sending, long before the body could be complete.
    c.stream.tcp().set_read_timeout(Some(Duration::from_millis(1))).expect("timeout");
    let mut sent = 0;
    let mut peek = [0u8; 1];
    while sent < 999 {
        if c.stream.write_all(b"x").is_err() || c.stream.tcp().peek(&mut peek).is_ok() {
            break;
        }
        sent += 1;
        sleep(Duration::from_millis(20));
    }
    assert!(sent < 999, "the server waited for the whole dripped body");
    c.stream.tcp().set_read_timeout(None).expect("timeout");
    let r = c.response(false);
    assert_eq!(r.status, 408);
    assert!(r.closes());
    c.assert_closed();
    assert_eq!(server.outcome().close, CloseReason::Body(reel_http::BodyError::Timeout));
}

/// A handler that answers without reading the body (a cache hit, an origin that did not
/// wait for it) leaves the codec to read the rest; when that stalls the client gets the
/// same 408 as when the handler reads it, not a silent close.
#[test]
fn a_stalled_body_the_handler_did_not_read_gets_408_and_close() {
    let server = Server::with_limits(short_timeouts());
    let mut c = server.connect();
    c.send(b"POST /hello HTTP/1.1\r\nHost: t\r\nContent-Length: 10\r\n\r\nabc");
    let r = c.response(false);
    assert_eq!(r.status, 408);
    assert!(r.closes());
    c.assert_closed();
    assert_eq!(server.outcome().close, CloseReason::Body(reel_http::BodyError::Timeout));
}
