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

#[test]
fn http2_serves_hits_misses_coalesced_misses_ranges_conditionals_and_head() {
    let dir = tempfile::tempdir().expect("tmp");
    let origin = Origin::start("o");
    let a = body(200_000, 1);
    let slow = body(1_500_000, 2);
    let cached = |b: &[u8]| {
        Object::ok(b.to_vec()).header("etag", "\"v1\"").header("cache-control", "max-age=3600")
    };
    origin.put("/a.ts", cached(&a));
    origin.put("/slow.ts", cached(&slow).delay(Duration::from_millis(700)));
    let pki = Pki::new(dir.path());
    pki.leaf("edge", &["edge.example.test"]);
    let reel = Reel::start(&tls_conf(dir.path(), &origin, &pki));
    let addr = reel.listener_addr("https").expect("https listener");
    rt().block_on(async {
        let c = h2_client(addr, pki.client(&[b"h2", b"http/1.1"]), "edge.example.test").await;
        let r = h2_get(&c, "/a.ts").await;
        assert_eq!(r.status, 200);
        assert!(r.cache_status().contains("fwd=miss"), "{}", r.cache_status());
        assert!(r.body == a);
        let r = h2_get(&c, "/a.ts").await;
        assert_eq!(r.cache_status(), "reel; hit");
        assert!(r.body == a);
        assert_eq!(origin.hits("/a.ts"), 1);
        // Range, conditional and HEAD on the cached object.
        let r = h2_req(&c, "GET", "/a.ts", &[("range", "bytes=1000-1999")]).await.expect("range");
        assert_eq!(r.status, 206);
        assert!(r.body == a[1000..2000]);
        assert_eq!(r.headers["content-range"], "bytes 1000-1999/200000");
        let r = h2_req(&c, "GET", "/a.ts", &[("if-none-match", "\"v1\"")]).await.expect("inm");
        assert_eq!((r.status, r.body.len()), (304, 0));
        let r = h2_req(&c, "HEAD", "/a.ts", &[]).await.expect("head");
        assert_eq!((r.status, r.body.len()), (200, 0));
        assert_eq!(r.headers["content-length"], "200000");
        // A slow miss asked for on many streams of two connections: one origin fetch, every
        // stream byte-exact.
        let c2 = h2_client(addr, pki.client(&[b"h2"]), "edge.example.test").await;
        let mut work = Vec::new();
        for i in 0..12 {
            let c = if i % 2 == 0 { c.clone() } else { c2.clone() };
            work.push(tokio::spawn(async move { h2_get(&c, "/slow.ts").await }));
        }
        let mut collapsed = 0;
        for w in work {
            let r = w.await.expect("task");
            assert_eq!(r.status, 200);
            assert!(r.body == slow, "a coalesced stream was not byte-exact");
            collapsed += usize::from(r.cache_status().contains("collapsed"));
        }
        assert_eq!(origin.hits("/slow.ts"), 1);
        assert!(collapsed > 0, "no stream joined the fill");
        // HTTPS/1.1 on the same listener, same cache.
        let (head, b, _) =
            https11_get(addr, pki.client(&[b"http/1.1"]), "/a.ts").await.expect("h1");
        assert!(
            head.starts_with("HTTP/1.1 200") && head.contains("cache-status: reel; hit"),
            "{head}"
        );
        assert!(b == a);
        // The health endpoint answers over HTTP/2 too (503 on an overloaded machine).
        let h = h2_get(&c, "/healthz").await;
        assert!(h.status == 200 || h.status == 503, "{}", h.status);
        assert_eq!(h.headers["content-type"], "application/json");
    });
    // Workers hand their lines over every flush_interval: wait for it.
    eventually("HTTP/2 requests in the access log", || {
        let log = std::fs::read_to_string(dir.path().join("access.log")).unwrap_or_default();
        log.contains("/slow.ts").then_some(())
    });
}

/// RFC 9113 8.2.3 lets an HTTP/2 client split its cookie into several `cookie` fields;
/// they reached the HTTP/1.1 origin as several `Cookie:` lines, which RFC 6265 5.4 does
/// not allow and many origins read only the first of.
#[test]
fn separate_http2_cookie_fields_reach_the_origin_as_one_field() {
    let dir = tempfile::tempdir().expect("tmp");
    let origin = Origin::start("o");
    origin.put("/c.ts", Object::ok("c").header("cache-control", "no-store"));
    origin.put("/p", Object::ok("p"));
    let pki = Pki::new(dir.path());
    pki.leaf("edge", &["edge.example.test"]);
    let reel = Reel::start(&tls_conf(dir.path(), &origin, &pki));
    let addr = reel.listener_addr("https").expect("https listener");
    rt().block_on(async {
        let c = h2_client(addr, pki.client(&[b"h2"]), "edge.example.test").await;
        let split = [("cookie", "a=1"), ("cookie", "b=2")];
        for (method, path) in [("GET", "/c.ts"), ("POST", "/p")] {
            let r = h2_req(&c, method, path, &split).await.expect("h2 request");
            assert_eq!(r.status, 200, "{method} {path}");
            assert_eq!(origin.cookies(path), ["a=1; b=2"], "{method} {path}");
        }
    });
}

