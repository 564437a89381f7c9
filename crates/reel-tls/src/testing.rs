//! Test certificates (feature `testing`, for this workspace's tests only): a CA made in
//! memory, leaf certificates it signs written as PEM files, and rustls client
//! configurations that trust it.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};
use rustls::pki_types::CertificateDer;

/// A certificate authority living in memory.
pub struct TestCa {
    issuer: CertifiedIssuer<'static, KeyPair>,
}

impl Default for TestCa {
    fn default() -> Self {
        Self::new()
    }
}

impl TestCa {
    /// A new CA with a fresh ECDSA P-256 key.
    pub fn new() -> TestCa {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, "reel test CA");
        let key = KeyPair::generate().expect("CA key");
        TestCa { issuer: CertifiedIssuer::self_signed(params, key).expect("CA certificate") }
    }

    /// The CA certificate.
    pub fn der(&self) -> CertificateDer<'static> {
        self.issuer.der().clone()
    }

    /// The CA certificate as PEM.
    pub fn pem(&self) -> String {
        self.issuer.pem()
    }

    /// A leaf certificate for `names` signed by this CA: `(certificate PEM, key PEM)`.
    pub fn leaf(&self, names: &[&str]) -> (String, String) {
        let params =
            CertificateParams::new(names.iter().map(|s| s.to_string()).collect::<Vec<_>>())
                .expect("leaf params");
        let key = KeyPair::generate().expect("leaf key");
        let cert = params.signed_by(&key, &self.issuer).expect("leaf certificate");
        (cert.pem(), key.serialize_pem())
    }

    /// A leaf for `names` that expired in 2001: `(certificate PEM, key PEM)`.
    pub fn expired_leaf(&self, names: &[&str]) -> (String, String) {
        let mut params =
            CertificateParams::new(names.iter().map(|s| s.to_string()).collect::<Vec<_>>())
                .expect("leaf params");
        params
            .distinguished_name
            .push(DnType::CommonName, names.first().copied().unwrap_or("leaf"));
        params.not_before = rcgen::date_time_ymd(2000, 1, 1);
        params.not_after = rcgen::date_time_ymd(2001, 1, 1);
        let key = KeyPair::generate().expect("leaf key");
        let cert = params.signed_by(&key, &self.issuer).expect("leaf certificate");
        (cert.pem(), key.serialize_pem())
    }

    /// Writes a leaf for `names` as `<stem>.pem` and `<stem>.key` in `dir`.
    pub fn write_leaf(&self, dir: &Path, stem: &str, names: &[&str]) -> (PathBuf, PathBuf) {
        let (cert, key) = self.leaf(names);
        let (c, k) = (dir.join(format!("{stem}.pem")), dir.join(format!("{stem}.key")));
        std::fs::write(&c, cert).expect("write certificate");
        std::fs::write(&k, key).expect("write key");
        (c, k)
    }

    /// A client configuration trusting this CA, offering `alpn`, with its own in-memory
    /// session cache (connections made with the same configuration can resume).
    pub fn client_config(&self, alpn: &[&[u8]]) -> Arc<rustls::ClientConfig> {
        client_config_trusting(&[self.der()], alpn)
    }
}

/// A client configuration (TLS 1.3 and 1.2) trusting `roots` and offering `alpn`.
pub fn client_config_trusting(
    roots: &[CertificateDer<'static>],
    alpn: &[&[u8]],
) -> Arc<rustls::ClientConfig> {
    let mut store = rustls::RootCertStore::empty();
    for r in roots {
        store.add(r.clone()).expect("trust anchor");
    }
    let mut c = rustls::ClientConfig::builder_with_provider(crate::cert::provider())
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_root_certificates(store)
        .with_no_client_auth();
    c.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Arc::new(c)
}

/// Like [`client_config_trusting`] but TLS 1.2 only.
pub fn client_config_tls12(roots: &[CertificateDer<'static>]) -> Arc<rustls::ClientConfig> {
    let mut store = rustls::RootCertStore::empty();
    for r in roots {
        store.add(r.clone()).expect("trust anchor");
    }
    let c = rustls::ClientConfig::builder_with_provider(crate::cert::provider())
        .with_protocol_versions(&[&rustls::version::TLS12])
        .expect("versions")
        .with_root_certificates(store)
        .with_no_client_auth();
    Arc::new(c)
}
