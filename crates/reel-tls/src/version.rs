//! The TLS protocol version: the one a handshake negotiated, and the least a listener
//! accepts. A leaf: the listener's configuration (`context`) and the handshake (`accept`)
//! both name it.

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
