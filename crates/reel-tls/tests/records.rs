//! The record layer after the handshake, against rustls clients on 127.0.0.1: every
//! version and cipher suite carries bytes both ways once the session has left rustls (to
//! the kernel where it has kTLS, to reel's own record layer otherwise), and the control
//! records a client may send end the stream as they should.
//!
//! Where the kernel has the `tls` module (or `REEL_REQUIRE_KTLS=1` says it must, as in
//! `benches/ktls-vm.sh`) the sessions must be the kernel's; elsewhere they must be reel's
//! with the reason `no_module`.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use reel_tls::testing::TestCa;
use reel_tls::{Fallback, HandshakeInfo, KtlsMode, RecordPath, Tickets, TlsVersion, server_config};
use rustls::SupportedCipherSuite;
use rustls::crypto::ring::cipher_suite as cs;
use rustls::pki_types::ServerName;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

/// How the server's side of a connection ended.
#[derive(Debug, PartialEq, Eq)]
enum End {
    /// Read returned end of stream.
    Eof,
    /// Read failed.
    Error(std::io::ErrorKind),
}

fn kernel_expected() -> bool {
    std::env::var_os("REEL_REQUIRE_KTLS").is_some_and(|v| v == "1") || reel_tls::kernel_has_tls()
}

/// Echo server: every byte read is written back; when reading ends the server sends
/// `close_notify` and reports how reading ended.
async fn echo(mode: KtlsMode) -> (u16, TestCa, mpsc::UnboundedReceiver<(HandshakeInfo, End)>) {
    let ca = TestCa::new();
    let (cert, key) = ca.leaf(&["edge.test"]);
    let dir = tempfile::tempdir().expect("tmp");
    let (c, k) = (dir.path().join("c.pem"), dir.path().join("k.pem"));
    std::fs::write(&c, cert).expect("write");
    std::fs::write(&k, key).expect("write");
    let loaded = Arc::new(
        reel_tls::cert::load(&reel_tls::CertSpec {
            source: reel_tls::CertSource::Files { cert: c, key: k },
            names: Vec::new(),
            cert_key: "c".into(),
            key_key: "k".into(),
        })
        .expect("load"),
    );
    let tickets = Tickets::new().expect("tickets");
    let tls = Arc::new(
        server_config("l", loaded, &[], false, true, reel_tls::TlsVersion::Tls12, mode, &tickets)
            .expect("cfg"),
    );
    let l = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = l.local_addr().expect("addr").port();
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = l.accept().await else { return };
            let (tls, tx) = (tls.clone(), tx.clone());
            tokio::spawn(async move {
                let Ok((mut s, info)) = reel_tls::accept(&tls, tcp, Duration::from_secs(5)).await
                else {
                    return;
                };
                let mut buf = vec![0u8; 70_000];
                let end = loop {
                    match s.read(&mut buf).await {
                        Ok(0) => break End::Eof,
                        Ok(n) => {
                            if s.write_all(&buf[..n]).await.is_err() || s.flush().await.is_err() {
                                break End::Error(std::io::ErrorKind::BrokenPipe);
                            }
                        }
                        Err(e) => break End::Error(e.kind()),
                    }
                };
                let _ = s.shutdown().await;
                let _ = tx.send((info, end));
            });
        }
    });
    (port, ca, rx)
}

fn client(
    ca: &TestCa,
    suite: SupportedCipherSuite,
    version: &'static rustls::SupportedProtocolVersion,
) -> Arc<rustls::ClientConfig> {
    let mut provider = rustls::crypto::ring::default_provider();
    provider.cipher_suites = vec![suite];
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca.der()).expect("root");
    Arc::new(
        rustls::ClientConfig::builder_with_provider(Arc::new(provider))
            .with_protocol_versions(&[version])
            .expect("versions")
            .with_root_certificates(roots)
            .with_no_client_auth(),
    )
}

type Client = tokio_rustls::client::TlsStream<TcpStream>;

async fn connect(port: u16, cfg: Arc<rustls::ClientConfig>) -> Client {
    let tcp = TcpStream::connect(("127.0.0.1", port)).await.expect("connect");
    let name = ServerName::try_from("edge.test").expect("name");
    tokio_rustls::TlsConnector::from(cfg).connect(name, tcp).await.expect("handshake")
}

fn pattern(n: usize, seed: u8) -> Vec<u8> {
    (0..n).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)).collect()
}

fn check_path(info: &HandshakeInfo, mode: KtlsMode) {
    match mode {
        KtlsMode::Off => {
            assert_eq!((info.path, info.fallback), (RecordPath::Userspace, Some(Fallback::Off)))
        }
        KtlsMode::Auto if kernel_expected() => {
            assert_eq!((info.path, info.fallback), (RecordPath::Ktls, None), "kTLS expected")
        }
        KtlsMode::Auto => assert_eq!(
            (info.path, info.fallback),
            (RecordPath::Userspace, Some(Fallback::NoModule))
        ),
    }
}

