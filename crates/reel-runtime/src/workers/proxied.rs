//! The accept path of a PROXY protocol listener: a connection from a source the app trusts
//! is counted against the worker's and the process's caps at once, then reads its header
//! (within the app's timeout) in a task of its own, so a slow balancer holds up no other
//! accept; its client-address count then moves to the client the header named, and the app
//! gets the connection ([`WorkerApp::on_proxied_conn`]). Anything else is closed.

use std::io;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use tokio::net::TcpStream;

use super::conn_limits;
use super::local::{ConnGuard, Local};
use super::park::Guarded;
use crate::app::WorkerApp;
use crate::proxy_header::{self, Header};

/// Takes a connection accepted on PROXY protocol listener `name` from `peer`.
pub(super) fn accept<A: WorkerApp>(
    state: &Rc<Local>,
    app: &Rc<A>,
    stream: TcpStream,
    peer: SocketAddr,
    name: Rc<str>,
) {
    let Some(timeout) = app.proxy_header_timeout(peer.ip()) else {
        // Not a trusted proxy: no header of its would be believed, nor its own address used.
        tracing::debug!(listener = %name, %peer, "PROXY protocol connection from an untrusted source; closed");
        state.stats.refused.fetch_add(1, Ordering::Relaxed);
        return;
    };
    // The balancer's address is no client: counted for the process only until the header
    // names the client.
    let source = match conn_limits::check_transport(state, peer) {
        Ok(ip) => ip,
        Err(why) => return conn_limits::refuse(state, app, stream, peer, name, why),
    };
    state.open.set(state.open.get() + 1);
    state.stats.open.fetch_add(1, Ordering::Relaxed);
    let listener = state.name_id(&name);
    let guard =
        ConnGuard { local: state.clone(), client: source, port: 0, proxied: true, listener };
    let (state, app) = (state.clone(), app.clone());
    tokio::task::spawn_local(async move {
        let client = match tokio::time::timeout(timeout, read_header(&stream)).await {
            Ok(Ok(client)) => client.unwrap_or(peer),
            Ok(Err(e)) => {
                tracing::debug!(listener = %name, %peer, error = %e, "PROXY protocol header refused; closed");
                state.stats.refused.fetch_add(1, Ordering::Relaxed);
                return;
            }
            Err(_) => {
                tracing::debug!(listener = %name, %peer, "no PROXY protocol header in time; closed");
                state.stats.refused.fetch_add(1, Ordering::Relaxed);
                return;
            }
        };
        let mut guard = guard;
        if let Err(why) = conn_limits::move_to_client(&mut guard, client) {
            drop(guard);
            return conn_limits::refuse(&state, &app, stream, client, name, why);
        }
        let conn = app.on_proxied_conn(stream, client, peer, &name, state.drain.clone());
        tokio::task::spawn_local(Guarded::new(conn, guard));
    });
}

/// Reads the PROXY header at the start of `stream` and nothing after it (the client's
/// first bytes, a TLS ClientHello or a request, stay in the socket): the client's address,
/// or `None` when the header names none (the balancer's own connection).
pub(super) async fn read_header(stream: &TcpStream) -> io::Result<Option<SocketAddr>> {
    let invalid = |why: &'static str| io::Error::new(io::ErrorKind::InvalidData, why);
    // The header's bytes read so far, then what the socket holds after them.
    let mut seen: Vec<u8> = Vec::with_capacity(proxy_header::V1_MAX);
    let mut window = [0u8; 512];
    loop {
        let n = stream.peek(&mut window).await?;
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        let have = seen.len();
        seen.extend_from_slice(&window[..n]);
        match proxy_header::parse(&seen) {
            Header::Complete { len, client } => {
                // Take exactly the header's bytes off the socket.
                consume(stream, len.saturating_sub(have)).await?;
                return Ok(client);
            }
            // All of them belong to the header: take them, and wait for more.
            Header::Incomplete => consume(stream, n).await?,
            Header::Invalid(why) => return Err(invalid(why)),
        }
    }
}

/// Reads and drops `n` bytes that a peek showed are in the socket.
async fn consume(stream: &TcpStream, mut n: usize) -> io::Result<()> {
    let mut sink = [0u8; 512];
    while n > 0 {
        let want = n.min(sink.len());
        match stream.try_read(&mut sink[..want]) {
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(k) => n -= k,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => stream.readable().await?,
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    const TEST_TIMEOUT: Duration = Duration::from_secs(5);

    async fn pair() -> (TcpStream, TcpStream) {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let c = TcpStream::connect(l.local_addr().unwrap()).await.unwrap();
        let (s, _) = l.accept().await.unwrap();
        (c, s)
    }

    /// The header is taken off the socket, the bytes after it stay: sent in one write, and
    /// sent a few bytes at a time.
    #[tokio::test]
    async fn the_header_is_read_and_what_follows_is_left() {
        let client: SocketAddr = "203.0.113.7:40000".parse().unwrap();
        let server: SocketAddr = "192.0.2.1:80".parse().unwrap();
        for header in
            [proxy_header::v1(client, server), proxy_header::v2(client, server, b"\x04\0\x01z")]
        {
            for chunk in [1usize, 7, 4096] {
                let (mut c, mut s) = pair().await;
                let mut bytes = header.clone();
                bytes.extend_from_slice(b"GET / HTTP/1.1\r\n\r\n");
                let send = tokio::spawn(async move {
                    for part in bytes.chunks(chunk) {
                        c.write_all(part).await.unwrap();
                        tokio::time::sleep(Duration::from_millis(1)).await;
                    }
                    c
                });
                let got = tokio::time::timeout(TEST_TIMEOUT, read_header(&s)).await.unwrap();
                assert_eq!(got.unwrap(), Some(client), "chunks of {chunk}");
                let _c = send.await.unwrap();
                let mut rest = vec![0u8; 18];
                s.read_exact(&mut rest).await.unwrap();
                assert_eq!(&rest, b"GET / HTTP/1.1\r\n\r\n");
            }
        }
    }

    #[tokio::test]
    async fn anything_but_a_header_is_refused() {
        let (mut c, s) = pair().await;
        c.write_all(b"GET / HTTP/1.1\r\n\r\n").await.unwrap();
        let e = read_header(&s).await.unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData);
        let (c, s) = pair().await;
        drop(c);
        assert!(read_header(&s).await.is_err(), "closed before a header");
    }
}
