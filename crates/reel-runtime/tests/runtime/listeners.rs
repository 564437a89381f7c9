//! Listeners: live changes, binding errors, addresses another process holds, and
//! handing the sockets to a successor.

use std::io::ErrorKind;
use std::net::{SocketAddr, TcpStream as StdStream};
use std::time::Duration;

use reel_runtime::{RuntimeError, RuntimeOptions, start};
use reel_test_support::listening_inodes;

use crate::support::{connect, echo_factory, listening_sockets, roundtrip, spec, worker_cpus};

#[test]
fn set_listeners_adds_changes_and_removes() {
    let cpus = worker_cpus();
    let rt = start(&cpus, vec![spec("a", "127.0.0.1:0")], RuntimeOptions::default(), echo_factory)
        .unwrap();
    let a = rt.local_addr("a").unwrap();
    let mut on_a = connect(a);
    assert!(roundtrip(&mut on_a, "1").ends_with(":a:1\n"));

    rt.set_listeners(vec![spec("a", "127.0.0.1:0"), spec("b", "127.0.0.1:0")]).unwrap();
    assert_eq!(rt.local_addr("a").unwrap(), a, "unchanged listener kept");
    let b = rt.local_addr("b").unwrap();
    assert_ne!(a.port(), b.port());
    assert_eq!(listening_sockets(b.port()), 2);
    let mut on_b = connect(b);
    assert!(roundtrip(&mut on_b, "2").ends_with(":b:2\n"));

    // All-or-nothing: a port held by a socket without SO_REUSEPORT cannot be bound.
    let blocker = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let taken = blocker.local_addr().unwrap();
    let err = rt
        .set_listeners(vec![spec("c", "127.0.0.1:0"), spec("d", &taken.to_string())])
        .unwrap_err();
    assert!(matches!(err, RuntimeError::Bind { ref name, .. } if name == "d"), "{err}");
    let names: Vec<String> = rt.listeners().into_iter().map(|l| l.name).collect();
    assert_eq!(names, vec!["a", "b"]);
    assert_eq!(listening_sockets(a.port()), 2);
    assert!(roundtrip(&mut connect(b), "3").ends_with(":b:3\n"));

    // Backlog change keeps the sockets; removal closes "a" but its connection continues.
    let mut b_spec = spec("b", "127.0.0.1:0");
    b_spec.backlog = 64;
    rt.set_listeners(vec![b_spec]).unwrap();
    assert_eq!(rt.local_addr("b").unwrap(), b);
    assert!(rt.local_addr("a").is_none());
    assert_eq!(rt.listeners()[0].backlog, 64);
    assert_eq!(listening_sockets(a.port()), 0);
    assert_eq!(StdStream::connect(a).unwrap_err().kind(), ErrorKind::ConnectionRefused);
    assert!(roundtrip(&mut on_a, "4").ends_with(":a:4\n"));
    assert!(roundtrip(&mut on_b, "5").ends_with(":b:5\n"));
    drop((on_a, on_b));
    let report = rt.shutdown(Duration::from_secs(10));
    assert_eq!(report.dropped_connections, 0);
}

#[test]
fn start_fails_on_address_in_use_and_bad_options() {
    let blocker = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let taken = blocker.local_addr().unwrap().to_string();
    let err =
        start(&worker_cpus(), vec![spec("x", &taken)], RuntimeOptions::default(), echo_factory)
            .unwrap_err();
    assert!(
        matches!(err, RuntimeError::Bind { ref source, .. } if source.kind() == ErrorKind::AddrInUse),
        "{err}"
    );
    assert!(matches!(
        start(&[], vec![], RuntimeOptions::default(), echo_factory),
        Err(RuntimeError::NoWorkers)
    ));
    let zero_cap = RuntimeOptions { max_connections_per_worker: 0, ..Default::default() };
    assert!(matches!(
        start(&[0], vec![], zero_cap, echo_factory),
        Err(RuntimeError::InvalidOptions(_))
    ));
    assert!(matches!(
        start(
            &[0],
            vec![spec("x", "127.0.0.1:0"), spec("x", "127.0.0.1:0")],
            RuntimeOptions::default(),
            echo_factory
        ),
        Err(RuntimeError::DuplicateListener(_))
    ));
}

