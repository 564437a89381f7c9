//! HTTPS origins through the binary: a TLS origin whose certificate authority is made in the
//! test, reached through `[[origin_group.tier]] tls = true` (with and without `ca_file`) and
//! through `--origin https://`.

use std::io::{BufRead, BufReader, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};

use crate::common::{Conf, Origin, Reel, get, message, metric, request};

/// A keep-alive HTTPS/1.1 origin answering every path with `secure <path>`.
struct TlsOrigin {
    addr: SocketAddr,
    ca_pem: String,
    connections: Arc<AtomicUsize>,
    requests: Arc<AtomicUsize>,
    /// The server name (SNI) of every handshake, finished or not.
    sni: Arc<Mutex<Vec<Option<String>>>>,
}

impl TlsOrigin {
    fn start() -> TlsOrigin {
        let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let ca = CertifiedIssuer::self_signed(ca, KeyPair::generate().unwrap()).unwrap();
        let key = KeyPair::generate().unwrap();
        let params =
            CertificateParams::new(vec!["origin.test".to_owned(), "127.0.0.1".to_owned()]).unwrap();
        let cert = params.signed_by(&key, &*ca).unwrap();
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let cfg = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(vec![cert.der().clone()], key)
            .unwrap();
        let cfg = Arc::new(cfg);
        let l = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let origin = TlsOrigin {
            addr: l.local_addr().unwrap(),
            ca_pem: ca.pem(),
            connections: Arc::default(),
            requests: Arc::default(),
            sni: Arc::default(),
        };
        let (conns, reqs, sni) =
            (origin.connections.clone(), origin.requests.clone(), origin.sni.clone());
        std::thread::spawn(move || {
            for tcp in l.incoming().flatten() {
                conns.fetch_add(1, Ordering::SeqCst);
                let (cfg, reqs, sni) = (cfg.clone(), reqs.clone(), sni.clone());
                std::thread::spawn(move || {
                    let Ok(conn) = rustls::ServerConnection::new(cfg) else { return };
                    let mut tls = rustls::StreamOwned::new(conn, tcp);
                    // Completes the handshake (or fails on a client that rejects us); the
                    // server name is recorded either way.
                    let done = tls.flush().is_ok() && tls.conn.complete_io(&mut tls.sock).is_ok();
                    sni.lock().unwrap().push(tls.conn.server_name().map(str::to_owned));
                    if !done {
                        return;
                    }
                    let mut r = BufReader::new(tls);
                    loop {
                        let mut line = String::new();
                        if r.read_line(&mut line).unwrap_or(0) == 0 {
                            return;
                        }
                        let path = line.split_whitespace().nth(1).unwrap_or("/").to_owned();
                        loop {
                            let mut h = String::new();
                            if r.read_line(&mut h).unwrap_or(0) == 0 {
                                return;
                            }
                            if h.trim_end().is_empty() {
                                break;
                            }
                        }
                        reqs.fetch_add(1, Ordering::SeqCst);
                        let body = format!("secure {path}");
                        let resp = format!(
                            "HTTP/1.1 200 OK\r\ncontent-length: {}\r\ncache-control: max-age=60\r\n\r\n{body}",
                            body.len()
                        );
                        if r.get_mut().write_all(resp.as_bytes()).is_err() {
                            return;
                        }
                    }
                });
            }
        });
        origin
    }
}

fn conf(dir: &std::path::Path, o: &TlsOrigin) -> Conf {
    // `Conf` wants an `Origin` only for its address.
    let placeholder = Origin::start("unused");
    let mut c = Conf::new(dir, &placeholder);
    c.origins = vec![o.addr];
    c
}

#[test]
fn https_origin_verified_with_ca_file_and_reused() {
    let dir = tempfile::tempdir().unwrap();
    let o = TlsOrigin::start();
    let ca = dir.path().join("origin-ca.pem");
    std::fs::write(&ca, &o.ca_pem).unwrap();
    let mut c = conf(dir.path(), &o);
    c.origin_group = format!("ca_file = \"{}\"\n", ca.display());
    c.tier = "  tls = true\n  host_header = \"origin.test\"\n".into();
    let reel = Reel::start(&c);
    for i in 0..3 {
        let r = get(reel.data, &format!("/v/{i}.ts"));
        assert_eq!(r.status, 200, "{}", r.text());
        assert_eq!(r.text(), format!("secure /v/{i}.ts"));
    }
    assert_eq!(get(reel.data, "/v/0.ts").text(), "secure /v/0.ts");
    assert_eq!(o.requests.load(Ordering::SeqCst), 3, "the fourth was a hit");
    assert_eq!(o.sni.lock().unwrap()[0].as_deref(), Some("origin.test"));
    assert!(
        o.connections.load(Ordering::SeqCst) <= reel.workers(),
        "keep-alive: at most one TLS connection per worker"
    );
    assert_eq!(reel.status()["origin_warnings"], serde_json::json!([]));
}

