//! Coverage-guided fuzz targets for the parsers reel runs on bytes from the network, the
//! disk and the operator (`docs/fuzzing.md`).
//!
//! Each module is one target: a `run(&[u8])` that hands the bytes to one parser the way
//! reel does, and checks what it can about the answer (a round trip, bounds); a panic is
//! a finding. The libFuzzer binaries in `fuzz_targets/` call them (`fuzz.sh` builds them
//! with coverage instrumentation); `tests/corpus.rs` replays every file of
//! `corpus/<target>/` through them in a plain `cargo test`.

pub mod cache_control;
pub mod client_hello;
pub mod config;
mod fields;
pub mod http1_head;
pub mod http_date;
pub mod proxy_header;
pub mod range;
pub mod store_checkpoint;
pub mod store_volume;
pub mod stored_meta;
pub mod stream_head;
pub mod tls_record;

/// A target's entry: the bytes of one input.
pub type Target = fn(&[u8]);

/// Every target: its name (its corpus folder and binary) and its entry.
pub const TARGETS: &[(&str, Target)] = &[
    ("cache_control", cache_control::run),
    ("client_hello", client_hello::run),
    ("config", config::run),
    ("http1_head", http1_head::run),
    ("http_date", http_date::run),
    ("proxy_header", proxy_header::run),
    ("range", range::run),
    ("store_checkpoint", store_checkpoint::run),
    ("store_volume", store_volume::run),
    ("stored_meta", stored_meta::run),
    ("stream_head", stream_head::run),
    ("tls_record", tls_record::run),
];
