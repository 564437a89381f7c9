//! QUIC packets reach the group socket of the worker their connection ID names, through the
//! kernel with the routing program attached; the rest falls back to the address hash, as
//! does everything once the program is taken off.

use std::collections::BTreeSet;
use std::future::poll_fn;
use std::io;
use std::net::{SocketAddr, UdpSocket as StdUdp};
use std::task::Poll;

use reel_runtime::quic_route::{CID_LEN, UdpGroup, UdpRouting, adopt_udp_group, bind_udp_group};
use tokio::io::ReadBuf;
use tokio::net::UdpSocket;

use crate::support::{IO_TIMEOUT, skip};

const WORKERS: usize = 4;
/// Client sockets (source ports) for the checks that expect the hash to spread packets.
const CLIENTS: usize = 20;

/// A bound group, its sockets registered with the test's runtime.
struct Group {
    socks: Vec<UdpSocket>,
    addr: SocketAddr,
}

impl Group {
    /// `None` when the address family has no loopback here.
    fn bind(addr: &str) -> Option<Group> {
        let addr: SocketAddr = addr.parse().unwrap();
        let g = match bind_udp_group(addr, WORKERS) {
            Ok(g) => g,
            Err(e) if addr.is_ipv6() && e.kind() == io::ErrorKind::AddrNotAvailable => {
                return None;
            }
            Err(e) => panic!("binding the group on {addr}: {e}"),
        };
        Some(Group::new(g))
    }

    fn new(g: UdpGroup) -> Group {
        // The program needs no privilege: a refusal here is a bug, not an environment.
        assert_eq!(g.routing, UdpRouting::ConnectionId, "the routing program was not attached");
        let addr = g.sockets[0].local_addr().unwrap();
        for s in &g.sockets {
            assert_eq!(s.local_addr().unwrap(), addr, "one port for the group");
        }
        let socks = g.sockets.into_iter().map(|s| UdpSocket::from_std(s).unwrap()).collect();
        Group { socks, addr }
    }

    fn client(&self) -> StdUdp {
        let any: SocketAddr =
            if self.addr.is_ipv6() { "[::1]:0" } else { "127.0.0.1:0" }.parse().unwrap();
        StdUdp::bind(any).unwrap()
    }

    /// Sends `pkt` from `from`; returns the index of the group socket that receives it.
    async fn route(&self, from: &StdUdp, pkt: &[u8]) -> usize {
        from.send_to(pkt, self.addr).unwrap();
        let mut buf = vec![0u8; 2048];
        let (i, n) = tokio::time::timeout(
            IO_TIMEOUT,
            poll_fn(|cx| {
                for (i, s) in self.socks.iter().enumerate() {
                    let mut rb = ReadBuf::new(&mut buf);
                    if let Poll::Ready(r) = s.poll_recv_from(cx, &mut rb) {
                        let from = r.unwrap();
                        return Poll::Ready((i, rb.filled().len(), from));
                    }
                }
                Poll::Pending
            }),
        )
        .await
        .map(|(i, n, peer)| {
            assert_eq!(peer, from.local_addr().unwrap());
            (i, n)
        })
        .unwrap_or_else(|_| panic!("a {}-byte packet never arrived", pkt.len()));
        // A stray packet from an earlier check would show here as another payload.
        assert_eq!(&buf[..n], pkt, "received on socket {i}");
        i
    }

    /// Sends one packet from each of [`CLIENTS`] client sockets; the sockets they landed on.
    async fn spread(&self, make: impl Fn(u8) -> Vec<u8>) -> BTreeSet<usize> {
        let mut seen = BTreeSet::new();
        for tag in 0..CLIENTS as u8 {
            seen.insert(self.route(&self.client(), &make(tag)).await);
        }
        seen
    }
}

/// A short-header packet; `first` supplies the bits header protection scrambles and the
/// fixed bit (which a peer may grease, RFC 9287).
fn short(first: u8, dcid0: u8, tag: u8) -> Vec<u8> {
    let mut p = vec![first & 0x7f, dcid0];
    p.extend_from_slice(&[0x5a; CID_LEN - 1]);
    p.extend_from_slice(&[tag; 24]);
    p
}

/// A QUIC v1 long-header packet of `kind` (`0x00` Initial, `0x10` 0-RTT, `0x20` Handshake).
fn long(kind: u8, low: u8, dcid_len: u8, dcid0: u8, tag: u8) -> Vec<u8> {
    let mut p = vec![0xc0 | kind | (low & 0x0f), 0, 0, 0, 1, dcid_len, dcid0];
    p.extend_from_slice(&[0xa5; 20 - 1]);
    p.extend_from_slice(&[tag; 24]);
    p
}

