//! TLS to origins: one rustls client configuration per group, and the TLS side of each host.
//!
//! Certificates are verified (RFC 5280 path validation and RFC 6125 name checks, done by
//! rustls-webpki) against the group's `ca_file` when it has one, else against the system's
//! roots (the OS store, read once per process; a machine without one gets the bundled Mozilla
//! roots).
//!
//! A certificate listed in `ca_file` is also pinned: when the origin presents exactly it (the
//! same DER bytes) as its end-entity certificate, [`PinningVerifier`] accepts it although
//! webpki cannot build a path from it, as curl, nginx and HAProxy do. That is how internal
//! origins are commonly trusted: `openssl req -x509` makes a self-signed certificate with
//! `CA:TRUE`, which webpki refuses as an end entity (`CaUsedAsEndEntity`), and a leaf listed
//! without its issuer has no path (`UnknownIssuer`). Only those two refusals are overridden,
//! and only for a listed certificate; webpki checks the validity dates before either, so an
//! expired pinned certificate still fails. The name is still checked (RFC 6125, subjectAltName
//! entries only, as for any certificate), and so is the handshake signature, so the origin
//! must hold the pinned certificate's key.
//!
//! `insecure_skip_verify` replaces the chain and name checks by a verifier that accepts any
//! certificate but still checks the handshake signatures, so the connection is at least bound
//! to the key the origin presented.
//!
//! The crypto provider is `ring`, given explicitly so no process-wide default is needed. The
//! configuration is shared by every worker, and with it rustls' session cache: a worker's new
//! connection to an origin resumes a session another worker made (RFC 8446 section 2.2).

use std::path::Path;
use std::sync::{Arc, OnceLock};

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, WebPkiSupportedAlgorithms};
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::server::ParsedCertificate;
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, DistinguishedName, OtherError,
    RootCertStore, SignatureScheme,
};

use crate::spec::{SpecError, TlsSpec};

/// ALPN protocol ids (RFC 7301), in our order of preference.
pub(crate) const ALPN_H2: &[u8] = b"h2";
const ALPN_HTTP11: &[u8] = b"http/1.1";

fn provider() -> Arc<CryptoProvider> {
    static P: OnceLock<Arc<CryptoProvider>> = OnceLock::new();
    P.get_or_init(|| Arc::new(rustls::crypto::ring::default_provider())).clone()
}

/// The system's trust anchors, loaded once. Unreadable entries of the OS store are skipped
/// (and logged); an empty or missing store falls back to the bundled Mozilla roots.
fn system_roots() -> Arc<RootCertStore> {
    static ROOTS: OnceLock<Arc<RootCertStore>> = OnceLock::new();
    ROOTS
        .get_or_init(|| {
            let found = rustls_native_certs::load_native_certs();
            for e in &found.errors {
                tracing::debug!(error = %e, "skipping part of the system certificate store");
            }
            let mut store = RootCertStore::empty();
            let (added, ignored) = store.add_parsable_certificates(found.certs);
            if store.is_empty() {
                store.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
                tracing::info!(
                    roots = store.len(),
                    "no system certificate store; origin TLS trusts the bundled Mozilla roots"
                );
            } else {
                tracing::debug!(added, ignored, "origin TLS trusts the system certificate store");
            }
            Arc::new(store)
        })
        .clone()
}

/// The certificates of a PEM bundle, as trust anchors and as they are (for pinning).
fn load_ca_file(path: &Path) -> Result<(RootCertStore, Vec<CertificateDer<'static>>), String> {
    let shown = path.display();
    let iter = CertificateDer::pem_file_iter(path).map_err(|e| format!("ca_file {shown}: {e}"))?;
    let mut store = RootCertStore::empty();
    let mut certs = Vec::new();
    for cert in iter {
        let cert = cert.map_err(|e| format!("ca_file {shown}: {e}"))?;
        store.add(cert.clone()).map_err(|e| format!("ca_file {shown}: {e}"))?;
        certs.push(cert);
    }
    if store.is_empty() {
        return Err(format!("ca_file {shown}: no PEM certificate in it"));
    }
    Ok((store, certs))
}

/// The client configuration of a group with TLS hosts.
pub(crate) fn client_config(group: &str, spec: &TlsSpec) -> Result<Arc<ClientConfig>, SpecError> {
    let fail = |reason: String| SpecError::Tls { group: group.to_owned(), reason };
    let builder = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| fail(e.to_string()))?;
    let mut cfg = if spec.insecure_skip_verify {
        tracing::warn!(
            group,
            "insecure_skip_verify: origin certificates of this group are NOT verified; anyone on \
             the path can impersonate the origin"
        );
        let algs = provider().signature_verification_algorithms;
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AcceptAnyCert(algs)))
            .with_no_client_auth()
    } else if let Some(path) = &spec.ca_file {
        let (roots, pinned) = load_ca_file(path).map_err(fail)?;
        let webpki = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider())
            .build()
            .map_err(|e| fail(e.to_string()))?;
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(PinningVerifier { webpki, pinned }))
            .with_no_client_auth()
    } else {
        builder.with_root_certificates(system_roots()).with_no_client_auth()
    };
    cfg.alpn_protocols = if spec.http2 {
        vec![ALPN_H2.to_vec(), ALPN_HTTP11.to_vec()]
    } else {
        vec![ALPN_HTTP11.to_vec()]
    };
    Ok(Arc::new(cfg))
}