#[test]
fn unverifiable_https_origin_is_a_counted_502() {
    let dir = tempfile::tempdir().unwrap();
    let o = TlsOrigin::start();
    let mut c = conf(dir.path(), &o);
    // The system roots do not know the test authority.
    c.tier = "  tls = true\n  host_header = \"origin.test\"\n".into();
    let reel = Reel::start(&c);
    let r = get(reel.data, "/v/x.ts");
    assert_eq!(r.status, 502);
    assert_eq!(o.requests.load(Ordering::SeqCst), 0);
    let m = reel.metrics();
    let key = format!("reel_origin_errors_total{{group=\"o\",host=\"{}\",kind=\"tls\"}}", o.addr);
    assert_eq!(metric(&m, &key), Some(1.0), "{m}");
    // The log is read from the child's stderr by another thread: wait for the line.
    let warned =
        reel.logs.wait_for("the TLS warning", |v| message(v) == "origin TLS handshake failed");
    assert!(warned.to_string().contains("UnknownIssuer"), "{warned}");
}

#[test]
fn insecure_skip_verify_is_shown_on_status() {
    let dir = tempfile::tempdir().unwrap();
    let o = TlsOrigin::start();
    let mut c = conf(dir.path(), &o);
    c.origin_group = "insecure_skip_verify = true\n".into();
    c.tier = "  tls = true\n".into();
    let reel = Reel::start(&c);
    assert_eq!(get(reel.data, "/v/x.ts").text(), "secure /v/x.ts");
    let w = reel.status()["origin_warnings"].clone();
    assert!(w[0].as_str().is_some_and(|s| s.contains("insecure_skip_verify")), "{w}");
    reel.logs.wait_for("the insecure warning", |v| message(v).contains("NOT verified"));
}

#[test]
fn origin_flag_https_speaks_tls() {
    let dir = tempfile::tempdir().unwrap();
    let o = TlsOrigin::start();
    let mut c = conf(dir.path(), &o);
    c.serve_args = vec!["--origin".into(), format!("https://{}", o.addr)];
    let reel = Reel::start(&c);
    // The flag's origin serves Hosts no site claims. It verifies against the system roots,
    // which do not know the test authority: the handshake reached the origin and failed
    // verification, so it was TLS.
    let r = request(reel.data, "GET", "unclaimed.invalid", "/v/x.ts", &[]);
    assert_eq!(r.status, 502);
    assert!(o.connections.load(Ordering::SeqCst) >= 1);
    let m = reel.metrics();
    let key =
        format!("reel_origin_errors_total{{group=\"--origin\",host=\"{}\",kind=\"tls\"}}", o.addr);
    assert_eq!(metric(&m, &key), Some(1.0), "{m}");
}

/// `--origin https://` names the origin's own host in SNI by default (an IP address: no
/// SNI, verified against the address); `--origin-host NAME` sends NAME as SNI and verifies
/// the certificate for it. The system roots come from `SSL_CERT_FILE`, here the test's CA.
#[test]
fn origin_flag_https_sends_the_origins_name_or_the_origin_host_as_sni() {
    let dir = tempfile::tempdir().unwrap();
    let o = TlsOrigin::start();
    let ca = dir.path().join("origin-ca.pem");
    std::fs::write(&ca, &o.ca_pem).unwrap();
    let env = [("SSL_CERT_FILE", ca.to_str().unwrap())];
    for (i, (host_flag, sni)) in
        [(None, None), (Some("origin.test"), Some("origin.test"))].into_iter().enumerate()
    {
        let sub = dir.path().join(format!("run{i}"));
        std::fs::create_dir(&sub).unwrap();
        let mut c = conf(&sub, &o);
        c.serve_args = vec!["--origin".into(), format!("https://{}", o.addr)];
        if let Some(h) = host_flag {
            c.serve_args.extend(["--origin-host".into(), h.into()]);
        }
        let reel = Reel::start_env(&c, &env);
        let path = format!("/sni/{i}.ts");
        let r = request(reel.data, "GET", "viewer.example", &path, &[]);
        assert_eq!((r.status, r.text()), (200, format!("secure {path}")), "{host_flag:?}");
        assert_eq!(o.sni.lock().unwrap().last().cloned(), Some(sni.map(String::from)));
    }
}
