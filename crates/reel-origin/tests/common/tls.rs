//! A TLS origin on 127.0.0.1 for the client tests: a certificate authority made in the test
//! (rcgen), a server certificate it signs, and hyper serving HTTP/1.1 or HTTP/2 as ALPN
//! chose. It records what a real origin could see: accepted TCP connections, completed
//! handshakes, the SNI name, and the protocol, `Host`/authority and path of each request.
//! [`SelfSigned`] is the other way origins are trusted: a self-signed certificate pinned in
//! `ca_file`.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU16, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair, KeyUsagePurpose,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio::net::TcpListener;

/// A certificate authority and its PEM file.
pub(crate) struct TestCa {
    issuer: CertifiedIssuer<'static, KeyPair>,
    pub dir: tempfile::TempDir,
}

impl TestCa {
    pub(crate) fn new(name: &str) -> TestCa {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let issuer = CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap();
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("ca.pem"), issuer.pem()).unwrap();
        TestCa { issuer, dir }
    }

    /// The CA certificate as a PEM bundle on disk.
    pub(crate) fn pem_path(&self) -> PathBuf {
        self.dir.path().join("ca.pem")
    }

    /// A server certificate for `names` (DNS names or IP addresses) and its key.
    pub(crate) fn issue(
        &self,
        names: &[&str],
    ) -> (CertificateDer<'static>, PrivateKeyDer<'static>) {
        let (cert, key, _) = self.issue_with_pem(names);
        (cert, key)
    }

    /// Like [`TestCa::issue`], with the certificate in PEM too.
    pub(crate) fn issue_with_pem(
        &self,
        names: &[&str],
    ) -> (CertificateDer<'static>, PrivateKeyDer<'static>, String) {
        let key = KeyPair::generate().unwrap();
        let mut params =
            CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>())
                .unwrap();
        params.distinguished_name.push(DnType::CommonName, names[0]);
        let cert = params.signed_by(&key, &*self.issuer).unwrap();
        let der = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
        (cert.der().clone(), der, cert.pem())
    }
}

/// A self-signed server certificate with `CA:TRUE`, what `openssl req -x509` makes, and its
/// PEM file (for `ca_file`).
pub(crate) struct SelfSigned {
    pub cert: CertificateDer<'static>,
    key: KeyPair,
    pub dir: tempfile::TempDir,
}

impl SelfSigned {
    /// Valid now, for `origin.test`, `localhost` and `127.0.0.1`.
    pub(crate) fn new() -> SelfSigned {
        Self::with(|_| {})
    }

    /// Like [`SelfSigned::new`], with `edit` applied to the parameters before signing.
    pub(crate) fn with(edit: impl FnOnce(&mut CertificateParams)) -> SelfSigned {
        let names = ["origin.test", "localhost", "127.0.0.1"];
        let mut params =
            CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>())
                .unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, "origin.test");
        edit(&mut params);
        let key = KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("cert.pem"), cert.pem()).unwrap();
        SelfSigned { cert: cert.der().clone(), key, dir }
    }

    pub(crate) fn pem_path(&self) -> PathBuf {
        self.dir.path().join("cert.pem")
    }

    pub(crate) fn key(&self) -> PrivateKeyDer<'static> {
        PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(self.key.serialize_der()))
    }
}

/// A PEM bundle in `dir` holding the certificates of the PEM files `parts`, in order.
pub(crate) fn bundle(dir: &Path, parts: &[PathBuf]) -> PathBuf {
    let text: String = parts.iter().map(|p| std::fs::read_to_string(p).unwrap()).collect();
    let path = dir.join("bundle.pem");
    std::fs::write(&path, text).unwrap();
    path
}

/// One request as the origin saw it.
#[derive(Clone, Debug)]
pub(crate) struct TlsSeen {
    pub version: http::Version,
    pub path: String,
    /// `Host` header for HTTP/1.1, `:authority` for HTTP/2.
    pub authority: Option<String>,
    pub user_agent: Option<String>,
}

#[derive(Default)]
pub(crate) struct TlsState {
    pub connections: AtomicUsize,
    pub handshakes: AtomicUsize,
    pub health_requests: AtomicUsize,
    pub health_status: AtomicU16,
    pub sni: Mutex<Vec<Option<String>>>,
    /// Whether each completed handshake resumed an earlier session.
    pub resumed: Mutex<Vec<bool>>,
    pub seen: Mutex<Vec<TlsSeen>>,
    /// Requests to `/gate` wait here until this many are in flight at once.
    pub gate: Mutex<Option<Arc<tokio::sync::Barrier>>>,
}

