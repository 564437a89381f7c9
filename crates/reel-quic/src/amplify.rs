//! The anti-amplification limit (RFC 9000 section 8.1) held exactly, at the socket.
//!
//! Before a client's address is validated the server may send it at most three times the
//! bytes it received from it. The transport checks this before each datagram it builds
//! but, once any budget is left, lets a whole datagram go (quinn issue 1082): a handshake
//! flight that ends just under the limit is followed by a packet past it (the 1-RTT
//! packet with the first NEW_CONNECTION_ID frames, about 140-220 bytes over). [`Limited`]
//! wraps a worker's UDP socket and keeps a ledger per client address from its first
//! Initial: bytes received, bytes sent; datagrams that would take a client past three
//! times what it sent are not sent (the transport takes them as lost and sends them again
//! once the client's next packet, or its address's validation, allows). A datagram from
//! the address carrying a Handshake packet validates it (only a client that received our
//! Initial can make one; the transport checks its protection) and ends its ledger.
//!
//! The ledger is only consulted while it has entries (new handshakes), so established
//! connections pay one atomic load per batch of datagrams; entries of handshakes that
//! never validate expire with [`EXPIRY`], and at most [`MAX_ENTRIES`] are kept (past it, a
//! new client is limited by the transport's own check only).

use std::collections::HashMap;
use std::fmt;
use std::io::{self, IoSliceMut};
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use quinn::udp::{RecvMeta, Transmit};
use quinn::{AsyncUdpSocket, UdpPoller};

/// How long an address's ledger lives without validation (longer than any handshake).
pub const EXPIRY: Duration = Duration::from_secs(30);
/// Most ledgers a socket keeps.
pub const MAX_ENTRIES: usize = 65_536;

#[derive(Debug, Clone, Copy)]
struct Entry {
    received: u64,
    sent: u64,
    since: Instant,
}

/// A UDP socket that holds the 3x limit for unvalidated client addresses.
pub struct Limited {
    inner: Arc<dyn AsyncUdpSocket>,
    /// Entries in `ledger`, read without the lock.
    tracked: AtomicUsize,
    ledger: Mutex<Ledger>,
}

/// The unvalidated addresses, and when the expired ones were last swept out.
struct Ledger {
    entries: HashMap<SocketAddr, Entry>,
    swept: Instant,
}

impl fmt::Debug for Limited {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Limited").field("tracked", &self.tracked).finish()
    }
}

/// Long header packet types (RFC 9000 section 17.2).
const INITIAL: u8 = 0;
const HANDSHAKE: u8 = 2;

/// What a datagram says about its sender's address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Seen {
    /// Starts with an Initial packet (a new or handshaking client).
    Initial,
    /// Carries a Handshake packet (the client has our Initial: its address is proven).
    Handshake,
    /// Anything else.
    Other,
}

fn varint(b: &[u8], at: usize) -> Option<(u64, usize)> {
    let first = *b.get(at)?;
    let len = 1usize << (first >> 6);
    let bytes = b.get(at..at + len)?;
    let mut v = u64::from(first & 0x3f);
    for x in &bytes[1..] {
        v = (v << 8) | u64::from(*x);
    }
    Some((v, at + len))
}

/// Walks the coalesced long-header packets of a datagram (RFC 9000 section 12.2).
pub fn classify(d: &[u8]) -> Seen {
    let mut at = 0;
    let mut seen = Seen::Other;
    while let Some(&flags) = d.get(at) {
        // A short header (1-RTT) packet is the last of a datagram.
        if flags & 0x80 == 0 {
            break;
        }
        // Version 0 is version negotiation, which has no type.
        if d.get(at + 1..at + 5).is_none_or(|v| v == [0, 0, 0, 0]) {
            break;
        }
        let ty = (flags >> 4) & 3;
        if ty == HANDSHAKE {
            return Seen::Handshake;
        }
        let Some(next) = packet_end(d, at, ty) else { break };
        if ty == INITIAL && at == 0 {
            seen = Seen::Initial;
        }
        at = next;
    }
    seen
}

/// The end of the long-header packet at `at` of type `ty`.
fn packet_end(d: &[u8], at: usize, ty: u8) -> Option<usize> {
    let mut p = at + 5;
    let dcid = usize::from(*d.get(p)?);
    p += 1 + dcid;
    let scid = usize::from(*d.get(p)?);
    p += 1 + scid;
    if ty == INITIAL {
        let (token, q) = varint(d, p)?;
        p = q.checked_add(usize::try_from(token).ok()?)?;
    }
    // Retry packets (type 3) have no length: the last of a datagram.
    if ty == 3 {
        return None;
    }
    let (len, q) = varint(d, p)?;
    q.checked_add(usize::try_from(len).ok()?)
}

