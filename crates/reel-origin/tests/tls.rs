//! HTTPS origins: real TLS handshakes on 127.0.0.1 against a server whose certificate
//! authority is made in the test.

mod common;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use common::tls::{SelfSigned, TestCa, TlsServer, bundle};
use common::{fast_health_checks, group};
use http::uri::PathAndQuery;
use reel_origin::{ErrorKind, GroupSpec, OriginRequest, OriginResponse, Origins};
use reel_test_support::wait_until_async;

fn get(path: &'static str) -> OriginRequest {
    OriginRequest::get(PathAndQuery::from_static(path), "edge.example")
}

async fn read_all(resp: &mut OriginResponse) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(c) = resp.next_chunk().await.unwrap() {
        out.extend_from_slice(&c);
    }
    out
}

/// One TLS host at `addr`, trusting `ca`, with `host_header` as the TLS name when given.
fn tls_group(addr: &str, ca: Option<&TestCa>, host_header: Option<&str>) -> GroupSpec {
    let mut g = group("g", vec![vec![addr.to_owned()]]);
    g.tiers[0][0].tls = true;
    g.tiers[0][0].host_header = host_header.map(str::to_owned);
    g.tls.ca_file = ca.map(TestCa::pem_path);
    g.retries = 0;
    g
}

#[tokio::test]
async fn verified_with_ca_file_and_sni_from_host_header() {
    let ca = TestCa::new("reel test CA");
    let s = TlsServer::start(&ca, false).await;
    let origins = Origins::new(vec![tls_group(&s.host(), Some(&ca), Some("origin.test"))]).unwrap();
    let mut r = origins.worker_client().send("g", get("/seg.ts")).await.unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(read_all(&mut r).await, b"hello over tls");
    assert_eq!(s.sni(), vec![Some("origin.test".to_owned())]);
    let seen = s.last_seen();
    assert_eq!(seen.version, http::Version::HTTP_11);
    assert_eq!(seen.authority.as_deref(), Some("origin.test"));
    assert_eq!(seen.path, "/seg.ts");
    assert!(origins.warnings().is_empty());
}

#[tokio::test]
async fn sni_is_the_host_name_of_the_address() {
    let ca = TestCa::new("reel test CA");
    let s = TlsServer::start(&ca, false).await;
    // A DNS name: sent as SNI and checked against the certificate.
    let by_name = format!("localhost:{}", s.addr.port());
    let origins = Origins::new(vec![tls_group(&by_name, Some(&ca), None)]).unwrap();
    let mut r = origins.worker_client().send("g", get("/a")).await.unwrap();
    read_all(&mut r).await;
    assert_eq!(s.sni(), vec![Some("localhost".to_owned())]);
    // The request's own Host still goes in the header.
    assert_eq!(s.last_seen().authority.as_deref(), Some("edge.example"));

    // An IP address: no SNI (RFC 6066 section 3), the certificate's IP address entry counts.
    let origins = Origins::new(vec![tls_group(&s.host(), Some(&ca), None)]).unwrap();
    let mut r = origins.worker_client().send("g", get("/b")).await.unwrap();
    read_all(&mut r).await;
    assert_eq!(s.sni(), vec![Some("localhost".to_owned()), None]);
}

#[tokio::test]
async fn unknown_authority_fails_clearly_and_is_counted() {
    let ca = TestCa::new("reel test CA");
    let s = TlsServer::start(&ca, false).await;
    // No ca_file: the system roots do not know the test authority.
    let origins = Origins::new(vec![tls_group(&s.host(), None, Some("origin.test"))]).unwrap();
    let e = origins.worker_client().send("g", get("/x")).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Tls);
    assert_eq!(e.client_status(), 502);
    assert!(e.before_response());
    let msg = e.to_string();
    assert!(msg.contains("TLS handshake failed"), "{msg}");
    assert!(msg.contains("UnknownIssuer"), "{msg}");
    assert_eq!(s.requests(), 0, "no request went to an unverified origin");
    assert_eq!(s.handshakes(), 0);
    let snap = origins.snapshot();
    assert_eq!(snap.groups[0].hosts[0].errors.get(ErrorKind::Tls), 1);
    let mut w = reel_metrics::PromWriter::new();
    snap.render_prometheus(&mut w);
    let metrics = w.finish();
    assert!(metrics.contains("kind=\"tls\"} 1\n"), "{metrics}");

    // Another authority's bundle does not help either.
    let other = TestCa::new("someone else");
    let origins =
        Origins::new(vec![tls_group(&s.host(), Some(&other), Some("origin.test"))]).unwrap();
    let e = origins.worker_client().send("g", get("/x")).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Tls);
}