#[test]
fn many_multiplexed_streams_return_their_own_objects_byte_exact() {
    let dir = tempfile::tempdir().expect("tmp");
    let origin = Origin::start("o");
    let objects: Vec<Vec<u8>> = (0..40).map(|i| body(1000 + i * 15_013, i as u8)).collect();
    for (i, b) in objects.iter().enumerate() {
        origin.put(
            &format!("/m/{i}.ts"),
            Object::ok(b.clone()).header("cache-control", "max-age=3600"),
        );
    }
    let pki = Pki::new(dir.path());
    pki.leaf("edge", &["edge.example.test"]);
    let reel = Reel::start(&tls_conf(dir.path(), &origin, &pki));
    let addr = reel.listener_addr("https").expect("https listener");
    let objects = Arc::new(objects);
    rt().block_on(async {
        let c = h2_client(addr, pki.client(&[b"h2"]), "edge.example.test").await;
        // One stream first: the client then knows the server's stream limit (128) and
        // queues the rest instead of opening streams the server would refuse.
        assert_eq!(h2_get(&c, "/m/0.ts").await.status, 200);
        let mut work = Vec::new();
        for n in 0..200 {
            let (c, objects) = (c.clone(), objects.clone());
            work.push(tokio::spawn(async move {
                let i = (n * 7) % objects.len();
                let r = h2_get(&c, &format!("/m/{i}.ts")).await;
                assert_eq!(r.status, 200);
                assert!(r.body == objects[i], "stream for object {i} carried other bytes");
            }));
        }
        for w in work {
            w.await.expect("stream");
        }
    });
}

/// A hand-written HTTP/2 connection for the attacks.
async fn connect_raw(addr: SocketAddr, cfg: Arc<rustls::ClientConfig>) -> RawH2<Tls> {
    RawH2::handshake(tls_connect(addr, cfg, "edge.example.test").await.expect("TLS")).await
}

/// HPACK for `GET https://edge.example.test{path}` (static table and literals).
fn get_block(path: &str) -> Vec<u8> {
    reel_test_support::h2::get_block("edge.example.test", path)
}

#[test]
fn rapid_reset_and_continuation_floods_get_goaway_while_other_connections_are_served() {
    let dir = tempfile::tempdir().expect("tmp");
    let origin = Origin::start("o");
    let a = body(50_000, 3);
    origin.put("/a.ts", Object::ok(a.clone()).header("cache-control", "max-age=3600"));
    origin.put("/slow.ts", Object::ok(body(10, 4)).delay(Duration::from_millis(400)));
    let pki = Pki::new(dir.path());
    pki.leaf("edge", &["edge.example.test"]);
    let mut conf = tls_conf(dir.path(), &origin, &pki);
    // The limit is per second: at the default (100) the 300 paced resets below tripped it
    // only while the client kept up 2 ms a reset, which a loaded CI machine did not. At 10
    // it trips at any pace faster than 100 ms a reset; the burst trips either.
    conf.http.push_str("h2_max_resets_per_second = 10\n");
    let reel = Reel::start(&conf);
    let addr = reel.listener_addr("https").expect("https listener");
    let served = Arc::new(Mutex::new((0u32, 0u32)));
    rt().block_on(async {
        // An honest viewer keeps fetching on its own connection the whole time.
        let stop = Arc::new(AtomicBool::new(false));
        let honest = {
            let (c, stop, served, a) = (
                h2_client(addr, pki.client(&[b"h2"]), "edge.example.test").await,
                stop.clone(),
                served.clone(),
                a.clone(),
            );
            tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    let ok = h2_req(&c, "GET", "/a.ts", &[]).await.is_ok_and(|r| r.body == a);
                    let mut s = served.lock().unwrap();
                    if ok { s.0 += 1 } else { s.1 += 1 }
                }
            })
        };
        // Rapid reset: HEADERS and RST_STREAM back to back, 1000 times, in one write.
        let mut raw = connect_raw(addr, pki.client(&[b"h2"])).await;
        let mut burst = Vec::new();
        for i in 0..1000u32 {
            let id = 2 * i + 1;
            burst.extend(frame(HEADERS, END_STREAM | END_HEADERS, id, &get_block("/slow.ts")));
            burst.extend(frame(RST_STREAM, 0, id, &CANCEL.to_be_bytes()));
        }
        let _ = raw.write(&burst).await;
        assert_eq!(raw.goaway().await, Some(ENHANCE_YOUR_CALM), "rapid reset");
        // Rapid reset of streams already being answered.
        let mut raw = connect_raw(addr, pki.client(&[b"h2"])).await;
        for i in 0..300u32 {
            let id = 2 * i + 1;
            raw.send(HEADERS, END_STREAM | END_HEADERS, id, &get_block("/slow.ts")).await;
            tokio::time::sleep(Duration::from_millis(2)).await;
            if raw.write(&frame(RST_STREAM, 0, id, &CANCEL.to_be_bytes())).await.is_err() {
                break;
            }
        }
        assert_eq!(raw.goaway().await, Some(ENHANCE_YOUR_CALM), "resets of running streams");
        // CONTINUATION flood: a header block that never ends.
        let mut raw = connect_raw(addr, pki.client(&[b"h2"])).await;
        raw.send(HEADERS, END_STREAM, 1, &get_block("/a.ts")).await;
        let mut flood = Vec::new();
        for _ in 0..20_000 {
            flood.extend(frame(CONTINUATION, 0, 1, &[0x40, 0x01, b'x', 0x01, b'y']));
        }
        let _ = raw.write(&flood).await;
        assert!(raw.goaway().await.is_some(), "CONTINUATION flood");
        stop.store(true, Ordering::Relaxed);
        honest.await.expect("honest viewer");
    });
    let (ok, failed) = *served.lock().unwrap();
    assert!(ok > 0 && failed == 0, "honest viewer: {ok} served, {failed} failed");
    // A fresh connection is served as usual.
    rt().block_on(async {
        let c = h2_client(addr, pki.client(&[b"h2"]), "edge.example.test").await;
        assert!(h2_get(&c, "/a.ts").await.body == a);
    });
}