impl Limited {
    /// Wraps `inner`.
    pub fn new(inner: Arc<dyn AsyncUdpSocket>) -> Limited {
        let ledger = Ledger { entries: HashMap::new(), swept: Instant::now() };
        Limited { inner, tracked: AtomicUsize::new(0), ledger: Mutex::new(ledger) }
    }

    /// Notes a datagram of `len` bytes from `from` that says `seen`.
    fn received(&self, from: SocketAddr, len: usize, seen: Seen, now: Instant) {
        if seen == Seen::Other && self.tracked.load(Ordering::Relaxed) == 0 {
            return;
        }
        let mut guard = self.ledger.lock().unwrap_or_else(|p| p.into_inner());
        let ledger = &mut *guard;
        let l = &mut ledger.entries;
        match seen {
            Seen::Handshake => {
                l.remove(&from);
            }
            Seen::Other => {
                if let Some(e) = l.get_mut(&from) {
                    e.received += len as u64;
                }
            }
            Seen::Initial => {
                // Handshakes given up (forged addresses) leave their entries: swept out
                // once per expiry, or when the ledger is full.
                let full = l.len() >= MAX_ENTRIES && !l.contains_key(&from);
                if full || now.duration_since(ledger.swept) >= EXPIRY {
                    l.retain(|_, e| now.duration_since(e.since) < EXPIRY);
                    ledger.swept = now;
                }
                if l.len() < MAX_ENTRIES || l.contains_key(&from) {
                    let e = l.entry(from).or_insert(Entry { received: 0, sent: 0, since: now });
                    e.received += len as u64;
                }
            }
        }
        self.tracked.store(l.len(), Ordering::Relaxed);
    }

    /// How many bytes of `t` may go: all of it unless its destination is unvalidated and
    /// it would take it past three times what it sent; then the whole datagrams that fit.
    fn allowed(&self, t: &Transmit<'_>, now: Instant) -> usize {
        let len = t.contents.len();
        if self.tracked.load(Ordering::Relaxed) == 0 {
            return len;
        }
        let mut guard = self.ledger.lock().unwrap_or_else(|p| p.into_inner());
        let l = &mut guard.entries;
        let Some(e) = l.get_mut(&t.destination) else { return len };
        if now.duration_since(e.since) >= EXPIRY {
            l.remove(&t.destination);
            self.tracked.store(l.len(), Ordering::Relaxed);
            return len;
        }
        let budget = (3 * e.received).saturating_sub(e.sent);
        let n = if len as u64 <= budget {
            len
        } else {
            // Whole datagrams only: a datagram cut short would be a malformed packet.
            let seg = t.segment_size.unwrap_or(len).max(1);
            let fit = usize::try_from(budget).unwrap_or(usize::MAX) / seg * seg;
            fit.min(len)
        };
        e.sent += n as u64;
        n
    }
}

impl AsyncUdpSocket for Limited {
    fn create_io_poller(self: Arc<Self>) -> Pin<Box<dyn UdpPoller>> {
        self.inner.clone().create_io_poller()
    }

    fn try_send(&self, t: &Transmit<'_>) -> io::Result<()> {
        let n = self.allowed(t, Instant::now());
        if n == t.contents.len() {
            return self.inner.try_send(t);
        }
        tracing::trace!(to = %t.destination, held = t.contents.len() - n, "anti-amplification limit");
        if n == 0 {
            // Taken as sent; the transport sends it again as a lost packet.
            return Ok(());
        }
        let part = Transmit {
            destination: t.destination,
            ecn: t.ecn,
            contents: &t.contents[..n],
            segment_size: t.segment_size.filter(|s| *s < n),
            src_ip: t.src_ip,
        };
        self.inner.try_send(&part)
    }

