//! Integration tests for reel-http over real loopback sockets.

mod bodies;
mod common;
mod fuzz;
mod h2;
mod h3;
mod hooks;
mod idle;
mod interim;
mod lifecycle;
mod protocol;
mod smuggling;
mod tls;
