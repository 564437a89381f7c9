//! End-to-end tests of the cache path: a real store in a tempdir, real origin groups
//! pointing at a scriptable test origin, two thread-per-core workers serving HTTP/1.1 on
//! 127.0.0.1, and raw-TCP clients. Each test is one scenario; its name says what broke.

mod client;
mod origin;
mod server;

mod coalescing;
mod conditional;
mod failover;
mod framing;
mod freshness;
mod headers;
mod hostile;
mod keys_purge;
mod llhls;
mod llhls_demo;
mod memory;
mod pass;
mod ranges;
mod routing;
mod shield;
mod slices;
mod stale;
mod storing;
mod targeted;
mod unknown_length;
mod vary;

use origin::Origin;
use server::{Opts, Server};

/// An origin and a server in front of it with default settings.
pub fn setup() -> (Origin, Server) {
    let o = Origin::start();
    let s = Server::start(Opts::new(o.addr));
    (o, s)
}

/// Like [`setup`] with adjusted options.
pub fn setup_with(f: impl FnOnce(&mut Opts)) -> (Origin, Server) {
    let o = Origin::start();
    let mut opts = Opts::new(o.addr);
    f(&mut opts);
    let s = Server::start(opts);
    (o, s)
}
