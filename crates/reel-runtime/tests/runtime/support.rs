//! What the runtime tests share: listener specs, an echoing app, client helpers and
//! what `/proc` says about the listening sockets.

use std::future::Future;
use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream as StdStream};
use std::sync::atomic::Ordering;
use std::time::Duration;

use reel_runtime::{ListenerSpec, Runtime, WorkerApp, WorkerCtx};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::watch;

pub(crate) const IO_TIMEOUT: Duration = Duration::from_secs(20);

pub(crate) fn spec(name: &str, addr: &str) -> ListenerSpec {
    ListenerSpec {
        name: name.into(),
        addr: addr.parse().unwrap(),
        backlog: 128,
        proxy_protocol: false,
        udp_twin: false,
    }
}

/// Echoes each read back prefixed with `<worker>:<listener>:`; returns when drained while idle.
pub(crate) struct Echo {
    pub(crate) index: usize,
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

pub(crate) fn echo_factory(ctx: &WorkerCtx) -> Echo {
    Echo { index: ctx.index }
}

pub(crate) fn connect(addr: SocketAddr) -> StdStream {
    let s = StdStream::connect(addr).unwrap();
    s.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    s
}

/// Sends one line and returns the echoed line.
pub(crate) fn roundtrip(s: &mut StdStream, msg: &str) -> String {
    s.write_all(format!("{msg}\n").as_bytes()).unwrap();
    let mut line = String::new();
    BufReader::new(s.try_clone().unwrap()).read_line(&mut line).unwrap();
    line
}

pub(crate) use reel_test_support::{skip, wait_until};

pub(crate) fn worker_cpus() -> Vec<usize> {
    let allowed = reel_runtime::core_plan::allowed_cpus().unwrap();
    if allowed.len() >= 2 {
        allowed[..2].to_vec()
    } else {
        // Two workers on one CPU still exercise two reuseport sockets.
        vec![allowed[0], allowed[0]]
    }
}

/// Listening sockets on 127.0.0.1:`port` according to /proc/net/tcp.
pub(crate) fn listening_sockets(port: u16) -> usize {
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

pub(crate) fn total_accepted(rt: &Runtime) -> u64 {
    rt.stats().iter().map(|s| s.accepted.load(Ordering::Relaxed)).sum()
}