async fn routes_by_connection_id(group: Group) {
    // Five client addresses: the worker follows the ID, whatever address sends it.
    for (c, from) in (0..5).map(|_| group.client()).enumerate() {
        for w in 0..WORKERS as u8 {
            let low = c as u8 * 7 + w;
            assert_eq!(group.route(&from, &short(low, w, c as u8)).await, usize::from(w), "short");
            let hs = long(0x20, low, CID_LEN as u8, w, c as u8);
            assert_eq!(group.route(&from, &hs).await, usize::from(w), "handshake");
        }
    }

    // Initials and 0-RTT carry the client's ID: the hash places them, the same socket for
    // one address (twice an Initial, then 0-RTT), spread over the group across addresses.
    // Were the ID's byte used, every one would land on socket 1.
    let mut seen = BTreeSet::new();
    for tag in 0..CLIENTS as u8 {
        let from = group.client();
        let first = group.route(&from, &long(0x00, 0, CID_LEN as u8, 1, tag)).await;
        assert_eq!(group.route(&from, &long(0x00, 3, CID_LEN as u8, 1, tag)).await, first);
        assert_eq!(group.route(&from, &long(0x10, 1, CID_LEN as u8, 1, tag)).await, first);
        seen.insert(first);
    }
    assert!(seen.len() > 1, "Initials all landed on {seen:?}");

    // A Handshake whose ID is not one of ours by length.
    let seen = group.spread(|tag| long(0x20, 0, 20, 1, tag)).await;
    assert!(seen.len() > 1, "foreign-length Handshakes all landed on {seen:?}");

    // Too short to hold an ID: still delivered, and not by its byte 1 (which is in bounds).
    let seen = group.spread(|tag| vec![0x40, 2, tag]).await;
    assert!(seen.len() > 1, "3-byte packets all landed on {seen:?}");
    let seen = group.spread(|tag| vec![0x40, 3, tag, 0, 0, 0, 0, 0]).await;
    assert!(seen.len() > 1, "8-byte short headers all landed on {seen:?}");

    // A worker byte past the group: the kernel hashes.
    let seen = group.spread(|tag| short(0x40, 200, tag)).await;
    assert!(seen.len() > 1, "past-the-group IDs all landed on {seen:?}");
}

#[tokio::test(flavor = "current_thread")]
async fn quic_packets_reach_the_worker_their_connection_id_names_v4() {
    routes_by_connection_id(Group::bind("127.0.0.1:0").unwrap()).await;
}

#[tokio::test(flavor = "current_thread")]
async fn quic_packets_reach_the_worker_their_connection_id_names_v6() {
    match Group::bind("[::1]:0") {
        Some(g) => routes_by_connection_id(g).await,
        None => skip("no IPv6 loopback"),
    }
}

#[tokio::test(flavor = "current_thread")]
async fn an_adopted_group_routes_by_connection_id() {
    let g = bind_udp_group("127.0.0.1:0".parse().unwrap(), WORKERS).unwrap();
    let group = Group::new(adopt_udp_group(g.sockets, WORKERS).unwrap());
    let from = group.client();
    for w in 0..WORKERS as u8 {
        assert_eq!(group.route(&from, &short(0x40, w, w)).await, usize::from(w));
    }
}

/// Taken off the group (`route_by_hash`), the program no longer places packets: those from
/// one address all land on one socket, whatever worker their ID names, and addresses are
/// spread by the hash. An adopted group with the program attached loses it the same way.
#[tokio::test(flavor = "current_thread")]
async fn a_group_routed_by_hash_ignores_the_connection_id() {
    let g = bind_udp_group("127.0.0.1:0".parse().unwrap(), WORKERS).unwrap();
    let mut g = adopt_udp_group(g.sockets, WORKERS).unwrap();
    g.route_by_hash("test").unwrap();
    assert_eq!(g.routing, UdpRouting::Hash("test".into()));
    // Detaching a group that has no program is not an error.
    g.route_by_hash("again").unwrap();
    let addr = g.sockets[0].local_addr().unwrap();
    let socks = g.sockets.into_iter().map(|s| UdpSocket::from_std(s).unwrap()).collect();
    let group = Group { socks, addr };
    let from = group.client();
    let first = group.route(&from, &short(0x40, 0, 0)).await;
    for w in 1..WORKERS as u8 {
        assert_eq!(group.route(&from, &short(0x40, w, w)).await, first, "ID naming worker {w}");
    }
    let seen = group.spread(|tag| short(0x40, 1, tag)).await;
    assert!(seen.len() > 1, "short headers from many addresses all landed on {seen:?}");
}
