//! Connection limits at accept: per worker, per client address and for the process,
//! changed live, and how a refused connection is answered or closed.

use std::future::Future;
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream as StdStream};
use std::sync::atomic::Ordering;
use std::time::Duration;

use reel_runtime::{Refusal, Runtime, RuntimeError, RuntimeOptions, WorkerApp, WorkerCtx, start};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::watch;

use crate::support::{IO_TIMEOUT, connect, echo_factory, roundtrip, spec, wait_until, worker_cpus};

/// Greets each connection and holds it until the client closes.
struct Hold;

impl WorkerApp for Hold {
    // Not an `async fn`: its future would borrow `self` and the listener name, and the
    // trait asks for a `'static` one.
    #[allow(clippy::manual_async_fn)]
    fn on_conn(
        &self,
        mut stream: TcpStream,
        _peer: SocketAddr,
        _listener: &str,
        _drain: watch::Receiver<bool>,
    ) -> impl Future<Output = impl Into<reel_runtime::ConnEnd>> + 'static {
        async move {
            if stream.write_all(b"hi\n").await.is_err() {
                return;
            }
            let mut buf = [0u8; 64];
            while let Ok(n) = stream.read(&mut buf).await {
                if n == 0 {
                    return;
                }
            }
        }
    }

    async fn on_refused(
        &self,
        mut stream: TcpStream,
        _peer: SocketAddr,
        _listener: &str,
        why: Refusal,
    ) {
        let _ = stream.write_all(format!("no:{}\n", why.as_str()).as_bytes()).await;
    }
}

fn greeted(s: &mut StdStream, within: Duration) -> bool {
    s.set_read_timeout(Some(within)).unwrap();
    let mut buf = [0u8; 3];
    match s.read_exact(&mut buf) {
        Ok(()) => {
            assert_eq!(&buf, b"hi\n");
            true
        }
        Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => false,
        Err(e) => panic!("{e}"),
    }
}

/// What a refused connection reads: `no:<why>` and then end of file.
fn refused_with(s: &mut StdStream) -> String {
    s.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    text
}

fn hold_with(opts: RuntimeOptions, names: &[&str]) -> Runtime {
    let cpu = worker_cpus()[0];
    let specs = names.iter().map(|n| spec(n, "127.0.0.1:0")).collect();
    start(&[cpu], specs, opts, |_: &WorkerCtx| Hold).unwrap()
}

#[test]
fn a_connection_over_the_worker_cap_is_closed_at_accept() {
    let rt = hold_with(
        RuntimeOptions { max_connections_per_worker: 2, ..Default::default() },
        &["http"],
    );
    let addr = rt.local_addr("http").unwrap();
    let mut conns: Vec<StdStream> = (0..2).map(|_| connect(addr)).collect();
    for c in &mut conns {
        assert!(greeted(c, IO_TIMEOUT));
    }
    // Accepted, answered by on_refused and closed: nothing waits in the backlog.
    for _ in 0..3 {
        assert_eq!(refused_with(&mut connect(addr)), "no:worker\n");
    }
    let stats = rt.stats()[0].clone();
    assert_eq!(stats.open.load(Ordering::Relaxed), 2);
    assert_eq!(stats.accepted.load(Ordering::Relaxed), 5);
    assert_eq!(stats.refused.load(Ordering::Relaxed), 3);
    assert_eq!(rt.open_connections(), 2);

    drop(conns.remove(0));
    wait_until("the close to be seen", || rt.open_connections() == 1);
    let mut again = connect(addr);
    assert!(greeted(&mut again, IO_TIMEOUT));
    drop((conns, again));
    let report = rt.shutdown(Duration::from_secs(10));
    assert_eq!(report.dropped_connections, 0);
}

#[test]
fn connection_cap_holds_across_listeners() {
    let rt = hold_with(
        RuntimeOptions { max_connections_per_worker: 1, ..Default::default() },
        &["a", "b"],
    );
    let a = rt.local_addr("a").unwrap();
    let b = rt.local_addr("b").unwrap();
    let mut first = connect(a);
    assert!(greeted(&mut first, IO_TIMEOUT));
    assert_eq!(refused_with(&mut connect(b)), "no:worker\n");
    assert_eq!(refused_with(&mut connect(a)), "no:worker\n");
    assert_eq!(rt.stats()[0].open.load(Ordering::Relaxed), 1);
    drop(first);
    wait_until("the close to be seen", || rt.open_connections() == 0);
    let mut on_b = connect(b);
    assert!(greeted(&mut on_b, IO_TIMEOUT));
    drop(on_b);
    assert_eq!(rt.shutdown(Duration::from_secs(10)).dropped_connections, 0);
}

