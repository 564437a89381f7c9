//! `reel-load` over HTTP/3 against a small quinn + h3 server in the test, on 127.0.0.1:0
//! with a self-signed certificate: `get --h3` prints the exact body, `fixed --h3` and
//! `open --h3` count requests, bytes and statuses like the HTTP/1.1 path.

use std::net::SocketAddr;
use std::process::Output;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use quinn::crypto::rustls::QuicServerConfig;
use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};

/// Sizes the server answers at `/obj/<size>`.
const SIZES: [usize; 2] = [1024, 300 * 1024];

/// A deterministic body of `n` bytes.
fn body(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i % 251) as u8).collect()
}

/// An HTTP/3 server: `/obj/1024` and `/obj/307200` answer 200 with [`body`], anything else
/// 404; counts the requests it answered.
struct Server {
    addr: SocketAddr,
    served: Arc<AtomicU64>,
    _ep: quinn::Endpoint,
}

impl Server {
    fn start() -> Self {
        let ck = rcgen::generate_simple_self_signed(vec!["127.0.0.1".into(), "localhost".into()])
            .unwrap();
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(ck.signing_key.serialize_der()));
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut tls = rustls::ServerConfig::builder_with_provider(provider)
            .with_protocol_versions(&[&rustls::version::TLS13])
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(vec![ck.cert.der().clone()], key)
            .unwrap();
        tls.alpn_protocols = vec![b"h3".to_vec()];
        let quic = QuicServerConfig::try_from(Arc::new(tls)).unwrap();
        let cfg = quinn::ServerConfig::with_crypto(Arc::new(quic));
        let ep = quinn::Endpoint::server(cfg, "127.0.0.1:0".parse().unwrap()).unwrap();
        let addr = ep.local_addr().unwrap();
        let served = Arc::new(AtomicU64::new(0));
        let (ep2, count) = (ep.clone(), served.clone());
        tokio::spawn(async move {
            while let Some(incoming) = ep2.accept().await {
                tokio::spawn(serve_conn(incoming, count.clone()));
            }
        });
        Self { addr, served, _ep: ep }
    }

    fn url(&self, path: &str) -> String {
        format!("https://127.0.0.1:{}{path}", self.addr.port())
    }
}

async fn serve_conn(incoming: quinn::Incoming, served: Arc<AtomicU64>) {
    let Ok(conn) = incoming.await else { return };
    let Ok(mut h3c) = h3::server::Connection::new(h3_quinn::Connection::new(conn)).await else {
        return;
    };
    while let Ok(Some(resolver)) = h3c.accept().await {
        let served = served.clone();
        tokio::spawn(async move {
            let Ok((req, mut stream)) = resolver.resolve_request().await else { return };
            let size = req
                .uri()
                .path()
                .strip_prefix("/obj/")
                .and_then(|n| n.parse::<usize>().ok())
                .filter(|n| SIZES.contains(n));
            let (status, data) = match size {
                Some(n) => (200, body(n)),
                None => (404, b"not found\n".to_vec()),
            };
            let resp = http::Response::builder()
                .status(status)
                .header("content-length", data.len())
                .header("cache-status", "test; hit")
                .body(())
                .unwrap();
            if stream.send_response(resp).await.is_err() {
                return;
            }
            if stream.send_data(Bytes::from(data)).await.is_err() {
                return;
            }
            if stream.finish().await.is_ok() {
                served.fetch_add(1, Ordering::Relaxed);
            }
        });
    }
}

/// Runs the built `reel-load` with `args` off the runtime's thread, so the in-test server
/// keeps serving.
async fn reel_load(args: &[&str]) -> Output {
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    tokio::task::spawn_blocking(move || {
        std::process::Command::new(env!("CARGO_BIN_EXE_reel-load")).args(&args).output().unwrap()
    })
    .await
    .unwrap()
}

/// The value of `key` in `reel-load --kv` output.
fn kv(out: &Output, key: &str) -> u64 {
    let text = String::from_utf8_lossy(&out.stdout);
    let v = text
        .lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix('='))
        .unwrap_or_else(|| panic!("no {key} in {text}"));
    v.parse::<f64>().unwrap() as u64
}