/// A listening socket with `SO_REUSEPORT`, as another process running reel would hold.
fn reuseport_listener() -> std::net::TcpListener {
    let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    s.set_reuse_port(true).unwrap();
    s.bind(&"127.0.0.1:0".parse::<SocketAddr>().unwrap().into()).unwrap();
    s.listen(16).unwrap();
    s.into()
}

#[test]
fn an_address_another_process_listens_on_is_refused_even_with_reuseport() {
    let other = reuseport_listener();
    let taken = other.local_addr().unwrap();
    let err = start(
        &worker_cpus(),
        vec![spec("http", &taken.to_string())],
        RuntimeOptions::default(),
        echo_factory,
    )
    .unwrap_err();
    assert!(
        matches!(err, RuntimeError::Bind { ref source, .. } if source.kind() == ErrorKind::AddrInUse),
        "{err}"
    );
    assert!(err.to_string().contains("another process already listens"), "{err}");
    // A live listener change to that address is refused the same way.
    let rt = start(
        &worker_cpus(),
        vec![spec("a", "127.0.0.1:0")],
        RuntimeOptions::default(),
        echo_factory,
    )
    .unwrap();
    let e = rt.set_listeners(vec![spec("a", &taken.to_string())]).unwrap_err();
    assert!(
        matches!(e, RuntimeError::Bind { ref source, .. } if source.kind() == ErrorKind::AddrInUse)
    );
    // Renaming a listener keeps its address: that is our own group, not another process.
    let a = rt.local_addr("a").unwrap();
    rt.set_listeners(vec![spec("renamed", &a.to_string())]).unwrap();
    assert_eq!(rt.local_addr("renamed"), Some(a));
    drop(other);
    rt.shutdown(Duration::from_secs(10));
}

#[test]
fn exported_sockets_start_a_successor_on_the_same_sockets() {
    let first = start(
        &worker_cpus(),
        vec![spec("http", "127.0.0.1:0")],
        RuntimeOptions { pin: false, ..Default::default() },
        echo_factory,
    )
    .unwrap();
    let addr = first.local_addr("http").unwrap();
    let before = listening_inodes(addr.port());
    assert_eq!(before.len(), 2);
    let mut kept = connect(addr);
    assert!(roundtrip(&mut kept, "old").ends_with(":http:old\n"));

    let exported = first.export_listeners().unwrap();
    assert_eq!(exported.len(), 2);
    let mut inherited = reel_runtime::Inherited::new();
    for (name, fd) in exported {
        inherited.entry(name).or_default().push(std::net::TcpListener::from(fd));
    }
    // The successor has one worker: it takes both sockets, so none is left untaken.
    let second = reel_runtime::start_with(
        &worker_cpus()[..1],
        vec![spec("http", "127.0.0.1:0"), spec("new", "127.0.0.1:0")],
        inherited,
        RuntimeOptions { pin: false, ..Default::default() },
        echo_factory,
    )
    .unwrap();
    assert_eq!(second.local_addr("http"), Some(addr), "port 0 in the spec: the inherited port");
    // The first stops accepting; its open connection is unaffected.
    first.set_listeners(vec![]).unwrap();
    assert_eq!(listening_inodes(addr.port()), before, "the very same sockets");
    for i in 0..20 {
        let mut c = connect(addr);
        assert!(roundtrip(&mut c, &i.to_string()).starts_with("0:http:"));
    }
    assert!(roundtrip(&mut kept, "still").ends_with(":http:still\n"));
    drop(kept);
    first.shutdown(Duration::from_secs(10));
    assert_eq!(listening_inodes(addr.port()), before);
    second.shutdown(Duration::from_secs(10));
    assert!(listening_inodes(addr.port()).is_empty());
}
