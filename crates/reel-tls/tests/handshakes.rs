//! Real handshakes on 127.0.0.1 with certificates made by the test: loading and refusing
//! certificate files, ALPN, SNI selection and strictness, resumption across separately
//! built configurations (as on two workers or across a reload), the handshake deadline,
//! and an `openssl s_client` interoperability check.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use reel_test_support::{skip, which};
use reel_tls::testing::{TestCa, client_config_tls12};
use reel_tls::{
    Alpn, CertSource, CertSpec, HandshakeCounters, HandshakeError, HandshakeInfo, KtlsMode,
    ListenerTls, LoadedCert, Tickets, TlsError, TlsVersion, server_config,
};
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

fn spec(cert: &Path, key: &Path, names: &[&str], at: &str) -> CertSpec {
    CertSpec {
        source: CertSource::Files { cert: cert.to_owned(), key: key.to_owned() },
        names: names.iter().map(|s| s.to_string()).collect(),
        cert_key: format!("{at}.cert"),
        key_key: format!("{at}.key"),
    }
}

fn load(s: &CertSpec) -> Arc<LoadedCert> {
    Arc::new(reel_tls::cert::load(s).expect("certificate loads"))
}

/// Serves `tls` on a fresh port: each connection is handshaken and counted, its outcome
/// reported, and on success the server answers one line `<alpn>\n` and closes.
async fn serve(
    tls: Arc<ListenerTls>,
    timeout: Duration,
) -> (u16, mpsc::UnboundedReceiver<Result<HandshakeInfo, HandshakeError>>, Arc<HandshakeCounters>) {
    let l = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = l.local_addr().expect("addr").port();
    let (tx, rx) = mpsc::unbounded_channel();
    let counters = Arc::new(HandshakeCounters::default());
    let c = counters.clone();
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = l.accept().await else { return };
            let (tls, tx, c) = (tls.clone(), tx.clone(), c.clone());
            tokio::spawn(async move {
                let r = reel_tls::accept_counted(&tls, tcp, timeout, &c).await;
                let _ = tx.send(r.as_ref().map(|(_, i)| *i).map_err(Clone::clone));
                if let Ok((mut s, info)) = r {
                    let line = if info.alpn == Alpn::H2 { "h2\n" } else { "http/1.1\n" };
                    let _ = s.write_all(line.as_bytes()).await;
                    let _ = s.shutdown().await;
                }
            });
        }
    });
    (port, rx, counters)
}

/// Connects with `config` for `name`; returns the line the server sent and the leaf
/// certificate it presented.
async fn connect(
    port: u16,
    config: Arc<rustls::ClientConfig>,
    name: &str,
) -> std::io::Result<(String, CertificateDer<'static>)> {
    let tcp = TcpStream::connect(("127.0.0.1", port)).await?;
    let server_name = ServerName::try_from(name.to_owned()).expect("name");
    let mut s = tokio_rustls::TlsConnector::from(config).connect(server_name, tcp).await?;
    let leaf = s.get_ref().1.peer_certificates().and_then(|c| c.first().cloned()).expect("leaf");
    let mut line = String::new();
    s.read_to_string(&mut line).await?;
    Ok((line, leaf))
}