    fn poll_recv(
        &self,
        cx: &mut Context<'_>,
        bufs: &mut [IoSliceMut<'_>],
        meta: &mut [RecvMeta],
    ) -> Poll<io::Result<usize>> {
        let n = match self.inner.poll_recv(cx, bufs, meta) {
            Poll::Ready(Ok(n)) => n,
            other => return other,
        };
        let now = Instant::now();
        for (m, b) in meta.iter().zip(bufs.iter()).take(n) {
            let data = b.get(..m.len).unwrap_or(b);
            for d in data.chunks(m.stride.max(1)) {
                self.received(m.addr, d.len(), classify(d), now);
            }
        }
        Poll::Ready(Ok(n))
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.inner.local_addr()
    }

    fn max_transmit_segments(&self) -> usize {
        self.inner.max_transmit_segments()
    }

    fn max_receive_segments(&self) -> usize {
        self.inner.max_receive_segments()
    }

    fn may_fragment(&self) -> bool {
        self.inner.may_fragment()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A long header packet of type `ty` with `body` bytes of payload.
    fn packet(ty: u8, body: usize) -> Vec<u8> {
        let mut p = vec![0xc0 | (ty << 4), 0, 0, 0, 1, 8, 1, 2, 3, 4, 5, 6, 7, 8, 0];
        if ty == INITIAL {
            p.push(0); // no token
        }
        p.extend_from_slice(&[0x40 | (body >> 8) as u8, body as u8]);
        p.extend(std::iter::repeat_n(0u8, body));
        p
    }

    #[test]
    fn coalesced_packets_are_walked_to_a_handshake_packet() {
        assert_eq!(classify(&packet(INITIAL, 1100)), Seen::Initial);
        let mut d = packet(INITIAL, 300);
        d.extend(packet(HANDSHAKE, 100));
        assert_eq!(classify(&d), Seen::Handshake);
        assert_eq!(classify(&[0x40, 1, 2, 3]), Seen::Other, "1-RTT");
        assert_eq!(classify(&[0xc0, 0, 0, 0, 0, 1]), Seen::Other, "version negotiation");
        assert_eq!(classify(&[0xc0, 0, 0, 0, 1, 200]), Seen::Other, "truncated");
        assert_eq!(classify(&[]), Seen::Other);
    }

    #[derive(Debug)]
    struct Null;
    impl AsyncUdpSocket for Null {
        fn create_io_poller(self: Arc<Self>) -> Pin<Box<dyn UdpPoller>> {
            unimplemented!()
        }
        fn try_send(&self, _: &Transmit<'_>) -> io::Result<()> {
            Ok(())
        }
        fn poll_recv(
            &self,
            _: &mut Context<'_>,
            _: &mut [IoSliceMut<'_>],
            _: &mut [RecvMeta],
        ) -> Poll<io::Result<usize>> {
            Poll::Pending
        }
        fn local_addr(&self) -> io::Result<SocketAddr> {
            Ok("127.0.0.1:1".parse().unwrap())
        }
    }

    fn transmit(to: SocketAddr, bytes: &[u8], seg: Option<usize>) -> Transmit<'_> {
        Transmit { destination: to, ecn: None, contents: bytes, segment_size: seg, src_ip: None }
    }

    #[test]
    fn an_unvalidated_address_gets_whole_datagrams_up_to_three_times_its_bytes() {
        let s = Limited::new(Arc::new(Null));
        let (a, b): (SocketAddr, SocketAddr) =
            ("10.0.0.1:5000".parse().unwrap(), "10.0.0.2:5000".parse().unwrap());
        let now = Instant::now();
        s.received(a, 1200, Seen::Initial, now);
        let four = vec![0u8; 4 * 1200];
        assert_eq!(s.allowed(&transmit(a, &four, Some(1200)), now), 3600, "three of four");
        assert_eq!(s.allowed(&transmit(a, &[0; 138], None), now), 0, "no budget left");
        assert_eq!(s.allowed(&transmit(b, &four, Some(1200)), now), 4800, "not tracked");
        s.received(a, 100, Seen::Other, now);
        assert_eq!(s.allowed(&transmit(a, &[0; 301], None), now), 0, "301 > 300");
        assert_eq!(s.allowed(&transmit(a, &[0; 300], None), now), 300);
        s.received(a, 60, Seen::Handshake, now);
        assert_eq!(s.allowed(&transmit(a, &four, Some(1200)), now), 4800, "validated");
        assert_eq!(s.tracked.load(Ordering::Relaxed), 0);
        s.received(b, 1200, Seen::Initial, now);
        let later = now + EXPIRY;
        assert_eq!(s.allowed(&transmit(b, &four, Some(1200)), later), 4800, "expired");
        s.received(a, 1200, Seen::Initial, now);
        assert_eq!(s.tracked.load(Ordering::Relaxed), 1);
        s.received(b, 1200, Seen::Initial, later);
        assert_eq!(s.tracked.load(Ordering::Relaxed), 1, "the expired entry of a was swept");
    }
}
