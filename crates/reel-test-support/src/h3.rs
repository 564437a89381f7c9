//! An HTTP/3 client for tests: a quinn endpoint on its own UDP socket (so a test can move
//! it to another port mid-connection), rustls trusting any certificate (loopback servers
//! with test certificates) or a given CA, and whole-response helpers.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::{Buf, Bytes};
use quinn::crypto::rustls::QuicClientConfig;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};

use crate::h2::Reply;

/// Accepts any certificate but checks the handshake signatures; counts the certificates
/// it was shown (one per full handshake, none for a resumed one).
#[derive(Debug)]
struct AnyCert(Arc<rustls::crypto::CryptoProvider>, Arc<AtomicUsize>);

impl ServerCertVerifier for AnyCert {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        self.1.fetch_add(1, Ordering::SeqCst);
        Ok(ServerCertVerified::assertion())
    }
    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }
    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }
    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// A client configuration with ALPN `h3` that accepts any server certificate.
pub fn client_config() -> quinn::ClientConfig {
    client_config_counting().0
}

/// [`client_config`], and how many server certificates its handshakes were shown: a full
/// handshake is shown one, a resumed one (a session ticket the server took) none.
pub fn client_config_counting() -> (quinn::ClientConfig, Arc<AtomicUsize>) {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let shown = Arc::new(AtomicUsize::new(0));
    let mut tls = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .expect("TLS 1.3")
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AnyCert(provider, shown.clone())))
        .with_no_client_auth();
    tls.alpn_protocols = vec![b"h3".to_vec()];
    let quic = QuicClientConfig::try_from(Arc::new(tls)).expect("QUIC client config");
    (quinn::ClientConfig::new(Arc::new(quic)), shown)
}

/// A client endpoint on a new UDP socket of 127.0.0.1.
pub fn endpoint() -> quinn::Endpoint {
    endpoint_counting().0
}

/// [`endpoint`], with the count of server certificates of [`client_config_counting`]: its
/// connections share one session store, so a second one may resume the first's session.
pub fn endpoint_counting() -> (quinn::Endpoint, Arc<AtomicUsize>) {
    let mut e = quinn::Endpoint::client("127.0.0.1:0".parse().expect("address")).expect("endpoint");
    let (config, shown) = client_config_counting();
    e.set_default_client_config(config);
    (e, shown)
}

/// The request side of an HTTP/3 connection.
pub type SendRequest = h3::client::SendRequest<h3_quinn::OpenStreams, Bytes>;

/// One request's stream (its response is read from it).
pub type RequestStream = h3::client::RequestStream<h3_quinn::BidiStream<Bytes>, Bytes>;

/// Connects to `addr` over QUIC (server name `localhost`) and starts HTTP/3; the
/// connection's driver runs as a local task. Returns the QUIC connection too.
pub async fn connect(
    ep: &quinn::Endpoint,
    addr: SocketAddr,
) -> Result<(quinn::Connection, SendRequest), String> {
    let conn = ep
        .connect(addr, "localhost")
        .map_err(|e| e.to_string())?
        .await
        .map_err(|e| e.to_string())?;
    let (mut driver, send) = h3::client::new(h3_quinn::Connection::new(conn.clone()))
        .await
        .map_err(|e| e.to_string())?;
    tokio::spawn(async move {
        let _ = std::future::poll_fn(|cx| driver.poll_close(cx)).await;
    });
    Ok((conn, send))
}

/// Sends `method path` (authority `localhost`) with `headers` and an optional body and
/// reads the whole response.
pub async fn request(
    send: &mut SendRequest,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&[u8]>,
) -> Result<Reply, String> {
    request_at(send, "localhost", method, path, headers, body).await
}

/// [`request`] with another authority (the `Host` the server sees).
pub async fn request_at(
    send: &mut SendRequest,
    authority: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&[u8]>,
) -> Result<Reply, String> {
    let mut b = http::Request::builder().method(method).uri(format!("https://{authority}{path}"));
    for (n, v) in headers {
        b = b.header(*n, *v);
    }
    let req = b.body(()).map_err(|e| e.to_string())?;
    let mut stream = send.send_request(req).await.map_err(|e| e.to_string())?;
    if let Some(body) = body {
        stream.send_data(Bytes::copy_from_slice(body)).await.map_err(|e| e.to_string())?;
    }
    stream.finish().await.map_err(|e| e.to_string())?;
    let resp = stream.recv_response().await.map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    while let Some(mut chunk) = stream.recv_data().await.map_err(|e| e.to_string())? {
        while chunk.has_remaining() {
            let c = chunk.chunk();
            out.extend_from_slice(c);
            let n = c.len();
            chunk.advance(n);
        }
    }
    Ok(Reply { status: resp.status().as_u16(), headers: resp.headers().clone(), body: out })
}

/// `GET path`.
pub async fn get(send: &mut SendRequest, path: &str) -> Result<Reply, String> {
    request(send, "GET", path, &[], None).await
}