#[tokio::test]
async fn alpn_versions_and_counters_over_real_handshakes() {
    let dir = tempfile::tempdir().expect("tmp");
    let ca = TestCa::new();
    let (c, k) = ca.write_leaf(dir.path(), "edge", &["edge.test"]);
    let cert = load(&spec(&c, &k, &[], "listener[0]"));
    assert_eq!(cert.names, vec!["edge.test"]);
    let tickets = Tickets::new().expect("tickets");
    let tls = Arc::new(
        server_config(
            "listener[0]",
            cert.clone(),
            &[],
            false,
            true,
            TlsVersion::Tls12,
            KtlsMode::Auto,
            &tickets,
        )
        .expect("config"),
    );
    let (port, mut rx, counters) = serve(tls, Duration::from_secs(5)).await;

    let (line, _) =
        connect(port, ca.client_config(&[b"h2", b"http/1.1"]), "edge.test").await.expect("h2");
    assert_eq!(line, "h2\n");
    let info = rx.recv().await.expect("outcome").expect("handshake");
    assert_eq!((info.version, info.alpn, info.resumed), (TlsVersion::Tls13, Alpn::H2, false));

    let (line, _) = connect(port, ca.client_config(&[b"http/1.1"]), "edge.test").await.expect("h1");
    assert_eq!(line, "http/1.1\n");
    rx.recv().await.expect("outcome").expect("handshake");
    let (line, _) = connect(port, ca.client_config(&[]), "edge.test").await.expect("no alpn");
    assert_eq!(line, "http/1.1\n");
    rx.recv().await.expect("outcome").expect("handshake");

    let (line, _) =
        connect(port, client_config_tls12(&[ca.der()]), "edge.test").await.expect("1.2");
    assert_eq!(line, "http/1.1\n");
    let info = rx.recv().await.expect("outcome").expect("handshake");
    assert_eq!(info.version, TlsVersion::Tls12);

    // A client that speaks no TLS at all.
    let mut raw = TcpStream::connect(("127.0.0.1", port)).await.expect("connect");
    raw.write_all(b"GET / HTTP/1.1\r\nHost: edge.test\r\n\r\n").await.expect("write");
    let err = rx.recv().await.expect("outcome").expect_err("not TLS");
    assert_eq!(err.label(), "protocol_error", "{err}");

    let snap = counters.snapshot();
    assert_eq!(snap.completed(TlsVersion::Tls13, false), 3);
    assert_eq!(snap.completed(TlsVersion::Tls12, false), 1);
    assert_eq!(snap.failed("protocol_error"), 1);
    assert!(snap.rows().contains(&("ok", "tls1.3", false, 3)));
}

#[tokio::test]
async fn http2_off_offers_only_http11() {
    let ca = TestCa::new();
    let dir = tempfile::tempdir().expect("tmp");
    let (c, k) = ca.write_leaf(dir.path(), "edge", &["edge.test"]);
    let tickets = Tickets::new().expect("tickets");
    let tls = server_config(
        "l",
        load(&spec(&c, &k, &[], "l")),
        &[],
        false,
        false,
        TlsVersion::Tls12,
        KtlsMode::Auto,
        &tickets,
    );
    let (port, _rx, _) = serve(Arc::new(tls.expect("config")), Duration::from_secs(5)).await;
    let (line, _) =
        connect(port, ca.client_config(&[b"h2", b"http/1.1"]), "edge.test").await.expect("h1");
    assert_eq!(line, "http/1.1\n");
    // A client that insists on h2 only is refused (RFC 7301 section 3.2).
    assert!(connect(port, ca.client_config(&[b"h2"]), "edge.test").await.is_err());
}

