//! Idle keep-alive connections parked without a task (the workers' idle lot): a plain
//! connection that waits `http.park_after` (1 s) for its next request leaves its task, is
//! counted in `reel_connections_parked`, and is served as before when it speaks again; a
//! parked connection still closes at its idle timeout, when its client closes, and at once
//! when the node drains (a request already on its way in is answered first); `"0s"` turns
//! parking off, and a reload turns it on for new connections.

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use crate::common::*;

/// Connections parked, summed over the workers.
fn parked(reel: &Reel) -> f64 {
    let m = reel.metrics();
    (0..64).filter_map(|w| metric(&m, &format!("reel_connections_parked{{worker=\"{w}\"}}"))).sum()
}

/// Waits until exactly `n` connections are parked.
fn wait_parked(reel: &Reel, n: f64) {
    eventually(&format!("{n} parked connections"), || (parked(reel) == n).then_some(()));
}

fn segment_origin() -> Origin {
    let o = Origin::start("o");
    o.put_default(Object::ok(vec![5u8; 20_000]).header("cache-control", "max-age=600"));
    o
}

#[test]
fn idle_connections_park_and_are_served_again_when_they_speak() {
    let dir = tempfile::tempdir().unwrap();
    let o = segment_origin();
    let reel = Reel::start(&Conf::new(dir.path(), &o));
    let mut conns: Vec<Conn> = (0..20).map(|_| Conn::open(reel.data).unwrap()).collect();
    for (i, c) in conns.iter_mut().enumerate() {
        let r = c.get("127.0.0.1", &format!("/v/{}.ts", i % 4)).unwrap();
        assert_eq!((r.status, r.body.len()), (200, 20_000));
    }
    wait_parked(&reel, 20.0);
    // Each speaks again on its own connection: answered, kept alive, parked again.
    for round in 0..2 {
        for (i, c) in conns.iter_mut().enumerate() {
            let r = c.get("127.0.0.1", &format!("/v/{}.ts", i % 4)).unwrap();
            assert_eq!((r.status, r.body.len()), (200, 20_000), "round {round}");
            assert!(r.cache_status().contains("hit"), "{}", r.cache_status());
            assert!(r.header("connection").is_none_or(|v| !v.contains("close")));
        }
        wait_parked(&reel, 20.0);
    }
    // A pipelined pair sent to a parked connection: both answered, in order.
    let c = &mut conns[0];
    c.w.write_all(b"GET /v/1.ts HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\nGET /healthz HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n")
        .unwrap();
    let a = c.read_response().unwrap();
    let b = c.read_response().unwrap();
    assert_eq!((a.status, a.body.len(), b.status), (200, 20_000, 200));
    // Clients that close while parked leave the lot (and the open count).
    drop(conns);
    wait_parked(&reel, 0.0);
    // Woken by the close, each ends in a task of its own a moment later.
    eventually("no open connection", || {
        let m = reel.metrics();
        let open: f64 = (0..64)
            .filter_map(|w| metric(&m, &format!("reel_connections_open{{worker=\"{w}\"}}")))
            .sum();
        (open == 0.0).then_some(())
    });
    assert_eq!(o.hits("/v/1.ts"), 1);
}

#[test]
fn a_parked_connection_closes_at_its_idle_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let o = segment_origin();
    let mut conf = Conf::new(dir.path(), &o);
    conf.http = "idle_timeout = \"4s\"\n".into();
    let reel = Reel::start(&conf);
    let mut c = Conn::open(reel.data).unwrap();
    let sent = Instant::now();
    assert_eq!(c.get("127.0.0.1", "/t.ts").unwrap().status, 200);
    wait_parked(&reel, 1.0);
    // Closed silently once the idle timeout passes, not before it (it was parked at 1 s).
    let mut b = [0u8; 1];
    assert_eq!(c.r.read(&mut b).unwrap(), 0, "closed, nothing sent");
    let waited = sent.elapsed();
    assert!(waited >= Duration::from_secs(4), "closed after {waited:?}, before the idle timeout");
    wait_parked(&reel, 0.0);
}

#[test]
fn drain_closes_parked_connections_at_once_and_answers_a_request_on_its_way_in() {
    let dir = tempfile::tempdir().unwrap();
    let o = segment_origin();
    let mut conf = Conf::new(dir.path(), &o);
    conf.shutdown_timeout = "60s".into();
    let mut reel = Reel::start(&conf);
    let mut conns: Vec<Conn> = (0..10).map(|_| Conn::open(reel.data).unwrap()).collect();
    for c in &mut conns {
        assert_eq!(c.get("127.0.0.1", "/d.ts").unwrap().status, 200);
    }
    wait_parked(&reel, 10.0);
    // One parked client sends a request as the drain starts.
    let mut speaker = conns.pop().unwrap();
    speaker.w.write_all(b"GET /d.ts HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n").unwrap();
    let asked = Instant::now();
    reel.signal(libc::SIGTERM);
    let r = speaker.read_response().unwrap();
    assert_eq!((r.status, r.body.len()), (200, 20_000));
    // The idle ones are closed without waiting for the shutdown timeout.
    for c in &mut conns {
        let mut b = [0u8; 1];
        match c.r.read(&mut b) {
            Ok(0) => {}
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
            other => panic!("an idle connection was not closed: {other:?}"),
        }
    }
    assert!(reel.wait_exit().success());
    assert!(asked.elapsed() < Duration::from_secs(60), "waited for the shutdown timeout");
}

#[test]
fn park_after_zero_never_parks_and_a_reload_turns_parking_on_for_new_connections() {
    let dir = tempfile::tempdir().unwrap();
    let o = segment_origin();
    let mut conf = Conf::new(dir.path(), &o);
    conf.http = "park_after = \"0s\"\n".into();
    let mut reel = Reel::start(&conf);
    let mut before = Conn::open(reel.data).unwrap();
    assert_eq!(before.get("127.0.0.1", "/p.ts").unwrap().status, 200);
    // Well past the default park delay: still in its task.
    std::thread::sleep(Duration::from_millis(2500));
    assert_eq!(parked(&reel), 0.0);

    conf.http = "park_after = \"1s\"\n".into();
    reel.rewrite(&conf);
    let st = reel.sighup_reload();
    assert_eq!(st["reload"]["last_ok"], true, "{st}");
    let mut after = Conn::open(reel.data).unwrap();
    assert_eq!(after.get("127.0.0.1", "/p.ts").unwrap().status, 200);
    wait_parked(&reel, 1.0);
    // The one accepted before the reload keeps its settings, and both are served.
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(parked(&reel), 1.0);
    assert_eq!(before.get("127.0.0.1", "/p.ts").unwrap().status, 200);
    assert_eq!(after.get("127.0.0.1", "/p.ts").unwrap().status, 200);
}
