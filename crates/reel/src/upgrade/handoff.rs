//! The control channel of a binary upgrade: a `SOCK_SEQPACKET` socket pair between the
//! running process and its successor. Each message is one JSON object in one packet;
//! listening sockets travel with a message as `SCM_RIGHTS`. Blocking, with timeouts:
//! both ends use it from plain threads.
//!
//! The exchange (see `upgrade` for the old side and `inherit` for the new):
//!
//! 1. old → new `Sockets` (possibly several packets, with the descriptors), then
//!    `SocketsDone`;
//! 2. new → old `WantStore` once its config is valid and everything before the store is
//!    ready; old freezes its store, waits for its fills to finish, answers `StoreReleased`
//!    (or `Abort`);
//! 3. new → old `Serving` once its workers accept on the inherited sockets;
//! 4. old → new `Stderr` with its own standard error: until then the new process writes
//!    its standard error into a pipe the old one relays (so a failed start's error lines
//!    reach the old process's log); from then on it writes where the old one did;
//! 5. old stops accepting and drains; once its HTTP/3 connections are closed it sends
//!    `QuicReleased`, and the new one starts reading the UDP sockets (until then they are
//!    the old one's alone: both reading them would split each connection's packets);
//! 6. old exits: the new one sees end-of-file and lets its store take writes (and starts
//!    its HTTP/3 side if no `QuicReleased` came).

use std::io::{self, IoSlice, IoSliceMut};
use std::mem::MaybeUninit;
use std::os::fd::{BorrowedFd, OwnedFd};
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags, Timespec, poll};
use rustix::net::{
    AddressFamily, RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SendAncillaryBuffer,
    SendAncillaryMessage, SendFlags, SocketFlags, SocketType, recvmsg, sendmsg, socketpair,
};
use serde::{Deserialize, Serialize};

/// The environment variable naming the successor's end of the channel.
pub(crate) const ENV_FD: &str = "REEL_UPGRADE_FD";

/// Largest message; more than any exchange needs.
const MAX_MSG: usize = 64 * 1024;
/// Descriptors per packet (the kernel's SCM_MAX_FD is 253).
pub(crate) const FDS_PER_MSG: usize = 200;

/// What a socket handed over is for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", content = "name", rename_all = "snake_case")]
pub(crate) enum SocketRole {
    /// One socket of the data listener with this name (a listener has one per worker).
    Data(String),
    /// The admin listener.
    Admin,
    /// The demo origin's listener.
    Demo,
    /// One UDP socket of the HTTP/3 side of the data listener with this name (one per
    /// worker, in worker order: the reuseport group's order).
    Quic(String),
}

/// One message of the exchange.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "t", rename_all = "snake_case")]
pub(crate) enum Msg {
    /// The descriptors that come with this packet, in order.
    Sockets {
        /// Role of each descriptor.
        roles: Vec<SocketRole>,
    },
    /// Every socket was sent; `pid` is the sender's.
    SocketsDone {
        /// The old process.
        pid: u32,
    },
    /// The successor is ready to open the store.
    WantStore,
    /// The old process writes nothing more to the store.
    StoreReleased,
    /// The old process has closed its HTTP/3 connections and reads its UDP sockets no
    /// more.
    QuicReleased,
    /// The old process calls the upgrade off.
    Abort {
        /// Why.
        reason: String,
    },
    /// The successor accepts on the sockets now.
    Serving {
        /// The successor.
        pid: u32,
    },
    /// The descriptor that comes with this packet is the old process's standard error:
    /// the successor writes its own there from now on.
    Stderr,
}

/// One end of the channel.
#[derive(Debug)]
pub(crate) struct Channel {
    fd: OwnedFd,
}

impl Channel {
    /// A connected pair: (ours, theirs). Both are close-on-exec; the caller clears the
    /// flag on the end it passes to a child.
    pub(crate) fn pair() -> io::Result<(Channel, OwnedFd)> {
        let (a, b) =
            socketpair(AddressFamily::UNIX, SocketType::SEQPACKET, SocketFlags::CLOEXEC, None)?;
        Ok((Channel { fd: a }, b))
    }

    /// Wraps an inherited end.
    pub(crate) fn from_fd(fd: OwnedFd) -> Channel {
        Channel { fd }
    }

