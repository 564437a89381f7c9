//! A listener's QUIC settings and the `quinn` configurations made from them.

use std::sync::Arc;
use std::time::Duration;

use quinn::crypto::rustls::QuicServerConfig;
use quinn::{EndpointConfig, IdleTimeout, ServerConfig, TransportConfig, VarInt};

use crate::cid::WorkerCids;

/// Errors building a QUIC configuration.
#[derive(Debug, thiserror::Error)]
pub enum QuicError {
    /// The TLS configuration cannot carry QUIC (no TLS 1.3, no AES-128-GCM suite).
    #[error("the TLS configuration cannot serve QUIC: {0}")]
    Tls(String),
    /// The system has no random source for the keys.
    #[error("no random source for the QUIC keys")]
    Random,
    /// A setting is out of the transport's range.
    #[error("QUIC setting {0} is out of range")]
    Range(&'static str),
}

/// When a new connection's address is validated with a Retry (RFC 9000 section 8.1.2)
/// before the server spends a handshake on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RetryMode {
    /// When the worker has more handshakes in progress than
    /// [`QuicSettings::retry_above`]: a flood of Initials from forged addresses costs
    /// one stateless packet each, a quiet server saves clients the round trip.
    #[default]
    Auto,
    /// Every new connection proves its address first (one more round trip).
    Always,
    /// Never (the anti-amplification limit still holds: at most three times the bytes
    /// received are sent to an unvalidated address).
    Never,
}

impl RetryMode {
    /// The configuration value.
    pub fn as_str(self) -> &'static str {
        match self {
            RetryMode::Auto => "auto",
            RetryMode::Always => "always",
            RetryMode::Never => "never",
        }
    }
}

/// The smallest send window a connection is given however many share the worker's
/// budget (16 KiB over 50 ms: 2.6 Mbit/s, a standard-definition stream).
pub const MIN_SEND_WINDOW: u64 = 16 * 1024;

impl QuicSettings {
    /// The send window of a connection that makes `open` on its worker: its share of
    /// [`QuicSettings::worker_send_budget`], within [`MIN_SEND_WINDOW`] and
    /// [`QuicSettings::send_window`].
    pub fn send_share(&self, open: usize) -> u64 {
        let share = self.worker_send_budget / (open.max(1) as u64);
        share.clamp(MIN_SEND_WINDOW.min(self.send_window), self.send_window)
    }
}

/// The transport settings and admission limits of one QUIC listener.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuicSettings {
    /// Concurrent request (bidirectional) streams a client may open. Default 100.
    pub max_streams: u32,
    /// A connection with no packet for this long is gone (the transport's idle
    /// timeout; the HTTP layer closes idle connections itself, earlier). Default 60 s.
    pub idle_timeout: Duration,
    /// Most time from the first packet to a complete handshake. Default 10 s.
    pub handshake_timeout: Duration,
    /// Bytes a client may send on one stream before we read them (request bodies).
    /// Default 64 KiB.
    pub stream_receive_window: u32,
    /// Bytes a client may send on the connection before we read them. Default 256 KiB.
    pub receive_window: u32,
    /// Bytes sent and not yet acknowledged per connection: bounds what a connection holds
    /// in the transport's buffers (as `h2_connection_buffer` does for HTTP/2), and its
    /// throughput to this over the round trip (256 KiB over 50 ms: 40 Mbit/s, a 4K video
    /// stream with room). Default 256 KiB.
    pub send_window: u64,
    /// Response bytes the connections of one worker may hold unacknowledged between them:
    /// a new connection's send window is its share of this among the worker's open
    /// connections (never more than [`QuicSettings::send_window`], never less than
    /// [`MIN_SEND_WINDOW`]), so a flood of connections that stop acknowledging pins about
    /// this much, not a full window each. Default 64 MiB (256 connections at a full
    /// window).
    pub worker_send_budget: u64,
    /// Address validation.
    pub retry: RetryMode,
    /// Handshakes in progress on a worker above which [`RetryMode::Auto`] sends Retry.
    /// Default 64.
    pub retry_above: usize,
    /// Handshakes in progress on a worker from one client address (an IPv6 /64) above
    /// which [`RetryMode::Auto`] sends Retry: a flood with one forged source is asked to
    /// prove it after a few. Default 4.
    pub retry_above_per_client: usize,
    /// QUIC connections one client address (an IPv6 /64) may have open across the
    /// workers, well below the TCP share (`max_connections_per_client`): each can hold a
    /// send window of response bytes in the transport. A client refused here falls back to
    /// TCP (the `Alt-Svc` it came from). 0: no cap of its own. Default 64.
    pub max_per_client: usize,
    /// Connections per worker; past it new ones are refused (`CONNECTION_REFUSED`).
    pub max_per_worker: usize,
    /// Send runs of datagrams in one `sendmsg` with UDP GSO where the kernel and NIC
    /// take it. Default true; off only to measure what it saves.
    pub segmentation_offload: bool,
}

