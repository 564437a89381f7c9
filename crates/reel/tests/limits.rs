//! Connection limits and listener ownership of `reel serve`: at the descriptor limit the
//! health endpoint, hits and the admin listener still answer (descriptors kept in
//! reserve); one client address cannot hold more than its cap; a second reel cannot join
//! a data address the first one listens on; origin connections to one host are bounded
//! (`max_connections`) while hits go on.

use std::net::{SocketAddr, TcpStream};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::*;

/// Connects from `from` (another loopback address is another client).
fn connect_from(from: &str, to: SocketAddr) -> Conn {
    let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    s.bind(&format!("{from}:0").parse::<SocketAddr>().unwrap().into()).unwrap();
    s.connect(&to.into()).unwrap();
    Conn::from_stream(s.into()).unwrap()
}

#[test]
fn at_the_descriptor_limit_health_hits_and_admin_still_answer() {
    let dir = tempfile::tempdir().unwrap();
    let o = Origin::start("o");
    o.put("/seg.ts", Object::ok(vec![7u8; 10_000]));
    let mut conf = Conf::new(dir.path(), &o);
    conf.http = "max_connections_per_client = 0\nreserved_fds = 48\n".into();
    // A small descriptor limit, as a busy edge reaches a large one.
    let wrapper = dir.path().join("limited.sh");
    std::fs::write(&wrapper, format!("#!/bin/sh\nulimit -n 256 || exit 70\nexec {BIN} \"$@\"\n"))
        .unwrap();
    std::fs::set_permissions(&wrapper, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .unwrap();
    let reel = Reel::start_with(&conf, &wrapper, &[]);
    let addr = reel.data;
    let mut kept = Conn::open(addr).unwrap();
    assert_eq!(kept.get("127.0.0.1", "/seg.ts").unwrap().status, 200);

    // Idle connections, more than the process has descriptors for.
    let hoard: Vec<TcpStream> = (0..300).map(|_| TcpStream::connect(addr).unwrap()).collect();
    let m = eventually("connections refused at the budget", || {
        let m = reel.metrics();
        let refused: f64 = (0..8)
            .filter_map(|w| {
                metric(&m, &format!("reel_connections_refused_total{{worker=\"{w}\"}}"))
            })
            .sum();
        (refused > 0.0).then_some(m)
    });
    let open: f64 = (0..8)
        .filter_map(|w| metric(&m, &format!("reel_connections_open{{worker=\"{w}\"}}")))
        .sum();
    assert!(open < 256.0, "client connections stay under the descriptor limit: {open}");

    // A health probe on a new connection gets an answer (the node is full: 503); while
    // the places for answering refusals are taken it is closed at once, never left
    // waiting, and the next probe is answered.
    let h = eventually("an answered probe", || {
        Conn::open(addr).and_then(|mut c| c.get("127.0.0.1", "/healthz")).ok()
    });
    assert_eq!(h.status, 503, "{}", h.text());
    assert_eq!(h.json()["status"], "overloaded");
    assert!(h.text().contains("reserved_fds"), "{}", h.text());
    // The admin listener and an open connection's hit are served.
    assert_eq!(reel.status()["workers"].as_array().map(Vec::len), Some(reel.workers()));
    let r = kept.get("127.0.0.1", "/seg.ts").unwrap();
    assert!(r.cache_status().contains("hit"), "{}", r.cache_status());
    drop(hoard);
    eventually("health back once the hoard is gone", || {
        (get(addr, "/healthz").status == 200).then_some(())
    });
}

#[test]
fn one_client_address_holds_at_most_its_cap() {
    let dir = tempfile::tempdir().unwrap();
    let o = Origin::start("o");
    let mut conf = Conf::new(dir.path(), &o);
    conf.http = "max_connections_per_client = 3\n".into();
    let mut reel = Reel::start(&conf);
    let addr = reel.data;
    let mut held: Vec<Conn> = (0..3).map(|_| connect_from("127.0.0.1", addr)).collect();
    for c in &mut held {
        assert_eq!(c.get("127.0.0.1", "/healthz").unwrap().status, 200);
    }
    let r = connect_from("127.0.0.1", addr).get("127.0.0.1", "/healthz").unwrap();
    assert_eq!((r.status, r.header("connection")), (503, Some("close")));
    assert!(r.text().contains("max_connections_per_client"), "{}", r.text());
    assert_eq!(r.header("retry-after"), Some("1"));
    // Another address has its own count.
    let mut other = connect_from("127.0.0.2", addr);
    assert_eq!(other.get("127.0.0.1", "/healthz").unwrap().status, 200);
    // Closing one makes room again.
    drop(held.pop());
    eventually("the place to come back", || {
        let r = connect_from("127.0.0.1", addr).get("127.0.0.1", "/healthz").ok()?;
        (r.status == 200).then_some(())
    });
    // The cap changes with a reload (0 = none).
    conf.http = "max_connections_per_client = 0\n".into();
    reel.rewrite(&conf);
    assert_eq!(reel.sighup_reload()["reload"]["last_ok"], true);
    let mut more: Vec<Conn> = (0..5).map(|_| connect_from("127.0.0.1", addr)).collect();
    for c in &mut more {
        assert_eq!(c.get("127.0.0.1", "/healthz").unwrap().status, 200);
    }
}

/// Starts a second reel on `conf`, which must refuse to run: its exit status and stderr.
/// One still running after `PATIENCE` is killed and fails the test.
fn run_second(conf: &Conf) -> (std::process::ExitStatus, String) {
    let mut child = Command::new(BIN)
        .args(["serve", "--config"])
        .arg(conf.path())
        .current_dir(&conf.dir)
        .env_remove("NOTIFY_SOCKET")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + PATIENCE;
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the second reel is running beside the first one");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    (status, err)
}

#[test]
fn a_second_reel_on_the_same_data_address_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let o = Origin::start("o");
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut conf = Conf::new(&dir.path().join("a"), &o);
    std::fs::create_dir_all(&conf.dir).unwrap();
    conf.listeners = vec![("http".into(), format!("127.0.0.1:{port}"))];
    let first = Reel::start(&conf);

    // The same config by mistake, in another directory (its own store and admin port 0).
    let mut second = conf.clone();
    second.dir = dir.path().join("b");
    std::fs::create_dir_all(&second.dir).unwrap();
    second.write();
    let (status, err) = run_second(&second);
    assert!(!status.success());
    // Said once, with the config key to change.
    assert_eq!(err.matches("another process already listens").count(), 1, "{err}");
    assert!(err.contains(&format!("listener \"http\" address 127.0.0.1:{port}")), "{err}");
    // The first one serves on, alone.
    assert_eq!(get(first.data, "/healthz").status, 200);
}

