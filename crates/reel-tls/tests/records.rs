//! The record layer after the handshake, against rustls clients on 127.0.0.1: every
//! version and cipher suite carries bytes both ways once the session has left rustls (to
//! the kernel where it has kTLS, to reel's own record layer otherwise), and the control
//! records a client may send end the stream as they should.
//!
//! Records crafted by the tests (a session's secrets taken from the rustls client after a
//! real handshake, then raw writes on its socket) check what reel's own record layer
//! refuses and with which alert, and how long a record may take to arrive.
//!
//! Where the kernel has the `tls` module (or `REEL_REQUIRE_KTLS=1` says it must, as in
//! `benches/ktls-vm.sh`) the sessions must be the kernel's; elsewhere they must be reel's
//! with the reason `no_module`.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use reel_tls::record::{
    DirectionKeys, MAX_PLAINTEXT, Opener, Sealer, SessionKeys, Version, content,
};
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

/// How the echo server runs its sessions.
#[derive(Clone, Copy)]
struct Opts {
    mode: KtlsMode,
    /// The handshake timeout, which is also the record timeout.
    timeout: Duration,
    /// Drop the session when reading ends instead of shutting it down.
    drop_at_end: bool,
    /// The sealer's confidentiality limit, for sessions reel seals.
    seal_limit: Option<u64>,
}

impl Opts {
    fn new(mode: KtlsMode) -> Opts {
        Opts { mode, timeout: Duration::from_secs(5), drop_at_end: false, seal_limit: None }
    }
}

/// Echo server: every byte read is written back; when reading ends the server sends
/// `close_notify` and reports how reading ended.
async fn echo(mode: KtlsMode) -> (u16, TestCa, mpsc::UnboundedReceiver<(HandshakeInfo, End)>) {
    echo_with(Opts::new(mode)).await
}

