//! QUIC (RFC 9000) endpoints for the workers, on `quinn`.
//!
//! # What this crate owns
//! * [`cid`]: server connection IDs whose first byte names the worker that owns the
//!   connection, so the kernel's reuseport program (`reel_runtime::quic_route`) hands a
//!   client's packets to that worker even after its address changed.
//! * [`config`]: the transport settings of a listener ([`QuicSettings`]: streams, windows,
//!   idle timeout, address validation) turned into one `quinn::ServerConfig` that every
//!   worker shares, so a Retry token or a resumption ticket issued by one worker is good on
//!   all of them.
//! * [`amplify`]: the anti-amplification limit (three times the bytes received from an
//!   unproven address) held exactly at the socket, where the transport lets a datagram
//!   past it.
//! * [`worker`]: one endpoint per worker on the worker's own UDP socket, the admission of
//!   each new connection (Retry, per-worker and per-client-address limits) and the
//!   handshake, then the connection handed to the application (HTTP/3).
//!
//! # Design
//! Thread per core as for TCP: each worker's endpoint runs on its `current_thread` runtime,
//! and its connections' drivers with it; nothing is shared between workers but the
//! read-only configuration and keys.

#![deny(unsafe_code)]

pub mod amplify;
pub mod cid;
pub mod config;
pub mod worker;

pub use cid::{CID_LEN, WorkerCids};
pub use config::{
    Keys, MIN_SEND_WINDOW, QuicConfig, QuicError, QuicSettings, RetryMode, endpoint_config,
    server_config,
};
pub use worker::{Admission, Arrival, QuicCounters, client_key, serve_worker};