#[test]
fn the_connection_limits_change_live() {
    let rt = hold_with(
        RuntimeOptions { max_connections_per_worker: 1, ..Default::default() },
        &["http"],
    );
    let addr = rt.local_addr("http").unwrap();
    let mut first = connect(addr);
    assert!(greeted(&mut first, IO_TIMEOUT));
    assert_eq!(refused_with(&mut connect(addr)), "no:worker\n", "at the cap of 1");

    rt.set_max_connections_per_worker(2).unwrap();
    let mut second = connect(addr);
    assert!(greeted(&mut second, IO_TIMEOUT));
    assert_eq!(refused_with(&mut connect(addr)), "no:worker\n", "at the cap of 2");

    // Lowering it keeps the open connections; new ones are refused until below it.
    rt.set_max_connections_per_worker(1).unwrap();
    drop(first);
    wait_until("the close to be seen", || rt.open_connections() == 1);
    assert_eq!(refused_with(&mut connect(addr)), "no:worker\n", "one open, cap 1");
    drop(second);
    wait_until("the close to be seen", || rt.open_connections() == 0);
    let mut third = connect(addr);
    assert!(greeted(&mut third, IO_TIMEOUT));

    // The per-client and process caps change the same way.
    rt.set_connection_limits(10, 1, 0, 64).unwrap();
    assert_eq!(refused_with(&mut connect(addr)), "no:client\n");
    rt.set_connection_limits(10, 0, 1, 64).unwrap();
    assert_eq!(refused_with(&mut connect(addr)), "no:process\n");
    // With no place to answer refusals, they are closed unanswered.
    rt.set_connection_limits(10, 0, 1, 0).unwrap();
    assert_eq!(refused_with(&mut connect(addr)), "");

    assert!(matches!(rt.set_max_connections_per_worker(0), Err(RuntimeError::InvalidOptions(_))));
    drop(third);
    assert_eq!(rt.shutdown(Duration::from_secs(10)).dropped_connections, 0);
}

/// Connects from `from` (a loopback address other than 127.0.0.1 is another client).
fn connect_from(from: &str, to: SocketAddr) -> StdStream {
    let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    s.bind(&format!("{from}:0").parse::<SocketAddr>().unwrap().into()).unwrap();
    s.connect(&to.into()).unwrap();
    let s: StdStream = s.into();
    s.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    s
}

#[test]
fn per_client_and_process_caps_count_every_worker() {
    let rt = start(
        &worker_cpus(),
        vec![spec("http", "127.0.0.1:0")],
        RuntimeOptions {
            max_connections_per_client: 2,
            max_connections: 3,
            pin: false,
            ..Default::default()
        },
        |_: &WorkerCtx| Hold,
    )
    .unwrap();
    let addr = rt.local_addr("http").unwrap();
    // Two workers: the kernel spreads these, the caps hold over both.
    let mut a: Vec<StdStream> = (0..2).map(|_| connect_from("127.0.0.1", addr)).collect();
    for c in &mut a {
        assert!(greeted(c, IO_TIMEOUT));
    }
    for _ in 0..4 {
        assert_eq!(refused_with(&mut connect_from("127.0.0.1", addr)), "no:client\n");
    }
    let mut b = connect_from("127.0.0.2", addr);
    assert!(greeted(&mut b, IO_TIMEOUT), "another client address has its own count");
    assert_eq!(refused_with(&mut connect_from("127.0.0.3", addr)), "no:process\n");
    drop(a.remove(0));
    wait_until("the close to be seen", || rt.open_connections() == 2);
    let mut c = connect_from("127.0.0.1", addr);
    assert!(greeted(&mut c, IO_TIMEOUT));
    drop((a, b, c));
    assert_eq!(rt.shutdown(Duration::from_secs(10)).dropped_connections, 0);
}

#[test]
fn by_default_a_refused_connection_is_just_closed() {
    let cpu = worker_cpus()[0];
    let rt = start(
        &[cpu],
        vec![spec("http", "127.0.0.1:0")],
        RuntimeOptions { max_connections_per_worker: 1, ..Default::default() },
        echo_factory,
    )
    .unwrap();
    let addr = rt.local_addr("http").unwrap();
    let mut first = connect(addr);
    assert!(roundtrip(&mut first, "1").ends_with(":http:1\n"));
    let mut second = connect(addr);
    let _ = second.write_all(b"2\n");
    let mut buf = Vec::new();
    // End of file (or a reset, when the line arrived after the close): never an echo.
    let r = second.read_to_end(&mut buf);
    assert!(buf.is_empty(), "{r:?} {buf:?}");
    assert_eq!(rt.stats()[0].refused.load(Ordering::Relaxed), 1);
    drop(first);
    assert_eq!(rt.shutdown(Duration::from_secs(10)).dropped_connections, 0);
}