#[tokio::test]
async fn sni_picks_the_certificate_and_strict_listeners_refuse_unknown_names() {
    let dir = tempfile::tempdir().expect("tmp");
    let ca = TestCa::new();
    let (dc, dk) = ca.write_leaf(dir.path(), "default", &["edge.test"]);
    let (vc, vk) = ca.write_leaf(dir.path(), "video", &["video.example.com"]);
    let (wc, wk) = ca.write_leaf(dir.path(), "cdn", &["*.cdn.example.com"]);
    let default = load(&spec(&dc, &dk, &[], "listener[0]"));
    let extra = vec![
        load(&spec(&vc, &vk, &["video.example.com"], "certificate[0]")),
        load(&spec(&wc, &wk, &["*.cdn.example.com"], "certificate[1]")),
    ];
    let tickets = Tickets::new().expect("tickets");
    let client = ca.client_config(&[b"http/1.1"]);
    let leaf_of = |c: &LoadedCert| c.certified.cert[0].clone();

    let lax = server_config(
        "l",
        default.clone(),
        &extra,
        false,
        true,
        TlsVersion::Tls12,
        KtlsMode::Auto,
        &tickets,
    )
    .expect("config");
    let (port, _rx, _) = serve(Arc::new(lax), Duration::from_secs(5)).await;
    let (_, leaf) = connect(port, client.clone(), "video.example.com").await.expect("video");
    assert_eq!(leaf, leaf_of(&extra[0]));
    let (_, leaf) = connect(port, client.clone(), "a.cdn.example.com").await.expect("cdn");
    assert_eq!(leaf, leaf_of(&extra[1]));
    let (_, leaf) = connect(port, client.clone(), "edge.test").await.expect("default");
    assert_eq!(leaf, leaf_of(&default));
    // An unknown name gets the default certificate, which the client then rejects.
    assert!(connect(port, client.clone(), "other.test").await.is_err());

    let strict = server_config(
        "l",
        default.clone(),
        &extra,
        true,
        true,
        TlsVersion::Tls12,
        KtlsMode::Auto,
        &tickets,
    )
    .expect("config");
    let (port, mut rx, counters) = serve(Arc::new(strict), Duration::from_secs(5)).await;
    let (_, leaf) = connect(port, client.clone(), "a.cdn.example.com").await.expect("cdn");
    assert_eq!(leaf, leaf_of(&extra[1]));
    rx.recv().await.expect("outcome").expect("handshake");
    let (_, leaf) = connect(port, client.clone(), "edge.test").await.expect("default name");
    assert_eq!(leaf, leaf_of(&default));
    rx.recv().await.expect("outcome").expect("handshake");
    // The alert is `access_denied` (rustls' answer when no certificate is chosen), as
    // docs/operations.md says.
    let err = connect(port, client.clone(), "other.test").await.expect_err("refused");
    assert!(err.to_string().contains("alert") && err.to_string().contains("AccessDenied"), "{err}");
    assert_eq!(rx.recv().await.expect("outcome"), Err(HandshakeError::UnknownName));
    // Without SNI (a client connecting to an IP address) a strict listener refuses too.
    let err = connect(port, client.clone(), "127.0.0.1").await.expect_err("no sni");
    assert!(err.to_string().contains("AccessDenied"), "{err}");
    assert_eq!(rx.recv().await.expect("outcome"), Err(HandshakeError::UnknownName));
    assert_eq!(counters.snapshot().failed("unknown_name"), 2);
}

#[tokio::test]
async fn min_version_1_3_refuses_tls12_only_clients() {
    let dir = tempfile::tempdir().expect("tmp");
    let ca = TestCa::new();
    let (c, k) = ca.write_leaf(dir.path(), "edge", &["edge.test"]);
    let cert = load(&spec(&c, &k, &[], "l"));
    let tickets = Tickets::new().expect("tickets");
    let tls =
        server_config("l", cert, &[], false, true, TlsVersion::Tls13, KtlsMode::Auto, &tickets)
            .expect("1.3");
    assert_eq!(tls.min_version, TlsVersion::Tls13);
    let (port, mut rx, counters) = serve(Arc::new(tls), Duration::from_secs(5)).await;
    let err = connect(port, client_config_tls12(&[ca.der()]), "edge.test").await.expect_err("1.2");
    assert!(err.to_string().contains("ProtocolVersion"), "{err}");
    let refused = rx.recv().await.expect("outcome").expect_err("refused");
    assert_eq!(refused.label(), "protocol_error", "{refused}");
    let (line, _) = connect(port, ca.client_config(&[b"h2"]), "edge.test").await.expect("1.3");
    assert_eq!(line, "h2\n");
    let info = rx.recv().await.expect("outcome").expect("handshake");
    assert_eq!(info.version, TlsVersion::Tls13);
    let snap = counters.snapshot();
    assert_eq!((snap.failed("protocol_error"), snap.completed(TlsVersion::Tls13, false)), (1, 1));
}

