//! Worker runtime behaviour with real threads, loopback sockets and /proc.

use std::future::Future;
use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream as StdStream};
use std::sync::atomic::Ordering;
use std::time::Duration;

use reel_runtime::{
    ListenerSpec, Refusal, Runtime, RuntimeError, RuntimeOptions, Steer, WorkerApp, WorkerCtx,
    start,
};
use reel_test_support::{listening_inodes, skip, wait_until};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::watch;

const IO_TIMEOUT: Duration = Duration::from_secs(20);

fn spec(name: &str, addr: &str) -> ListenerSpec {
    ListenerSpec { name: name.into(), addr: addr.parse().unwrap(), backlog: 128 }
}

/// Echoes each read back prefixed with `<worker>:<listener>:`; returns when drained while idle.
struct Echo {
    index: usize,
}

impl WorkerApp for Echo {
    fn on_conn(
        &self,
        mut stream: TcpStream,
        _peer: SocketAddr,
        listener: &str,
        mut drain: watch::Receiver<bool>,
    ) -> impl Future<Output = impl Into<reel_runtime::ConnEnd>> + 'static {
        let prefix = format!("{}:{}:", self.index, listener);
        async move {
            let mut buf = [0u8; 1024];
            loop {
                tokio::select! {
                    r = stream.read(&mut buf) => match r {
                        Ok(0) | Err(_) => return,
                        Ok(n) => {
                            let mut out = prefix.clone().into_bytes();
                            out.extend_from_slice(&buf[..n]);
                            if stream.write_all(&out).await.is_err() {
                                return;
                            }
                        }
                    },
                    _ = drain.wait_for(|d| *d) => return,
                }
            }
        }
    }
}

fn echo_factory(ctx: &WorkerCtx) -> Echo {
    Echo { index: ctx.index }
}

fn connect(addr: SocketAddr) -> StdStream {
    let s = StdStream::connect(addr).unwrap();
    s.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    s
}

/// Sends one line and returns the echoed line.
fn roundtrip(s: &mut StdStream, msg: &str) -> String {
    s.write_all(format!("{msg}\n").as_bytes()).unwrap();
    let mut line = String::new();
    BufReader::new(s.try_clone().unwrap()).read_line(&mut line).unwrap();
    line
}

fn worker_cpus() -> Vec<usize> {
    let allowed = reel_runtime::plan::allowed_cpus().unwrap();
    if allowed.len() >= 2 {
        allowed[..2].to_vec()
    } else {
        // Two workers on one CPU still exercise two reuseport sockets.
        vec![allowed[0], allowed[0]]
    }
}

/// Listening sockets on 127.0.0.1:`port` according to /proc/net/tcp.
fn listening_sockets(port: u16) -> usize {
    let want = format!("0100007F:{port:04X}");
    std::fs::read_to_string("/proc/net/tcp")
        .unwrap()
        .lines()
        .skip(1)
        .filter(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            f.len() > 3 && f[1] == want && f[3] == "0A"
        })
        .count()
}

fn total_accepted(rt: &Runtime) -> u64 {
    rt.stats().iter().map(|s| s.accepted.load(Ordering::Relaxed)).sum()
}

#[test]
fn two_pinned_workers_share_one_port_and_serve_many_connections() {
    let cpus = worker_cpus();
    let rt =
        start(&cpus, vec![spec("http", "127.0.0.1:0")], RuntimeOptions::default(), echo_factory)
            .unwrap();
    let addr = rt.local_addr("http").unwrap();
    assert_ne!(addr.port(), 0);
    // One address, and behind it one socket per worker.
    assert_eq!(listening_sockets(addr.port()), 2);

    let tids = rt.worker_tids();
    assert_eq!(tids.len(), 2);
    for (i, (index, cpu, tid)) in tids.iter().enumerate() {
        assert_eq!(*index, i);
        assert_eq!(*cpu, cpus[i]);
        assert!(*tid > 0);
        let status = std::fs::read_to_string(format!("/proc/self/task/{tid}/status")).unwrap();
        let name = std::fs::read_to_string(format!("/proc/self/task/{tid}/comm")).unwrap();
        assert_eq!(name.trim(), format!("reel-w{i}"));
        if rt.stats()[i].pinned.load(Ordering::Relaxed) {
            let allowed =
                status.lines().find_map(|l| l.strip_prefix("Cpus_allowed_list:")).unwrap().trim();
            assert_eq!(allowed, cpu.to_string());
        }
    }

    let clients: Vec<_> = (0..4)
        .map(|t| {
            std::thread::spawn(move || {
                for i in 0..50 {
                    let mut s = connect(addr);
                    let msg = format!("c{t}-{i}");
                    let line = roundtrip(&mut s, &msg);
                    assert!(line.ends_with(&format!(":http:{msg}\n")), "{line}");
                }
            })
        })
        .collect();
    for c in clients {
        c.join().unwrap();
    }
    assert_eq!(total_accepted(&rt), 200);
    wait_until("connections to close", || {
        rt.stats().iter().all(|s| s.open.load(Ordering::Relaxed) == 0)
    });
    let report = rt.shutdown(Duration::from_secs(10));
    assert_eq!(report.dropped_connections, 0);
    assert_eq!(report.panicked_workers, 0);
    assert_eq!(listening_sockets(addr.port()), 0);
}

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

