//! One client address cannot take every origin connection of a host (issue 36.3): many
//! misses for distinct slow URLs from 127.0.0.1, over HTTP/1.1 and over HTTP/2, hold at
//! most their fair share of `max_connections` (128), and a miss of another address
//! (127.0.0.2) on the same host is served instead of getting 503 after `connect_timeout`.

use std::net::{SocketAddr, TcpStream};
use std::thread;

use bytes::Bytes;
use reel_test_support::h2::{END_HEADERS, END_STREAM, HEADERS, RawH2, exchange, get_block};
use reel_test_support::{wait_until, wait_until_async};
use rustls::pki_types::ServerName;

use crate::common::{Conf, Conn, Object, Origin, Reel, eventually, metric};
use crate::origin::Gate;
use crate::tls::{Pki, rt, tls_conf};

/// An origin whose every path but `/ok.ts` waits at `gate`, and the sum of its requests.
fn slow_origin(gate: &Gate) -> Origin {
    let origin = Origin::start("o");
    origin.put_default(Object::ok(vec![b's'; 100]).gated(gate));
    origin.put("/ok.ts", Object::ok(vec![b'k'; 100]));
    origin
}

fn slow_hits(origin: &Origin) -> u64 {
    origin.all_hits().iter().filter(|(p, _)| p.starts_with("/slow")).map(|(_, n)| n).sum()
}

/// A connection to `to` from the loopback address `from`.
fn connect_from(from: &str, to: SocketAddr) -> TcpStream {
    let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    s.bind(&format!("{from}:0").parse::<SocketAddr>().unwrap().into()).unwrap();
    s.connect(&to.into()).unwrap();
    s.into()
}

fn conf(dir: &std::path::Path, origin: &Origin, pki: Option<&Pki>) -> Conf {
    let mut c = match pki {
        Some(pki) => tls_conf(dir, origin, pki),
        None => Conf::new(dir, origin),
    };
    // A miss beyond the host's places gives up quickly; so does one beyond its
    // connection's misses (HTTP/2).
    c.connect_timeout = "1s".into();
    c.rules = format!("lock_timeout = \"1s\"\n{}", c.rules);
    c
}

/// A miss of `/ok.ts` from another address, over HTTP/1.1 from 127.0.0.2.
fn other_viewer(data: SocketAddr) -> u16 {
    other_viewer_of(data, "/ok.ts")
}

/// A request for `path` from 127.0.0.2, over HTTP/1.1.
fn other_viewer_of(data: SocketAddr, path: &str) -> u16 {
    let mut c = Conn::from_stream(connect_from("127.0.0.2", data)).expect("connect");
    c.get("127.0.0.1", path).expect("a response").status
}

/// A miss of another address finds a place while the origin still holds the 7 slow
/// requests of viewers that left: their places came back by abandoning the fills, not when
/// their `first_byte_timeout` passed, and nothing asked the origin again.
fn places_came_back_by_abandoning(reel: &Reel, origin: &Origin, what: &str) {
    eventually("a place for a new miss", || (other_viewer(reel.data) == 200).then_some(()));
    let timeouts = metric(
        &reel.metrics(),
        &format!(
            "reel_origin_errors_total{{group=\"o\",host=\"{}\",kind=\"first_byte_timeout\"}}",
            origin.addr
        ),
    );
    assert_eq!(timeouts.unwrap_or(0.0), 0.0, "{what}the places came back by abandoning the fills");
    assert_eq!(slow_hits(origin), 7, "{what}nothing asked the origin again");
}

#[test]
fn one_address_with_many_slow_http1_misses_leaves_origin_connections_to_others() {
    let dir = tempfile::tempdir().expect("tmp");
    let gate = Gate::default();
    let origin = slow_origin(&gate);
    let reel = Reel::start(&conf(dir.path(), &origin, None));
    let data = reel.data;
    // 130 misses of distinct slow URLs from 127.0.0.1, one connection each.
    let asks: Vec<_> = (0..130)
        .map(|i| {
            thread::spawn(move || {
                let mut c = Conn::from_stream(connect_from("127.0.0.1", data)).expect("connect");
                c.get("127.0.0.1", &format!("/slow{i}.ts")).map(|r| r.status).unwrap_or(0)
            })
        })
        .collect();
    // Each one is at the origin or has given up waiting for a place.
    wait_until("every slow miss placed or refused", || {
        slow_hits(&origin) + asks.iter().filter(|a| a.is_finished()).count() as u64 == 130
    });
    assert_eq!(other_viewer(data), 200, "another address's miss is served");
    let held = slow_hits(&origin);
    assert!(held < 128, "one address holds {held} of the host's 128 origin connections");
    gate.open();
    for a in asks {
        assert!(matches!(a.join().unwrap(), 200 | 503));
    }
}