/// The ClientHello a rustls client sends for `dns_name`, with `ip` (as long) in its place:
/// what a client that puts the address it connects to in SNI sends.
fn client_hello_naming(ca: &TestCa, dns_name: &str, ip: &str) -> Vec<u8> {
    assert_eq!(dns_name.len(), ip.len());
    let name = ServerName::try_from(dns_name.to_owned()).expect("name");
    let mut conn = rustls::ClientConnection::new(ca.client_config(&[]), name).expect("client");
    let mut hello = Vec::new();
    conn.write_tls(&mut hello).expect("ClientHello");
    let at = hello.windows(dns_name.len()).position(|w| w == dns_name.as_bytes()).expect("SNI");
    hello[at..at + ip.len()].copy_from_slice(ip.as_bytes());
    hello
}

#[tokio::test]
async fn an_ip_address_as_server_name_is_served_as_no_name_and_counted() {
    let dir = tempfile::tempdir().expect("tmp");
    let ca = TestCa::new();
    let (c, k) = ca.write_leaf(dir.path(), "edge", &["edge.test"]);
    let cert = load(&spec(&c, &k, &[], "l"));
    let tickets = Tickets::new().expect("tickets");
    for strict in [false, true] {
        let tls = server_config(
            "l",
            cert.clone(),
            &[],
            strict,
            true,
            TlsVersion::Tls12,
            KtlsMode::Auto,
            &tickets,
        );
        let (port, mut rx, counters) =
            serve(Arc::new(tls.expect("config")), Duration::from_secs(5)).await;
        for (ip, hello) in [
            ("127.0.0.1", client_hello_naming(&ca, "abcde.xyz", "127.0.0.1")),
            ("0:0:0:0:0:0:0:1", client_hello_naming(&ca, "abcdefghi.xyzzy", "0:0:0:0:0:0:0:1")),
        ] {
            let mut raw = TcpStream::connect(("127.0.0.1", port)).await.expect("connect");
            raw.set_nodelay(true).expect("nodelay");
            // In small pieces: the server reads the ClientHello in several reads.
            for piece in hello.chunks(97) {
                raw.write_all(piece).await.expect("write");
            }
            // The server answers as to a client without a name (its default certificate),
            // or, strict, refuses it.
            let mut answer = [0u8; 5];
            raw.read_exact(&mut answer).await.expect("an answer");
            let want = if strict { 21 } else { 22 };
            assert_eq!(answer[0], want, "{ip}, strict {strict}: record type {}", answer[0]);
            drop(raw);
            let outcome = rx.recv().await.expect("outcome");
            if strict {
                assert_eq!(outcome, Err(HandshakeError::UnknownName), "{ip}");
            }
        }
        // A server name that is neither a DNS name nor an address fails the handshake.
        let mut raw = TcpStream::connect(("127.0.0.1", port)).await.expect("connect");
        raw.write_all(&client_hello_naming(&ca, "abcde.xyz", "bad name!")).await.expect("write");
        let mut answer = [0u8; 1];
        raw.read_exact(&mut answer).await.expect("an answer");
        assert_eq!(answer[0], 21, "an alert");
        let e = rx.recv().await.expect("outcome").expect_err("refused");
        assert_eq!(e.label(), "protocol_error", "{e}");
        // A DNS name, and no name at all (rustls sends none for an address), are not counted.
        connect(port, ca.client_config(&[]), "edge.test").await.expect("dns name");
        rx.recv().await.expect("outcome").expect("handshake");
        let _ = connect(port, ca.client_config(&[]), "127.0.0.1").await;
        rx.recv().await.expect("outcome").expect_err("no name, no certificate for it");
        assert_eq!(counters.snapshot().sni_ip_address(), 2, "strict {strict}");
    }
}

