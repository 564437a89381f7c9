//! Typed errors of certificate loading and TLS context building. Every error names the
//! configuration key it is about, so the binary can point at `file:line:column`.

use std::path::PathBuf;

/// Why a certificate or a TLS context could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A file could not be read (missing, permissions, a directory...).
    #[error("cannot read {path}: {source}")]
    Read {
        /// The configuration key naming the file.
        key: String,
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The file holds no PEM item of the expected kind, or a malformed one.
    #[error("{path} is not a PEM {what} file: {reason}")]
    NotPem {
        /// The configuration key naming the file.
        key: String,
        /// The file.
        path: PathBuf,
        /// `certificate` or `private key`.
        what: &'static str,
        /// What the PEM parser said.
        reason: String,
    },
    /// The certificate could not be parsed as X.509.
    #[error("{path}: invalid certificate: {reason}")]
    BadCert {
        /// The configuration key naming the file.
        key: String,
        /// The file.
        path: PathBuf,
        /// Parser message.
        reason: String,
    },
    /// The private key is of a kind rustls cannot sign with.
    #[error("{path}: unsupported private key: {reason}")]
    BadKey {
        /// The configuration key naming the file.
        key: String,
        /// The file.
        path: PathBuf,
        /// rustls' message.
        reason: String,
    },
    /// The private key does not belong to the certificate.
    #[error("the private key in {key_path} does not match the certificate in {cert_path}")]
    KeyMismatch {
        /// The configuration key naming the key file.
        key: String,
        /// The certificate file.
        cert_path: PathBuf,
        /// The key file.
        key_path: PathBuf,
    },
    /// Making a self-signed certificate failed.
    #[error("cannot make a self-signed certificate: {reason}")]
    SelfSigned {
        /// The configuration key (`listener[i].tls_cert`).
        key: String,
        /// rcgen's message.
        reason: String,
    },
    /// rustls refused the server configuration.
    #[error("TLS configuration: {reason}")]
    Config {
        /// The configuration key of the listener.
        key: String,
        /// rustls' message.
        reason: String,
    },
}

impl TlsError {
    /// The configuration key path the error is about, e.g. `listener[1].tls_key` or
    /// `certificate[0].cert`.
    pub fn config_key(&self) -> &str {
        match self {
            TlsError::Read { key, .. }
            | TlsError::NotPem { key, .. }
            | TlsError::BadCert { key, .. }
            | TlsError::BadKey { key, .. }
            | TlsError::KeyMismatch { key, .. }
            | TlsError::SelfSigned { key, .. }
            | TlsError::Config { key, .. } => key,
        }
    }
}