#[test]
fn one_address_with_many_slow_http2_streams_leaves_origin_connections_to_others() {
    let dir = tempfile::tempdir().expect("tmp");
    let gate = Gate::default();
    let origin = slow_origin(&gate);
    let pki = Pki::new(dir.path());
    pki.leaf("edge", &["edge.example.test"]);
    let reel = Reel::start(&conf(dir.path(), &origin, Some(&pki)));
    let addr = reel.listener_addr("https").expect("https listener");
    rt().block_on(async {
        // 8 connections x 24 streams: each connection has 32 misses at the origin at most.
        let mut streams = Vec::new();
        for c in 0..8 {
            let tcp = connect_from("127.0.0.1", addr);
            tcp.set_nonblocking(true).unwrap();
            let tcp = tokio::net::TcpStream::from_std(tcp).unwrap();
            tcp.set_nodelay(true).unwrap();
            let name = ServerName::try_from("edge.example.test").unwrap();
            let tls = tokio_rustls::TlsConnector::from(pki.client(&[b"h2"]))
                .connect(name, tcp)
                .await
                .expect("TLS");
            let send = reel_test_support::h2::client(tls).await;
            for s in 0..24 {
                let send: h2::client::SendRequest<Bytes> = send.clone();
                let path = format!("https://edge.example.test/slow{c}-{s}.ts");
                streams.push(tokio::spawn(async move {
                    let req = http::Request::builder().uri(path).body(()).unwrap();
                    exchange(&send, req, None).await.map(|r| r.status).unwrap_or(0)
                }));
            }
        }
        let total = streams.len() as u64;
        wait_until_async("every slow stream placed or refused", || {
            slow_hits(&origin) + streams.iter().filter(|s| s.is_finished()).count() as u64 == total
        })
        .await;
        let data = reel.data;
        let other = tokio::task::spawn_blocking(move || other_viewer(data));
        assert_eq!(other.await.unwrap(), 200, "another address's miss is served");
        let held = slow_hits(&origin);
        assert!(held < 128, "one address holds {held} of the host's 128 origin connections");
        gate.open();
        for s in streams {
            assert!(matches!(s.await.unwrap(), 200 | 503));
        }
    });
}

/// A fill nobody waits for any more, before the origin answered, is abandoned and gives its
/// origin connection back: an HTTP/2 client asks for 8 slow URLs (taking every viewer's
/// place of a host with `max_connections = 8`) and closes its connection; the host's
/// places come back while the origin still holds those requests, not when their
/// `first_byte_timeout` passes.
#[test]
fn fills_whose_viewers_all_left_before_the_answer_give_their_origin_connections_back() {
    let dir = tempfile::tempdir().expect("tmp");
    let gate = Gate::default();
    let origin = slow_origin(&gate);
    let pki = Pki::new(dir.path());
    pki.leaf("edge", &["edge.example.test"]);
    let mut c = conf(dir.path(), &origin, Some(&pki));
    c.origin_group = "max_connections = 8\n".into();
    let reel = Reel::start(&c);
    let addr = reel.listener_addr("https").expect("https listener");
    rt().block_on(async {
        let tcp = connect_from("127.0.0.1", addr);
        tcp.set_nonblocking(true).unwrap();
        let tcp = tokio::net::TcpStream::from_std(tcp).unwrap();
        let name = ServerName::try_from("edge.example.test").unwrap();
        let tls = tokio_rustls::TlsConnector::from(pki.client(&[b"h2"]))
            .connect(name, tcp)
            .await
            .expect("TLS");
        let mut raw = RawH2::handshake(tls).await;
        for i in 0..8u32 {
            let block = get_block("edge.example.test", &format!("/slow{i}.ts"));
            raw.send(HEADERS, END_STREAM | END_HEADERS, 2 * i + 1, &block).await;
        }
        // 7 places for viewers (one is the node's own): 7 misses at the origin.
        wait_until_async("the viewers' places taken", || slow_hits(&origin) == 7).await;
        drop(raw);
    });
    places_came_back_by_abandoning(&reel, &origin, "");
    gate.open();
}

