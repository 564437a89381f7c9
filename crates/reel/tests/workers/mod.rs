//! reel's promises to origins hold per process, not per worker: one origin request per
//! object however many viewers miss it, whatever worker each viewer's connection landed
//! on. Each test runs the real binary with 1, 2 and 4 workers (`REEL_TEST_WORKERS`: 4 on a
//! 2-CPU machine too, unpinned), spreads its viewers over many connections, checks with
//! `/status` `workers[].requests` that more than one worker answered them, and counts what
//! the origin was asked.

use std::net::SocketAddr;
use std::sync::{Arc, Barrier};

use serde_json::Value;

use crate::common::*;

mod coalescing;
mod disks;
mod llhls;
mod refresh;
mod slices;
mod timeouts;

/// The worker counts every guarantee is checked at.
const WORKERS: [usize; 3] = [1, 2, 4];

/// Starts `reel serve` on `conf` with `n` workers.
pub(crate) fn start_n(conf: &Conf, n: usize) -> Reel {
    let reel = Reel::start_env(conf, &[("REEL_TEST_WORKERS", &n.to_string())]);
    assert_eq!(reel.workers(), n, "{n} workers asked for");
    reel
}

/// Requests answered so far, per worker.
pub(crate) fn per_worker(reel: &Reel) -> Vec<u64> {
    let st = reel.status();
    st["workers"]
        .as_array()
        .map(|w| w.iter().map(|w| w["requests"].as_u64().unwrap_or(0)).collect())
        .unwrap_or_default()
}

/// Checks that with more than one worker, more than one answered since `before`.
pub(crate) fn assert_spread(reel: &Reel, before: &[u64], what: &str) {
    let after = per_worker(reel);
    if after.len() < 2 {
        return;
    }
    let served =
        after.iter().zip(before.iter().chain(std::iter::repeat(&0))).filter(|(a, b)| a > b);
    assert!(
        served.count() > 1,
        "{what}: one worker answered every request: {before:?} -> {after:?}"
    );
}

/// One request of a burst: the listener, the target and extra header fields.
#[derive(Clone)]
struct Ask {
    addr: SocketAddr,
    target: String,
    headers: Vec<(String, String)>,
}

impl Ask {
    fn get(addr: SocketAddr, target: &str) -> Ask {
        Ask { addr, target: target.to_string(), headers: Vec::new() }
    }

    fn with(mut self, name: &str, value: &str) -> Ask {
        self.headers.push((name.to_string(), value.to_string()));
        self
    }
}

/// Sends every request of `asks` at once, each on a connection of its own (a thread
/// each, released together), `Host` naming the listener it goes to.
fn burst(asks: Vec<Ask>) -> Vec<Resp> {
    burst_bg(asks).join().expect("burst")
}

/// [`burst`] in the background: the answers come with the handle's `join`.
fn burst_bg(asks: Vec<Ask>) -> std::thread::JoinHandle<Vec<Resp>> {
    std::thread::spawn(move || burst_now(asks))
}

fn burst_now(asks: Vec<Ask>) -> Vec<Resp> {
    let go = Arc::new(Barrier::new(asks.len()));
    let handles: Vec<_> = asks
        .into_iter()
        .map(|a| {
            let go = go.clone();
            std::thread::spawn(move || {
                let mut c = Conn::open(a.addr).expect("connect");
                let host = format!("127.0.0.1:{}", a.addr.port());
                let h: Vec<(&str, &str)> =
                    a.headers.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
                go.wait();
                c.request("GET", &host, &a.target, &h)
                    .unwrap_or_else(|e| panic!("GET {} on {}: {e}", a.target, a.addr))
            })
        })
        .collect();
    handles.into_iter().map(|h| h.join().expect("request thread")).collect()
}

/// The value of one sample of `/metrics`, 0 when absent.
fn sample(reel: &Reel, name_and_labels: &str) -> f64 {
    metric(&reel.metrics(), name_and_labels).unwrap_or(0.0)
}

/// The viewers waiting on another request's origin fetch right now, all workers together.
pub(crate) fn waiters(reel: &Reel) -> f64 {
    sample(reel, "reel_coalesced_waiters")
}

/// `GET` of a JSON document from `addr` (an origin's counters).
fn json_at(addr: SocketAddr, target: &str) -> Value {
    get(addr, target).json()
}
