//! Integration tests for reel-http over real loopback sockets.

mod bodies;
mod common;
mod lifecycle;
mod protocol;
mod smuggling;
mod tls;