/// The same over HTTP/1.1 and HTTPS/1.1, where no stream reset says a viewer left: 7
/// viewers each send a request for a slow URL and close their socket at once (taking
/// every viewer's place of a host with `max_connections = 8`); reel notices the closed
/// sockets while the requests wait, and the places come back while the origin still holds
/// those requests, not when their `first_byte_timeout` passes.
#[test]
fn fills_whose_http1_viewers_closed_their_sockets_give_their_origin_connections_back() {
    use std::io::Write;
    for tls in [false, true] {
        let dir = tempfile::tempdir().expect("tmp");
        let gate = Gate::default();
        let origin = slow_origin(&gate);
        let pki = Pki::new(dir.path());
        pki.leaf("edge", &["edge.example.test"]);
        let mut c = conf(dir.path(), &origin, tls.then_some(&pki));
        c.origin_group = "max_connections = 8\n".into();
        let reel = Reel::start(&c);
        let addr = if tls { reel.listener_addr("https").expect("https") } else { reel.data };
        rt().block_on(async {
            let mut gone = Vec::new();
            for i in 0..7 {
                let head = format!("GET /slow{i}.ts HTTP/1.1\r\nHost: edge.example.test\r\n\r\n");
                let tcp = connect_from("127.0.0.1", addr);
                if tls {
                    tcp.set_nonblocking(true).unwrap();
                    let tcp = tokio::net::TcpStream::from_std(tcp).unwrap();
                    let name = ServerName::try_from("edge.example.test").unwrap();
                    let mut s = tokio_rustls::TlsConnector::from(pki.client(&[b"http/1.1"]))
                        .connect(name, tcp)
                        .await
                        .expect("TLS");
                    tokio::io::AsyncWriteExt::write_all(&mut s, head.as_bytes()).await.unwrap();
                    gone.push(Box::new(s) as Box<dyn std::any::Any>);
                } else {
                    let mut tcp = tcp;
                    tcp.write_all(head.as_bytes()).unwrap();
                    gone.push(Box::new(tcp));
                }
            }
            wait_until_async("the viewers' places taken", || slow_hits(&origin) == 7).await;
            // Each viewer closes its socket (over TLS without a close_notify, as a player
            // that is killed does).
            drop(gone);
        });
        places_came_back_by_abandoning(&reel, &origin, &format!("tls {tls}: "));
        gate.open();
    }
}

/// The node's own traffic has room no viewer can take: while one address's slow misses
/// hold every viewer's place of a host (`max_connections = 8`), a stale-while-revalidate
/// refresh of a stored object still reaches the origin.
#[test]
fn a_background_refresh_reaches_the_origin_while_viewers_hold_every_place() {
    let dir = tempfile::tempdir().expect("tmp");
    let gate = Gate::default();
    let origin = slow_origin(&gate);
    let swr = Object::ok(vec![b'p'; 100])
        .header("cache-control", "max-age=1, stale-while-revalidate=600");
    origin.put("/live.m3u8", swr);
    let mut c = conf(dir.path(), &origin, None);
    c.origin_group = "max_connections = 8\n".into();
    let reel = Reel::start(&c);
    let data = reel.data;
    assert_eq!(other_viewer_of(data, "/live.m3u8"), 200);
    let asks: Vec<_> = (0..9)
        .map(|i| {
            thread::spawn(move || {
                let mut c = Conn::from_stream(connect_from("127.0.0.1", data)).expect("connect");
                c.get("127.0.0.1", &format!("/slow{i}.ts")).map(|r| r.status).unwrap_or(0)
            })
        })
        .collect();
    wait_until("every slow miss placed or refused", || {
        slow_hits(&origin) + asks.iter().filter(|a| a.is_finished()).count() as u64 == 9
    });
    // Once stale, a viewer's hit starts the refresh; it needs an origin connection.
    eventually("the refresh at the origin", || {
        let _ = other_viewer_of(data, "/live.m3u8");
        (origin.hits("/live.m3u8") == 2).then_some(())
    });
    let key = format!(
        "reel_origin_errors_total{{group=\"o\",host=\"{}\",kind=\"first_byte_timeout\"}}",
        origin.addr
    );
    let timeouts = metric(&reel.metrics(), &key).unwrap_or(0.0);
    assert_eq!(timeouts, 0.0, "the refresh went while the viewers' misses held their places");
    gate.open();
    for a in asks {
        assert!(matches!(a.join().unwrap(), 200 | 503));
    }
}