#[test]
fn a_worker_that_dies_at_startup_is_named() {
    let cpus = worker_cpus();
    let err = start(&cpus, vec![spec("http", "127.0.0.1:0")], RuntimeOptions::default(), |ctx| {
        assert!(ctx.index != 1, "worker 1 cannot start");
        Echo { index: ctx.index }
    })
    .unwrap_err();
    match err {
        RuntimeError::Worker { index, ref message } => {
            assert_eq!(index, 1, "{err}");
            assert!(message.contains("worker 1 cannot start"), "{err}");
        }
        e => panic!("unexpected error: {e}"),
    }
}

/// Panics when the worker drops it, after serving: a worker thread that dies at exit.
struct PanicsOnDrop;

impl WorkerApp for PanicsOnDrop {
    fn on_conn(
        &self,
        _stream: TcpStream,
        _peer: SocketAddr,
        _listener: &str,
        _drain: watch::Receiver<bool>,
    ) -> impl Future<Output = impl Into<reel_runtime::ConnEnd>> + 'static {
        std::future::ready(())
    }
}

impl Drop for PanicsOnDrop {
    fn drop(&mut self) {
        panic!("worker state dropped with a broken invariant");
    }
}

#[test]
fn a_panicked_worker_is_counted_in_the_shutdown_report() {
    let rt = start(
        &worker_cpus(),
        vec![spec("http", "127.0.0.1:0")],
        RuntimeOptions::default(),
        |_: &WorkerCtx| PanicsOnDrop,
    )
    .unwrap();
    let report = rt.shutdown(Duration::from_secs(5));
    assert_eq!(report.panicked_workers, 2, "{report:?}");
}

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

/// Reads one request line, takes `delay` to answer, then closes if draining.
struct Slow {
    delay: Option<Duration>,
}

impl WorkerApp for Slow {
    fn on_conn(
        &self,
        stream: TcpStream,
        _peer: SocketAddr,
        _listener: &str,
        drain: watch::Receiver<bool>,
    ) -> impl Future<Output = impl Into<reel_runtime::ConnEnd>> + 'static {
        let delay = self.delay;
        async move {
            let mut stream = tokio::io::BufReader::new(stream);
            loop {
                let mut line = String::new();
                match stream.read_line(&mut line).await {
                    Ok(0) | Err(_) => return,
                    Ok(_) => {}
                }
                match delay {
                    Some(d) => tokio::time::sleep(d).await,
                    None => std::future::pending().await,
                }
                if stream.get_mut().write_all(b"done\n").await.is_err() || *drain.borrow() {
                    return;
                }
            }
        }
    }
}

#[test]
fn graceful_shutdown_waits_for_in_flight_request() {
    let rt = start(
        &worker_cpus(),
        vec![spec("http", "127.0.0.1:0")],
        RuntimeOptions::default(),
        |_: &WorkerCtx| Slow { delay: Some(Duration::from_millis(800)) },
    )
    .unwrap();
    let addr = rt.local_addr("http").unwrap();
    let mut drain = rt.drain_receiver();
    let mut s = connect(addr);
    s.write_all(b"req\n").unwrap();
    wait_until("request accepted", || total_accepted(&rt) == 1);
    let handle = rt.shutdown_handle();
    assert!(!handle.is_draining());
    let shutdown = std::thread::spawn(move || rt.shutdown(Duration::from_secs(30)));
    let mut got = String::new();
    s.read_to_string(&mut got).unwrap();
    assert_eq!(got, "done\n", "in-flight response completed, then closed");
    let report = shutdown.join().unwrap();
    assert_eq!(report.dropped_connections, 0);
    assert!(handle.is_draining());
    assert!(*drain.borrow_and_update());
    assert_eq!(StdStream::connect(addr).unwrap_err().kind(), ErrorKind::ConnectionRefused);
}

#[test]
fn shutdown_deadline_drops_stuck_connection() {
    let rt = start(
        &worker_cpus(),
        vec![spec("http", "127.0.0.1:0")],
        RuntimeOptions::default(),
        |_: &WorkerCtx| Slow { delay: None },
    )
    .unwrap();
    let addr = rt.local_addr("http").unwrap();
    let mut s = connect(addr);
    s.write_all(b"req\n").unwrap();
    wait_until("request accepted", || total_accepted(&rt) == 1);
    // Triggered through the handle, then waited for, as a signal task would.
    rt.shutdown_handle().shutdown(Duration::from_millis(300));
    let report = rt.wait();
    assert_eq!(report.dropped_connections, 1);
    let mut rest = Vec::new();
    match s.read_to_end(&mut rest) {
        Ok(_) => assert!(rest.is_empty()),
        Err(e) => assert_eq!(e.kind(), ErrorKind::ConnectionReset),
    }
}

