//! The server side of one TLS handshake, on the worker that accepted the connection, and
//! per-worker counters of how handshakes ended.
//!
//! The ClientHello is read first (rustls' `Acceptor`), so a handshake refused by a strict
//! listener for its server name is told apart from other failures, and a server name that
//! was an IP address is noticed (see `client_hello`); the rest of the handshake then runs
//! against the listener's shared configuration. The whole handshake is bounded by one
//! deadline (slow or silent clients cannot hold a connection slot).

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use rustls::HandshakeKind;
use tokio::net::TcpStream;
use tokio_rustls::LazyConfigAcceptor;
use tokio_rustls::server::StartHandshake;

use crate::client_hello::{Recorded, sni_is_ip_address};
use crate::context::{ALPN_H2, ListenerTls};

/// A server-side TLS stream over TCP.
pub type TlsStream = tokio_rustls::server::TlsStream<TcpStream>;

/// Negotiated protocol version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TlsVersion {
    /// TLS 1.2 (RFC 5246).
    Tls12,
    /// TLS 1.3 (RFC 8446).
    Tls13,
}

impl TlsVersion {
    /// Metric label: `tls1.2` or `tls1.3`.
    pub fn as_str(self) -> &'static str {
        match self {
            TlsVersion::Tls12 => "tls1.2",
            TlsVersion::Tls13 => "tls1.3",
        }
    }

    /// The version number, as `min_tls_version` is written: `1.2` or `1.3`.
    pub fn number(self) -> &'static str {
        match self {
            TlsVersion::Tls12 => "1.2",
            TlsVersion::Tls13 => "1.3",
        }
    }
}

/// Application protocol chosen by ALPN.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Alpn {
    /// `h2`: HTTP/2.
    H2,
    /// `http/1.1`, or no ALPN at all.
    Http11,
}

/// What a completed handshake negotiated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HandshakeInfo {
    /// Protocol version.
    pub version: TlsVersion,
    /// Whether the session was resumed from a ticket (no certificate, no full key
    /// exchange signature).
    pub resumed: bool,
    /// The application protocol.
    pub alpn: Alpn,
}

/// Why a handshake did not complete.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HandshakeError {
    /// The handshake did not finish in time.
    #[error("TLS handshake timed out")]
    Timeout,
    /// A strict listener knows no certificate for the server name (or none was sent).
    #[error("TLS handshake refused: unknown server name")]
    UnknownName,
    /// The client closed or reset the connection during the handshake.
    #[error("client closed the connection during the TLS handshake")]
    Closed,
    /// The client's messages were refused (not TLS, no common version, cipher suite or
    /// ALPN protocol, bad record...).
    #[error("TLS handshake failed: {0}")]
    Protocol(String),
    /// Socket error.
    #[error("I/O error during the TLS handshake: {0:?}")]
    Io(io::ErrorKind),
}

impl HandshakeError {
    /// Metric label: `timeout`, `unknown_name`, `closed`, `protocol_error`, `io_error`.
    pub fn label(&self) -> &'static str {
        match self {
            HandshakeError::Timeout => "timeout",
            HandshakeError::UnknownName => "unknown_name",
            HandshakeError::Closed => "closed",
            HandshakeError::Protocol(_) => "protocol_error",
            HandshakeError::Io(_) => "io_error",
        }
    }

    fn from_io(e: io::Error) -> HandshakeError {
        match e.kind() {
            io::ErrorKind::UnexpectedEof
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::BrokenPipe => HandshakeError::Closed,
            io::ErrorKind::InvalidData => HandshakeError::Protocol(
                e.get_ref().map_or_else(|| e.to_string(), |inner| inner.to_string()),
            ),
            kind => HandshakeError::Io(kind),
        }
    }
}

/// Runs the server handshake on `tcp` with `tls`, within `timeout`. Sets `TCP_NODELAY`.
pub async fn accept(
    tls: &ListenerTls,
    tcp: TcpStream,
    timeout: Duration,
) -> Result<(TlsStream, HandshakeInfo), HandshakeError> {
    handshake(tls, tcp, timeout).await.0
}

/// [`accept`], counting the outcome in `counters`, and the ClientHello when its server
/// name was an IP address.
pub async fn accept_counted(
    tls: &ListenerTls,
    tcp: TcpStream,
    timeout: Duration,
    counters: &HandshakeCounters,
) -> Result<(TlsStream, HandshakeInfo), HandshakeError> {
    let (r, sni_ip_address) = handshake(tls, tcp, timeout).await;
    counters.record(&r.as_ref().map(|(_, i)| *i).map_err(Clone::clone));
    if sni_ip_address {
        counters.sni_ip_address.fetch_add(1, Ordering::Relaxed);
    }
    r
}