#[tokio::test]
async fn get_h3_prints_the_exact_body() {
    let server = Server::start();
    for n in SIZES {
        let url = server.url(&format!("/obj/{n}"));
        let out = reel_load(&["get", "--h3", &url]).await;
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        assert!(out.stdout == body(n), "body of {n} bytes differs ({} bytes)", out.stdout.len());
        assert!(String::from_utf8_lossy(&out.stderr).starts_with("HTTP/3 200"));
    }
}

#[tokio::test]
async fn get_h3_include_prints_the_head_first_and_fails_on_404() {
    let server = Server::start();
    let out = reel_load(&["get", "--h3", "-i", &server.url("/obj/1024")]).await;
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let split = out.stdout.windows(4).position(|w| w == b"\r\n\r\n").expect("a blank line");
    let head = String::from_utf8_lossy(&out.stdout[..split]).to_string();
    assert!(head.starts_with("HTTP/3 200\r\n"), "{head}");
    assert!(head.contains("content-length: 1024"), "{head}");
    assert!(out.stdout[split + 4..] == body(1024));

    let out = reel_load(&["get", "--h3", &server.url("/missing")]).await;
    assert!(!out.status.success());
    assert_eq!(out.stdout, b"not found\n");
    // HTTP/3 needs TLS.
    let out =
        reel_load(&["get", "--h3", &format!("http://127.0.0.1:{}/", server.addr.port())]).await;
    assert!(!out.status.success());
}

#[tokio::test]
async fn fixed_h3_counts_requests_without_errors() {
    let server = Server::start();
    let url = server.url("/obj/307200");
    let out = reel_load(&["fixed", "--h3", "-c", "2", "-d", "1s", "--kv", &url]).await;
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let requests = kv(&out, "requests");
    assert!(requests > 0);
    assert_eq!(kv(&out, "errors_total"), 0);
    assert_eq!(kv(&out, "body_bytes"), requests * 300 * 1024);
    assert!(server.served.load(Ordering::Relaxed) >= requests);
    assert_eq!(kv(&out, "connections"), 2);
}

#[tokio::test]
async fn fixed_h3_with_streams_over_two_urls_and_404s_as_errors() {
    let server = Server::start();
    let (a, b) = (server.url("/obj/1024"), server.url("/missing"));
    let args = [
        "fixed",
        "--h3",
        "--streams",
        "4",
        "-c",
        "2",
        "-d",
        "500ms",
        "--json",
        "--mark-url",
        "/obj/",
        &a,
        &b,
    ];
    let out = reel_load(&args).await;
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let requests = r["requests"].as_u64().unwrap();
    let (marked, e404) =
        (r["marked"].as_u64().unwrap(), r["errors"]["status_4xx"].as_u64().unwrap());
    assert!(requests > 8, "{r}");
    // Round robin over the two URLs: the 1 KiB object is marked by its URL, the other is a 404.
    assert_eq!(marked + e404, requests, "{r}");
    assert!(marked.abs_diff(e404) <= 8, "{r}");
    assert_eq!(r["errors_total"].as_u64().unwrap(), e404, "{r}");
}

#[tokio::test]
async fn open_h3_sends_the_schedule() {
    let server = Server::start();
    let url = server.url("/obj/1024");
    let out = reel_load(&["open", "--h3", "-c", "2", "-r", "200", "-d", "1s", "--kv", &url]).await;
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(kv(&out, "requests"), 200);
    assert_eq!(kv(&out, "errors_total"), 0);
}

#[tokio::test]
async fn scenarios_without_h3_refuse_it_and_a_dead_server_counts_errors() {
    let server = Server::start();
    let out = reel_load(&["live", "--h3", "-d", "200ms", &server.url("/live/index.m3u8")]).await;
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("HTTP/3"));
    // Nobody on this UDP port: every attempt fails, none hangs past the run.
    let port = std::net::UdpSocket::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let url = format!("https://127.0.0.1:{port}/obj/1024");
    let out =
        reel_load(&["fixed", "--h3", "-c", "1", "-d", "300ms", "--timeout", "200ms", "--kv", &url])
            .await;
    assert!(!out.status.success());
    assert_eq!(kv(&out, "requests"), 0);
    assert!(kv(&out, "errors_total") > 0);
}
