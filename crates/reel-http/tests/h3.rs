//! HTTP/3 over QUIC on 127.0.0.1 (quinn + h3 client): the same handler as HTTP/1.1 and
//! HTTP/2, byte-exact file, memory and streamed bodies, HEAD, request bodies, many
//! streams on one connection, refused heads, a connection that moves to a new client
//! port, rapid reset, Retry, drain.

use std::time::Duration;

use reel_http::{CloseReason, H3Settings, Limits};
use reel_quic::{QuicSettings, RetryMode};
use reel_test_support::h3;

use crate::common::{FILE_LEN, Server, file_data};

fn server() -> Server {
    let quic = QuicSettings { retry: RetryMode::Never, ..Default::default() };
    Server::start_h3(Limits::default(), H3Settings::default(), quic)
}

#[tokio::test(flavor = "current_thread")]
async fn files_memory_and_streams_byte_exact() {
    let server = server();
    let ep = h3::endpoint();
    let (_conn, mut c) = h3::connect(&ep, server.addr).await.unwrap();
    let r = h3::get(&mut c, "/hello").await.unwrap();
    assert_eq!((r.status, &r.body[..]), (200, &b"hello world"[..]));
    let r = h3::get(&mut c, "/info?a=1").await.unwrap();
    assert_eq!(std::str::from_utf8(&r.body).unwrap(), "GET /info q=a=1 host=localhost v=3 ka=true");
    for (off, len) in [(0u64, 1u64), (5, 16_384), (77, 300_000), (1_000_003, 2 * 1024 * 1024 + 7)] {
        let r = h3::get(&mut c, &format!("/file?off={off}&len={len}")).await.unwrap();
        assert_eq!(r.status, 200);
        assert_eq!(r.headers["content-length"], len.to_string().as_str());
        assert!(r.body == file_data()[off as usize..(off + len) as usize], "file {off}+{len}");
    }
    let r = h3::get(&mut c, "/stream?len=25003").await.unwrap();
    assert_eq!(r.status, 200);
    let mut want = b"abc".to_vec();
    want.extend_from_slice(&file_data()[1000..6000]);
    want.extend_from_slice(&[b'z'; 20_000]);
    assert!(r.body == want);
    // HEAD: the length a GET would have, no body.
    let r = h3::request(&mut c, "HEAD", "/file?off=0&len=5000", &[], None).await.unwrap();
    assert_eq!((r.status, r.body.len()), (200, 0));
    assert_eq!(r.headers["content-length"], "5000");
    // A request body reaches the handler.
    let body = vec![7u8; 100_000];
    let r = h3::request(&mut c, "POST", "/echo", &[], Some(&body)).await.unwrap();
    assert_eq!(r.status, 200);
    assert!(r.body == body);
    let r = h3::get(&mut c, "/nothing-here").await.unwrap();
    assert_eq!(r.status, 404);
}

#[tokio::test(flavor = "current_thread")]
async fn many_concurrent_streams_return_their_own_bytes() {
    let server = server();
    let ep = h3::endpoint();
    let (_conn, c) = h3::connect(&ep, server.addr).await.unwrap();
    let local = tokio::task::LocalSet::new();
    local
        .run_until(async {
            let mut work = Vec::new();
            for i in 0..90u64 {
                let mut c = c.clone();
                work.push(tokio::task::spawn_local(async move {
                    let (off, len) = (i * 104_729 % (FILE_LEN - 300_000), 1000 + i * 2_111);
                    let r = h3::get(&mut c, &format!("/file?off={off}&len={len}")).await.unwrap();
                    assert_eq!(r.status, 200);
                    assert!(
                        r.body == file_data()[off as usize..(off + len) as usize],
                        "stream {i}"
                    );
                }));
            }
            for w in work {
                w.await.unwrap();
            }
        })
        .await;
}

#[tokio::test(flavor = "current_thread")]
async fn refused_heads_get_the_http1_status() {
    let server = server();
    let ep = h3::endpoint();
    let (_conn, mut c) = h3::connect(&ep, server.addr).await.unwrap();
    let long = format!("/{}", "a".repeat(Limits::default().max_request_line + 10));
    let r = h3::get(&mut c, &long).await.unwrap();
    assert_eq!(r.status, 414);
    // The connection goes on.
    let r = h3::get(&mut c, "/hello").await.unwrap();
    assert_eq!(r.status, 200);
}

