//! Who the client is: PROXY protocol v1 and v2 headers on `proxy_protocol` listeners (plain
//! and TLS), from trusted sources only, and `X-Forwarded-For`/`Forwarded` from trusted
//! proxies; the client they name is what the access log and `max_connections_per_client`
//! use. The "balancer" is the test itself, sending the headers by hand from 127.0.0.1
//! (trusted) or 127.0.0.2 (not).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::ServerName;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::common::*;
use crate::tls::{Pki, rt, tls_conf};

/// What a TCP balancer sends: the signature, PROXY command, TCP over IPv4 or IPv6, the
/// addresses, then `tlvs`.
fn v2(client: SocketAddr, server: SocketAddr, tlvs: &[u8]) -> Vec<u8> {
    let mut addrs = Vec::new();
    let fam = match (client, server) {
        (SocketAddr::V4(c), SocketAddr::V4(s)) => {
            addrs.extend_from_slice(&c.ip().octets());
            addrs.extend_from_slice(&s.ip().octets());
            0x11
        }
        (c, s) => {
            for a in [c, s] {
                addrs.extend_from_slice(&match a.ip() {
                    std::net::IpAddr::V4(a) => a.to_ipv6_mapped().octets(),
                    std::net::IpAddr::V6(a) => a.octets(),
                });
            }
            0x21
        }
    };
    addrs.extend_from_slice(&client.port().to_be_bytes());
    addrs.extend_from_slice(&server.port().to_be_bytes());
    let mut h = b"\r\n\r\n\0\r\nQUIT\n".to_vec();
    h.extend_from_slice(&[0x21, fam]);
    h.extend_from_slice(&u16::try_from(addrs.len() + tlvs.len()).unwrap().to_be_bytes());
    h.extend_from_slice(&addrs);
    h.extend_from_slice(tlvs);
    h
}

fn v1(client: SocketAddr, server: SocketAddr) -> Vec<u8> {
    let fam = if client.is_ipv4() { "TCP4" } else { "TCP6" };
    let (c, s) = (client.ip(), server.ip());
    format!("PROXY {fam} {c} {s} {} {}\r\n", client.port(), server.port()).into_bytes()
}