#[tokio::test]
async fn a_name_the_certificate_lacks_fails() {
    let ca = TestCa::new("reel test CA");
    let s = TlsServer::start(&ca, false).await;
    let origins =
        Origins::new(vec![tls_group(&s.host(), Some(&ca), Some("elsewhere.test"))]).unwrap();
    let e = origins.worker_client().send("g", get("/x")).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Tls);
    assert!(e.to_string().contains("not valid for name \"elsewhere.test\""), "{e}");
    assert_eq!(s.requests(), 0);
}

#[tokio::test]
async fn insecure_skip_verify_connects_and_is_reported() {
    let ca = TestCa::new("reel test CA");
    let s = TlsServer::start(&ca, false).await;
    let mut g = tls_group(&s.host(), None, Some("elsewhere.test"));
    g.tls.insecure_skip_verify = true;
    let origins = Origins::new(vec![g]).unwrap();
    let mut r = origins.worker_client().send("g", get("/x")).await.unwrap();
    assert_eq!(read_all(&mut r).await, b"hello over tls");
    let w = origins.warnings();
    assert_eq!(w.len(), 1);
    assert!(w[0].contains("\"g\"") && w[0].contains("insecure_skip_verify"), "{w:?}");
}

#[tokio::test]
async fn keep_alive_reuses_one_tls_connection() {
    let ca = TestCa::new("reel test CA");
    let s = TlsServer::start(&ca, false).await;
    let origins = Origins::new(vec![tls_group(&s.host(), Some(&ca), Some("origin.test"))]).unwrap();
    let client = origins.worker_client();
    for i in 0..5 {
        let mut r = client.send("g", get("/seg.ts")).await.unwrap();
        assert_eq!(read_all(&mut r).await, b"hello over tls");
        assert_eq!(r.timing.connect.is_some(), i == 0, "request {i}");
    }
    assert_eq!(client.idle_connections(&s.host()), 1);
    assert_eq!(s.requests(), 5);
    assert_eq!(s.connections(), 1, "one TCP connection");
    assert_eq!(s.handshakes(), 1, "one handshake");
}

#[tokio::test]
async fn new_connections_resume_the_session_across_workers() {
    let ca = TestCa::new("reel test CA");
    let s = TlsServer::start(&ca, false).await;
    let mut g = tls_group(&s.host(), Some(&ca), Some("origin.test"));
    g.max_idle_per_host = 0; // every request opens a connection
    let origins = Origins::new(vec![g]).unwrap();
    // Two clients with their own pools, as two workers have.
    for client in [origins.worker_client(), origins.worker_client(), origins.worker_client()] {
        let mut r = client.send("g", get("/x")).await.unwrap();
        read_all(&mut r).await;
    }
    assert_eq!(s.handshakes(), 3);
    let resumed = s.state.resumed.lock().unwrap().clone();
    assert_eq!(resumed, [false, true, true], "a full handshake, then resumptions");
}

#[tokio::test]
async fn tls_and_plain_pools_are_apart() {
    // The same address in a TLS group and a plain group: a TLS connection must never carry a
    // plain-HTTP request or the other way round.
    let ca = TestCa::new("reel test CA");
    let s = TlsServer::start(&ca, false).await;
    let tls = tls_group(&s.host(), Some(&ca), Some("origin.test"));
    let mut plain = group("plain", vec![vec![s.host()]]);
    plain.retries = 0;
    let origins = Origins::new(vec![tls, plain]).unwrap();
    let client = origins.worker_client();
    let mut r = client.send("g", get("/a")).await.unwrap();
    read_all(&mut r).await;
    // Plain HTTP to a TLS server fails (it answers nothing a client can parse)...
    assert!(client.send("plain", get("/b")).await.is_err());
    // ...and the TLS connection is still the one reused.
    let mut r = client.send("g", get("/c")).await.unwrap();
    read_all(&mut r).await;
    assert_eq!(r.timing.connect, None);
    assert_eq!(s.handshakes(), 1);
}

