//! Workers serve: pinned threads sharing one port, a worker that fails to start, the
//! app's per-worker background task.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::time::Duration;

use reel_runtime::{Runtime, RuntimeError, RuntimeOptions, WorkerApp, WorkerCtx, start};
use tokio::net::TcpStream;
use tokio::sync::watch;

use crate::support::{
    Echo, connect, echo_factory, listening_sockets, roundtrip, spec, total_accepted, wait_until,
    worker_cpus,
};

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
fn handles_are_shareable_across_threads() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<Runtime>();
    send_sync::<reel_runtime::ShutdownHandle>();
    send_sync::<reel_runtime::WorkerStats>();
}
