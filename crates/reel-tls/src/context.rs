//! One immutable rustls server configuration per TLS listener, and the session-ticket
//! keys every configuration shares.
//!
//! Resumption across workers: every worker serves a listener from the same
//! `Arc<ServerConfig>`, and every configuration (across listeners and reloads) holds the
//! same [`Tickets`], so a TLS 1.3 ticket (or TLS 1.2 ticket) issued by one worker is
//! accepted by all, and still after a reload. The ticket keys live only in memory and
//! rotate every 6 hours; tickets made with the previous key are still accepted, so a
//! rotation never forces full handshakes. No server-side session cache is kept (it would
//! be a lock shared by the workers): resumption is by tickets only.

use std::sync::Arc;

use rustls::server::{NoServerSessionStorage, ProducesTickets, ServerConfig};

use crate::cert::{LoadedCert, provider};
use crate::error::TlsError;
use crate::sni::SniResolver;
use crate::version::TlsVersion;

/// ALPN protocol id of HTTP/2 (RFC 9113 section 3.2).
pub const ALPN_H2: &[u8] = b"h2";
/// ALPN protocol id of HTTP/1.1 (RFC 7301 section 6).
pub const ALPN_HTTP11: &[u8] = b"http/1.1";
/// ALPN protocol id of HTTP/3 (RFC 9114 section 3.1).
pub const ALPN_H3: &[u8] = b"h3";

/// The process's session-ticket keys (see the module docs). Cheap to clone.
#[derive(Clone)]
pub struct Tickets(Arc<dyn ProducesTickets>);

impl std::fmt::Debug for Tickets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tickets").field("lifetime", &self.0.lifetime()).finish()
    }
}

impl Tickets {
    /// New random keys, rotated every 6 hours (rustls' `TicketRotator`).
    pub fn new() -> Result<Tickets, TlsError> {
        rustls::crypto::ring::Ticketer::new()
            .map(Tickets)
            .map_err(|e| TlsError::Config { key: String::new(), reason: e.to_string() })
    }
}

/// A TLS listener's serving state: the rustls configuration and what it was built from.
#[derive(Debug)]
pub struct ListenerTls {
    /// Shared by every worker serving the listener.
    pub config: Arc<ServerConfig>,
    /// The certificate selection inside `config`.
    pub resolver: Arc<SniResolver>,
    /// The listener's default certificate first, then the SNI ones.
    pub certs: Vec<Arc<LoadedCert>>,
    /// Whether ALPN offers `h2`.
    pub http2: bool,
    /// Whether sessions may go to the kernel.
    pub ktls: KtlsMode,
    /// Whether the kernel had the `tls` module when this configuration was built (a
    /// reload looks again).
    pub kernel_tls: bool,
    /// The oldest protocol version offered.
    pub min_version: TlsVersion,
}

impl ListenerTls {
    /// The configuration of the listener's QUIC side (HTTP/3): the same certificates and
    /// SNI selection and the same shared `tickets`, TLS 1.3 only (QUIC has no other,
    /// RFC 9001 section 4.2), ALPN `h3`. `early_data`: accept 0-RTT requests (replayable;
    /// the HTTP/3 layer admits only safe methods in them); otherwise none.
    pub fn quic_config(
        &self,
        tickets: &Tickets,
        early_data: bool,
    ) -> Result<Arc<ServerConfig>, TlsError> {
        let mut config = ServerConfig::builder_with_provider(provider())
            .with_protocol_versions(&[&rustls::version::TLS13])
            .map_err(|e| TlsError::Config { key: String::new(), reason: e.to_string() })?
            .with_no_client_auth()
            .with_cert_resolver(self.resolver.clone());
        config.alpn_protocols = vec![ALPN_H3.to_vec()];
        config.ticketer = tickets.0.clone();
        config.session_storage = Arc::new(NoServerSessionStorage {});
        // QUIC's 0-RTT is all or nothing (RFC 9001 section 4.6.1).
        config.max_early_data_size = if early_data { u32::MAX } else { 0 };
        Ok(Arc::new(config))
    }
}

/// A listener's `ktls` setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum KtlsMode {
    /// The kernel seals the records when it can; user space otherwise.
    #[default]
    Auto,
    /// Always user space.
    Off,
}

impl KtlsMode {
    /// The configuration value: `auto` or `off`.
    pub fn as_str(self) -> &'static str {
        match self {
            KtlsMode::Auto => "auto",
            KtlsMode::Off => "off",
        }
    }
}

/// Builds a listener's configuration: TLS 1.3, and 1.2 unless `min_version` is 1.3, with
/// the `ring` provider's suites, certificates chosen by [`SniResolver`], ALPN `h2` (when
/// `http2`) then `http/1.1`, the shared `tickets`, no 0-RTT data (it could be replayed).
/// `key` is the listener's configuration key, for errors.
#[allow(clippy::too_many_arguments)] // one per listener setting, each named at the call
pub fn server_config(
    key: &str,
    default: Arc<LoadedCert>,
    extra: &[Arc<LoadedCert>],
    strict: bool,
    http2: bool,
    min_version: TlsVersion,
    ktls: KtlsMode,
    tickets: &Tickets,
) -> Result<ListenerTls, TlsError> {
    let resolver = Arc::new(SniResolver::new(&default, extra, strict));
    let versions: &[&'static rustls::SupportedProtocolVersion] = match min_version {
        TlsVersion::Tls12 => &[&rustls::version::TLS13, &rustls::version::TLS12],
        TlsVersion::Tls13 => &[&rustls::version::TLS13],
    };
    let mut config = ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(versions)
        .map_err(|e| TlsError::Config { key: key.to_owned(), reason: e.to_string() })?
        .with_no_client_auth()
        .with_cert_resolver(resolver.clone());
    config.alpn_protocols = if http2 {
        vec![ALPN_H2.to_vec(), ALPN_HTTP11.to_vec()]
    } else {
        vec![ALPN_HTTP11.to_vec()]
    };
    config.ticketer = tickets.0.clone();
    config.session_storage = Arc::new(NoServerSessionStorage {});
    config.max_early_data_size = 0;
    // The record layer leaves rustls after the handshake (to the kernel or to reel's).
    config.enable_secret_extraction = true;
    let mut certs = Vec::with_capacity(extra.len() + 1);
    certs.push(default);
    certs.extend(extra.iter().cloned());
    let kernel_tls = ktls == KtlsMode::Auto && crate::sys::kernel_has_tls();
    Ok(ListenerTls {
        config: Arc::new(config),
        resolver,
        certs,
        http2,
        min_version,
        ktls,
        kernel_tls,
    })
}