#[tokio::test(flavor = "current_thread")]
async fn a_client_that_moves_to_a_new_port_keeps_its_connection() {
    let server = server();
    let ep = h3::endpoint();
    let (conn, mut c) = h3::connect(&ep, server.addr).await.unwrap();
    let before = ep.local_addr().unwrap();
    let r = h3::get(&mut c, "/file?off=0&len=100000").await.unwrap();
    assert_eq!(r.status, 200);
    // A new socket, as after a NAT rebinding or a move to another network.
    ep.rebind(std::net::UdpSocket::bind("127.0.0.1:0").unwrap()).unwrap();
    assert_ne!(ep.local_addr().unwrap(), before);
    let r = h3::get(&mut c, "/file?off=3&len=300000").await.unwrap();
    assert_eq!(r.status, 200);
    assert!(r.body == file_data()[3..300_003]);
    assert_eq!(conn.close_reason(), None);
}

#[tokio::test(flavor = "current_thread")]
async fn rapid_resets_close_the_connection() {
    let quic = QuicSettings { retry: RetryMode::Never, ..Default::default() };
    let server =
        Server::start_h3(Limits::default(), H3Settings { max_resets_per_second: 10 }, quic);
    let ep = h3::endpoint();
    let (conn, mut c) = h3::connect(&ep, server.addr).await.unwrap();
    for _ in 0..40 {
        let req = http::Request::get("https://localhost/slow").body(()).unwrap();
        let Ok(mut s) = c.send_request(req).await else { break };
        s.stop_stream(::h3::error::Code::H3_REQUEST_CANCELLED);
        s.stop_sending(::h3::error::Code::H3_REQUEST_CANCELLED);
    }
    let reason = tokio::time::timeout(Duration::from_secs(20), conn.closed()).await.unwrap();
    assert!(
        matches!(&reason, quinn::ConnectionError::ApplicationClosed(a) if a.error_code == quinn::VarInt::from_u32(0x107)),
        "{reason}"
    );
    let o = server.outcome();
    assert_eq!(o.close, CloseReason::Abuse("rapid reset"));
}

#[tokio::test(flavor = "current_thread")]
async fn drain_sends_goaway_and_finishes_streams_in_flight() {
    let server = server();
    let ep = h3::endpoint();
    let (conn, mut c) = h3::connect(&ep, server.addr).await.unwrap();
    let local = tokio::task::LocalSet::new();
    local
        .run_until(async {
            let mut c2 = c.clone();
            let slow = tokio::task::spawn_local(async move { h3::get(&mut c2, "/slow").await });
            reel_test_support::wait_until_async("the slow request", || server.slow_started() == 1)
                .await;
            server.drain();
            let r = slow.await.unwrap().unwrap();
            assert_eq!((r.status, &r.body[..]), (200, &b"slow done"[..]));
        })
        .await;
    let _ = tokio::time::timeout(Duration::from_secs(10), conn.closed()).await.unwrap();
    // A new request on the drained connection is not served.
    assert!(h3::get(&mut c, "/hello").await.is_err());
    assert_eq!(server.outcome().close, CloseReason::Drain);
}

#[tokio::test(flavor = "current_thread")]
async fn concurrent_streams_are_bounded_by_the_transport() {
    let quic = QuicSettings { retry: RetryMode::Never, max_streams: 4, ..Default::default() };
    let server = Server::start_h3(Limits::default(), H3Settings::default(), quic);
    let ep = h3::endpoint();
    let (_conn, c) = h3::connect(&ep, server.addr).await.unwrap();
    let local = tokio::task::LocalSet::new();
    local
        .run_until(async {
            let mut work = Vec::new();
            for _ in 0..10 {
                let mut c = c.clone();
                work.push(tokio::task::spawn_local(async move {
                    h3::get(&mut c, "/slow?gated=1").await
                }));
            }
            reel_test_support::wait_until_async("4 streams at work", || server.slow_started() == 4)
                .await;
            // None of them can finish, so no fifth stream may open.
            tokio::time::sleep(Duration::from_millis(300)).await;
            assert_eq!(server.slow_started(), 4);
            server.open_gate(10);
            for w in work {
                let r = w.await.unwrap().unwrap();
                assert_eq!((r.status, &r.body[..]), (200, &b"slow done"[..]));
            }
            assert_eq!(server.slow_started(), 10);
        })
        .await;
}