impl Default for QuicSettings {
    fn default() -> Self {
        QuicSettings {
            max_streams: 100,
            idle_timeout: Duration::from_secs(60),
            handshake_timeout: Duration::from_secs(10),
            stream_receive_window: 64 * 1024,
            receive_window: 256 * 1024,
            send_window: 256 * 1024,
            worker_send_budget: 64 << 20,
            retry: RetryMode::Auto,
            retry_above: 64,
            retry_above_per_client: 4,
            max_per_client: 64,
            max_per_worker: 10_000,
            segmentation_offload: true,
        }
    }
}

/// What a listener's endpoints serve with: the server configuration (certificates,
/// transport) and the admission settings. Replaced whole on a reload.
#[derive(Clone)]
pub struct QuicConfig {
    /// The `quinn` server configuration ([`server_config`]).
    pub server: ServerConfig,
    /// The settings it was made from; admission reads them per new connection.
    pub settings: QuicSettings,
}

impl std::fmt::Debug for QuicConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QuicConfig").field("settings", &self.settings).finish()
    }
}

/// The process's QUIC keys, shared by every worker, listener and reload: a Retry token or
/// a stateless reset made by one worker is good on every other.
#[derive(Clone)]
pub struct Keys {
    /// Stateless-reset tokens (RFC 9000 section 10.3).
    pub reset: Arc<ring::hmac::Key>,
    /// Retry and NEW_TOKEN tokens (address validation).
    pub token: Arc<ring::hkdf::Prk>,
}

impl std::fmt::Debug for Keys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Keys")
    }
}

impl Keys {
    /// New random keys; `Err` when the system has no random source.
    pub fn new() -> Result<Keys, QuicError> {
        let rng = ring::rand::SystemRandom::new();
        let reset = ring::hmac::Key::generate(ring::hmac::HMAC_SHA256, &rng)
            .map_err(|_| QuicError::Random)?;
        let mut secret = [0u8; 32];
        ring::rand::SecureRandom::fill(&rng, &mut secret).map_err(|_| QuicError::Random)?;
        let token = ring::hkdf::Salt::new(ring::hkdf::HKDF_SHA256, &[]).extract(&secret);
        Ok(Keys { reset: Arc::new(reset), token: Arc::new(token) })
    }
}

/// The server configuration every worker of a listener shares: `tls` must be a TLS 1.3
/// configuration with ALPN `h3` (see `reel_tls::ListenerTls::quic_config`).
pub fn server_config(
    tls: Arc<rustls::ServerConfig>,
    s: &QuicSettings,
    keys: &Keys,
) -> Result<ServerConfig, QuicError> {
    let crypto = QuicServerConfig::try_from(tls).map_err(|e| QuicError::Tls(e.to_string()))?;
    let mut t = TransportConfig::default();
    t.max_concurrent_bidi_streams(VarInt::from_u32(s.max_streams))
        // The peer's control stream and its two QPACK streams (RFC 9114 section 6.2).
        .max_concurrent_uni_streams(VarInt::from_u32(3))
        .max_idle_timeout(Some(
            IdleTimeout::try_from(s.idle_timeout).map_err(|_| QuicError::Range("idle_timeout"))?,
        ))
        .stream_receive_window(VarInt::from_u32(s.stream_receive_window))
        .receive_window(VarInt::from_u32(s.receive_window))
        .send_window(s.send_window)
        // No unreliable datagrams: HTTP/3 without extensions does not use them.
        .datagram_receive_buffer_size(None)
        .enable_segmentation_offload(s.segmentation_offload);
    let mut c = ServerConfig::with_crypto(Arc::new(crypto));
    c.transport_config(Arc::new(t))
        .token_key(keys.token.clone())
        // Connections may move to a new client address (the point of routing by ID).
        .migration(true)
        .retry_token_lifetime(Duration::from_secs(15));
    Ok(c)
}

/// A worker's endpoint configuration: its connection IDs, and the stateless-reset key
/// all workers share (a reset for a connection another worker owns is then still valid).
pub fn endpoint_config(worker: u8, keys: &Keys) -> EndpointConfig {
    let mut c = EndpointConfig::new(keys.reset.clone());
    c.cid_generator(move || Box::new(WorkerCids::new(worker)));
    c
}