fn sa(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

/// A TCP connection from `from` (an address of the loopback network) to `to`.
fn connect_from(from: &str, to: SocketAddr) -> TcpStream {
    let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    s.bind(&format!("{from}:0").parse::<SocketAddr>().unwrap().into()).unwrap();
    s.connect(&to.into()).unwrap();
    s.into()
}

/// A connection from `from` that sent `header` first, ready for HTTP.
fn proxied(from: &str, to: SocketAddr, header: &[u8]) -> Conn {
    let mut s = connect_from(from, to);
    s.write_all(header).unwrap();
    Conn::from_stream(s).unwrap()
}

/// Whether the server closed `s` without answering `GET /healthz`.
fn closed_unanswered(mut s: TcpStream) -> bool {
    s.set_read_timeout(Some(PATIENCE)).unwrap();
    // The server may close before or after this write: a reset is a close too.
    let _ = s.write_all(b"GET /healthz HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n");
    let mut buf = [0u8; 64];
    match s.read(&mut buf) {
        Ok(0) => true,
        Ok(_) => false,
        Err(e) => e.kind() == std::io::ErrorKind::ConnectionReset,
    }
}

fn log_lines(dir: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(dir.join("access.log"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// The access-log line of the request for `target`.
fn line_of(dir: &std::path::Path, target: &str) -> Value {
    eventually(&format!("the access-log line of {target}"), || {
        log_lines(dir).into_iter().find(|v| v["path"] == target)
    })
}

/// `(client, peer)` of the line of `target`; `peer` is `None` when it is not logged.
fn addresses(dir: &std::path::Path, target: &str) -> (String, Option<String>) {
    let l = line_of(dir, target);
    (l["client"].as_str().unwrap().to_owned(), l["peer"].as_str().map(str::to_owned))
}

fn proxy_conf(dir: &std::path::Path, o: &Origin) -> Conf {
    let mut conf = Conf::new(dir, o);
    conf.http =
        "trusted_proxies = [\"127.0.0.1\", \"10.0.0.0/8\"]\npark_after = \"200ms\"\n".into();
    conf.listener_lines.insert("http".into(), "proxy_protocol = true\n".into());
    conf
}

#[test]
fn proxy_v1_and_v2_headers_name_the_client() {
    let dir = tempfile::tempdir().unwrap();
    let o = Origin::start("o");
    let reel = Reel::start(&proxy_conf(dir.path(), &o));
    let (addr, d) = (reel.data, dir.path());

    // v1, then a second request on the same connection after it was parked: the client
    // stays the one the header named.
    let mut c = proxied("127.0.0.1", addr, &v1(sa("203.0.113.7:40000"), addr));
    assert_eq!(c.get("127.0.0.1", "/healthz?v1").unwrap().status, 200);
    std::thread::sleep(Duration::from_millis(600));
    assert_eq!(c.get("127.0.0.1", "/healthz?v1-parked").unwrap().status, 200);
    let proxied_pair = ("203.0.113.7".to_owned(), Some("127.0.0.1".to_owned()));
    assert_eq!(addresses(d, "/healthz?v1"), proxied_pair);
    assert_eq!(addresses(d, "/healthz?v1-parked"), proxied_pair);

    // v2 over IPv6, with TLVs (an AWS-style one and a unique id), which are skipped.
    let tlvs =
        [[0xEA, 0x00, 0x03, 0x01, b'v', b'p'].as_slice(), &[0x05, 0x00, 0x02, b'i', b'd']].concat();
    let mut c =
        proxied("127.0.0.1", addr, &v2(sa("[2001:db8::7]:5555"), sa("[2001:db8::1]:80"), &tlvs));
    assert_eq!(c.get("127.0.0.1", "/healthz?v2").unwrap().status, 200);
    assert_eq!(
        addresses(d, "/healthz?v2"),
        ("2001:db8::7".to_owned(), Some("127.0.0.1".to_owned()))
    );

    // v2 LOCAL (the balancer's own health check) and v1 UNKNOWN: the balancer is the client.
    let mut local = v2(sa("198.51.100.1:1"), sa("192.0.2.1:80"), &[]);
    local[12] = 0x20;
    let mut c = proxied("127.0.0.1", addr, &local);
    assert_eq!(c.get("127.0.0.1", "/healthz?local").unwrap().status, 200);
    assert_eq!(addresses(d, "/healthz?local"), ("127.0.0.1".to_owned(), None));
    let mut c = proxied("127.0.0.1", addr, b"PROXY UNKNOWN\r\n");
    assert_eq!(c.get("127.0.0.1", "/healthz?unknown").unwrap().status, 200);
    assert_eq!(addresses(d, "/healthz?unknown"), ("127.0.0.1".to_owned(), None));

    // A header sent a byte at a time is read whole, and only it.
    let mut s = connect_from("127.0.0.1", addr);
    for b in v1(sa("203.0.113.8:1"), addr) {
        s.write_all(&[b]).unwrap();
        std::thread::sleep(Duration::from_millis(2));
    }
    let mut c = Conn::from_stream(s).unwrap();
    assert_eq!(c.get("127.0.0.1", "/healthz?slow").unwrap().status, 200);
    assert_eq!(addresses(d, "/healthz?slow").0, "203.0.113.8");

    // A source that is no trusted proxy is closed unanswered, header or not.
    let mut s = connect_from("127.0.0.2", addr);
    s.write_all(&v1(sa("203.0.113.9:1"), addr)).unwrap();
    assert!(closed_unanswered(s), "an untrusted source is refused");
    // So is a trusted one that sends no header, or a broken one.
    assert!(closed_unanswered(connect_from("127.0.0.1", addr)), "a request without a header");
    let mut s = connect_from("127.0.0.1", addr);
    s.write_all(b"PROXY TCP4 203.0.113.9 192.0.2.1 99999 80\r\n").unwrap();
    assert!(closed_unanswered(s), "a bad header");
    assert!(
        !log_lines(d).iter().any(|v| v["client"] == "203.0.113.9" || v["client"] == "127.0.0.2")
    );
}

#[test]
fn max_connections_per_client_counts_the_client_a_header_names() {
    let dir = tempfile::tempdir().unwrap();
    let o = Origin::start("o");
    let mut conf = proxy_conf(dir.path(), &o);
    conf.http.push_str("max_connections_per_client = 2\n");
    let reel = Reel::start(&conf);
    let addr = reel.data;
    let same = v2(sa("203.0.113.7:1"), addr, &[]);
    let mut held: Vec<Conn> = (0..2).map(|_| proxied("127.0.0.1", addr, &same)).collect();
    for c in &mut held {
        assert_eq!(c.get("127.0.0.1", "/healthz").unwrap().status, 200);
    }
    // A third for the same client, over v1 this time: over its cap.
    let r = proxied("127.0.0.1", addr, &v1(sa("203.0.113.7:2"), addr)).get("127.0.0.1", "/healthz");
    let r = r.unwrap();
    assert_eq!((r.status, r.header("connection")), (503, Some("close")));
    assert!(r.text().contains("max_connections_per_client"), "{}", r.text());
    // Other clients through the same balancer have their own counts: the balancer's
    // address is counted for none of them.
    for i in 1..=3 {
        let h = v1(sa(&format!("198.51.100.{i}:1")), addr);
        let mut c = proxied("127.0.0.1", addr, &h);
        assert_eq!(c.get("127.0.0.1", "/healthz").unwrap().status, 200);
        held.push(c);
    }
    // Closing one of the client's makes room for it again.
    drop(held.remove(0));
    eventually("the client's place to come back", || {
        let r = proxied("127.0.0.1", addr, &same).get("127.0.0.1", "/healthz").ok()?;
        (r.status == 200).then_some(())
    });
}

#[test]
fn proxy_header_before_tls() {
    let dir = tempfile::tempdir().unwrap();
    let o = Origin::start("o");
    let pki = Pki::new(dir.path());
    pki.leaf("edge", &["edge.example.test"]);
    let mut conf = tls_conf(dir.path(), &o, &pki);
    conf.http = "trusted_proxies = [\"127.0.0.0/31\"]\n".into();
    let lines = conf.listener_lines.get("https").cloned().unwrap_or_default();
    conf.listener_lines.insert("https".into(), format!("{lines}proxy_protocol = true\n"));
    let reel = Reel::start(&conf);
    let tls_addr = reel.listener_addr("https").expect("https address");
    // The plain listener takes no header: a client there is its socket's peer.
    assert_eq!(get(reel.data, "/healthz?plain").status, 200);
    assert_eq!(addresses(dir.path(), "/healthz?plain"), ("127.0.0.1".to_owned(), None));

    let cfg = pki.client(&[b"http/1.1"]);
    let https = |from: &'static str, header: Vec<u8>, target: &'static str| {
        let cfg: Arc<rustls::ClientConfig> = cfg.clone();
        rt().block_on(async move {
            let s = connect_from(from, tls_addr);
            s.set_nonblocking(true).unwrap();
            let mut s = tokio::net::TcpStream::from_std(s).unwrap();
            s.write_all(&header).await?;
            let name = ServerName::try_from("edge.example.test").unwrap();
            let mut t = tokio_rustls::TlsConnector::from(cfg).connect(name, s).await?;
            let req = format!(
                "GET {target} HTTP/1.1\r\nHost: edge.example.test\r\nConnection: close\r\n\r\n"
            );
            t.write_all(req.as_bytes()).await?;
            let mut raw = Vec::new();
            let _ = t.read_to_end(&mut raw).await;
            Ok::<_, std::io::Error>(String::from_utf8_lossy(&raw).into_owned())
        })
    };
    let r =
        https("127.0.0.1", v2(sa("203.0.113.7:40000"), tls_addr, &[]), "/healthz?tls-v2").unwrap();
    assert!(r.starts_with("HTTP/1.1 200"), "{r}");
    let r =
        https("127.0.0.1", v1(sa("[2001:db8::5]:1"), sa("[2001:db8::1]:443")), "/healthz?tls-v1")
            .unwrap();
    assert!(r.starts_with("HTTP/1.1 200"), "{r}");
    let d = dir.path();
    assert_eq!(
        addresses(d, "/healthz?tls-v2"),
        ("203.0.113.7".to_owned(), Some("127.0.0.1".to_owned()))
    );
    assert_eq!(
        addresses(d, "/healthz?tls-v1"),
        ("2001:db8::5".to_owned(), Some("127.0.0.1".to_owned()))
    );
    // From outside the trusted network (127.0.0.0/31 holds .0 and .1): no handshake.
    let r = https("127.0.0.2", v1(sa("203.0.113.9:1"), tls_addr), "/healthz?untrusted");
    assert!(r.as_deref().map_or(true, str::is_empty), "{r:?}");
    // A ClientHello where the header should be: closed too.
    let r = https("127.0.0.1", Vec::new(), "/healthz?no-header");
    assert!(r.as_deref().map_or(true, str::is_empty), "{r:?}");
}

#[test]
fn forwarded_for_from_trusted_proxies_names_the_client() {
    let dir = tempfile::tempdir().unwrap();
    let o = Origin::start("o");
    let mut conf = Conf::new(dir.path(), &o);
    conf.http = "trusted_proxies = [\"127.0.0.1\", \"10.0.0.0/8\"]\n".into();
    let reel = Reel::start(&conf);
    let (addr, d) = (reel.data, dir.path());
    let send = |from: &str, target: &str, field: (&str, &str)| {
        let mut c = Conn::from_stream(connect_from(from, addr)).unwrap();
        assert_eq!(c.request("GET", "127.0.0.1", target, &[field]).unwrap().status, 200);
    };
    // From a trusted peer: the right-most address that is not a trusted proxy.
    send("127.0.0.1", "/healthz?xff", ("X-Forwarded-For", "198.51.100.1, 203.0.113.9, 10.1.2.3"));
    assert_eq!(
        addresses(d, "/healthz?xff"),
        ("203.0.113.9".to_owned(), Some("127.0.0.1".to_owned()))
    );
    send(
        "127.0.0.1",
        "/healthz?fwd",
        ("Forwarded", "for=\"[2001:db8::9]:4711\";proto=https, for=10.0.0.1"),
    );
    assert_eq!(
        addresses(d, "/healthz?fwd"),
        ("2001:db8::9".to_owned(), Some("127.0.0.1".to_owned()))
    );
    // A malformed entry first from the right: the peer stays the client.
    send("127.0.0.1", "/healthz?bad", ("X-Forwarded-For", "203.0.113.9, not-an-address"));
    assert_eq!(addresses(d, "/healthz?bad"), ("127.0.0.1".to_owned(), None));
    // From an untrusted peer the field is ignored.
    send("127.0.0.2", "/healthz?untrusted", ("X-Forwarded-For", "203.0.113.9"));
    assert_eq!(addresses(d, "/healthz?untrusted"), ("127.0.0.2".to_owned(), None));
}

#[test]
fn check_refuses_bad_trusted_proxies_and_proxy_protocol_without_them() {
    let dir = tempfile::tempdir().unwrap();
    let o = Origin::start("o");
    let mut conf = Conf::new(dir.path(), &o);
    conf.http = "trusted_proxies = [\"10.0.0.1/8\", \"bogus\"]\n".into();
    conf.write();
    let out = std::process::Command::new(BIN)
        .args(["check", "--config"])
        .arg(conf.path())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("http.trusted_proxies[0]") && err.contains("the network is 10.0.0.0/8"),
        "{err}"
    );
    assert!(err.contains("http.trusted_proxies[1]") && err.contains("not an IP address"), "{err}");

    let mut conf = Conf::new(dir.path(), &o);
    conf.listener_lines.insert("http".into(), "proxy_protocol = true\n".into());
    conf.write();
    let out = std::process::Command::new(BIN)
        .args(["check", "--config"])
        .arg(conf.path())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("listener[0].proxy_protocol") && err.contains("trusted_proxies"), "{err}");
}

#[test]
fn proxy_protocol_and_trusted_proxies_change_on_reload() {
    let dir = tempfile::tempdir().unwrap();
    let o = Origin::start("o");
    let mut conf = Conf::new(dir.path(), &o);
    conf.http = "trusted_proxies = [\"127.0.0.2\"]\n".into();
    let mut reel = Reel::start(&conf);
    let (addr, d) = (reel.data, dir.path());
    let xff = |target: &str| {
        let mut c = Conn::from_stream(connect_from("127.0.0.1", addr)).unwrap();
        let r = c.request("GET", "127.0.0.1", target, &[("X-Forwarded-For", "203.0.113.9")]);
        assert_eq!(r.unwrap().status, 200);
    };
    // 127.0.0.1 is not trusted yet: its field is ignored.
    xff("/healthz?before");
    assert_eq!(addresses(d, "/healthz?before"), ("127.0.0.1".to_owned(), None));

    // Trusted, and the listener takes PROXY headers: a connection without one is refused.
    conf.http = "trusted_proxies = [\"127.0.0.1\"]\n".into();
    conf.listener_lines.insert("http".into(), "proxy_protocol = true\n".into());
    reel.rewrite(&conf);
    let st = reel.sighup_reload();
    assert_eq!(st["reload"]["last_ok"], true, "{st}");
    eventually("headers to be required", || {
        closed_unanswered(connect_from("127.0.0.1", addr)).then_some(())
    });
    let mut c = proxied("127.0.0.1", addr, &v1(sa("198.51.100.4:9"), addr));
    let r = c.request("GET", "127.0.0.1", "/healthz?after", &[("X-Forwarded-For", "203.0.113.9")]);
    assert_eq!(r.unwrap().status, 200);
    // The header's client is no trusted proxy: its X-Forwarded-For is not believed.
    assert_eq!(
        addresses(d, "/healthz?after"),
        ("198.51.100.4".to_owned(), Some("127.0.0.1".to_owned()))
    );

    // And off again.
    conf.listener_lines.clear();
    reel.rewrite(&conf);
    assert_eq!(reel.sighup_reload()["reload"]["last_ok"], true);
    eventually("plain connections again", || {
        let r =
            Conn::from_stream(connect_from("127.0.0.1", addr)).ok()?.get("127.0.0.1", "/healthz");
        (r.ok()?.status == 200).then_some(())
    });
    xff("/healthz?off");
    assert_eq!(
        addresses(d, "/healthz?off"),
        ("203.0.113.9".to_owned(), Some("127.0.0.1".to_owned()))
    );
}
