//! Certificates: loading a PEM chain and its key from files, making a self-signed one in
//! memory, and the facts `/status` and `/metrics` show about each (names, validity).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::sign::CertifiedKey;

use crate::error::TlsError;

/// A certificate that expires within this is reported as a warning by `reel check`.
pub const EXPIRY_WARNING: Duration = Duration::from_secs(30 * 24 * 3600);

/// Where a certificate comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CertSource {
    /// PEM files: the chain (leaf first) and the private key.
    Files {
        /// Certificate chain file.
        cert: PathBuf,
        /// Private key file.
        key: PathBuf,
    },
    /// A self-signed certificate made in memory for these names (DNS names, `*.domain`
    /// wildcards, IP addresses with or without brackets).
    SelfSigned {
        /// Subject alternative names.
        names: Vec<String>,
    },
}

/// One certificate to load, with the configuration keys its errors point at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertSpec {
    /// What to load.
    pub source: CertSource,
    /// Server names it is chosen for by SNI; empty = the names in the certificate
    /// (DNS subject alternative names).
    pub names: Vec<String>,
    /// Configuration key of the certificate (`listener[1].tls_cert`, `certificate[0].cert`).
    pub cert_key: String,
    /// Configuration key of the private key (`listener[1].tls_key`, `certificate[0].key`).
    pub key_key: String,
}

/// A loaded certificate, ready to serve.
#[derive(Debug)]
pub struct LoadedCert {
    /// The chain and signing key rustls serves.
    pub certified: Arc<CertifiedKey>,
    /// Lowercase server names it answers (configured, else from the certificate).
    pub names: Vec<String>,
    /// Where it came from: the certificate file, or `self-signed`.
    pub origin: String,
    /// Start of validity.
    pub not_before: SystemTime,
    /// End of validity.
    pub not_after: SystemTime,
    /// The configuration key it was loaded for.
    pub config_key: String,
}

impl LoadedCert {
    /// `notAfter` in Unix seconds (negative before 1970), for the expiry metric.
    pub fn not_after_unix(&self) -> i64 {
        unix(self.not_after)
    }

    /// A warning when the certificate has expired, is not yet valid, or expires within
    /// [`EXPIRY_WARNING`] of `now`.
    pub fn expiry_warning(&self, now: SystemTime) -> Option<String> {
        let what = &self.origin;
        if self.not_after <= now {
            return Some(format!(
                "certificate {what} expired at unix time {}",
                unix(self.not_after)
            ));
        }
        if self.not_before > now {
            return Some(format!(
                "certificate {what} is not valid before unix time {}",
                unix(self.not_before)
            ));
        }
        let left = self.not_after.duration_since(now).unwrap_or_default();
        (left < EXPIRY_WARNING).then(|| {
            format!(
                "certificate {what} expires in {} days (unix time {})",
                left.as_secs() / 86_400,
                unix(self.not_after)
            )
        })
    }
}

fn unix(t: SystemTime) -> i64 {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
        Err(e) => -i64::try_from(e.duration().as_secs()).unwrap_or(i64::MAX),
    }
}

/// The crypto provider every reel TLS context uses.
pub fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn read(key: &str, path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Read {
        key: key.to_owned(),
        path: path.to_owned(),
        source,
    })
}

/// Loads (or makes) the certificate `spec` describes, refusing anything that would fail
/// at handshake time: unreadable files, no PEM certificate or key, an X.509 parse error, a
/// key rustls cannot sign with, or a key that is not the certificate's.
pub fn load(spec: &CertSpec) -> Result<LoadedCert, TlsError> {
    let (chain, key, origin) = match &spec.source {
        CertSource::Files { cert, key } => {
            let chain = read_chain(&spec.cert_key, cert)?;
            let pk = read_key(&spec.key_key, key)?;
            (chain, pk, cert.display().to_string())
        }
        CertSource::SelfSigned { names } => {
            let (chain, key) = self_signed(names)
                .map_err(|reason| TlsError::SelfSigned { key: spec.cert_key.clone(), reason })?;
            (chain, key, "self-signed".to_owned())
        }
    };
    let cert_path = match &spec.source {
        CertSource::Files { cert, .. } => cert.clone(),
        CertSource::SelfSigned { .. } => PathBuf::from("self-signed"),
    };
    let facts = parse_leaf(&chain[0]).map_err(|reason| TlsError::BadCert {
        key: spec.cert_key.clone(),
        path: cert_path.clone(),
        reason,
    })?;
    let signing = provider().key_provider.load_private_key(key).map_err(|e| TlsError::BadKey {
        key: spec.key_key.clone(),
        path: match &spec.source {
            CertSource::Files { key, .. } => key.clone(),
            CertSource::SelfSigned { .. } => PathBuf::from("self-signed"),
        },
        reason: e.to_string(),
    })?;
    let certified = CertifiedKey::new(chain, signing);
    match certified.keys_match() {
        Ok(()) => {}
        Err(rustls::Error::InconsistentKeys(rustls::InconsistentKeys::Unknown)) => {
            tracing::debug!(cert = %origin, "cannot tell whether the key matches the certificate");
        }
        Err(rustls::Error::InconsistentKeys(rustls::InconsistentKeys::KeyMismatch)) => {
            let key_path = match &spec.source {
                CertSource::Files { key, .. } => key.clone(),
                CertSource::SelfSigned { .. } => PathBuf::from("self-signed"),
            };
            return Err(TlsError::KeyMismatch { key: spec.key_key.clone(), cert_path, key_path });
        }
        Err(e) => {
            return Err(TlsError::BadCert {
                key: spec.cert_key.clone(),
                path: cert_path,
                reason: e.to_string(),
            });
        }
    }
    let names = if spec.names.is_empty() {
        facts.dns_names
    } else {
        spec.names.iter().map(|n| n.trim_end_matches('.').to_ascii_lowercase()).collect()
    };
    Ok(LoadedCert {
        certified: Arc::new(certified),
        names,
        origin,
        not_before: facts.not_before,
        not_after: facts.not_after,
        config_key: spec.cert_key.clone(),
    })
}