#[test]
fn sni_picks_certificates_and_strict_listeners_refuse_unknown_names() {
    let dir = tempfile::tempdir().expect("tmp");
    let origin = Origin::start("o");
    origin.put("/a.ts", Object::ok(body(1000, 5)).header("cache-control", "max-age=3600"));
    let pki = Pki::new(dir.path());
    let edge = pki.leaf("edge", &["edge.example.test"]);
    let video = pki.leaf("video", &["video.example.test"]);
    let cdn = pki.leaf("cdn", &["*.cdn.example.test"]);
    let mut conf = tls_conf(dir.path(), &origin, &pki);
    conf.listeners.push(("strict".into(), "127.0.0.1:0".into()));
    conf.listener_lines
        .insert("strict".into(), format!("{}sni_strict = true\n", tls_lines(&pki, "edge")));
    let d = dir.path().display();
    conf.extra = format!(
        "\n[[certificate]]\nnames = [\"video.example.test\"]\ncert = \"{d}/video.pem\"\nkey = \"{d}/video.key\"\n\n[[certificate]]\nnames = [\"*.cdn.example.test\"]\ncert = \"{d}/cdn.pem\"\nkey = \"{d}/cdn.key\"\n"
    );
    let reel = Reel::start(&conf);
    let lax = reel.listener_addr("https").expect("https");
    let strict = reel.listener_addr("strict").expect("strict");
    let client = pki.client(&[b"h2", b"http/1.1"]);
    rt().block_on(async {
        for (addr, name, want) in [
            (lax, "video.example.test", &video),
            (lax, "a.cdn.example.test", &cdn),
            (lax, "edge.example.test", &edge),
            (strict, "video.example.test", &video),
            (strict, "edge.example.test", &edge),
        ] {
            let s = tls_connect(addr, client.clone(), name).await.expect(name);
            assert_eq!(&leaf_of(&s), want, "{name}");
        }
        // An unknown name: the lax listener answers with its default certificate (which
        // this client then rejects for the name); the strict one refuses the handshake.
        let e = tls_connect(lax, client.clone(), "other.example.test").await.expect_err("lax");
        assert!(e.to_string().contains("not valid for name"), "{e}");
        let e =
            tls_connect(strict, client.clone(), "other.example.test").await.expect_err("strict");
        assert!(e.to_string().to_lowercase().contains("alert"), "{e}");
        // HTTP/2 through an SNI certificate reaches the same cache.
        let c = h2_client(lax, client.clone(), "video.example.test").await;
        assert_eq!(h2_get(&c, "/a.ts").await.status, 200);
    });
    let m = reel.metrics();
    assert_eq!(
        metric(
            &m,
            r#"reel_tls_handshakes_total{result="unknown_name",version="none",resumed="false"}"#
        ),
        Some(1.0),
        "{m}"
    );
    assert!(m.contains(r#"reel_tls_cert_expiry_timestamp_seconds{name="*.cdn.example.test",key="certificate[1].cert"}"#));
    let st = reel.status();
    let certs = st["tls"]["certificates"].as_array().expect("certificates");
    assert_eq!(certs.len(), 4, "each listener's own and the two SNI ones: {st}");
    assert!(
        certs
            .iter()
            .any(|c| c["names"][0] == "video.example.test" && c["not_after"].as_i64() > Some(0))
    );
}

#[test]
fn reload_swaps_certificates_under_traffic_without_failed_requests() {
    let dir = tempfile::tempdir().expect("tmp");
    let origin = Origin::start("o");
    let a = body(30_000, 6);
    origin.put("/a.ts", Object::ok(a.clone()).header("cache-control", "max-age=3600"));
    let pki = Pki::new(dir.path());
    let old = pki.leaf("edge", &["edge.example.test"]);
    let reel = Reel::start(&tls_conf(dir.path(), &origin, &pki));
    let addr = reel.listener_addr("https").expect("https");
    let stop = Arc::new(AtomicBool::new(false));
    let seen: Arc<Mutex<Vec<CertificateDer<'static>>>> = Arc::default();
    let counts = Arc::new(Mutex::new((0u32, Vec::<String>::new())));
    let traffic = {
        let (stop, seen, counts, client, a) =
            (stop.clone(), seen.clone(), counts.clone(), pki.client(&[b"h2"]), a.clone());
        // Full handshakes only: a resumed session shows the certificate of the session it
        // resumes (tickets stay valid across reloads).
        let mut h1 = (*pki.client(&[b"http/1.1"])).clone();
        h1.resumption = rustls::client::Resumption::disabled();
        let h1 = Arc::new(h1);
        std::thread::spawn(move || {
            rt().block_on(async move {
                // A connection opened before the reload keeps working after it.
                let long = h2_client(addr, client.clone(), "edge.example.test").await;
                while !stop.load(Ordering::Relaxed) {
                    let fresh = async {
                        let (head, b, leaf) = https11_get(addr, h1.clone(), "/a.ts").await?;
                        if !head.starts_with("HTTP/1.1 200") || b != a {
                            return Err(std::io::Error::other(format!("bad response: {head}")));
                        }
                        let r = h2_req(&long, "GET", "/a.ts", &[])
                            .await
                            .map_err(std::io::Error::other)?;
                        if r.status != 200 || r.body != a {
                            return Err(std::io::Error::other("bad h2 response"));
                        }
                        Ok::<_, std::io::Error>(leaf)
                    };
                    let outcome = fresh.await;
                    let mut c = counts.lock().unwrap();
                    match outcome {
                        Ok(leaf) => {
                            c.0 += 1;
                            let mut s = seen.lock().unwrap();
                            if !s.contains(&leaf) {
                                s.push(leaf);
                            }
                        }
                        Err(e) => c.1.push(e.to_string()),
                    }
                }
            })
        })
    };
    eventually("traffic before the reload", || (counts.lock().unwrap().0 > 20).then_some(()));
    // New certificate files, then SIGHUP.
    let new = pki.leaf("edge", &["edge.example.test"]);
    assert_ne!(old, new);
    let st = reel.sighup_reload();
    assert_eq!(st["reload"]["last_ok"], true, "{st}");
    eventually("the new certificate served", || seen.lock().unwrap().contains(&new).then_some(()));
    let after = counts.lock().unwrap().0;
    eventually("traffic after the reload", || {
        (counts.lock().unwrap().0 > after + 20).then_some(())
    });
    stop.store(true, Ordering::Relaxed);
    traffic.join().expect("traffic thread");
    let (ok, failures) = counts.lock().unwrap().clone();
    assert!(failures.is_empty(), "{} of {} requests failed: {:?}", failures.len(), ok, failures);
    assert!(seen.lock().unwrap().contains(&old));
}

fn line_col_of(text: &str, needle: &str) -> (usize, usize) {
    let at = text.find(needle).unwrap_or_else(|| panic!("{needle:?} not in the config"));
    let line = text[..at].lines().count() + usize::from(text[..at].ends_with('\n'));
    (line, needle.len() + 1)
}

#[test]
fn a_mismatched_key_is_refused_by_check_serve_and_reload_and_the_old_certificate_keeps_serving() {
    let dir = tempfile::tempdir().expect("tmp");
    let origin = Origin::start("o");
    origin.put("/a.ts", Object::ok(body(1000, 7)).header("cache-control", "max-age=3600"));
    let pki = Pki::new(dir.path());
    let edge = pki.leaf("edge", &["edge.example.test"]);
    pki.leaf("other", &["other.example.test"]);
    let good = tls_conf(dir.path(), &origin, &pki);
    let mut bad = good.clone();
    let d = dir.path().display();
    bad.listener_lines.insert(
        "https".into(),
        format!("tls_cert = \"{d}/edge.pem\"\ntls_key = \"{d}/other.key\"\n"),
    );
    bad.write();
    let text = bad.render();
    let (line, col) = line_col_of(&text, "tls_key = ");
    let out =
        Command::new(BIN).arg("check").arg("--config").arg(bad.path()).output().expect("check");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(64), "{err}");
    let want =
        format!("{}:{line}:{col}: listener[1].tls_key: the private key in ", bad.path().display());
    assert!(err.contains(&want), "expected {want:?} in:\n{err}");
    assert!(err.contains("does not match the certificate"), "{err}");
    // `serve` refuses it the same way.
    let out =
        Command::new(BIN).arg("serve").arg("--config").arg(bad.path()).output().expect("serve");
    assert_eq!(out.status.code(), Some(64));
    assert!(String::from_utf8_lossy(&out.stderr).contains("listener[1].tls_key"));
    // A non-PEM certificate and a missing key file are refused with their keys too.
    std::fs::write(dir.path().join("junk.pem"), "not a certificate\n").expect("write");
    for (lines, want) in [
        (
            format!("tls_cert = \"{d}/junk.pem\"\ntls_key = \"{d}/edge.key\"\n"),
            "listener[1].tls_cert: ",
        ),
        (
            format!("tls_cert = \"{d}/edge.pem\"\ntls_key = \"{d}/missing.key\"\n"),
            "listener[1].tls_key: cannot read",
        ),
    ] {
        let mut broken = good.clone();
        broken.listener_lines.insert("https".into(), lines);
        broken.write();
        let out = Command::new(BIN).arg("check").arg("--config").arg(broken.path()).output();
        let out = out.expect("check");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(64), "{err}");
        assert!(err.contains(want), "expected {want:?} in {err}");
    }

    // Running with the good file, a reload to the bad one fails and changes nothing.
    let mut reel = Reel::start(&good);
    let addr = reel.listener_addr("https").expect("https");
    let client = pki.client(&[b"http/1.1"]);
    rt().block_on(async {
        let (head, _, leaf) = https11_get(addr, client.clone(), "/a.ts").await.expect("before");
        assert!(head.starts_with("HTTP/1.1 200"));
        assert_eq!(leaf, edge);
    });
    reel.rewrite(&bad);
    let r = reel.admin_req("POST", "/admin/reload");
    assert_eq!(r.status, 400, "{}", r.text());
    assert!(r.text().contains("listener[1].tls_key"), "{}", r.text());
    rt().block_on(async {
        let (head, _, leaf) = https11_get(addr, client.clone(), "/a.ts").await.expect("after");
        assert!(head.starts_with("HTTP/1.1 200"));
        assert_eq!(leaf, edge, "the old certificate keeps serving");
    });
    assert_eq!(reel.status()["reload"]["last_ok"], false);
}

