//! Worker runtime behaviour with real threads, loopback sockets and /proc.

mod limits;
mod listeners;
mod serve;
mod shutdown;
mod steer;
mod support;