    /// Sends `msg` with `fds` attached.
    pub(crate) fn send(&self, msg: &Msg, fds: &[BorrowedFd<'_>]) -> io::Result<()> {
        let body = serde_json::to_vec(msg).map_err(io::Error::other)?;
        let mut space = vec![MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(fds.len()))];
        let mut control = SendAncillaryBuffer::new(&mut space);
        if !fds.is_empty() && !control.push(SendAncillaryMessage::ScmRights(fds)) {
            return Err(io::Error::other("descriptors do not fit the control buffer"));
        }
        let n = sendmsg(&self.fd, &[IoSlice::new(&body)], &mut control, SendFlags::NOSIGNAL)?;
        if n != body.len() {
            return Err(io::Error::other("message sent in part"));
        }
        Ok(())
    }

    /// Waits up to `timeout` (forever with `None`) for the next message. `Ok(None)` is
    /// end-of-file: the other process closed its end or exited.
    pub(crate) fn recv(
        &self,
        timeout: Option<Duration>,
    ) -> io::Result<Option<(Msg, Vec<OwnedFd>)>> {
        if !self.readable(timeout)? {
            return Err(io::Error::new(io::ErrorKind::TimedOut, "no message in time"));
        }
        let mut buf = vec![0u8; MAX_MSG];
        let mut space = vec![MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(FDS_PER_MSG))];
        let mut control = RecvAncillaryBuffer::new(&mut space);
        let r = recvmsg(
            &self.fd,
            &mut [IoSliceMut::new(&mut buf)],
            &mut control,
            RecvFlags::CMSG_CLOEXEC,
        )?;
        let mut fds = Vec::new();
        for m in control.drain() {
            if let RecvAncillaryMessage::ScmRights(rights) = m {
                fds.extend(rights);
            }
        }
        if r.bytes == 0 && fds.is_empty() {
            return Ok(None);
        }
        let msg = serde_json::from_slice(&buf[..r.bytes.min(buf.len())])
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
        Ok(Some((msg, fds)))
    }

    /// Waits until a message (or end-of-file) can be read; false on timeout.
    fn readable(&self, timeout: Option<Duration>) -> io::Result<bool> {
        let deadline = timeout.map(|t| Instant::now() + t);
        loop {
            let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
            let ts =
                left.map(|l| Timespec { tv_sec: l.as_secs() as _, tv_nsec: l.subsec_nanos() as _ });
            let mut pfd = [PollFd::new(&self.fd, PollFlags::IN)];
            match poll(&mut pfd, ts.as_ref()) {
                Ok(0) if left.is_some_and(|l| l.is_zero()) => return Ok(false),
                Ok(0) => {}
                Ok(_) => return Ok(true),
                Err(rustix::io::Errno::INTR) => {}
                Err(e) => return Err(e.into()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::net::TcpListener;
    use std::os::fd::AsFd;

    use super::*;

    #[test]
    fn messages_and_listening_sockets_cross_the_channel() {
        let (a, b) = Channel::pair().unwrap();
        let b = Channel::from_fd(b);
        let l1 = TcpListener::bind("127.0.0.1:0").unwrap();
        let l2 = TcpListener::bind("127.0.0.1:0").unwrap();
        let roles = vec![SocketRole::Data("http".into()), SocketRole::Admin];
        a.send(&Msg::Sockets { roles: roles.clone() }, &[l1.as_fd(), l2.as_fd()]).unwrap();
        a.send(&Msg::SocketsDone { pid: 7 }, &[]).unwrap();
        let (m, fds) = b.recv(Some(Duration::from_secs(5))).unwrap().unwrap();
        assert_eq!(m, Msg::Sockets { roles });
        let got: Vec<TcpListener> = fds.into_iter().map(TcpListener::from).collect();
        // The very same sockets: a connection to the first is accepted from its copy.
        assert_eq!(got[0].local_addr().unwrap(), l1.local_addr().unwrap());
        assert_eq!(got[1].local_addr().unwrap(), l2.local_addr().unwrap());
        let _c = std::net::TcpStream::connect(l1.local_addr().unwrap()).unwrap();
        got[0].accept().unwrap();
        let (m, fds) = b.recv(None).unwrap().unwrap();
        assert_eq!((m, fds.len()), (Msg::SocketsDone { pid: 7 }, 0));
        let e = b.recv(Some(Duration::from_millis(50))).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut);
        drop(a);
        assert!(b.recv(Some(Duration::from_secs(5))).unwrap().is_none(), "end of file");
    }

    #[test]
    fn a_garbled_message_is_an_error_not_a_panic() {
        let (a, b) = Channel::pair().unwrap();
        rustix::net::send(&a.fd, b"{not json", SendFlags::empty()).unwrap();
        let e = Channel::from_fd(b).recv(Some(Duration::from_secs(5))).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData);
    }
}
