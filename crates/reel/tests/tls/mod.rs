//! HTTPS and HTTP/2 against the real binary: certificates made by the test (a CA and its
//! leaves as PEM files), real handshakes on 127.0.0.1. The cache behind HTTP/2 (hit,
//! miss, coalesced miss, range, 304, HEAD), split cookie fields reaching the origin as
//! one, many multiplexed streams, the flood defences, SNI and `sni_strict`, certificate
//! reloads under traffic, a mismatched key refused by `reel check` and by a reload, and
//! session resumption across workers.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use reel_test_support::h2::{
    CANCEL, CONTINUATION, END_HEADERS, END_STREAM, ENHANCE_YOUR_CALM, HEADERS, PING, RST_STREAM,
    RawH2, Reply, SETTINGS, WINDOW_UPDATE, exchange, frame,
};
use reel_test_support::{skip, wait_until_async};
use reel_tls::testing::TestCa;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::common::{BIN, Conf, Object, Origin, Reel, eventually, get, metric, request};
use crate::origin::Gate;

type Tls = tokio_rustls::client::TlsStream<TcpStream>;

pub(crate) fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime")
}

/// Test PKI: a CA and leaf files in the test's directory.
pub(crate) struct Pki {
    ca: TestCa,
    dir: PathBuf,
}

impl Pki {
    pub(crate) fn new(dir: &Path) -> Pki {
        Pki { ca: TestCa::new(), dir: dir.to_path_buf() }
    }

    /// Writes `<stem>.pem`/`<stem>.key` for `names`; returns the leaf certificate.
    pub(crate) fn leaf(&self, stem: &str, names: &[&str]) -> CertificateDer<'static> {
        let (c, _) = self.ca.write_leaf(&self.dir, stem, names);
        pem_leaf(&c)
    }

    pub(crate) fn client(&self, alpn: &[&[u8]]) -> Arc<rustls::ClientConfig> {
        self.ca.client_config(alpn)
    }

    /// A client that speaks TLS 1.2 only (no ALPN).
    pub(crate) fn client_tls12(&self) -> Arc<rustls::ClientConfig> {
        reel_tls::testing::client_config_tls12(&[self.ca.der()])
    }
}

fn pem_leaf(path: &Path) -> CertificateDer<'static> {
    use rustls::pki_types::pem::PemObject;
    CertificateDer::pem_file_iter(path).expect("pem").next().expect("a certificate").expect("der")
}

/// `tls_cert`/`tls_key` lines for the leaf `stem` of `pki`.
pub(crate) fn tls_lines(pki: &Pki, stem: &str) -> String {
    let d = pki.dir.display();
    format!("tls_cert = \"{d}/{stem}.pem\"\ntls_key = \"{d}/{stem}.key\"\n")
}

/// A config with a plain listener `http` and a TLS listener `https` serving `edge`.
pub(crate) fn tls_conf(dir: &Path, origin: &Origin, pki: &Pki) -> Conf {
    let mut c = Conf::new(dir, origin);
    c.listeners.push(("https".into(), "127.0.0.1:0".into()));
    c.listener_lines.insert("https".into(), tls_lines(pki, "edge"));
    c
}

async fn tls_connect(
    addr: SocketAddr,
    cfg: Arc<rustls::ClientConfig>,
    name: &str,
) -> std::io::Result<Tls> {
    let tcp = TcpStream::connect(addr).await?;
    let name = ServerName::try_from(name.to_owned()).expect("server name");
    tokio_rustls::TlsConnector::from(cfg).connect(name, tcp).await
}

fn leaf_of(s: &Tls) -> CertificateDer<'static> {
    s.get_ref().1.peer_certificates().and_then(|c| c.first().cloned()).expect("peer certificate")
}

pub(crate) async fn h2_client(
    addr: SocketAddr,
    cfg: Arc<rustls::ClientConfig>,
    name: &str,
) -> h2::client::SendRequest<Bytes> {
    let s = tls_connect(addr, cfg, name).await.expect("TLS");
    assert_eq!(s.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
    reel_test_support::h2::client(s).await
}

async fn h2_req(
    send: &h2::client::SendRequest<Bytes>,
    method: &str,
    path: &str,
    fields: &[(&str, &str)],
) -> Result<Reply, h2::Error> {
    let mut b =
        http::Request::builder().method(method).uri(format!("https://edge.example.test{path}"));
    for (n, v) in fields {
        b = b.header(*n, *v);
    }
    exchange(send, b.body(()).expect("request"), None).await
}

pub(crate) async fn h2_get(send: &h2::client::SendRequest<Bytes>, path: &str) -> Reply {
    h2_req(send, "GET", path, &[]).await.expect("h2 request")
}

/// One HTTPS/1.1 request on a new connection (`Connection: close`): status line and body.
pub(crate) async fn https11_get(
    addr: SocketAddr,
    cfg: Arc<rustls::ClientConfig>,
    path: &str,
) -> std::io::Result<(String, Vec<u8>, CertificateDer<'static>)> {
    let mut s = tls_connect(addr, cfg, "edge.example.test").await?;
    let leaf = leaf_of(&s);
    let req =
        format!("GET {path} HTTP/1.1\r\nHost: edge.example.test\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).await?;
    let mut raw = Vec::new();
    match s.read_to_end(&mut raw).await {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof && !raw.is_empty() => {}
        Err(e) => return Err(e),
    }
    let end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| std::io::Error::other("no response head"))?;
    let head = String::from_utf8_lossy(&raw[..end]).to_string();
    Ok((head, raw[end + 4..].to_vec(), leaf))
}

fn body(n: usize, seed: u8) -> Vec<u8> {
    (0..n).map(|i| ((i * 31 + i / 977) as u8).wrapping_add(seed)).collect()
}

/// HPACK for `GET https://edge.example.test{path}` (static table and literals).
fn get_block(path: &str) -> Vec<u8> {
    reel_test_support::h2::get_block("edge.example.test", path)
}

mod buffers;
mod certificates;
mod http2;