fn read_chain(key: &str, path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let bytes = read(key, path)?;
    let not_pem = |reason: String| TlsError::NotPem {
        key: key.to_owned(),
        path: path.to_owned(),
        what: "certificate",
        reason,
    };
    let chain = CertificateDer::pem_slice_iter(&bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| not_pem(e.to_string()))?;
    if chain.is_empty() {
        return Err(not_pem("no \"BEGIN CERTIFICATE\" block found".into()));
    }
    Ok(chain)
}

fn read_key(key: &str, path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    let bytes = read(key, path)?;
    PrivateKeyDer::from_pem_slice(&bytes).map_err(|e| TlsError::NotPem {
        key: key.to_owned(),
        path: path.to_owned(),
        what: "private key",
        reason: match e {
            rustls::pki_types::pem::Error::NoItemsFound => {
                "no \"BEGIN PRIVATE KEY\", \"BEGIN RSA PRIVATE KEY\" or \"BEGIN EC PRIVATE KEY\" block found".into()
            }
            other => other.to_string(),
        },
    })
}

/// What `/status` needs from a leaf certificate.
struct LeafFacts {
    not_before: SystemTime,
    not_after: SystemTime,
    dns_names: Vec<String>,
}

fn parse_leaf(der: &CertificateDer<'_>) -> Result<LeafFacts, String> {
    use x509_parser::prelude::{FromDer, GeneralName, X509Certificate};
    let (_, cert) = X509Certificate::from_der(der.as_ref()).map_err(|e| e.to_string())?;
    let at = |secs: i64| {
        if secs >= 0 {
            UNIX_EPOCH + Duration::from_secs(secs as u64)
        } else {
            UNIX_EPOCH - Duration::from_secs(secs.unsigned_abs())
        }
    };
    let validity = cert.validity();
    let mut dns_names = Vec::new();
    if let Ok(Some(san)) = cert.subject_alternative_name() {
        for n in &san.value.general_names {
            if let GeneralName::DNSName(d) = n {
                dns_names.push(d.trim_end_matches('.').to_ascii_lowercase());
            }
        }
    }
    Ok(LeafFacts {
        not_before: at(validity.not_before.timestamp()),
        not_after: at(validity.not_after.timestamp()),
        dns_names,
    })
}

/// Makes an ECDSA P-256 certificate signed by its own key for `names` (DNS names,
/// `*.domain` wildcards, IP addresses; `[::1]` brackets are removed). Returns the chain
/// (one certificate) and the key.
pub fn self_signed(
    names: &[String],
) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), String> {
    let mut sans: Vec<String> = Vec::with_capacity(names.len());
    for n in names {
        let n = n.trim_start_matches('[').trim_end_matches(']').to_ascii_lowercase();
        if !n.is_empty() && !sans.contains(&n) {
            sans.push(n);
        }
    }
    let made = rcgen::generate_simple_self_signed(sans).map_err(|e| e.to_string())?;
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(made.signing_key.serialize_der()));
    Ok((vec![made.cert.der().clone()], key))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn self_signed_certificates_carry_their_names_and_a_matching_key() {
        let names = vec!["localhost".to_owned(), "127.0.0.1".to_owned(), "[::1]".to_owned()];
        let spec = CertSpec {
            source: CertSource::SelfSigned { names },
            names: Vec::new(),
            cert_key: "listener[0].tls_cert".into(),
            key_key: "listener[0].tls_key".into(),
        };
        let c = load(&spec).expect("self-signed loads");
        assert_eq!(c.names, vec!["localhost"]);
        assert_eq!(c.origin, "self-signed");
        let now = SystemTime::now();
        assert!(c.not_before <= now && c.not_after > now + EXPIRY_WARNING);
        assert!(c.expiry_warning(now).is_none());
        assert!(
            c.expiry_warning(c.not_after + Duration::from_secs(1))
                .is_some_and(|w| w.contains("expired"))
        );
        let soon = c.not_after - Duration::from_secs(86_400 * 3);
        assert!(c.expiry_warning(soon).is_some_and(|w| w.contains("expires in 3 days")));
        assert!(c.not_after_unix() > unix(now));
    }
}
