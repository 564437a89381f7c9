//! TLS for reel's client-facing listeners, on rustls with the `ring` provider.
//!
//! # What this crate owns
//! * [`cert`]: loading a PEM certificate chain and its private key (refusing missing or
//!   unreadable files, files without PEM items, keys that do not match the certificate),
//!   in-memory self-signed certificates (rcgen), and what `/status` and `/metrics` show
//!   about a certificate (names, expiry).
//! * [`sni`]: choosing a certificate by the server name a client sends (exact names, then
//!   one-label wildcards, then the listener's default unless strict).
//! * [`context`]: one immutable `rustls::ServerConfig` per TLS listener (ALPN `h2` and/or
//!   `http/1.1`, TLS 1.3 and 1.2, or 1.3 only) sharing one process-wide session-ticket key
//!   rotator, so a ticket issued on one worker resumes on any other, and after a reload.
//! * [`accept`](mod@accept): the server handshake of one accepted TCP connection, bounded in
//!   time, on the worker that accepted it, with what it negotiated (version, resumption,
//!   ALPN) and per-worker handshake counters, including ClientHellos that named an IP
//!   address as server name (read from the ClientHello's bytes by `client_hello`, since
//!   rustls treats them as no name).
//!
//! * [`record`], [`sealed`], [`ktls`], [`session`]: the record layer after the handshake,
//!   taken out of rustls: to the kernel (kTLS, `sendfile` works on such a socket) or to
//!   reel's own, which seals file bodies in place in the caller's buffer; [`cork`] keeps
//!   the handshake from reading past its last record so that the handover loses nothing.
//!
//! It depends on no other reel crate: the binary converts configuration into
//! [`cert::CertSpec`]s and [`context::ListenerTls`].

#![deny(unsafe_code)]

pub mod accept;
mod bufs;
pub mod cert;
mod client_hello;
pub mod context;
mod copy;
pub mod cork;
mod error;
#[doc(hidden)]
pub mod fuzzing;
pub mod ktls;
pub mod record;
pub mod sealed;
pub mod session;
pub mod sni;
#[allow(unsafe_code)]
mod sys;
#[cfg(feature = "testing")]
pub mod testing;
mod version;

pub use accept::{
    Alpn, Fallback, HandshakeCounters, HandshakeError, HandshakeInfo, HandshakeSnapshot,
    RecordPath, Session, TlsStream, TlsVersion, accept, accept_counted,
};
pub use cert::{CertSource, CertSpec, LoadedCert, self_signed};
pub use context::{ALPN_H3, KtlsMode, ListenerTls, Tickets, server_config};
pub use error::TlsError;
pub use ktls::KtlsStream;
pub use sealed::SealedStream;
pub use session::KEY_UPDATE_CLOSES;
pub use sni::SniResolver;
pub use sys::kernel_has_tls;