pub(crate) struct TlsServer {
    pub addr: SocketAddr,
    pub state: Arc<TlsState>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for TlsServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl TlsServer {
    /// Serves with a certificate from `ca` for `origin.test`, `localhost` and `127.0.0.1`;
    /// offers HTTP/2 by ALPN when `h2`.
    pub(crate) async fn start(ca: &TestCa, h2: bool) -> TlsServer {
        let (cert, key) = ca.issue(&["origin.test", "localhost", "127.0.0.1"]);
        Self::start_with(vec![cert], key, h2).await
    }

    /// Serves `chain` (leaf first) with `key`, which must belong to the leaf.
    pub(crate) async fn start_with(
        chain: Vec<CertificateDer<'static>>,
        key: PrivateKeyDer<'static>,
        h2: bool,
    ) -> TlsServer {
        let cfg = server_builder().with_single_cert(chain, key).unwrap();
        Self::serve(cfg, h2).await
    }

    /// Presents `chain` but signs the handshake with `key` whatever it is: what someone who
    /// copied a certificate but not its key would try. Speaks only `version`.
    pub(crate) async fn start_with_wrong_key(
        chain: Vec<CertificateDer<'static>>,
        key: PrivateKeyDer<'static>,
        version: &'static rustls::SupportedProtocolVersion,
    ) -> TlsServer {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let signer = provider.key_provider.load_private_key(key).unwrap();
        let certified = rustls::sign::CertifiedKey::new(chain, signer);
        let cfg = rustls::ServerConfig::builder_with_provider(provider)
            .with_protocol_versions(&[version])
            .unwrap()
            .with_no_client_auth()
            .with_cert_resolver(Arc::new(rustls::sign::SingleCertAndKey::from(certified)));
        Self::serve(cfg, false).await
    }

    async fn serve(mut cfg: rustls::ServerConfig, h2: bool) -> TlsServer {
        cfg.alpn_protocols = if h2 {
            vec![b"h2".to_vec(), b"http/1.1".to_vec()]
        } else {
            vec![b"http/1.1".to_vec()]
        };
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(cfg));
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let state = Arc::new(TlsState::default());
        state.health_status.store(200, Ordering::SeqCst);
        let st = state.clone();
        let task = tokio::spawn(async move {
            let mut conns = tokio::task::JoinSet::new();
            while let Ok((tcp, _)) = listener.accept().await {
                st.connections.fetch_add(1, Ordering::SeqCst);
                let (acceptor, st) = (acceptor.clone(), st.clone());
                conns.spawn(async move {
                    // A client that rejects our certificate aborts here.
                    let Ok(tls) = acceptor.accept(tcp).await else { return };
                    st.handshakes.fetch_add(1, Ordering::SeqCst);
                    let conn = tls.get_ref().1;
                    st.sni.lock().unwrap().push(conn.server_name().map(str::to_owned));
                    let resumed = conn.handshake_kind() == Some(rustls::HandshakeKind::Resumed);
                    st.resumed.lock().unwrap().push(resumed);
                    let is_h2 = conn.alpn_protocol() == Some(b"h2");
                    let st2 = st.clone();
                    let svc = hyper::service::service_fn(move |req| handle(req, st2.clone()));
                    let io = TokioIo::new(tls);
                    if is_h2 {
                        let _ = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                            .serve_connection(io, svc)
                            .await;
                    } else {
                        let _ = hyper::server::conn::http1::Builder::new()
                            .serve_connection(io, svc)
                            .await;
                    }
                });
            }
        });
        TlsServer { addr, state, task }
    }

    pub(crate) fn host(&self) -> String {
        self.addr.to_string()
    }

    pub(crate) fn connections(&self) -> usize {
        self.state.connections.load(Ordering::SeqCst)
    }

    pub(crate) fn handshakes(&self) -> usize {
        self.state.handshakes.load(Ordering::SeqCst)
    }

    pub(crate) fn requests(&self) -> usize {
        self.state.seen.lock().unwrap().len()
    }

    pub(crate) fn last_seen(&self) -> TlsSeen {
        self.state.seen.lock().unwrap().last().cloned().expect("a request")
    }

    pub(crate) fn sni(&self) -> Vec<Option<String>> {
        self.state.sni.lock().unwrap().clone()
    }
}

fn server_builder() -> rustls::ConfigBuilder<rustls::ServerConfig, rustls::server::WantsServerCert>
{
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
}

async fn handle(
    req: Request<Incoming>,
    st: Arc<TlsState>,
) -> Result<Response<Full<Bytes>>, std::convert::Infallible> {
    let authority = req
        .uri()
        .authority()
        .map(|a| a.to_string())
        .or_else(|| req.headers().get("host").and_then(|v| v.to_str().ok()).map(str::to_owned));
    let seen = TlsSeen {
        version: req.version(),
        path: req.uri().path().to_owned(),
        authority,
        user_agent: req.headers().get("user-agent").and_then(|v| v.to_str().ok()).map(Into::into),
    };
    if seen.path == "/health" {
        st.health_requests.fetch_add(1, Ordering::SeqCst);
        let status = st.health_status.load(Ordering::SeqCst);
        let mut r = Response::new(Full::new(Bytes::new()));
        *r.status_mut() = http::StatusCode::from_u16(status).unwrap();
        return Ok(r);
    }
    let version = format!("{:?}", seen.version);
    st.seen.lock().unwrap().push(seen);
    let gate = st.gate.lock().unwrap().clone();
    if let Some(g) = gate.filter(|_| req.uri().path() == "/gate") {
        g.wait().await;
    }
    let mut r = Response::new(Full::new(Bytes::from_static(b"hello over tls")));
    r.headers_mut().insert("x-version", version.parse().unwrap());
    Ok(r)
}
