//! The helpers the workspace's integration tests share, kept in one place so that copies
//! in each crate's `tests/` cannot drift apart. Only ever a dev-dependency: nothing here
//! is linked into `reel`.
//!
//! * [`skip`] reports a test that cannot run on this machine in the form `.ci/run`
//!   counts; [`which`] and [`have_ffmpeg`] find the tools such tests need.
//! * [`h2`] is a hand-written HTTP/2 client for tests that misbehave on purpose (rapid
//!   reset, CONTINUATION and PING floods, stalled readers).
//! * [`listening_inodes`] names the listening sockets on a port, to tell whether a
//!   restart kept the very same sockets.

#![forbid(unsafe_code)]

pub mod h2;
mod net;
mod skip;

pub use net::listening_inodes;
pub use skip::{have_ffmpeg, skip, which};