#[tokio::test]
async fn http2_by_alpn_multiplexes_on_one_connection() {
    let ca = TestCa::new("reel test CA");
    let s = TlsServer::start(&ca, true).await;
    let mut g = tls_group(&s.host(), Some(&ca), Some("origin.test"));
    g.tls.http2 = true;
    let origins = Origins::new(vec![g]).unwrap();
    let client = origins.worker_client();
    let mut r = client.send("g", get("/first")).await.unwrap();
    assert_eq!(read_all(&mut r).await, b"hello over tls");
    let seen = s.last_seen();
    assert_eq!(seen.version, http::Version::HTTP_2);
    assert_eq!(seen.authority.as_deref(), Some("origin.test"), ":authority is the Host");
    assert_eq!(r.headers.get("x-version").unwrap(), "HTTP/2.0");

    // Eight requests that the origin answers only once all eight are in flight together: they
    // can only complete if they share the connection concurrently.
    const N: usize = 8;
    *s.state.gate.lock().unwrap() = Some(Arc::new(tokio::sync::Barrier::new(N)));
    let local = tokio::task::LocalSet::new();
    let bodies = local
        .run_until(async {
            let tasks: Vec<_> = (0..N)
                .map(|_| {
                    let c = client.clone();
                    tokio::task::spawn_local(async move {
                        let mut r = c.send("g", get("/gate")).await.unwrap();
                        read_all(&mut r).await
                    })
                })
                .collect();
            let mut out = Vec::new();
            for t in tasks {
                out.push(t.await.unwrap());
            }
            out
        })
        .await;
    assert!(bodies.iter().all(|b| b == b"hello over tls"));
    assert_eq!(s.requests(), 1 + N);
    assert_eq!(s.connections(), 1, "every request on one HTTP/2 connection");
    assert_eq!(client.idle_connections(&s.host()), 1);
}

#[tokio::test]
async fn http1_when_http2_is_off_even_if_the_origin_offers_it() {
    let ca = TestCa::new("reel test CA");
    let s = TlsServer::start(&ca, true).await;
    let origins = Origins::new(vec![tls_group(&s.host(), Some(&ca), Some("origin.test"))]).unwrap();
    let mut r = origins.worker_client().send("g", get("/x")).await.unwrap();
    read_all(&mut r).await;
    assert_eq!(s.last_seen().version, http::Version::HTTP_11);
}

#[tokio::test]
async fn health_checks_over_tls() {
    let ca = TestCa::new("reel test CA");
    let s = TlsServer::start(&ca, true).await;
    let mut g = tls_group(&s.host(), Some(&ca), Some("origin.test"));
    g.tls.http2 = true;
    fast_health_checks(&mut g);
    let origins = Origins::new(vec![g]).unwrap();
    origins.start_health_checks().unwrap();
    let probes = || s.state.health_requests.load(Ordering::SeqCst);
    wait_until_async("two probes", || probes() >= 2).await;
    assert_eq!(origins.is_healthy("g", &s.host()), Some(true));
    assert!(s.sni().iter().all(|n| n.as_deref() == Some("origin.test")));
    s.state.health_status.store(503, Ordering::SeqCst);
    wait_until_async("down on 503", || origins.is_healthy("g", &s.host()) == Some(false)).await;
    s.state.health_status.store(200, Ordering::SeqCst);
    wait_until_async("up again", || origins.is_healthy("g", &s.host()) == Some(true)).await;
    origins.stop_health_checks();

    // A probe that cannot verify the origin fails like a request would.
    let mut g = tls_group(&s.host(), None, Some("origin.test"));
    g.health.enabled = true;
    g.health.path = "/health".into();
    g.health.interval = Duration::from_millis(50);
    g.health.fall = 1;
    let before = probes();
    let origins = Origins::new(vec![g]).unwrap();
    origins.start_health_checks().unwrap();
    wait_until_async("down: unverified", || origins.is_healthy("g", &s.host()) == Some(false))
        .await;
    origins.stop_health_checks();
    assert_eq!(probes(), before, "no probe reached the unverified origin");
}

