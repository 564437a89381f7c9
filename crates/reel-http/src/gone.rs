//! Whether an HTTP/1.1 client is still there while its request is answered.
//!
//! HTTP/2 and HTTP/3 learn that a viewer left from the stream's reset; an HTTP/1.1
//! connection is not read while its handler works, so a client that closes its socket
//! right after sending a request would otherwise keep the handler (and the origin fetch it
//! waits on) going until the origin answers. While a request without a body (and nothing
//! pipelined behind it) waits longer than a check interval, the socket is peeked once per
//! interval: a FIN or a reset ends the wait, as nginx ends a request whose client closed
//! (`proxy_ignore_client_abort off`). A request answered at once never arms the timer.

use std::os::fd::{AsRawFd, BorrowedFd, RawFd};
use std::time::Duration;

use rustix::io::Errno;
use rustix::net::RecvFlags;

use crate::io::{Io, Transport};

/// How often a waiting request's socket is peeked.
pub(crate) const CHECK_EVERY: Duration = Duration::from_secs(1);

/// A watch on the socket of a connection whose request is being answered.
pub(crate) struct ClientGone {
    /// The connection's TCP socket, owned by its [`Io`] (see [`ClientGone::wait`]).
    fd: RawFd,
}

impl ClientGone {
    /// A watch for the request just parsed from `io`, when it has no body and nothing was
    /// pipelined behind it (bytes already read say the client is there, and a FIN after a
    /// pipelined batch is a half-close, not a departure); `None` for a byte stream without
    /// a socket of its own.
    pub(crate) fn for_request(io: &Io, has_body: bool) -> Option<ClientGone> {
        if has_body || !io.rbuf.is_empty() {
            return None;
        }
        let tcp = match &io.transport {
            Transport::Tcp(s) => s,
            Transport::Ktls(k) => k.tcp(),
            Transport::Sealed(s) => s.tcp(),
            Transport::Stream(_) => return None,
        };
        Some(ClientGone { fd: tcp.as_raw_fd() })
    }

    /// Resolves when the client has closed its end (FIN) or reset the connection; never
    /// once it sent more bytes (a pipelined request, a TLS record: it is there).
    ///
    /// The future must not outlive the request it watches: the caller drops it before the
    /// connection's [`Io`] can close or hand over its socket.
    pub(crate) async fn wait(self, every: Duration) {
        loop {
            tokio::time::sleep(every).await;
            // SAFETY: `fd` is the socket of the `Io` this watch was made from. That `Io`
            // lives, borrowed by the request's body, for the whole request, and its
            // transport is neither closed nor taken while a request is answered (only
            // between requests, when the connection is parked or ends); the caller drops
            // this future before the request ends. The borrow lasts for one `recv`.
            let fd = unsafe { BorrowedFd::borrow_raw(self.fd) };
            match peek(fd) {
                Peeked::Closed => return,
                Peeked::Data => return std::future::pending().await,
                Peeked::Nothing => {}
            }
        }
    }
}

/// What one non-blocking peek at a socket finds.
#[derive(Debug, PartialEq, Eq)]
enum Peeked {
    /// The peer closed its end or reset the connection.
    Closed,
    /// Bytes are waiting.
    Data,
    /// Nothing yet.
    Nothing,
}

fn peek(fd: BorrowedFd<'_>) -> Peeked {
    let mut byte = [0u8; 1];
    match rustix::net::recv(fd, &mut byte[..], RecvFlags::PEEK | RecvFlags::DONTWAIT) {
        Ok((_, 0)) => Peeked::Closed,
        Ok(_) => Peeked::Data,
        Err(Errno::AGAIN | Errno::INTR) => Peeked::Nothing,
        Err(_) => Peeked::Closed,
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::net::{Shutdown, TcpListener, TcpStream};
    use std::os::fd::AsFd;

    use reel_test_support::wait_until;

    use super::*;

    fn pair() -> (TcpStream, TcpStream) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let client = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        (client, l.accept().unwrap().0)
    }

    #[test]
    fn a_peek_tells_nothing_data_a_close_and_a_reset_apart_and_takes_nothing() {
        let (mut client, server) = pair();
        assert_eq!(peek(server.as_fd()), Peeked::Nothing);
        client.write_all(b"G").unwrap();
        wait_until("the byte", || peek(server.as_fd()) == Peeked::Data);
        assert_eq!(peek(server.as_fd()), Peeked::Data, "peeking leaves the byte");

        let (client, server) = pair();
        client.shutdown(Shutdown::Write).unwrap();
        wait_until("the FIN", || peek(server.as_fd()) == Peeked::Closed);

        // The client closes with bytes unread: the kernel resets the connection.
        let (client, mut server) = pair();
        server.write_all(b"unread").unwrap();
        wait_until("the bytes at the client", || client.peek(&mut [0u8; 1]).is_ok_and(|n| n > 0));
        drop(client);
        wait_until("the reset", || peek(server.as_fd()) == Peeked::Closed);
    }
}