/// Encodes `v` as a QUIC variable-length integer (RFC 9000 section 16).
fn varint(v: u64, out: &mut Vec<u8>) {
    match v {
        0..=63 => out.push(v as u8),
        64..=16383 => out.extend_from_slice(&(0x4000 | v as u16).to_be_bytes()),
        _ => out.extend_from_slice(&(0x8000_0000 | v as u32).to_be_bytes()),
    }
}

/// The server announces a QPACK dynamic table of 0 bytes: a client that grows one on its
/// encoder stream, or sends a field section that refers to one, gets a QPACK error and
/// never makes the server hold header state. Other connections are served.
#[tokio::test(flavor = "current_thread")]
async fn a_qpack_dynamic_table_is_refused() {
    let server = server();
    let ep = h3::endpoint();
    // A raw QUIC connection speaking just enough HTTP/3 by hand.
    let conn = ep.connect(server.addr, "localhost").unwrap().await.unwrap();
    let mut control = conn.open_uni().await.unwrap();
    // Control stream: type 0x00, an empty SETTINGS frame (type 0x04, length 0).
    control.write_all(&[0x00, 0x04, 0x00]).await.unwrap();
    let mut encoder = conn.open_uni().await.unwrap();
    // QPACK encoder stream (type 0x02): Set Dynamic Table Capacity 4096 (001 + 5-bit
    // prefix integer: 31, then 4065 as 0xe1 0x1f), then an insert of `x-a: 1`.
    encoder.write_all(&[0x02, 0x3f, 0xe1, 0x1f, 0x43, b'x', b'-', b'a', 0x01, b'1']).await.unwrap();
    let (mut send, mut recv) = conn.open_bi().await.unwrap();
    // HEADERS whose field section needs one dynamic entry (Required Insert Count 1,
    // encoded as 2; base 0) and uses it (indexed field line, dynamic, relative index 0).
    let mut frame = vec![0x01];
    let section = [0x02, 0x00, 0x80];
    varint(section.len() as u64, &mut frame);
    frame.extend_from_slice(&section);
    send.write_all(&frame).await.unwrap();
    let _ = send.finish();
    let answer = tokio::time::timeout(Duration::from_secs(10), recv.read_to_end(1 << 16)).await;
    // No response: the stream is reset or the connection closed with a QPACK error.
    assert!(!matches!(answer, Ok(Ok(ref b)) if !b.is_empty()), "answered: {answer:?}");
    let why = tokio::time::timeout(Duration::from_secs(10), conn.closed()).await.unwrap();
    let code = match &why {
        quinn::ConnectionError::ApplicationClosed(a) => a.error_code.into_inner(),
        other => panic!("closed for {other}"),
    };
    // QPACK_ENCODER_STREAM_ERROR (0x201) or QPACK_DECOMPRESSION_FAILED (0x200).
    assert!(code == 0x200 || code == 0x201, "error code {code:#x}");
    let (_c, mut c) = h3::connect(&h3::endpoint(), server.addr).await.unwrap();
    assert_eq!(h3::get(&mut c, "/hello").await.unwrap().status, 200);
}