/// One TLS host at `addr` whose `ca_file` is `ca_file`.
fn pinned_group(addr: &str, ca_file: PathBuf, host_header: Option<&str>) -> GroupSpec {
    let mut g = tls_group(addr, None, host_header);
    g.tls.ca_file = Some(ca_file);
    g
}

async fn expect_tls_error(g: GroupSpec) -> String {
    let origins = Origins::new(vec![g]).unwrap();
    let e = origins.worker_client().send("g", get("/x")).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Tls, "{e}");
    e.to_string()
}

// A certificate made by `openssl req -x509` is self-signed with `CA:TRUE`; webpki refuses it as
// an end entity ("CaUsedAsEndEntity") even when ca_file lists it, where curl, nginx and HAProxy
// accept it.
#[tokio::test]
async fn self_signed_ca_certificate_listed_in_ca_file_is_accepted() {
    let pinned = SelfSigned::new();
    let s = TlsServer::start_with(vec![pinned.cert.clone()], pinned.key(), false).await;
    let g = pinned_group(&s.host(), pinned.pem_path(), Some("origin.test"));
    let origins = Origins::new(vec![g]).unwrap();
    let mut r = origins.worker_client().send("g", get("/seg.ts")).await.unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(read_all(&mut r).await, b"hello over tls");
    assert_eq!(s.sni(), vec![Some("origin.test".to_owned())]);

    // By IP address, the certificate's IP address entry is the name.
    let origins = Origins::new(vec![pinned_group(&s.host(), pinned.pem_path(), None)]).unwrap();
    let mut r = origins.worker_client().send("g", get("/ip")).await.unwrap();
    assert_eq!(read_all(&mut r).await, b"hello over tls");
    assert_eq!(s.requests(), 2);
}

#[tokio::test]
async fn certificate_made_by_openssl_req_x509_is_accepted_when_listed() {
    // Made once with `openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes
    // -days 36500 -subj /CN=origin.test -addext subjectAltName=DNS:origin.test,IP:127.0.0.1`:
    // critical `CA:TRUE` and key identifiers, as operators' certificates have.
    use rustls::pki_types::pem::PemObject as _;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let data = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let pem = data.join("openssl-self-signed.pem");
    let cert = CertificateDer::from_pem_file(&pem).unwrap();
    let key = PrivateKeyDer::from_pem_file(data.join("openssl-self-signed.key")).unwrap();
    let s = TlsServer::start_with(vec![cert], key, false).await;
    for host_header in [Some("origin.test"), None] {
        let origins =
            Origins::new(vec![pinned_group(&s.host(), pem.clone(), host_header)]).unwrap();
        let mut r = origins.worker_client().send("g", get("/a")).await.unwrap();
        assert_eq!(read_all(&mut r).await, b"hello over tls");
    }
}

#[tokio::test]
async fn ca_file_with_an_authority_and_a_pinned_certificate_trusts_both() {
    let ca = TestCa::new("reel test CA");
    let pinned = SelfSigned::new();
    let dir = tempfile::tempdir().unwrap();
    let both = bundle(dir.path(), &[ca.pem_path(), pinned.pem_path()]);

    let by_ca = TlsServer::start(&ca, false).await;
    let origins =
        Origins::new(vec![pinned_group(&by_ca.host(), both.clone(), Some("origin.test"))]).unwrap();
    let mut r = origins.worker_client().send("g", get("/a")).await.unwrap();
    assert_eq!(read_all(&mut r).await, b"hello over tls");

    let by_pin = TlsServer::start_with(vec![pinned.cert.clone()], pinned.key(), false).await;
    let origins =
        Origins::new(vec![pinned_group(&by_pin.host(), both, Some("origin.test"))]).unwrap();
    let mut r = origins.worker_client().send("g", get("/b")).await.unwrap();
    assert_eq!(read_all(&mut r).await, b"hello over tls");
}

