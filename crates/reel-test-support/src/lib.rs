//! The helpers the workspace's integration tests share, kept in one place so that copies
//! in each crate's `tests/` cannot drift apart. Only ever a dev-dependency: nothing here
//! is linked into `reel`.
//!
//! * [`skip`] reports a test that cannot run on this machine in the form `.ci/run`
//!   counts; [`which`] and [`have_ffmpeg`] find the tools such tests need.
//! * [`wait_until`], [`eventually`] and [`wait_until_async`] poll an observable condition
//!   until a deadline ([`PATIENCE`]) and fail the test clearly past it: tests wait for
//!   what they can see, never for a fixed sleep.
//! * [`h2`] has an HTTP/2 client that reads whole responses, and a hand-written one for
//!   tests that misbehave on purpose (rapid reset, CONTINUATION and PING floods, stalled
//!   readers).
//! * [`h3`] has an HTTP/3 client (quinn + h3) that reads whole responses, on its own UDP
//!   socket so a test can move a connection to another port.
//! * [`listening_inodes`] names the listening sockets on a port, to tell whether a
//!   restart kept the very same sockets.
//! * [`CountingAlloc`] counts the heap bytes live, for memory measurements.
//! * [`ShutdownFs`] is a real file system a test makes fail (every read and write `EIO`).
//! * [`mmdb`] writes MaxMind DB files mapping networks to countries, and fetches the
//!   GeoLite2 City database a PyPI package ships.

#![deny(unsafe_code)]

#[allow(unsafe_code)]
mod alloc;
mod fs;
pub mod h2;
pub mod h3;
pub mod mmdb;
mod net;
mod skip;
mod wait;

pub use alloc::CountingAlloc;
pub use fs::ShutdownFs;
pub use net::listening_inodes;
pub use skip::{have_ffmpeg, skip, tool_or_install, which};
pub use wait::{PATIENCE, eventually, wait_until, wait_until_async};