/// Clients that ask for large bodies and never read them hold no pooled buffer past the
/// send timeout: their streams are reset and every buffer goes back. Others are served
/// meanwhile.
#[tokio::test(flavor = "current_thread")]
async fn clients_that_never_read_give_their_buffers_back_at_the_send_timeout() {
    let limits = Limits { send_timeout: Duration::from_millis(500), ..Default::default() };
    let quic = QuicSettings { retry: RetryMode::Never, ..Default::default() };
    let server = Server::start_h3(limits, H3Settings::default(), quic);
    let mut stalled = Vec::new();
    let mut conns = Vec::new();
    for _ in 0..4 {
        let ep = h3::endpoint();
        let (c, mut s) = h3::connect(&ep, server.addr).await.unwrap();
        for _ in 0..4 {
            let req =
                http::Request::get("https://localhost/file?off=0&len=20000000").body(()).unwrap();
            let mut st = s.send_request(req).await.unwrap();
            st.finish().await.unwrap();
            stalled.push(st);
        }
        conns.push((ep, c, s));
    }
    let (_c, mut probe) = h3::connect(&h3::endpoint(), server.addr).await.unwrap();
    let mut waited = 0;
    loop {
        let r = h3::get(&mut probe, "/pool").await.unwrap();
        assert_eq!(r.status, 200, "a reading client is served meanwhile");
        if r.body == b"0" && waited > 10 {
            break;
        }
        waited += 1;
        assert!(waited < 400, "pooled buffers still held: {:?}", String::from_utf8_lossy(&r.body));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The stalled responses were reset, never completed.
    let mut st = stalled.pop().unwrap();
    let mut got = 0usize;
    let ended = async {
        st.recv_response().await?;
        while let Some(mut c) = st.recv_data().await? {
            let n = bytes::Buf::remaining(&c);
            got += n;
            bytes::Buf::advance(&mut c, n);
        }
        Ok::<_, ::h3::error::StreamError>(())
    };
    let r = tokio::time::timeout(Duration::from_secs(20), ended).await.unwrap();
    assert!(r.is_err(), "a stalled response ended as if complete ({got} bytes)");
}

/// One field line of a QPACK field section: a literal name and value, neither Huffman
/// coded nor indexed (RFC 9204 section 4.5.6), so any name in any order can be sent.
fn literal(name: &str, value: &str, out: &mut Vec<u8>) {
    // 001 N=0 H=0, the name's length as a 3-bit prefix integer (RFC 7541 section 5.1).
    let (n, v) = (name.len(), value.len());
    assert!(n < 7 + 127 && v < 127, "short fields only");
    if n < 7 {
        out.push(0x20 | n as u8);
    } else {
        out.extend_from_slice(&[0x27, (n - 7) as u8]);
    }
    out.extend_from_slice(name.as_bytes());
    // H=0, the value's length as a 7-bit prefix integer.
    out.push(v as u8);
    out.extend_from_slice(value.as_bytes());
}

/// A HEADERS frame carrying `fields` in this order, as literals (no dynamic table).
fn headers_frame(fields: &[(&str, &str)]) -> Vec<u8> {
    // Required Insert Count 0, Delta Base 0.
    let mut section = vec![0x00, 0x00];
    for (n, v) in fields {
        literal(n, v, &mut section);
    }
    let mut frame = vec![0x01];
    varint(section.len() as u64, &mut frame);
    frame.extend_from_slice(&section);
    frame
}

/// A QUIC connection speaking just enough HTTP/3 by hand to send any field section.
async fn raw_h3(ep: &quinn::Endpoint, addr: std::net::SocketAddr) -> quinn::Connection {
    let conn = ep.connect(addr, "localhost").unwrap().await.unwrap();
    let mut control = conn.open_uni().await.unwrap();
    // Control stream: type 0x00, an empty SETTINGS frame (type 0x04, length 0).
    control.write_all(&[0x00, 0x04, 0x00]).await.unwrap();
    // Kept open: closing a control stream is a connection error.
    std::mem::forget(control);
    conn
}

/// What became of one request stream sent by hand: the server reset it (with this code),
/// or answered with this status.
#[derive(Debug, PartialEq)]
enum Outcome {
    Reset(u64),
    Status(u16),
}

/// Sends one request stream holding `fields` and the stream's end.
async fn raw_request(conn: &quinn::Connection, fields: &[(&str, &str)]) -> Outcome {
    let (mut send, mut recv) = conn.open_bi().await.unwrap();
    send.write_all(&headers_frame(fields)).await.unwrap();
    let _ = send.finish();
    let got = tokio::time::timeout(Duration::from_secs(10), recv.read_to_end(1 << 20))
        .await
        .expect("an answer or a reset");
    match got {
        Err(quinn::ReadToEndError::Read(quinn::ReadError::Reset(code))) => {
            Outcome::Reset(code.into_inner())
        }
        Err(e) => panic!("stream failed otherwise: {e}"),
        // A HEADERS frame (type 0x01, a one-byte length) whose section starts (after
        // its two-byte prefix) with :status as an indexed static field line.
        Ok(b) => {
            assert!(b.len() > 4 && b[0] == 0x01, "not a HEADERS frame: {b:?}");
            let status = match b[4] {
                0xd9 => 200,
                0xdb => 404,
                0xff if b.get(5) == Some(&(67 - 63)) => 400,
                other => panic!("status field line {other:#x}"),
            };
            Outcome::Status(status)
        }
    }
}

/// RFC 9114 sections 4.2 and 4.3: malformed field sections are stream errors of type
/// H3_MESSAGE_ERROR (0x10e), as HTTP/2 resets them: a repeated or late pseudo-header, a
/// scheme other than https, connection-specific fields. The connection goes on.
#[tokio::test(flavor = "current_thread")]
async fn malformed_field_sections_are_stream_errors() {
    let server = server();
    let ep = h3::endpoint();
    let conn = raw_h3(&ep, server.addr).await;
    let good: &[(&str, &str)] = &[
        (":method", "GET"),
        (":scheme", "https"),
        (":authority", "localhost"),
        (":path", "/hello"),
    ];
    assert_eq!(raw_request(&conn, good).await, Outcome::Status(200));
    let with = |extra: &[(&'static str, &'static str)]| {
        let mut f = good.to_vec();
        f.extend_from_slice(extra);
        f
    };
    let cases: Vec<(&str, Vec<(&str, &str)>)> = vec![
        ("a repeated :path", with(&[(":path", "/other")])),
        ("a pseudo-header after a regular field", {
            let mut f = good[..3].to_vec();
            f.push(("x-a", "1"));
            f.push((":path", "/hello"));
            f
        }),
        ("a repeated :method", with(&[(":method", "GET")])),
        ("a :status in a request", with(&[(":status", "200")])),
        ("a :protocol on a GET", {
            let mut f = good.to_vec();
            f.insert(1, (":protocol", "websocket"));
            f
        }),
        ("no :scheme", vec![good[0], good[2], good[3]]),
        (":scheme http", vec![good[0], (":scheme", "http"), good[2], good[3]]),
        ("connection", with(&[("connection", "keep-alive")])),
        ("te other than trailers", with(&[("te", "gzip")])),
        ("a second te", with(&[("te", "trailers"), ("te", "gzip")])),
        ("upgrade", with(&[("upgrade", "websocket")])),
        ("keep-alive", with(&[("keep-alive", "timeout=5")])),
        ("proxy-connection", with(&[("proxy-connection", "keep-alive")])),
        ("transfer-encoding", with(&[("transfer-encoding", "chunked")])),
    ];
    let mut wrong = Vec::new();
    for (what, fields) in &cases {
        let got = raw_request(&conn, fields).await;
        if got != Outcome::Reset(0x10e) {
            wrong.push(format!("{what}: {got:?}"));
        }
    }
    assert!(wrong.is_empty(), "not reset with H3_MESSAGE_ERROR: {wrong:#?}");
    // te: trailers is the one value allowed (RFC 9114 section 4.2).
    assert_eq!(raw_request(&conn, &with(&[("te", "trailers")])).await, Outcome::Status(200));
    assert_eq!(raw_request(&conn, good).await, Outcome::Status(200));
    assert_eq!(conn.close_reason(), None);
}

/// A request whose stream ends with its head has no body, whatever its method, as over
/// HTTP/2: `get` (an extension method: methods are case-sensitive) is not given a
/// stream-delimited body. One that goes on is delimited by its stream.
#[tokio::test(flavor = "current_thread")]
async fn a_request_whose_stream_ends_with_its_head_has_no_body() {
    let server = server();
    let ep = h3::endpoint();
    let (_conn, mut c) = h3::connect(&ep, server.addr).await.unwrap();
    for method in ["get", "POST", "PURGE"] {
        let r = h3::request(&mut c, method, "/framing", &[], None).await.unwrap();
        let text = String::from_utf8_lossy(&r.body);
        assert_eq!((r.status, &*text), (200, &*format!("{method} None complete=true")));
    }
    // Names h3 codes with Huffman (not in the static table) and te: trailers pass.
    let fields = [("x-request-id", "r-1"), ("te", "trailers")];
    let r = h3::request(&mut c, "get", "/framing", &fields, None).await.unwrap();
    assert_eq!(String::from_utf8_lossy(&r.body), "get None complete=true");
    let r = h3::request(&mut c, "post", "/framing", &[], Some(b"abc")).await.unwrap();
    assert_eq!(String::from_utf8_lossy(&r.body), "post Chunked complete=false");
    let r = h3::request(&mut c, "get", "/echo", &[], Some(b"abc")).await.unwrap();
    assert_eq!((r.status, &r.body[..]), (200, &b"abc"[..]));
}