#[tokio::test]
async fn pinned_leaf_without_its_issuer_is_accepted() {
    // A CA-signed certificate listed on its own, without the authority that signed it.
    let ca = TestCa::new("reel test CA");
    let (cert, key, text) = ca.issue_with_pem(&["origin.test"]);
    let dir = tempfile::tempdir().unwrap();
    let pem = dir.path().join("leaf.pem");
    std::fs::write(&pem, text).unwrap();
    let s = TlsServer::start_with(vec![cert], key, false).await;
    let origins = Origins::new(vec![pinned_group(&s.host(), pem, Some("origin.test"))]).unwrap();
    let mut r = origins.worker_client().send("g", get("/a")).await.unwrap();
    assert_eq!(read_all(&mut r).await, b"hello over tls");
}

#[tokio::test]
async fn self_signed_ca_certificate_not_in_ca_file_is_refused() {
    let served = SelfSigned::new();
    let s = TlsServer::start_with(vec![served.cert.clone()], served.key(), false).await;
    // Another certificate of the same shape and names: only the exact bytes are pinned.
    let other = SelfSigned::new();
    let msg =
        expect_tls_error(pinned_group(&s.host(), other.pem_path(), Some("origin.test"))).await;
    assert!(msg.contains("TLS handshake failed"), "{msg}");
    // An authority's bundle that does not list it.
    let ca = TestCa::new("reel test CA");
    expect_tls_error(pinned_group(&s.host(), ca.pem_path(), Some("origin.test"))).await;
    // The system roots.
    expect_tls_error(tls_group(&s.host(), None, Some("origin.test"))).await;
    assert_eq!(s.requests(), 0);
}

#[tokio::test]
async fn pinned_certificate_must_carry_the_name() {
    let pinned = SelfSigned::new();
    let s = TlsServer::start_with(vec![pinned.cert.clone()], pinned.key(), false).await;
    let msg =
        expect_tls_error(pinned_group(&s.host(), pinned.pem_path(), Some("elsewhere.test"))).await;
    assert!(msg.contains("not valid for name \"elsewhere.test\""), "{msg}");
    assert_eq!(s.requests(), 0);
}

#[tokio::test]
async fn expired_pinned_certificate_is_refused() {
    let pinned = SelfSigned::with(|p| {
        p.not_before = rcgen::date_time_ymd(2000, 1, 1);
        p.not_after = rcgen::date_time_ymd(2001, 1, 1);
    });
    let s = TlsServer::start_with(vec![pinned.cert.clone()], pinned.key(), false).await;
    let msg =
        expect_tls_error(pinned_group(&s.host(), pinned.pem_path(), Some("origin.test"))).await;
    assert!(msg.contains("expired"), "{msg}");

    let future = SelfSigned::with(|p| {
        p.not_before = rcgen::date_time_ymd(2999, 1, 1);
        p.not_after = rcgen::date_time_ymd(3000, 1, 1);
    });
    let s = TlsServer::start_with(vec![future.cert.clone()], future.key(), false).await;
    let msg =
        expect_tls_error(pinned_group(&s.host(), future.pem_path(), Some("origin.test"))).await;
    assert!(msg.contains("not valid yet"), "{msg}");
}

#[tokio::test]
async fn pinned_certificate_without_its_key_is_refused() {
    // The certificate is public; a server that has it but signs with another key must fail
    // the handshake signature check.
    let pinned = SelfSigned::new();
    let impostor = SelfSigned::new();
    for version in [&rustls::version::TLS13, &rustls::version::TLS12] {
        let s = TlsServer::start_with_wrong_key(vec![pinned.cert.clone()], impostor.key(), version)
            .await;
        let g = pinned_group(&s.host(), pinned.pem_path(), Some("origin.test"));
        let msg = expect_tls_error(g).await;
        assert!(msg.contains("BadSignature"), "{version:?}: {msg}");
        assert_eq!(s.requests(), 0);
    }
}

#[tokio::test]
async fn bad_ca_file_is_refused_at_build() {
    let dir = tempfile::tempdir().unwrap();
    let mut g = tls_group("127.0.0.1:1", None, None);
    g.tls.ca_file = Some(dir.path().join("nope.pem"));
    let e = Origins::new(vec![g]).unwrap_err().to_string();
    assert!(e.contains("origin group \"g\"") && e.contains("nope.pem"), "{e}");
}