/// Issue 26.4: a port held by a socket that does not listen (bound, as a client's local
/// port may be) is in use, but no process listens there: the message says so, and names
/// the listener's key.
#[test]
fn a_port_bound_without_a_listener_is_not_blamed_on_another_listener() {
    let dir = tempfile::tempdir().unwrap();
    let o = Origin::start("o");
    let holder = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    holder.bind(&"127.0.0.1:0".parse::<std::net::SocketAddr>().unwrap().into()).unwrap();
    let port = holder.local_addr().unwrap().as_socket().unwrap().port();
    let mut conf = Conf::new(dir.path(), &o);
    conf.listeners = vec![("http".into(), format!("127.0.0.1:{port}"))];
    conf.write();
    let (status, err) = run_second(&conf);
    assert!(!status.success());
    assert!(!err.contains("another process already listens"), "{err}");
    assert!(err.contains("nothing listens on it"), "{err}");
    assert!(err.contains(&format!("listener \"http\" address 127.0.0.1:{port}")), "{err}");
    drop(holder);
}

#[test]
fn a_second_reel_on_the_same_store_exits_1_naming_the_holder() {
    let dir = tempfile::tempdir().unwrap();
    let o = Origin::start("o");
    let conf = Conf::new(dir.path(), &o);
    let first = Reel::start(&conf);
    // The same store directory by mistake, on other ports (data and admin port 0).
    let second = conf.clone();
    second.write();
    let (status, err) = run_second(&second);
    assert_eq!(status.code(), Some(1), "{err}");
    assert!(err.contains(&format!("in use by another process (pid {})", first.pid())), "{err}");
    // The first one serves on, its store untouched.
    assert_eq!(get(first.data, "/healthz").status, 200);
}

/// Issue 23.3: misses to a slow origin cannot open a connection each. With
/// `max_connections = 3`, ten concurrent distinct misses put three requests on the origin;
/// the others wait `connect_timeout` and get 503, counted as `connection_limit`, the origin
/// stays healthy, and a hit is answered meanwhile.
#[test]
fn origin_connections_to_a_host_are_bounded_and_hits_go_on() {
    let dir = tempfile::tempdir().unwrap();
    let o = Origin::start("o");
    o.put("/hit.ts", Object::ok(vec![1u8; 1000]));
    for i in 0..10 {
        o.put(
            &format!("/slow{i}.ts"),
            Object::ok(vec![2u8; 100]).delay(Duration::from_millis(1500)),
        );
    }
    let mut conf = Conf::new(dir.path(), &o);
    conf.connect_timeout = "300ms".into();
    conf.origin_group = "max_connections = 3\n".into();
    let reel = Reel::start(&conf);
    assert_eq!(get(reel.data, "/hit.ts").status, 200);
    // The store commits a fill just after its last byte leaves; until then a request
    // follows the fill ("collapsed"). Wait for the stored object before busying the origin.
    eventually("/hit.ts stored", || {
        (get(reel.data, "/hit.ts").cache_status() == "reel; hit").then_some(())
    });
    let misses: Vec<_> = (0..10)
        .map(|i| {
            let addr = reel.data;
            std::thread::spawn(move || get(addr, &format!("/slow{i}.ts")).status)
        })
        .collect();
    eventually("three misses at the origin", || {
        let n: u64 = (0..10).map(|i| o.hits(&format!("/slow{i}.ts"))).sum();
        (n == 3).then_some(())
    });
    let hit = get(reel.data, "/hit.ts");
    assert_eq!(hit.status, 200);
    assert_eq!(hit.cache_status(), "reel; hit");
    let mut statuses: Vec<u16> = misses.into_iter().map(|t| t.join().unwrap()).collect();
    statuses.sort_unstable();
    assert_eq!(statuses, [200, 200, 200, 503, 503, 503, 503, 503, 503, 503]);
    let n: u64 = (0..10).map(|i| o.hits(&format!("/slow{i}.ts"))).sum();
    assert_eq!(n, 3, "no request beyond the bound reached the origin");
    let m = reel.metrics();
    let addr = o.addr.to_string();
    let kind = format!(
        "reel_origin_errors_total{{group=\"o\",host=\"{addr}\",kind=\"connection_limit\"}}"
    );
    assert_eq!(metric(&m, &kind), Some(7.0));
    assert_eq!(
        metric(&m, &format!("reel_origin_healthy{{group=\"o\",host=\"{addr}\"}}")),
        Some(1.0)
    );
}