/// Counts per-worker `run` invocations through the stats of the context.
struct Background;

impl WorkerApp for Background {
    fn on_conn(
        &self,
        _stream: TcpStream,
        _peer: SocketAddr,
        _listener: &str,
        _drain: watch::Receiver<bool>,
    ) -> impl Future<Output = impl Into<reel_runtime::ConnEnd>> + 'static {
        std::future::ready(())
    }

    async fn run(&self, ctx: WorkerCtx, mut drain: watch::Receiver<bool>) {
        // Visible from the test thread: the background task really runs on each worker.
        ctx.stats.accept_errors.fetch_add(1000, Ordering::Relaxed);
        let _ = drain.wait_for(|d| *d).await;
    }
}

#[test]
fn background_task_runs_on_every_worker() {
    let rt = start(&worker_cpus(), vec![], RuntimeOptions::default(), |_: &WorkerCtx| Background)
        .unwrap();
    wait_until("background tasks", || {
        rt.stats().iter().all(|s| s.accept_errors.load(Ordering::Relaxed) == 1000)
    });
    assert_eq!(rt.shutdown(Duration::from_secs(5)).dropped_connections, 0);
}

#[test]
fn cpu_steering_attached_and_accepting() {
    let cpus = worker_cpus();
    let rt = start(
        &cpus,
        vec![spec("http", "127.0.0.1:0"), spec("v6", "[::1]:0")],
        RuntimeOptions { steer: Steer::Cpu, irq_cpus: vec![0], ..Default::default() },
        echo_factory,
    );
    let rt = match rt {
        Ok(rt) => rt,
        // No IPv6 loopback in this environment: steer the IPv4 listener only.
        Err(RuntimeError::Bind { ref name, .. }) if name == "v6" => start(
            &cpus,
            vec![spec("http", "127.0.0.1:0")],
            RuntimeOptions { steer: Steer::Cpu, irq_cpus: vec![0], ..Default::default() },
            echo_factory,
        )
        .unwrap(),
        Err(e) => panic!("{e}"),
    };
    for name in ["http", "v6"] {
        let Some(addr) = rt.local_addr(name) else {
            continue;
        };
        for i in 0..20 {
            let mut s = connect(addr);
            let line = roundtrip(&mut s, &format!("m{i}"));
            assert!(line.ends_with(&format!(":{name}:m{i}\n")), "{line}");
        }
    }
    // Listeners added later get the program too.
    rt.set_listeners(vec![spec("http", "127.0.0.1:0"), spec("late", "127.0.0.1:0")]).unwrap();
    let late = rt.local_addr("late").unwrap();
    assert!(roundtrip(&mut connect(late), "x").ends_with(":late:x\n"));
    drop(rt);
    assert_eq!(listening_sockets(late.port()), 0);
}

#[test]
fn cpu_steering_picks_the_worker_of_the_processing_cpu() {
    let allowed = reel_runtime::plan::allowed_cpus().unwrap();
    if allowed.len() < 2 {
        return skip("needs two allowed CPUs");
    }
    let cpus = allowed[..2].to_vec();
    let rt = start(
        &cpus,
        vec![spec("http", "127.0.0.1:0")],
        RuntimeOptions { steer: Steer::Cpu, ..Default::default() },
        echo_factory,
    )
    .unwrap();
    let addr = rt.local_addr("http").unwrap();
    for (index, &cpu) in cpus.iter().enumerate() {
        // On loopback the SYN is processed by the connecting thread's CPU.
        let pinned = std::thread::spawn(move || {
            if !core_affinity::set_for_current(core_affinity::CoreId { id: cpu }) {
                return None;
            }
            Some(
                (0..10)
                    .map(|i| roundtrip(&mut connect(addr), &format!("s{i}")))
                    .collect::<Vec<_>>(),
            )
        })
        .join()
        .unwrap();
        let Some(lines) = pinned else {
            return skip(&format!("cannot pin a client thread to cpu {cpu}"));
        };
        for line in lines {
            assert!(line.starts_with(&format!("{index}:http:")), "cpu {cpu}: {line}");
        }
    }
    let per_worker: Vec<u64> =
        rt.stats().iter().map(|s| s.accepted.load(Ordering::Relaxed)).collect();
    assert_eq!(per_worker, vec![10, 10]);
}

#[test]
fn handles_are_shareable_across_threads() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<Runtime>();
    send_sync::<reel_runtime::ShutdownHandle>();
    send_sync::<reel_runtime::WorkerStats>();
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
