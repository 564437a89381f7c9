//! Load generator and benchmark support for reel.
//!
//! This crate owns `reel-load`, a loopback-only HTTP/1.1 and HTTP/3 load generator for
//! video caches: a hand-written keep-alive client ([`client`]), an HTTP/3 client over QUIC
//! ([`h3`]), latency/throughput accounting ([`stats`]), kernel arrival times of what it
//! reads ([`arrival`], the one module with `unsafe`), an HLS media playlist parser
//! ([`playlist`]), a Zipf sampler for VOD popularity ([`zipf`]), target validation
//! ([`target`]) and the scenarios themselves ([`scenario`], and [`llhls`] for Low-Latency
//! HLS viewers). The criterion micro-benchmarks in `benches/benches/` live beside it but
//! do not use this library.
#![deny(unsafe_code)]

pub mod arrival;
pub mod client;
pub mod h3;
pub mod llhls;
pub mod playlist;
pub mod scenario;
pub mod seek;
pub mod stats;
pub mod target;
pub mod zipf;