async fn echo_with(opts: Opts) -> (u16, TestCa, mpsc::UnboundedReceiver<(HandshakeInfo, End)>) {
    let mode = opts.mode;
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
                let Ok((mut s, info)) = reel_tls::accept(&tls, tcp, opts.timeout).await else {
                    return;
                };
                if let (reel_tls::Session::Sealed(sealed), Some(n)) = (&mut s, opts.seal_limit) {
                    sealed.set_seal_limit(n);
                }
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
                if opts.drop_at_end {
                    drop(s);
                } else {
                    let _ = s.shutdown().await;
                }
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
    let mut c = rustls::ClientConfig::builder_with_provider(Arc::new(provider))
        .with_protocol_versions(&[version])
        .expect("versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    // The crafted-record tests take the session's secrets out of the client.
    c.enable_secret_extraction = true;
    Arc::new(c)
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
async fn ktls_a_client_key_update_updates_the_keys_both_ways_or_ends_a_kernel_session_gracefully() {
    for mode in [KtlsMode::Auto, KtlsMode::Off] {
        let kernel = mode == KtlsMode::Auto && kernel_expected();
        let (port, ca, mut rx) = echo(mode).await;
        let mut c = connect(port, ca.client_config(&[b"http/1.1"])).await;
        c.write_all(b"before").await.expect("write");
        let mut got = [0u8; 6];
        c.read_exact(&mut got).await.expect("echo");
        let before = reel_tls::KEY_UPDATE_CLOSES.load(Ordering::Relaxed);
        if kernel {
            c.get_mut().1.refresh_traffic_keys().expect("key update");
            c.write_all(b"after").await.expect("write");
            c.flush().await.expect("flush");
            // The kernel cannot rekey: the server stops reading at the key update, says
            // close_notify and closes: the client sees an orderly end, never the bytes
            // sent after the update echoed.
            let mut rest = Vec::new();
            let _ = tokio::time::timeout(Duration::from_secs(10), c.read_to_end(&mut rest))
                .await
                .expect("server closed");
            assert!(rest.is_empty(), "{mode:?}: {rest:?}");
            let (info, end) = rx.recv().await.expect("report");
            assert_eq!(end, End::Eof, "{mode:?}");
            check_path(&info, mode);
            assert!(reel_tls::KEY_UPDATE_CLOSES.load(Ordering::Relaxed) > before);
            continue;
        }
        // rustls' update asks for ours (update_requested): the echo after each one is
        // opened with the client's next keys and sealed with ours, after our KeyUpdate.
        for round in 0..3u8 {
            c.get_mut().1.refresh_traffic_keys().expect("key update");
            let sent = pattern(40_000, round);
            c.write_all(&sent).await.expect("write");
            c.flush().await.expect("flush");
            let mut got = vec![0u8; sent.len()];
            tokio::time::timeout(Duration::from_secs(10), c.read_exact(&mut got))
                .await
                .expect("echo in time")
                .unwrap_or_else(|e| panic!("{mode:?} round {round}: {e}"));
            assert!(got == sent, "{mode:?} round {round}");
        }
        c.shutdown().await.expect("close_notify");
        let mut rest = Vec::new();
        c.read_to_end(&mut rest).await.expect("server's close_notify, no error");
        let (info, end) = rx.recv().await.expect("report");
        assert_eq!(end, End::Eof, "{mode:?}");
        check_path(&info, mode);
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

/// A client session taken out of rustls after its handshake: records are sealed and
/// opened by the test, written and read raw on the socket.
struct Raw {
    tcp: TcpStream,
    keys: SessionKeys,
    sealer: Sealer,
    opener: Opener,
    inbox: Vec<u8>,
}

impl Raw {
    /// Handshakes with `suite`, echoes one byte (the server's session has left rustls and
    /// the client has read the session tickets), then takes the secrets.
    async fn connect(port: u16, ca: &TestCa, suite: SupportedCipherSuite) -> Raw {
        let version = match suite {
            SupportedCipherSuite::Tls13(_) => &rustls::version::TLS13,
            SupportedCipherSuite::Tls12(_) => &rustls::version::TLS12,
        };
        let mut c = connect(port, client(ca, suite, version)).await;
        c.write_all(b"x").await.expect("write");
        c.read_exact(&mut [0u8; 1]).await.expect("echo");
        let (tcp, conn) = c.into_inner();
        let secrets = conn.dangerous_extract_secrets().expect("client secrets");
        let keys = SessionKeys {
            version: if version == &rustls::version::TLS13 {
                Version::Tls13
            } else {
                Version::Tls12
            },
            tx: DirectionKeys::from_rustls(secrets.tx.0, &secrets.tx.1).expect("tx"),
            rx: DirectionKeys::from_rustls(secrets.rx.0, &secrets.rx.1).expect("rx"),
        };
        let (sealer, opener) =
            (Sealer::new(&keys).expect("sealer"), Opener::new(&keys).expect("opener"));
        Raw { tcp, keys, sealer, opener, inbox: Vec::new() }
    }

    /// One record of `typ` carrying `payload`, sealed by the client's keys.
    fn seal(&mut self, typ: u8, payload: &[u8]) -> Vec<u8> {
        let h = self.sealer.head_room();
        let mut rec = vec![0u8; h + payload.len() + self.sealer.tail_room()];
        rec[h..h + payload.len()].copy_from_slice(payload);
        let n = self.sealer.seal(typ, &mut rec, payload.len()).expect("seal");
        rec.truncate(n);
        rec
    }

    /// The server's next record, opened: `(type, plaintext)`; `None` at the end of the
    /// stream. Bounded: a server that neither answers nor closes fails the test.
    async fn next(&mut self) -> Option<(u8, Vec<u8>)> {
        let read = async {
            loop {
                if let Some(n) = self.opener.record_len(&self.inbox).expect("server record") {
                    let mut rec: Vec<u8> = self.inbox.drain(..n).collect();
                    let o = self.opener.open(&mut rec).expect("open server record");
                    return Some((o.typ, rec[o.start..o.end].to_vec()));
                }
                let mut buf = [0u8; 4096];
                match self.tcp.read(&mut buf).await {
                    Ok(0) | Err(_) => return None,
                    Ok(n) => self.inbox.extend_from_slice(&buf[..n]),
                }
            }
        };
        tokio::time::timeout(Duration::from_secs(20), read)
            .await
            .expect("the server neither answered nor closed within 20 s")
    }

    /// The server's next record, which must be an alert: its payload.
    async fn alert(&mut self) -> [u8; 2] {
        match self.next().await {
            Some((content::ALERT, p)) => p.try_into().expect("two-byte alert"),
            Some((typ, p)) => {
                panic!("expected an alert, got a record of type {typ}, {} bytes", p.len())
            }
            None => panic!("expected an alert, got the end of the stream"),
        }
    }
}

/// An AES-128-GCM TLS 1.3 record of any length, sealed with `k` (the record layer under
/// test refuses to make such records).
fn seal_raw_tls13(k: &mut DirectionKeys, inner: &[u8]) -> Vec<u8> {
    use ring::aead::{AES_128_GCM, Aad, LessSafeKey, Nonce, UnboundKey};
    assert_eq!(k.cipher, reel_tls::record::Cipher::Aes128Gcm);
    let key = LessSafeKey::new(UnboundKey::new(&AES_128_GCM, &k.key).expect("key"));
    let mut nonce = k.iv;
    for (b, s) in nonce[4..].iter_mut().zip(k.seq.to_be_bytes()) {
        *b ^= s;
    }
    k.seq += 1;
    let len = inner.len() + 16;
    let hdr = [content::APPLICATION_DATA, 3, 3, (len >> 8) as u8, len as u8];
    let mut body = inner.to_vec();
    let tag = key
        .seal_in_place_separate_tag(Nonce::assume_unique_for_key(nonce), Aad::from(hdr), &mut body)
        .expect("seal");
    let mut rec = hdr.to_vec();
    rec.extend_from_slice(&body);
    rec.extend_from_slice(tag.as_ref());
    rec
}

fn off_with(timeout: Duration) -> Opts {
    Opts { timeout, ..Opts::new(KtlsMode::Off) }
}

#[tokio::test]
async fn a_client_that_stops_inside_a_record_is_cut_off_at_the_record_timeout() {
    // Record timeout 1 s; the echo server has no idle timeout of its own: only the record
    // layer can end this connection.
    let (port, ca, mut rx) = echo_with(off_with(Duration::from_secs(1))).await;
    let mut raw = Raw::connect(port, &ca, cs::TLS13_AES_128_GCM_SHA256).await;
    // A header announcing 256 bytes, and 10 of them.
    raw.tcp.write_all(&[23, 3, 3, 1, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10]).await.expect("write");
    assert_eq!(raw.alert().await, [1, 0], "close_notify");
    assert_eq!(raw.next().await, None, "then the end of the stream");
    let (_, end) = rx.recv().await.expect("report");
    assert_eq!(end, End::Error(std::io::ErrorKind::TimedOut));
}

#[tokio::test]
async fn a_record_that_arrives_slowly_but_whole_within_the_record_timeout_is_read() {
    let (port, ca, _rx) = echo_with(off_with(Duration::from_secs(5))).await;
    let mut raw = Raw::connect(port, &ca, cs::TLS13_AES_128_GCM_SHA256).await;
    let rec = raw.seal(content::APPLICATION_DATA, b"split");
    for b in rec {
        raw.tcp.write_all(&[b]).await.expect("write");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(raw.next().await, Some((content::APPLICATION_DATA, b"split".to_vec())));
}

#[tokio::test]
async fn tls13_records_over_2_14_plus_256_or_an_inner_plaintext_over_2_14_plus_1_are_record_overflow()
 {
    let (port, ca, mut rx) = echo_with(Opts::new(KtlsMode::Off)).await;
    // 2^14 + 257 bytes of ciphertext: 2^14 of content, the type, 240 bytes of padding.
    let mut inner = vec![b'a'; MAX_PLAINTEXT];
    inner.push(content::APPLICATION_DATA);
    inner.extend_from_slice(&[0; 240]);
    let mut raw = Raw::connect(port, &ca, cs::TLS13_AES_128_GCM_SHA256).await;
    let rec = seal_raw_tls13(&mut raw.keys.tx, &inner);
    assert_eq!(rec.len(), 5 + 16_641);
    raw.tcp.write_all(&rec).await.expect("write");
    assert_eq!(raw.alert().await, [2, 22], "record_overflow");
    assert_eq!(raw.next().await, None);
    let (_, end) = rx.recv().await.expect("report");
    assert_eq!(end, End::Error(std::io::ErrorKind::InvalidData));
    // 2^14 + 256 exactly, but 2^14 + 240 bytes of inner plaintext.
    inner.truncate(inner.len() - 1);
    let mut raw = Raw::connect(port, &ca, cs::TLS13_AES_128_GCM_SHA256).await;
    let rec = seal_raw_tls13(&mut raw.keys.tx, &inner);
    assert_eq!(rec.len(), 5 + 16_640);
    raw.tcp.write_all(&rec).await.expect("write");
    assert_eq!(raw.alert().await, [2, 22], "record_overflow");
    // The largest allowed: 2^14 of content and its type, no padding, is echoed.
    let mut raw = Raw::connect(port, &ca, cs::TLS13_AES_128_GCM_SHA256).await;
    let rec = seal_raw_tls13(&mut raw.keys.tx, &inner[..MAX_PLAINTEXT + 1]);
    raw.tcp.write_all(&rec).await.expect("write");
    let mut got = 0;
    while got < MAX_PLAINTEXT {
        match raw.next().await {
            Some((content::APPLICATION_DATA, p)) => got += p.len(),
            other => panic!("expected the echo, got {other:?}"),
        }
    }
}

#[tokio::test]
async fn a_record_that_does_not_authenticate_is_bad_record_mac() {
    let (port, ca, mut rx) = echo_with(Opts::new(KtlsMode::Off)).await;
    for suite in [cs::TLS13_CHACHA20_POLY1305_SHA256, cs::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256] {
        let mut raw = Raw::connect(port, &ca, suite).await;
        let mut rec = raw.seal(content::APPLICATION_DATA, b"tampered");
        let last = rec.len() - 1;
        rec[last] ^= 0x80;
        raw.tcp.write_all(&rec).await.expect("write");
        assert_eq!(raw.alert().await, [2, 20], "{suite:?}: bad_record_mac");
        assert_eq!(raw.next().await, None);
        let (_, end) = rx.recv().await.expect("report");
        assert_eq!(end, End::Error(std::io::ErrorKind::InvalidData));
    }
}

#[tokio::test]
async fn thirty_two_empty_records_in_a_row_are_read_the_thirty_third_is_unexpected_message() {
    let (port, ca, mut rx) = echo_with(Opts::new(KtlsMode::Off)).await;
    for suite in [cs::TLS13_AES_256_GCM_SHA384, cs::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256] {
        let mut raw = Raw::connect(port, &ca, suite).await;
        let mut burst = Vec::new();
        for _ in 0..32 {
            burst.extend(raw.seal(content::APPLICATION_DATA, b""));
        }
        burst.extend(raw.seal(content::APPLICATION_DATA, b"a"));
        raw.tcp.write_all(&burst).await.expect("write");
        assert_eq!(raw.next().await, Some((content::APPLICATION_DATA, b"a".to_vec())));
        let mut burst = Vec::new();
        for _ in 0..33 {
            burst.extend(raw.seal(content::APPLICATION_DATA, b""));
        }
        burst.extend(raw.seal(content::APPLICATION_DATA, b"b"));
        raw.tcp.write_all(&burst).await.expect("write");
        assert_eq!(raw.alert().await, [2, 10], "{suite:?}: unexpected_message");
        let (_, end) = rx.recv().await.expect("report");
        assert_eq!(end, End::Error(std::io::ErrorKind::InvalidData));
    }
}

#[tokio::test]
async fn in_tls12_a_handshake_message_of_type_24_is_unexpected_not_a_key_update() {
    let (port, ca, mut rx) = echo_with(Opts::new(KtlsMode::Off)).await;
    let mut raw = Raw::connect(port, &ca, cs::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384).await;
    // What a TLS 1.3 KeyUpdate(update_not_requested) looks like.
    let rec = raw.seal(content::HANDSHAKE, &[24, 0, 0, 1, 0]);
    raw.tcp.write_all(&rec).await.expect("write");
    assert_eq!(raw.alert().await, [2, 10], "unexpected_message");
    let (_, end) = rx.recv().await.expect("report");
    assert_eq!(end, End::Error(std::io::ErrorKind::InvalidData));
}

#[tokio::test]
async fn ktls_a_session_dropped_without_a_shutdown_still_says_close_notify() {
    for mode in [KtlsMode::Auto, KtlsMode::Off] {
        let (port, ca, mut rx) = echo_with(Opts { drop_at_end: true, ..Opts::new(mode) }).await;
        let mut c = connect(port, ca.client_config(&[b"http/1.1"])).await;
        c.write_all(b"before").await.expect("write");
        c.read_exact(&mut [0u8; 6]).await.expect("echo");
        // The server's reading ends at the client's close_notify; it drops the session.
        c.shutdown().await.expect("close_notify");
        let mut rest = Vec::new();
        let r = tokio::time::timeout(Duration::from_secs(10), c.read_to_end(&mut rest))
            .await
            .expect("server closed");
        // rustls reports an end without close_notify as UnexpectedEof.
        r.unwrap_or_else(|e| panic!("{mode:?}: {e}: no close_notify before the FIN"));
        let (info, end) = rx.recv().await.expect("report");
        assert_eq!(end, End::Eof);
        check_path(&info, mode);
    }
}

#[tokio::test]
async fn before_the_confidentiality_limit_tls13_keys_are_updated_tls12_sessions_end_with_close_notify()
 {
    for suite in [cs::TLS13_AES_128_GCM_SHA256, cs::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256] {
        let opts = Opts { seal_limit: Some(8), ..Opts::new(KtlsMode::Off) };
        let (port, ca, _rx) = echo_with(opts).await;
        let tls13 = matches!(suite, SupportedCipherSuite::Tls13(_));
        let version = if tls13 { &rustls::version::TLS13 } else { &rustls::version::TLS12 };
        let mut c = connect(port, client(&ca, suite, version)).await;
        let sent = pattern(1_000_000, 3);
        let (mut r, mut w) = tokio::io::split(&mut c);
        let writer = async {
            // A TLS 1.2 server stops reading when it cannot write; what is not taken is fine.
            let _ = w.write_all(&sent).await;
            let _ = w.flush().await;
        };
        let mut got = vec![0u8; sent.len()];
        let reader = tokio::time::timeout(Duration::from_secs(20), async {
            let mut at = 0;
            while at < got.len() {
                match r.read(&mut got[at..]).await? {
                    0 => break,
                    n => at += n,
                }
            }
            std::io::Result::Ok(at)
        });
        let (_, read) = tokio::join!(writer, reader);
        let n = read.expect("in time").unwrap_or_else(|e| panic!("{suite:?}: {e}"));
        assert!(got[..n] == sent[..n], "{suite:?}");
        if tls13 {
            // About 62 records at 8 per key: the keys changed several times, unnoticed.
            assert_eq!(n, sent.len(), "{suite:?}");
        } else {
            // Eight records at most (the handshake's count), then close_notify (read
            // returned 0, not an error).
            assert!(n > 0 && n <= 8 * MAX_PLAINTEXT, "{suite:?}: {n}");
        }
    }
}

/// Reads `out` until `want` shows up (then `true`) or the stream ends (`false`), keeping
/// what was read in `seen`. Bounded: a hang fails the test.
async fn read_until(
    out: &mut (impl tokio::io::AsyncRead + Unpin),
    seen: &mut String,
    want: &str,
) -> bool {
    let read = async {
        let mut buf = [0u8; 4096];
        while !seen.contains(want) {
            match out.read(&mut buf).await {
                Ok(0) | Err(_) => return false,
                Ok(n) => seen.push_str(&String::from_utf8_lossy(&buf[..n])),
            }
        }
        true
    };
    let r = tokio::time::timeout(Duration::from_secs(20), read).await;
    r.unwrap_or_else(|_| panic!("openssl s_client hung waiting for {want:?}: {seen}"))
}

/// `openssl s_client`'s `K` command (a KeyUpdate asking for ours): the session goes on
/// where reel seals its records; on a kTLS session it ends with close_notify, never the
/// bare FIN s_client reports as "unexpected eof".
#[tokio::test]
async fn ktls_openssl_s_client_key_updates_go_on_or_end_with_close_notify() {
    let Some(openssl) = reel_test_support::which("openssl") else {
        return reel_test_support::skip("openssl is not installed");
    };
    for mode in [KtlsMode::Auto, KtlsMode::Off] {
        let kernel = mode == KtlsMode::Auto && kernel_expected();
        let (port, _ca, mut rx) = echo(mode).await;
        let mut child = tokio::process::Command::new(&openssl)
            .args(["s_client", "-connect", &format!("127.0.0.1:{port}")])
            .args(["-servername", "edge.test", "-tls1_3"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("s_client runs");
        let mut stdin = child.stdin.take().expect("stdin");
        let mut stdout = child.stdout.take().expect("stdout");
        let mut stderr = child.stderr.take().expect("stderr");
        let (mut seen, mut said) = (String::new(), String::new());
        stdin.write_all(b"first line\n").await.expect("write");
        assert!(read_until(&mut stdout, &mut seen, "first line").await, "{mode:?}: {seen}");
        // A line that is a command is all of what s_client read: the next waits for it.
        stdin.write_all(b"K\n").await.expect("write");
        assert!(read_until(&mut stderr, &mut said, "KEYUPDATE").await, "{mode:?}: {said}");
        let _ = stdin.write_all(b"second line\n").await;
        if kernel {
            // The server ends the session at the update: s_client's stdout ends.
            assert!(!read_until(&mut stdout, &mut seen, "second line").await, "{seen}");
        } else {
            assert!(read_until(&mut stdout, &mut seen, "second line").await, "{mode:?}: {seen}");
            stdin.write_all(b"third line\n").await.expect("write");
            assert!(read_until(&mut stdout, &mut seen, "third line").await, "{mode:?}: {seen}");
            drop(stdin);
        }
        let out = tokio::time::timeout(Duration::from_secs(20), child.wait_with_output())
            .await
            .expect("s_client ends")
            .expect("s_client output");
        said.push_str(&String::from_utf8_lossy(&out.stderr));
        assert!(!said.contains("unexpected eof"), "{mode:?}: {said}");
        if !kernel {
            // s_client closed the session itself (its stdin ended): the server saw an end.
            let (info, end) = rx.recv().await.expect("report");
            check_path(&info, mode);
            assert!(matches!(end, End::Eof | End::Error(_)), "{end:?}");
        }
    }
}

/// The handshake's second ClientHello (after a HelloRetryRequest: the client's key share
/// was for a group reel does not take) is read from the socket like the rest of it.
#[tokio::test]
async fn a_handshake_with_a_hello_retry_request_completes() {
    let Some(openssl) = reel_test_support::which("openssl") else {
        return reel_test_support::skip("openssl is not installed");
    };
    let (port, _ca, mut rx) = echo(KtlsMode::Off).await;
    let mut child = tokio::process::Command::new(&openssl)
        .args(["s_client", "-connect", &format!("127.0.0.1:{port}")])
        .args(["-servername", "edge.test", "-tls1_3", "-msg", "-groups", "ffdhe2048:X25519"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("s_client runs");
    let mut stdin = child.stdin.take().expect("stdin");
    let mut stdout = child.stdout.take().expect("stdout");
    let mut seen = String::new();
    stdin.write_all(b"after a retry\n").await.expect("write");
    assert!(read_until(&mut stdout, &mut seen, "after a retry").await, "{seen}");
    // s_client -msg shows both ClientHellos.
    assert_eq!(seen.matches(", ClientHello").count(), 2, "{seen}");
    drop(stdin);
    let _ = tokio::time::timeout(Duration::from_secs(20), child.wait()).await;
    let (info, _) = rx.recv().await.expect("report");
    assert_eq!(info.version, TlsVersion::Tls13);
}

#[tokio::test]
async fn a_malformed_key_update_is_decode_error_an_unknown_request_illegal_parameter() {
    let (port, ca, mut rx) = echo_with(Opts::new(KtlsMode::Off)).await;
    for (msg, alert) in [(&[24u8, 0, 0, 2, 0, 0][..], 50u8), (&[24, 0, 0, 1, 7][..], 47)] {
        let mut raw = Raw::connect(port, &ca, cs::TLS13_AES_128_GCM_SHA256).await;
        let rec = raw.seal(content::HANDSHAKE, msg);
        raw.tcp.write_all(&rec).await.expect("write");
        assert_eq!(raw.alert().await, [2, alert], "{msg:?}");
        let (_, end) = rx.recv().await.expect("report");
        assert_eq!(end, End::Error(std::io::ErrorKind::InvalidData));
    }
}
