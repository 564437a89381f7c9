//! Interim responses a handler forwards while it works (RFC 9110 section 15.2): written
//! ahead of the final response, as they come, to HTTP/1.1 clients only.

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::{Arc, mpsc};
use std::thread;
use std::time::Duration;

use bytes::Bytes;
use reel_http::{
    Handler, Interim, Limits, MAX_INTERIMS, Request, RequestBody, Response, serve_connection,
};
use tokio::sync::{Notify, watch};

/// Answers `/hinted?n=N` with N `103 Early Hints`, then, once the test releases it, 200.
struct Hinting {
    release: Arc<Notify>,
}

impl Handler for Hinting {
    async fn handle(&self, req: &Request, body: &mut RequestBody<'_>) -> Response {
        let n: usize = req.query().and_then(|q| q.strip_prefix("n=")?.parse().ok()).unwrap_or(1);
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        for i in 0..n {
            let hint = format!("</s{i}.css>; rel=preload; as=style");
            let _ = tx.send(Interim { status: 103, headers: vec![("link".into(), hint.into())] });
        }
        let release = self.release.clone();
        body.with_interims(&mut rx, async move { release.notified().await }).await;
        Response::new(200).bytes(Bytes::from_static(b"final"))
    }
}

fn start() -> (SocketAddr, Arc<Notify>) {
    let release = Arc::new(Notify::new());
    let r = release.clone();
    let (addr_tx, addr_rx) = mpsc::channel();
    thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let local = tokio::task::LocalSet::new();
        local.block_on(&rt, async move {
            let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            addr_tx.send(l.local_addr().unwrap()).unwrap();
            let h = Rc::new(Hinting { release: r });
            let limits = Rc::new(Limits::default());
            let (_keep, drain) = watch::channel(false);
            loop {
                let Ok((s, peer)) = l.accept().await else { continue };
                let (h, lim, d) = (h.clone(), limits.clone(), drain.clone());
                tokio::task::spawn_local(async move {
                    serve_connection(s, peer, h, lim, d).await;
                });
            }
        });
    });
    (addr_rx.recv().unwrap(), release)
}

/// Reads from `c` until `buf` holds `n` complete heads (up to an empty line each).
fn read_heads(c: &mut std::net::TcpStream, buf: &mut Vec<u8>, n: usize) -> Vec<String> {
    loop {
        let text = String::from_utf8_lossy(buf).to_string();
        let heads: Vec<String> = text.split("\r\n\r\n").map(String::from).collect();
        if heads.len() > n {
            return heads[..n].to_vec();
        }
        let mut tmp = [0u8; 4096];
        let got = c.read(&mut tmp).expect("read");
        assert!(got > 0, "closed after {text:?}");
        buf.extend_from_slice(&tmp[..got]);
    }
}

fn client(addr: SocketAddr, request: &str) -> std::net::TcpStream {
    let mut c = std::net::TcpStream::connect(addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    c.write_all(request.as_bytes()).unwrap();
    c
}

#[test]
fn interims_reach_an_http11_client_while_the_handler_still_works() {
    let (addr, release) = start();
    let mut c = client(addr, "GET /hinted?n=2 HTTP/1.1\r\nHost: h\r\n\r\n");
    let mut buf = Vec::new();
    // The handler has not answered yet (it waits for the release): the hints came first.
    let heads = read_heads(&mut c, &mut buf, 2);
    assert_eq!(heads[0], "HTTP/1.1 103 Early Hints\r\nlink: </s0.css>; rel=preload; as=style");
    assert_eq!(heads[1], "HTTP/1.1 103 Early Hints\r\nlink: </s1.css>; rel=preload; as=style");
    release.notify_one();
    let heads = read_heads(&mut c, &mut buf, 3);
    assert!(heads[2].starts_with("HTTP/1.1 200 OK\r\n"), "{heads:?}");
    // The connection stays usable: the next request's answer follows the final one.
    c.write_all(b"GET /hinted?n=0 HTTP/1.1\r\nHost: h\r\n\r\n").unwrap();
    release.notify_one();
    let heads = read_heads(&mut c, &mut buf, 4);
    assert!(heads[3].starts_with("final") && heads[3].contains("HTTP/1.1 200 OK"), "{heads:?}");
}

#[test]
fn an_http10_client_never_gets_an_interim() {
    let (addr, release) = start();
    let mut c = client(addr, "GET /hinted?n=3 HTTP/1.0\r\n\r\n");
    release.notify_one();
    let mut out = Vec::new();
    c.read_to_end(&mut out).unwrap();
    let text = String::from_utf8_lossy(&out);
    assert!(text.starts_with("HTTP/1.1 200 OK\r\n"), "{text}");
    assert!(!text.contains("103"), "{text}");
    assert!(text.ends_with("final"), "{text}");
}

#[test]
fn interims_past_the_cap_are_dropped() {
    let (addr, release) = start();
    let mut c = client(addr, "GET /hinted?n=20 HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n");
    release.notify_one();
    let mut out = Vec::new();
    c.read_to_end(&mut out).unwrap();
    let text = String::from_utf8_lossy(&out);
    assert_eq!(text.matches("HTTP/1.1 103 Early Hints\r\n").count(), MAX_INTERIMS, "{text}");
    let last = text.rsplit("\r\n\r\n").nth(1).unwrap_or("");
    assert!(last.starts_with("HTTP/1.1 200 OK"), "the final response comes last: {text}");
}
