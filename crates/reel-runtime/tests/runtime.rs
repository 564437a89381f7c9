//! Worker runtime behaviour with real threads, loopback sockets and /proc.

use std::future::Future;
use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream as StdStream};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use reel_runtime::{
    ListenerSpec, Runtime, RuntimeError, RuntimeOptions, Steer, WorkerApp, WorkerCtx, start,
};
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
    ) -> impl Future<Output = ()> {
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

/// Reports a test that cannot run on this machine as `SKIPPED <test>: <why>` straight to
/// standard error: the harness captures `eprintln!` of passing tests, this line it does not,
/// and `.ci/run` counts them.
fn skip(why: &str) {
    use std::io::Write as _;
    let test = std::thread::current().name().unwrap_or("?").to_owned();
    let _ = std::io::stderr().write_all(format!("SKIPPED {test}: {why}\n").as_bytes());
}

fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let end = Instant::now() + IO_TIMEOUT;
    while !cond() {
        assert!(Instant::now() < end, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
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
    async fn on_conn(
        &self,
        mut stream: TcpStream,
        _peer: SocketAddr,
        _listener: &str,
        _drain: watch::Receiver<bool>,
    ) {
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

#[test]
fn connection_cap_pauses_accepting_until_one_closes() {
    let cpu = worker_cpus()[0];
    let rt = start(
        &[cpu],
        vec![spec("http", "127.0.0.1:0")],
        RuntimeOptions { max_connections_per_worker: 2, ..Default::default() },
        |_: &WorkerCtx| Hold,
    )
    .unwrap();
    let addr = rt.local_addr("http").unwrap();
    let mut conns: Vec<StdStream> = (0..2).map(|_| connect(addr)).collect();
    for c in &mut conns {
        assert!(greeted(c, IO_TIMEOUT));
    }
    // These complete the handshake in the kernel backlog but are not accepted.
    let mut waiting: Vec<StdStream> = (0..2).map(|_| connect(addr)).collect();
    for w in &mut waiting {
        assert!(!greeted(w, Duration::from_millis(300)));
    }
    let stats = rt.stats()[0].clone();
    assert_eq!(stats.open.load(Ordering::Relaxed), 2);
    assert_eq!(stats.accepted.load(Ordering::Relaxed), 2);
    assert!(stats.cap_pauses.load(Ordering::Relaxed) >= 1);

    drop(conns.remove(0));
    assert!(greeted(&mut waiting[0], IO_TIMEOUT));
    assert!(!greeted(&mut waiting[1], Duration::from_millis(300)));
    assert_eq!(stats.accepted.load(Ordering::Relaxed), 3);
    assert_eq!(stats.open.load(Ordering::Relaxed), 2);

    drop(conns);
    assert!(greeted(&mut waiting[1], IO_TIMEOUT));
    drop(waiting);
    let report = rt.shutdown(Duration::from_secs(10));
    assert_eq!(report.dropped_connections, 0);
}

#[test]
fn connection_cap_holds_across_listeners() {
    let cpu = worker_cpus()[0];
    let rt = start(
        &[cpu],
        vec![spec("a", "127.0.0.1:0"), spec("b", "127.0.0.1:0")],
        RuntimeOptions { max_connections_per_worker: 1, ..Default::default() },
        |_: &WorkerCtx| Hold,
    )
    .unwrap();
    let a = rt.local_addr("a").unwrap();
    let b = rt.local_addr("b").unwrap();
    let mut first = connect(a);
    assert!(greeted(&mut first, IO_TIMEOUT));
    let mut on_b = connect(b);
    let mut on_a = connect(a);
    assert!(!greeted(&mut on_b, Duration::from_millis(300)));
    assert!(!greeted(&mut on_a, Duration::from_millis(300)));
    assert_eq!(rt.stats()[0].open.load(Ordering::Relaxed), 1);
    drop(first);
    // Exactly one of the two waiting connections is taken next.
    let end = Instant::now() + IO_TIMEOUT;
    let mut served = None;
    while served.is_none() {
        assert!(Instant::now() < end, "no waiting connection was served");
        if greeted(&mut on_a, Duration::from_millis(50)) {
            served = Some(true);
        } else if greeted(&mut on_b, Duration::from_millis(50)) {
            served = Some(false);
        }
    }
    let other = if served == Some(true) { &mut on_b } else { &mut on_a };
    assert!(!greeted(other, Duration::from_millis(300)));
    assert_eq!(rt.stats()[0].accepted.load(Ordering::Relaxed), 2);
    drop((on_a, on_b));
    assert_eq!(rt.shutdown(Duration::from_secs(10)).dropped_connections, 0);
}

#[test]
fn the_connection_cap_changes_live() {
    let cpu = worker_cpus()[0];
    let rt = start(
        &[cpu],
        vec![spec("http", "127.0.0.1:0")],
        RuntimeOptions { max_connections_per_worker: 1, ..Default::default() },
        |_: &WorkerCtx| Hold,
    )
    .unwrap();
    let addr = rt.local_addr("http").unwrap();
    let mut first = connect(addr);
    assert!(greeted(&mut first, IO_TIMEOUT));
    let mut second = connect(addr);
    assert!(!greeted(&mut second, Duration::from_millis(300)), "paused at the cap of 1");

    // Raising the cap wakes the paused worker without any connection closing.
    rt.set_max_connections_per_worker(2).unwrap();
    assert!(greeted(&mut second, IO_TIMEOUT));
    let mut third = connect(addr);
    assert!(!greeted(&mut third, Duration::from_millis(300)), "paused at the cap of 2");

    // Lowering it keeps the open connections; the worker accepts again once below it.
    rt.set_max_connections_per_worker(1).unwrap();
    drop(first);
    assert!(!greeted(&mut third, Duration::from_millis(300)), "one open, cap 1");
    drop(second);
    assert!(greeted(&mut third, IO_TIMEOUT));

    assert!(matches!(rt.set_max_connections_per_worker(0), Err(RuntimeError::InvalidOptions(_))));
    drop(third);
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
    async fn on_conn(
        &self,
        _stream: TcpStream,
        _peer: SocketAddr,
        _listener: &str,
        _drain: watch::Receiver<bool>,
    ) {
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
    ) -> impl Future<Output = ()> {
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
    async fn on_conn(
        &self,
        _stream: TcpStream,
        _peer: SocketAddr,
        _listener: &str,
        _drain: watch::Receiver<bool>,
    ) {
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