/// The handshake, and whether the ClientHello's server name was an IP address.
async fn handshake(
    tls: &ListenerTls,
    tcp: TcpStream,
    timeout: Duration,
) -> (Result<(TlsStream, HandshakeInfo), HandshakeError>, bool) {
    let deadline = tokio::time::Instant::now() + timeout;
    // Handshake flights and responses leave in whole writes; Nagle would only hold back
    // the last segment of each (and meet the client's delayed ACK).
    let _ = tcp.set_nodelay(true);
    let lazy = LazyConfigAcceptor::new(rustls::server::Acceptor::default(), Recorded::new(tcp));
    let start = match tokio::time::timeout_at(deadline, lazy).await {
        Err(_) => return (Err(HandshakeError::Timeout), false),
        Ok(Err(e)) => return (Err(HandshakeError::from_io(e)), false),
        Ok(Ok(s)) => s,
    };
    let (tcp, recorded) = start.io.into_parts();
    let (refused, sni_ip_address) = {
        let hello = start.accepted.client_hello();
        let name = hello.server_name();
        // rustls reports an address sent as server name as no name at all.
        let ip = name.is_none() && sni_is_ip_address(&recorded);
        (tls.resolver.is_strict() && !tls.resolver.knows(name), ip)
    };
    // Not held for the rest of the handshake, which may take until the deadline.
    drop(recorded);
    let start = StartHandshake::from_parts(start.accepted, tcp);
    let stream =
        match tokio::time::timeout_at(deadline, start.into_stream(tls.config.clone())).await {
            Err(_) => return (Err(HandshakeError::Timeout), sni_ip_address),
            Ok(Err(_)) if refused => return (Err(HandshakeError::UnknownName), sni_ip_address),
            Ok(Err(e)) => return (Err(HandshakeError::from_io(e)), sni_ip_address),
            Ok(Ok(s)) => s,
        };
    let conn = stream.get_ref().1;
    let version = match conn.protocol_version() {
        Some(rustls::ProtocolVersion::TLSv1_2) => TlsVersion::Tls12,
        _ => TlsVersion::Tls13,
    };
    let info = HandshakeInfo {
        version,
        resumed: conn.handshake_kind() == Some(HandshakeKind::Resumed),
        alpn: if conn.alpn_protocol() == Some(ALPN_H2) { Alpn::H2 } else { Alpn::Http11 },
    };
    (Ok((stream, info)), sni_ip_address)
}

const FAILURES: [&str; 5] = ["timeout", "unknown_name", "closed", "protocol_error", "io_error"];

/// Handshake outcomes of one worker (relaxed atomics: the admin thread reads them).
#[derive(Debug, Default)]
pub struct HandshakeCounters {
    /// `[version][resumed]`: completed handshakes.
    ok: [[AtomicU64; 2]; 2],
    /// Indexed like [`FAILURES`].
    failed: [AtomicU64; FAILURES.len()],
    /// ClientHellos whose server name was an IP address (RFC 6066 allows DNS names only).
    sni_ip_address: AtomicU64,
}

impl HandshakeCounters {
    /// Counts one handshake's outcome.
    pub fn record(&self, outcome: &Result<HandshakeInfo, HandshakeError>) {
        match outcome {
            Ok(i) => {
                let v = usize::from(i.version == TlsVersion::Tls13);
                self.ok[v][usize::from(i.resumed)].fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => {
                let at = FAILURES.iter().position(|l| *l == e.label()).unwrap_or(0);
                self.failed[at].fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// The counts so far.
    pub fn snapshot(&self) -> HandshakeSnapshot {
        let mut s = HandshakeSnapshot::default();
        s.add(self);
        s
    }
}

/// Handshake counts, summed over workers with [`HandshakeSnapshot::add`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HandshakeSnapshot {
    ok: [[u64; 2]; 2],
    failed: [u64; FAILURES.len()],
    sni_ip_address: u64,
}

impl HandshakeSnapshot {
    /// Adds a worker's counters.
    pub fn add(&mut self, c: &HandshakeCounters) {
        for v in 0..2 {
            for r in 0..2 {
                self.ok[v][r] += c.ok[v][r].load(Ordering::Relaxed);
            }
        }
        for (i, f) in c.failed.iter().enumerate() {
            self.failed[i] += f.load(Ordering::Relaxed);
        }
        self.sni_ip_address += c.sni_ip_address.load(Ordering::Relaxed);
    }

    /// Rows `(result, version, resumed, count)`: result `ok` with version `tls1.2` or
    /// `tls1.3` and resumption, or a failure label (see [`HandshakeError::label`]) with
    /// version `none`.
    pub fn rows(&self) -> Vec<(&'static str, &'static str, bool, u64)> {
        let mut out = Vec::with_capacity(4 + FAILURES.len());
        for (v, name) in [(0, TlsVersion::Tls12), (1, TlsVersion::Tls13)] {
            for r in [false, true] {
                out.push(("ok", name.as_str(), r, self.ok[v][usize::from(r)]));
            }
        }
        for (i, l) in FAILURES.iter().enumerate() {
            out.push((*l, "none", false, self.failed[i]));
        }
        out
    }

    /// Completed handshakes of `version`, `resumed` or not.
    pub fn completed(&self, version: TlsVersion, resumed: bool) -> u64 {
        self.ok[usize::from(version == TlsVersion::Tls13)][usize::from(resumed)]
    }

    /// Failed handshakes with `label`.
    pub fn failed(&self, label: &str) -> u64 {
        FAILURES.iter().position(|l| *l == label).map_or(0, |i| self.failed[i])
    }

    /// ClientHellos that named an IP address as server name (rustls serves them as if they
    /// sent no name; counted whether or not the handshake then completed).
    pub fn sni_ip_address(&self) -> u64 {
        self.sni_ip_address
    }
}