#[tokio::test]
async fn ktls_every_version_and_suite_carries_bytes_both_ways_after_the_handover() {
    let suites: [(SupportedCipherSuite, &'static rustls::SupportedProtocolVersion); 6] = [
        (cs::TLS13_AES_128_GCM_SHA256, &rustls::version::TLS13),
        (cs::TLS13_AES_256_GCM_SHA384, &rustls::version::TLS13),
        (cs::TLS13_CHACHA20_POLY1305_SHA256, &rustls::version::TLS13),
        // The test CA's keys are ECDSA (rcgen's default).
        (cs::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, &rustls::version::TLS12),
        (cs::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384, &rustls::version::TLS12),
        (cs::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256, &rustls::version::TLS12),
    ];
    for mode in [KtlsMode::Auto, KtlsMode::Off] {
        let (port, ca, mut rx) = echo(mode).await;
        for (i, (suite, version)) in suites.iter().enumerate() {
            let mut c = connect(port, client(&ca, *suite, version)).await;
            for (j, n) in [1usize, 16_384, 16_385, 100_000, 1_000_000].into_iter().enumerate() {
                let sent = pattern(n, (i * 7 + j) as u8);
                let (mut r, mut w) = tokio::io::split(&mut c);
                let writer = async {
                    w.write_all(&sent).await.expect("write");
                    w.flush().await.expect("flush");
                };
                let mut got = vec![0u8; n];
                let reader = r.read_exact(&mut got);
                let (_, read) = tokio::join!(writer, reader);
                read.expect("echo");
                assert!(got == sent, "{mode:?} {suite:?} {n} bytes differ");
            }
            c.shutdown().await.expect("close_notify");
            let mut rest = Vec::new();
            c.read_to_end(&mut rest).await.expect("server's close_notify, no error");
            let (info, end) = rx.recv().await.expect("report");
            assert_eq!(end, End::Eof, "{mode:?} {suite:?}: close_notify is a clean end");
            let v = if *version == &rustls::version::TLS13 {
                TlsVersion::Tls13
            } else {
                TlsVersion::Tls12
            };
            assert_eq!(info.version, v);
            check_path(&info, mode);
        }
    }
}

#[tokio::test]
async fn ktls_a_client_key_update_ends_the_connection_gracefully_and_is_counted() {
    for mode in [KtlsMode::Auto, KtlsMode::Off] {
        let (port, ca, mut rx) = echo(mode).await;
        let mut c = connect(port, ca.client_config(&[b"http/1.1"])).await;
        c.write_all(b"before").await.expect("write");
        let mut got = [0u8; 6];
        c.read_exact(&mut got).await.expect("echo");
        let before = reel_tls::KEY_UPDATE_CLOSES.load(Ordering::Relaxed);
        c.get_mut().1.refresh_traffic_keys().expect("key update");
        c.write_all(b"after").await.expect("write");
        c.flush().await.expect("flush");
        // The server stops reading at the key update, says close_notify and closes: the
        // client sees an orderly end, never the bytes sent after the update echoed.
        let mut rest = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(10), c.read_to_end(&mut rest))
            .await
            .expect("server closed");
        assert!(rest.is_empty(), "{mode:?}: {rest:?}");
        let (info, end) = rx.recv().await.expect("report");
        assert_eq!(end, End::Eof, "{mode:?}");
        check_path(&info, mode);
        assert!(reel_tls::KEY_UPDATE_CLOSES.load(Ordering::Relaxed) > before);
    }
}

#[tokio::test]
async fn ktls_a_reset_ends_reading_with_an_error_not_a_panic() {
    for mode in [KtlsMode::Auto, KtlsMode::Off] {
        let (port, ca, mut rx) = echo(mode).await;
        let mut c = connect(port, ca.client_config(&[b"http/1.1"])).await;
        // One echo first: the server's side of the handshake is over.
        c.write_all(b"x").await.expect("write");
        c.read_exact(&mut [0u8; 1]).await.expect("echo");
        // Abort: the TCP connection goes away without close_notify (RST via linger 0).
        let (tcp, _) = c.into_inner();
        let std = tcp.into_std().expect("std");
        socket2::SockRef::from(&std).set_linger(Some(Duration::ZERO)).expect("linger");
        drop(std);
        let (info, end) = rx.recv().await.expect("report");
        check_path(&info, mode);
        assert!(
            matches!(end, End::Eof | End::Error(_)),
            "{mode:?}: a reset ends reading one way or the other: {end:?}"
        );
    }
}

#[tokio::test]
async fn ktls_sessions_are_what_the_listener_and_the_kernel_allow() {
    let (port, ca, mut rx) = echo(KtlsMode::Auto).await;
    let mut c = connect(port, ca.client_config(&[b"h2"])).await;
    // One echo first: a client that closes before the server's handover finished leaves
    // a socket the kernel no longer takes keys for (not established), a `refused` session.
    c.write_all(b"x").await.expect("write");
    c.read_exact(&mut [0u8; 1]).await.expect("echo");
    c.shutdown().await.expect("close");
    let (info, _) = rx.recv().await.expect("report");
    check_path(&info, KtlsMode::Auto);
    if std::env::var_os("REEL_REQUIRE_KTLS").is_some_and(|v| v == "1") {
        assert!(reel_tls::kernel_has_tls(), "REEL_REQUIRE_KTLS=1 but no tls module");
    }
}
