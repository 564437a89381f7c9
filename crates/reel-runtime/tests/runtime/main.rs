//! Worker runtime behaviour with real threads, loopback sockets and /proc.

mod limits;
mod listeners;
mod quic_route;
mod serve;
mod shutdown;
mod steer;
mod support;