#[tokio::test]
async fn tickets_resume_across_separately_built_configurations_only_when_shared() {
    let dir = tempfile::tempdir().expect("tmp");
    let ca = TestCa::new();
    let (c, k) = ca.write_leaf(dir.path(), "edge", &["edge.test"]);
    let cert = load(&spec(&c, &k, &[], "l"));
    let tickets = Tickets::new().expect("tickets");
    // Two "workers" (or the configuration before and after a reload), each built on its own.
    let a = server_config(
        "l",
        cert.clone(),
        &[],
        false,
        true,
        TlsVersion::Tls12,
        KtlsMode::Auto,
        &tickets,
    )
    .expect("a");
    let b = server_config(
        "l",
        cert.clone(),
        &[],
        false,
        true,
        TlsVersion::Tls12,
        KtlsMode::Auto,
        &tickets,
    )
    .expect("b");
    let (pa, mut ra, _) = serve(Arc::new(a), Duration::from_secs(5)).await;
    let (pb, mut rb, counters_b) = serve(Arc::new(b), Duration::from_secs(5)).await;
    let client = ca.client_config(&[b"h2"]);
    connect(pa, client.clone(), "edge.test").await.expect("full");
    assert!(!ra.recv().await.expect("outcome").expect("ok").resumed);
    for _ in 0..2 {
        connect(pb, client.clone(), "edge.test").await.expect("resumed");
        let info = rb.recv().await.expect("outcome").expect("ok");
        assert!(info.resumed && info.version == TlsVersion::Tls13, "{info:?}");
    }
    assert_eq!(counters_b.snapshot().completed(TlsVersion::Tls13, true), 2);

    // Keys not shared: the ticket is not accepted and a full handshake follows.
    let other = server_config(
        "l",
        cert,
        &[],
        false,
        true,
        TlsVersion::Tls12,
        KtlsMode::Auto,
        &Tickets::new().expect("t"),
    )
    .expect("c");
    let (pc, mut rc, _) = serve(Arc::new(other), Duration::from_secs(5)).await;
    let client = ca.client_config(&[b"h2"]);
    connect(pa, client.clone(), "edge.test").await.expect("full");
    ra.recv().await.expect("outcome").expect("ok");
    connect(pc, client, "edge.test").await.expect("full again");
    assert!(!rc.recv().await.expect("outcome").expect("ok").resumed);
}

#[tokio::test]
async fn a_silent_client_times_out() {
    let cert = Arc::new(
        reel_tls::cert::load(&CertSpec {
            source: CertSource::SelfSigned { names: vec!["localhost".into()] },
            names: Vec::new(),
            cert_key: "l.tls_cert".into(),
            key_key: "l.tls_key".into(),
        })
        .expect("self-signed"),
    );
    let tickets = Tickets::new().expect("tickets");
    let tls =
        server_config("l", cert, &[], false, true, TlsVersion::Tls12, KtlsMode::Auto, &tickets)
            .expect("config");
    let (port, mut rx, counters) = serve(Arc::new(tls), Duration::from_millis(200)).await;
    let _silent = TcpStream::connect(("127.0.0.1", port)).await.expect("connect");
    assert_eq!(rx.recv().await.expect("outcome"), Err(HandshakeError::Timeout));
    let closing = TcpStream::connect(("127.0.0.1", port)).await.expect("connect");
    drop(closing);
    assert_eq!(rx.recv().await.expect("outcome"), Err(HandshakeError::Closed));
    assert_eq!(counters.snapshot().failed("timeout"), 1);
}