/// Where and how one host is reached over TLS.
#[derive(Clone)]
pub(crate) struct TlsTarget {
    pub(crate) connector: tokio_rustls::TlsConnector,
    /// SNI and the name the certificate must carry.
    pub(crate) name: ServerName<'static>,
}

impl std::fmt::Debug for TlsTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsTarget").field("name", &self.name).finish_non_exhaustive()
    }
}

impl TlsTarget {
    /// `name` was checked by [`crate::GroupSpec`] validation; an invalid one is an error here
    /// too rather than a panic.
    pub(crate) fn new(group: &str, cfg: &Arc<ClientConfig>, name: &str) -> Result<Self, SpecError> {
        let name = ServerName::try_from(name.to_owned()).map_err(|_| SpecError::BadTlsName {
            group: group.to_owned(),
            name: name.to_owned(),
        })?;
        Ok(Self { connector: tokio_rustls::TlsConnector::from(cfg.clone()), name })
    }
}

/// A group's `ca_file`: webpki's verdict, except that a certificate of the file presented as
/// the end entity is accepted where webpki finds no path for it (see the module doc).
#[derive(Debug)]
struct PinningVerifier {
    webpki: Arc<WebPkiServerVerifier>,
    /// The certificates of `ca_file`, DER as read.
    pinned: Vec<CertificateDer<'static>>,
}

impl PinningVerifier {
    fn is_pinned(&self, end_entity: &CertificateDer<'_>) -> bool {
        self.pinned.iter().any(|p| p.as_ref() == end_entity.as_ref())
    }
}

/// Whether webpki refused a certificate only for want of a path to a trust anchor: it is a CA
/// certificate presented as an end entity, or its issuer is unknown. webpki reports both after
/// the certificate's own validity dates (and, for an unknown issuer, its basic constraints
/// and extended key usage) have passed.
fn refused_for_path_only(e: &rustls::Error) -> bool {
    match e {
        rustls::Error::InvalidCertificate(CertificateError::UnknownIssuer) => true,
        rustls::Error::InvalidCertificate(CertificateError::Other(OtherError(inner))) => {
            matches!(inner.downcast_ref::<webpki::Error>(), Some(webpki::Error::CaUsedAsEndEntity))
        }
        _ => false,
    }
}

impl ServerCertVerifier for PinningVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let refused = match self.webpki.verify_server_cert(
            end_entity,
            intermediates,
            server_name,
            ocsp_response,
            now,
        ) {
            Ok(v) => return Ok(v),
            Err(e) => e,
        };
        if !refused_for_path_only(&refused) || !self.is_pinned(end_entity) {
            return Err(refused);
        }
        let cert = ParsedCertificate::try_from(end_entity)?;
        rustls::client::verify_server_name(&cert, server_name)?;
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.webpki.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.webpki.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.webpki.supported_verify_schemes()
    }

    fn root_hint_subjects(&self) -> Option<&[DistinguishedName]> {
        self.webpki.root_hint_subjects()
    }
}

/// `insecure_skip_verify`: any certificate chain and name, but a valid handshake signature.
#[derive(Debug)]
struct AcceptAnyCert(WebPkiSupportedAlgorithms);

impl ServerCertVerifier for AcceptAnyCert {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.0)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.0)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ca_file_errors_are_clear() {
        let dir = std::env::temp_dir().join(format!("reel-origin-tls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let missing = dir.join("missing.pem");
        let spec = TlsSpec { ca_file: Some(missing.clone()), ..TlsSpec::default() };
        let e = client_config("g", &spec).unwrap_err().to_string();
        assert!(e.contains("ca_file") && e.contains("missing.pem"), "{e}");

        let empty = dir.join("empty.pem");
        std::fs::write(&empty, "not a certificate\n").unwrap();
        let spec = TlsSpec { ca_file: Some(empty), ..TlsSpec::default() };
        let e = client_config("g", &spec).unwrap_err().to_string();
        assert!(e.contains("no PEM certificate"), "{e}");

        let garbage = dir.join("garbage.pem");
        std::fs::write(&garbage, "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")
            .unwrap();
        let spec = TlsSpec { ca_file: Some(garbage), ..TlsSpec::default() };
        assert!(client_config("g", &spec).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn alpn_follows_http2() {
        let on = client_config("g", &TlsSpec { http2: true, ..TlsSpec::default() }).unwrap();
        assert_eq!(on.alpn_protocols, vec![b"h2".to_vec(), b"http/1.1".to_vec()]);
        let off = client_config("g", &TlsSpec::default()).unwrap();
        assert_eq!(off.alpn_protocols, vec![b"http/1.1".to_vec()]);
    }

    #[test]
    fn system_roots_are_never_empty() {
        assert!(!system_roots().is_empty());
    }
}