#[test]
fn an_expired_certificate_is_a_warning_for_check() {
    let dir = tempfile::tempdir().expect("tmp");
    let origin = Origin::start("o");
    let pki = Pki::new(dir.path());
    let (c, k) = pki.ca.expired_leaf(&["edge.example.test"]);
    std::fs::write(dir.path().join("edge.pem"), c).expect("write");
    std::fs::write(dir.path().join("edge.key"), k).expect("write");
    let conf = tls_conf(dir.path(), &origin, &pki);
    conf.write();
    let out =
        Command::new(BIN).arg("check").arg("--config").arg(conf.path()).output().expect("check");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(
        err.contains("warning: ") && err.contains("listener[1].tls_cert: certificate"),
        "{err}"
    );
    assert!(err.contains("expired"), "{err}");
}

#[test]
fn sessions_resume_across_workers() {
    let dir = tempfile::tempdir().expect("tmp");
    let origin = Origin::start("o");
    origin.put("/a.ts", Object::ok(body(1000, 8)).header("cache-control", "max-age=3600"));
    let pki = Pki::new(dir.path());
    pki.leaf("edge", &["edge.example.test"]);
    let reel = Reel::start(&tls_conf(dir.path(), &origin, &pki));
    let workers = reel.workers();
    if workers < 2 {
        return skip(&format!("only {workers} worker on this machine"));
    }
    let addr = reel.listener_addr("https").expect("https");
    let accepted = |st: &serde_json::Value| -> Vec<u64> {
        st["workers"]
            .as_array()
            .expect("workers")
            .iter()
            .map(|w| w["accepted"].as_u64().unwrap_or(0))
            .collect()
    };
    let client = pki.client(&[b"http/1.1"]);
    rt().block_on(async {
        let (head, _, _) =
            https11_get(addr, client.clone(), "/a.ts").await.expect("full handshake");
        assert!(head.starts_with("HTTP/1.1 200"));
    });
    let before = accepted(&reel.status());
    rt().block_on(async {
        for _ in 0..24 {
            let (head, _, _) = https11_get(addr, client.clone(), "/a.ts").await.expect("resumed");
            assert!(head.starts_with("HTTP/1.1 200"));
        }
    });
    let after = accepted(&reel.status());
    let busy = before.iter().zip(&after).filter(|(b, a)| a > b).count();
    assert!(busy >= 2, "the connections all landed on one worker: {before:?} -> {after:?}");
    let m = reel.metrics();
    let resumed =
        metric(&m, r#"reel_tls_handshakes_total{result="ok",version="tls1.3",resumed="true"}"#);
    assert_eq!(resumed, Some(24.0), "every later handshake resumed, on whichever worker:\n{m}");
}

#[test]
fn http2_settings_come_from_the_config_and_a_reload_applies_them_to_new_connections() {
    let dir = tempfile::tempdir().expect("tmp");
    let origin = Origin::start("o");
    let pki = Pki::new(dir.path());
    pki.leaf("edge", &["edge.example.test"]);
    let mut conf = tls_conf(dir.path(), &origin, &pki);
    conf.http = "h2_max_concurrent_streams = 7\n".into();
    let mut reel = Reel::start(&conf);
    let addr = reel.listener_addr("https").expect("https listener");
    // The client learns the server's SETTINGS_MAX_CONCURRENT_STREAMS once the connection
    // has read them: after the first response.
    let announced = |addr| {
        rt().block_on(async {
            let s = tls_connect(addr, pki.client(&[b"h2"]), "edge.example.test").await;
            let (send, mut conn) = h2::client::handshake(s.expect("TLS")).await.expect("h2");
            let req = async {
                let r = h2_req(&send, "GET", "/healthz", &[]).await;
                assert!(r.is_ok(), "no answer over HTTP/2: {:?}", r.err());
            };
            tokio::select! {
                () = req => {}
                r = &mut conn => panic!("connection ended first: {r:?}"),
            }
            conn.max_concurrent_send_streams()
        })
    };
    assert_eq!(announced(addr), 7);
    conf.http = "h2_max_concurrent_streams = 9\n".into();
    reel.rewrite(&conf);
    let st = reel.sighup_reload();
    assert_eq!(st["reload"]["last_ok"], true, "{st}");
    assert_eq!(announced(addr), 9);
}

/// Plain HTTP/1.1 viewers of `target` (Host `edge.example.test`), each on its own
/// connection, in the background; their responses once all are answered.
fn viewers_bg(
    addr: SocketAddr,
    target: &str,
    n: usize,
) -> std::thread::JoinHandle<Vec<crate::common::Resp>> {
    let target = target.to_string();
    std::thread::spawn(move || {
        let asks: Vec<_> = (0..n)
            .map(|_| {
                let t = target.clone();
                std::thread::spawn(move || request(addr, "GET", "edge.example.test", &t, &[]))
            })
            .collect();
        asks.into_iter().map(|a| a.join().expect("viewer")).collect()
    })
}

/// An HTTP/2 leader of an LL-HLS blocking request that resets its stream (RST_STREAM
/// CANCEL) while the origin holds the request abandons its wait, not the fetch: every
/// viewer coalesced behind it gets what the origin sends, from that one origin request. The
/// same for a blocking playlist reload and for the part a playlist hinted.
#[test]
fn a_cancelled_http2_leader_of_a_blocking_request_leaves_its_followers_the_origins_answer() {
    let dir = tempfile::tempdir().expect("tmp");
    let origin = Origin::start("o");
    let pki = Pki::new(dir.path());
    pki.leaf("edge", &["edge.example.test"]);
    let reel = Reel::start(&tls_conf(dir.path(), &origin, &pki));
    let addr = reel.listener_addr("https").expect("https listener");
    // A playlist that hints the next part, so a request for that part is blocking.
    let hinting = "#EXTM3U\n#EXT-X-VERSION:9\n#EXT-X-TARGETDURATION:2\n\
                   #EXT-X-SERVER-CONTROL:CAN-BLOCK-RELOAD=YES,PART-HOLD-BACK=1.5\n\
                   #EXT-X-PART-INF:PART-TARGET=0.5\n#EXT-X-MEDIA-SEQUENCE:5\n\
                   #EXT-X-PART:DURATION=0.5,URI=\"seg5.part0.ts\"\n\
                   #EXT-X-PRELOAD-HINT:TYPE=PART,URI=\"seg5.part1.ts\"\n";
    origin.put("/live/p.m3u8", Object::ok(hinting).header("cache-control", "max-age=1"));
    let listed = request(reel.data, "GET", "edge.example.test", "/live/p.m3u8", &[]);
    assert_eq!(listed.status, 200);
    let followers = 6;
    for (path, target, want) in [
        ("/live/p.m3u8", "/live/p.m3u8?_HLS_msn=5&_HLS_part=1", hinting.as_bytes().to_vec()),
        ("/live/seg5.part1.ts", "/live/seg5.part1.ts", body(30_000, 9)),
    ] {
        let gate = Gate::default();
        let hits = origin.hits(path);
        let obj = Object::ok(want.clone()).header("cache-control", "max-age=60");
        origin.put(path, obj.gated(&gate));
        rt().block_on(async {
            let mut raw = connect_raw(addr, pki.client(&[b"h2"])).await;
            raw.send(HEADERS, END_STREAM | END_HEADERS, 1, &get_block(target)).await;
            eventually("the leader's origin request", || {
                (origin.hits(path) == hits + 1).then_some(())
            });
            let pending = viewers_bg(reel.data, target, followers);
            eventually("every follower waiting", || {
                let w = metric(&reel.metrics(), "reel_coalesced_waiters");
                (w == Some(followers as f64)).then_some(())
            });
            raw.send(RST_STREAM, 0, 1, &CANCEL.to_be_bytes()).await;
            // The reset reached the server once a PING sent after it is answered.
            raw.send(PING, 0, 0, &[0; 8]).await;
            while let Some(f) = raw.read().await {
                if f.kind == PING {
                    break;
                }
            }
            gate.open();
            let answers = pending.join().expect("viewers");
            for r in &answers {
                assert_eq!(r.status, 200, "{target}: {}", r.cache_status());
                assert_eq!(r.body, want, "{target}");
            }
            assert_eq!(origin.hits(path), hits + 1, "{target}: one origin request");
        });
    }
}

/// A TLS connection from `from` (another loopback address is another client) with a small
/// receive buffer, as a client that means to stop reading sets it.
async fn tls_connect_from(from: &str, to: SocketAddr, cfg: Arc<rustls::ClientConfig>) -> Tls {
    let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    s.bind(&format!("{from}:0").parse::<SocketAddr>().unwrap().into()).unwrap();
    s.set_recv_buffer_size(4096).unwrap();
    s.connect(&to.into()).unwrap();
    s.set_nonblocking(true).unwrap();
    let tcp = TcpStream::from_std(s.into()).unwrap();
    let name = ServerName::try_from("edge.example.test".to_owned()).unwrap();
    tokio_rustls::TlsConnector::from(cfg).connect(name, tcp).await.expect("TLS")
}

/// Stalled HTTP/2 clients on `addr`, from 127.0.0.2: each opens huge flow-control
/// windows, asks for `path` on 8 streams and never reads.
async fn stalled_clients(addr: SocketAddr, pki: &Pki, path: &str, n: usize) -> Vec<RawH2<Tls>> {
    let mut stalled = Vec::new();
    for _ in 0..n {
        let tls = tls_connect_from("127.0.0.2", addr, pki.client(&[b"h2"])).await;
        let mut raw = RawH2::handshake(tls).await;
        // SETTINGS_INITIAL_WINDOW_SIZE 2^31-1, and the connection window as large.
        let mut settings = vec![0, 4];
        settings.extend_from_slice(&0x7fff_ffffu32.to_be_bytes());
        raw.send(SETTINGS, 0, 0, &settings).await;
        raw.send(WINDOW_UPDATE, 0, 0, &(0x7fff_ffffu32 - 65_535).to_be_bytes()).await;
        for i in 0..8u32 {
            raw.send(HEADERS, END_STREAM | END_HEADERS, 2 * i + 1, &get_block(path)).await;
        }
        stalled.push(raw);
    }
    stalled
}

/// A reel over `dir` whose `/big.ts` (2 MiB) is stored, with `send_timeout`.
fn big_hit_reel(dir: &Path, origin: &Origin, pki: &Pki, send_timeout: &str) -> (Reel, Vec<u8>) {
    let big = body(2 << 20, 5);
    origin.put("/big.ts", Object::ok(big.clone()).header("cache-control", "max-age=3600"));
    let mut conf = tls_conf(dir, origin, pki);
    conf.http = format!("send_timeout = \"{send_timeout}\"\nmax_connections_per_client = 0\n");
    let reel = Reel::start(&conf);
    assert_eq!(get(reel.data, "/big.ts").body.len(), big.len());
    eventually("stored", || {
        (get(reel.data, "/big.ts").cache_status() == "reel; hit").then_some(())
    });
    (reel, big)
}

/// Issue 23.1: HTTP/2 clients that open huge flow-control windows, ask for multi-MiB hits
/// and never read keep pooled buffers queued in their connections. One client address may
/// hold at most its share of a worker's pool, so other HTTPS viewers, HTTP/2 and HTTP/1.1
/// alike, are served at once even while those streams wait out a long `send_timeout`.
#[test]
fn clients_that_stop_reading_cannot_take_the_body_buffers_of_other_https_viewers() {
    let dir = tempfile::tempdir().expect("tmp");
    let origin = Origin::start("o");
    let pki = Pki::new(dir.path());
    pki.leaf("edge", &["edge.example.test"]);
    let (reel, big) = big_hit_reel(dir.path(), &origin, &pki, "60s");
    let addr = reel.listener_addr("https").expect("https listener");
    let lent = || metric(&reel.metrics(), "reel_body_buffers_lent").unwrap_or(0.0);
    rt().block_on(async {
        let stalled = stalled_clients(addr, &pki, "/big.ts", 48).await;
        eventually("the stalled clients hold buffers", || (lent() >= 100.0).then_some(()));
        let guard = Duration::from_secs(10);
        let c = h2_client(addr, pki.client(&[b"h2"]), "edge.example.test").await;
        for _ in 0..3 {
            let r = tokio::time::timeout(guard, h2_get(&c, "/big.ts")).await.expect("h2 viewer");
            assert_eq!(r.body.len(), big.len());
        }
        for _ in 0..3 {
            let r = https11_get(addr, pki.client(&[b"http/1.1"]), "/big.ts");
            let r = tokio::time::timeout(guard, r).await.expect("HTTPS/1.1 viewer").expect("TLS");
            assert_eq!(r.1.len(), big.len());
        }
        drop(stalled);
    });
}

/// Issue 23.1 and 23.11: the streams of a client that stopped reading are reset after
/// `send_timeout` and the connection closed once it has written nothing for as long with
/// buffers queued, so every pooled buffer comes back while the client is still connected,
/// long before `idle_timeout`.
#[test]
fn buffers_held_by_clients_that_stopped_reading_come_back_after_send_timeout() {
    let dir = tempfile::tempdir().expect("tmp");
    let origin = Origin::start("o");
    let pki = Pki::new(dir.path());
    pki.leaf("edge", &["edge.example.test"]);
    let (reel, _) = big_hit_reel(dir.path(), &origin, &pki, "1s");
    let addr = reel.listener_addr("https").expect("https listener");
    let lent = || metric(&reel.metrics(), "reel_body_buffers_lent").unwrap_or(0.0);
    rt().block_on(async {
        let stalled = stalled_clients(addr, &pki, "/big.ts", 8).await;
        eventually("the stalled clients hold buffers", || (lent() >= 8.0).then_some(()));
        eventually("every buffer back", || (lent() == 0.0).then_some(()));
        drop(stalled);
    });
}

/// Issue 23.3: one HTTP/2 connection's streams cannot each hold an origin connection.
/// With `max_misses_per_connection = 2`, six distinct misses of a slow origin on one
/// connection put two requests on the origin; the others wait `lock_timeout` and get 503,
/// while a miss of another connection is not held back.
#[test]
fn one_connection_waits_on_the_origin_with_at_most_its_misses() {
    let dir = tempfile::tempdir().expect("tmp");
    let origin = Origin::start("o");
    let gate = Gate::default();
    for i in 0..7u8 {
        let obj = Object::ok(body(100, i)).header("cache-control", "max-age=60");
        origin.put(&format!("/m{i}.ts"), obj.gated(&gate));
    }
    let pki = Pki::new(dir.path());
    pki.leaf("edge", &["edge.example.test"]);
    let mut conf = tls_conf(dir.path(), &origin, &pki);
    conf.rules = format!("max_misses_per_connection = 2\nlock_timeout = \"1s\"\n{}", conf.rules);
    let reel = Reel::start(&conf);
    let addr = reel.listener_addr("https").expect("https listener");
    let hits = || (0..6).map(|i| origin.hits(&format!("/m{i}.ts"))).sum::<u64>();
    rt().block_on(async {
        let c = h2_client(addr, pki.client(&[b"h2"]), "edge.example.test").await;
        let streams: Vec<_> = (0..6)
            .map(|i| {
                let c = c.clone();
                tokio::spawn(async move { h2_get(&c, &format!("/m{i}.ts")).await.status })
            })
            .collect();
        wait_until_async("two misses at the origin", || hits() == 2).await;
        // Another connection's miss is not held back by this one's.
        let data = reel.data;
        let other = std::thread::spawn(move || get(data, "/m6.ts").status);
        wait_until_async("the other connection's miss", || origin.hits("/m6.ts") == 1).await;
        // Past lock_timeout the four waiting streams get 503.
        wait_until_async("four 503s", || streams.iter().filter(|s| s.is_finished()).count() == 4)
            .await;
        gate.open();
        let mut statuses = Vec::new();
        for s in streams {
            statuses.push(s.await.expect("stream"));
        }
        statuses.sort_unstable();
        assert_eq!(statuses, [200, 200, 503, 503, 503, 503]);
        assert_eq!(other.join().expect("other"), 200);
    });
    assert_eq!(hits(), 2, "no more than two of the connection's misses reached the origin");
}