#[test]
fn bad_files_are_refused_with_the_key_they_came_from() {
    let dir = tempfile::tempdir().expect("tmp");
    let ca = TestCa::new();
    let (c1, k1) = ca.write_leaf(dir.path(), "one", &["one.test"]);
    let (_, k2) = ca.write_leaf(dir.path(), "two", &["two.test"]);
    let missing = dir.path().join("missing.pem");
    let text = dir.path().join("text.pem");
    std::fs::write(&text, "just some text\n").expect("write");
    let bad_der = dir.path().join("bad.pem");
    std::fs::write(&bad_der, "-----BEGIN CERTIFICATE-----\nAAECAwQ=\n-----END CERTIFICATE-----\n")
        .expect("write");
    let load = |c: &Path, k: &Path| reel_tls::cert::load(&spec(c, k, &[], "listener[1]"));

    match load(&c1, &k2) {
        Err(e @ TlsError::KeyMismatch { .. }) => {
            assert_eq!(e.config_key(), "listener[1].key");
            assert!(e.to_string().contains("does not match"), "{e}");
        }
        other => panic!("expected a key mismatch, got {other:?}"),
    }
    let e = load(&missing, &k1).expect_err("missing");
    assert!(matches!(e, TlsError::Read { .. }) && e.config_key() == "listener[1].cert", "{e}");
    let e = load(&c1, &missing).expect_err("missing key");
    assert!(matches!(e, TlsError::Read { .. }) && e.config_key() == "listener[1].key", "{e}");
    let e = load(&text, &k1).expect_err("not pem");
    assert!(matches!(e, TlsError::NotPem { what: "certificate", .. }), "{e}");
    let e = load(&c1, &text).expect_err("key not pem");
    assert!(matches!(e, TlsError::NotPem { what: "private key", .. }), "{e}");
    assert_eq!(e.config_key(), "listener[1].key");
    // A certificate file given as the key: PEM, but no key in it.
    let e = load(&c1, &c1).expect_err("cert as key");
    assert!(matches!(e, TlsError::NotPem { what: "private key", .. }), "{e}");
    let e = load(&bad_der, &k1).expect_err("bad der");
    assert!(matches!(e, TlsError::BadCert { .. }), "{e}");
    let e = load(dir.path(), &k1).expect_err("a directory");
    assert!(matches!(e, TlsError::Read { .. }), "{e}");
    assert!(load(&c1, &k1).is_ok());
}

/// RSA certificates work as well as ECDSA ones; made with the openssl command line,
/// which the test skips (saying so) where it is not installed.
#[tokio::test]
async fn rsa_certificates_and_openssl_s_client_interoperate() {
    let Some(openssl) = which("openssl") else {
        return skip("openssl is not installed");
    };
    let dir = tempfile::tempdir().expect("tmp");
    let (c, k) = (dir.path().join("rsa.pem"), dir.path().join("rsa.key"));
    let st = std::process::Command::new(&openssl)
        .args([
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "2",
            "-subj",
            "/CN=rsa.test",
        ])
        .args([
            "-addext",
            "subjectAltName=DNS:rsa.test",
            "-addext",
            "basicConstraints=critical,CA:FALSE",
        ])
        .arg("-keyout")
        .arg(&k)
        .arg("-out")
        .arg(&c)
        .output()
        .expect("openssl runs");
    assert!(st.status.success(), "{}", String::from_utf8_lossy(&st.stderr));
    let cert = load(&spec(&c, &k, &[], "l"));
    assert_eq!(cert.names, vec!["rsa.test"]);
    // Expires in 2 days: a warning.
    assert!(cert.expiry_warning(std::time::SystemTime::now()).is_some());
    let tickets = Tickets::new().expect("tickets");
    let tls = server_config(
        "l",
        cert.clone(),
        &[],
        false,
        true,
        TlsVersion::Tls12,
        KtlsMode::Auto,
        &tickets,
    )
    .expect("config");
    let (port, mut rx, _) = serve(Arc::new(tls), Duration::from_secs(5)).await;
    let client =
        reel_tls::testing::client_config_trusting(&[cert.certified.cert[0].clone()], &[b"h2"]);
    let (line, _) = connect(port, client, "rsa.test").await.expect("rsa handshake");
    assert_eq!(line, "h2\n");
    rx.recv().await.expect("outcome").expect("ok");

    let out = tokio::process::Command::new(&openssl)
        .args(["s_client", "-connect", &format!("127.0.0.1:{port}"), "-servername", "rsa.test"])
        .args(["-alpn", "h2,http/1.1"])
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .expect("s_client runs");
    let text =
        format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(text.contains("TLSv1.3"), "{text}");
    assert!(text.contains("ALPN protocol: h2"), "{text}");
    let info = rx.recv().await.expect("outcome").expect("ok");
    assert_eq!((info.alpn, info.version), (Alpn::H2, TlsVersion::Tls13));
}
