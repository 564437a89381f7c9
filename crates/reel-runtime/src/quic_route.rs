//! UDP reuseport groups for QUIC, with packets routed to the worker that owns their
//! connection by a classic BPF program (`SO_ATTACH_REUSEPORT_CBPF`, see `socket(7)`).
//!
//! Without a program the kernel picks a group member by hashing the 4-tuple, so a client
//! whose address or port changes (NAT rebinding, Wi-Fi to cellular) lands on another
//! worker, which does not know its connection. Server connection IDs are [`CID_LEN`]
//! bytes whose first byte is the owning worker's index, which is its socket's index in the
//! group (sockets join in worker order). The program reads that byte:
//!
//! * short header (`first & 0x80 == 0`): the destination ID starts at offset 1;
//! * long header of type Handshake (`first & 0x30 == 0x20`) whose destination ID length
//!   (offset 5) is [`CID_LEN`]: the ID starts at offset 6;
//! * anything else (an Initial or 0-RTT packet, whose destination ID the client chose;
//!   Version Negotiation, version 0; a packet too short to hold an ID, checked before any
//!   load, since a load past the end ends the program with 0, which would pick worker 0):
//!   an index past the group, which makes the kernel fall back to the hash. A client's
//!   Initials all come from one address, so they stay together.
//!
//! The type codes are QUIC v1's, which the drafts quinn also speaks share; QUIC v2
//! (RFC 9369) renumbers them (its 0-RTT is v1's Handshake) and would need a version check.
//!
//! The kernel runs a reuseport program on the UDP payload (the UDP header is pulled
//! first), so the loads are offsets into the QUIC packet, and an index at or past the
//! group's size also falls back to the hash. nginx's `quic_bpf` does the same with eBPF
//! and a socket map; classic BPF needs no `CAP_BPF` and reel already steers TCP with it
//! ([`crate::steer`]).

use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsFd;

use socket2::{Domain, Protocol, Socket, Type};

use crate::steer::{self, Insn};

/// Length of the server's connection IDs; byte 0 names the worker.
pub const CID_LEN: usize = 8;

/// `BPF_LD | BPF_W | BPF_ABS`: A = big-endian 32-bit word at k.
const LD_W_ABS: u16 = 0x20;
/// `BPF_LD | BPF_B | BPF_ABS`: A = packet byte at k.
const LD_B_ABS: u16 = 0x30;
/// `BPF_LD | BPF_W | BPF_LEN`: A = packet length.
const LD_W_LEN: u16 = 0x80;
/// `BPF_ALU | BPF_AND | BPF_K`.
const AND_K: u16 = 0x54;
/// `BPF_JMP | BPF_JGE | BPF_K`.
const JGE_K: u16 = 0x35;
/// `BPF_JMP | BPF_JEQ | BPF_K`.
const JEQ_K: u16 = 0x15;
/// `BPF_JMP | BPF_JSET | BPF_K`.
const JSET_K: u16 = 0x45;
/// `BPF_RET | BPF_K`.
const RET_K: u16 = 0x06;
/// `BPF_RET | BPF_A`.
const RET_A: u16 = 0x16;

/// An index past any group: the kernel hashes instead.
const HASH: u32 = u32::MAX;

/// The routing program (see the module docs). It does not depend on the group's size.
pub fn cid_program() -> Vec<Insn> {
    let i = |code, jt, jf, k| Insn { code, jt, jf, k };
    let cid = CID_LEN as u32;
    // Jumps are relative to the next instruction; the numbers are instruction indices.
    vec![
        // 0: a short header needs 1 + CID_LEN bytes.
        i(LD_W_LEN, 0, 0, 0),
        i(JGE_K, 0, 12, 1 + cid), // -> 14 (hash)
        // 2: header form.
        i(LD_B_ABS, 0, 0, 0),
        i(JSET_K, 2, 0, 0x80), // long -> 6
        // 4: short: the ID's first byte.
        i(LD_B_ABS, 0, 0, 1),
        i(RET_A, 0, 0, 0),
        // 6: long header, Handshake only.
        i(AND_K, 0, 0, 0x30),
        i(JEQ_K, 0, 6, 0x20), // not Handshake -> 14
        // 8: at least 6 + CID_LEN bytes.
        i(LD_W_LEN, 0, 0, 0),
        i(JGE_K, 0, 4, 6 + cid), // -> 14
        // 10: version 0 is Version Negotiation, whose type bits mean nothing (RFC 9000 17.2.1).
        i(LD_W_ABS, 0, 0, 1),
        i(JEQ_K, 2, 0, 0), // -> 14
        // 12: destination ID length CID_LEN.
        i(LD_B_ABS, 0, 0, 5),
        i(JEQ_K, 1, 0, cid), // -> 15
        // 14: hash.
        i(RET_K, 0, 0, HASH),
        // 15: the ID's first byte.
        i(LD_B_ABS, 0, 0, 6),
        i(RET_A, 0, 0, 0),
    ]
}

/// How a group's packets reach its sockets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UdpRouting {
    /// By the connection ID's worker byte ([`cid_program`]).
    ConnectionId,
    /// By the kernel's 4-tuple hash: the program could not be attached, or was taken off
    /// ([`UdpGroup::route_by_hash`]); why.
    Hash(String),
}

/// A reuseport group of UDP sockets, one per worker in worker order.
#[derive(Debug)]
pub struct UdpGroup {
    /// The sockets, nonblocking; socket `i` is worker `i`'s.
    pub sockets: Vec<UdpSocket>,
    /// How packets are routed among them.
    pub routing: UdpRouting,
}

impl UdpGroup {
    /// Takes the routing program off the group (an operator's choice, `why`): packets are
    /// spread by the kernel's 4-tuple hash from now on.
    pub fn route_by_hash(&mut self, why: &str) -> io::Result<()> {
        if let Some(s) = self.sockets.first() {
            steer::detach(s)?;
        }
        self.routing = UdpRouting::Hash(why.to_owned());
        Ok(())
    }
}

/// Socket buffers asked for: a burst of full-size datagrams to many clients (the kernel
/// caps them at `net.core.rmem_max` / `wmem_max`).
const SOCKET_BUFFER: usize = 4 << 20;

fn bind_one(addr: SocketAddr, reuse_port: bool) -> io::Result<Socket> {
    let s = Socket::new(
        Domain::for_address(addr),
        Type::DGRAM.nonblocking().cloexec(),
        Some(Protocol::UDP),
    )?;
    if reuse_port {
        s.set_reuse_port(true)?;
    }
    if addr.is_ipv6() {
        // As for TCP: an explicit [::] listener leaves 0.0.0.0 to another one.
        s.set_only_v6(true)?;
    }
    let _ = s.set_recv_buffer_size(SOCKET_BUFFER);
    let _ = s.set_send_buffer_size(SOCKET_BUFFER);
    s.bind(&addr.into())?;
    Ok(s)
}

/// Binds `n` UDP sockets on `addr` in one reuseport group, in order, and attaches the
/// routing program. A port 0 is resolved by the first socket and shared. The address
/// must be free: a reuseport socket of another process of the same user would otherwise
/// join its group silently.
pub fn bind_udp_group(addr: SocketAddr, n: usize) -> io::Result<UdpGroup> {
    if n == 0 || n > 255 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "{n} workers: a QUIC group has 1 to 255 (the connection ID names one in a byte)"
            ),
        ));
    }
    if addr.port() != 0 {
        // Fails with EADDRINUSE when any socket holds the port.
        drop(bind_one(addr, false)?);
    }
    let mut sockets = Vec::with_capacity(n);
    let mut at = addr;
    for i in 0..n {
        let s = bind_one(at, true)?;
        if i == 0 {
            at = s
                .local_addr()?
                .as_socket()
                .ok_or_else(|| io::Error::other("bound address is not an inet address"))?;
        }
        sockets.push(s);
    }
    let routing = attach_program(&sockets);
    Ok(UdpGroup { sockets: sockets.into_iter().map(UdpSocket::from).collect(), routing })
}

/// Takes over a group a predecessor handed over (an upgrade): socket `i` stays worker
/// `i`'s. With more sockets than `n` workers the last ones are closed, last first, so that
/// no other moves in the group; with fewer, new ones join it on the same address. The
/// routing program is attached again (it replaces the predecessor's, if any), so that
/// `routing` says what the kernel does now rather than what the predecessor managed.
pub fn adopt_udp_group(mut sockets: Vec<UdpSocket>, n: usize) -> io::Result<UdpGroup> {
    if n == 0 || n > 255 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{n} workers: a QUIC group has 1 to 255"),
        ));
    }
    let addr = sockets
        .first()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no socket handed over"))?
        .local_addr()?;
    while sockets.len() > n {
        drop(sockets.pop());
    }
    while sockets.len() < n {
        sockets.push(bind_one(addr, true)?.into());
    }
    for s in &sockets {
        s.set_nonblocking(true)?;
    }
    let routing = attach_program(&sockets);
    Ok(UdpGroup { sockets, routing })
}

/// Attaches [`cid_program`] to the group of `sockets[0]`.
fn attach_program(sockets: &[impl AsFd]) -> UdpRouting {
    match sockets.first().map(|s| steer::attach(s, &cid_program())) {
        Some(Err(e)) => UdpRouting::Hash(e.to_string()),
        _ => UdpRouting::ConnectionId,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs the program on `pkt` as the kernel would (an absolute load past the end
    /// returns 0).
    fn run(prog: &[Insn], pkt: &[u8]) -> u32 {
        let (mut a, mut pc) = (0u32, 0usize);
        loop {
            let i = prog[pc];
            pc += 1;
            match i.code {
                LD_W_LEN => a = pkt.len() as u32,
                LD_W_ABS => match pkt.get(i.k as usize..i.k as usize + 4) {
                    Some(w) => a = u32::from_be_bytes([w[0], w[1], w[2], w[3]]),
                    None => return 0,
                },
                LD_B_ABS => match pkt.get(i.k as usize) {
                    Some(b) => a = u32::from(*b),
                    None => return 0,
                },
                AND_K => a &= i.k,
                JGE_K => pc += if a >= i.k { i.jt } else { i.jf } as usize,
                JEQ_K => pc += if a == i.k { i.jt } else { i.jf } as usize,
                JSET_K => pc += if a & i.k != 0 { i.jt } else { i.jf } as usize,
                RET_K => return i.k,
                RET_A => return a,
                c => panic!("unexpected opcode {c:#x}"),
            }
        }
    }

    fn short(worker: u8) -> Vec<u8> {
        let mut p = vec![0x40, worker, 1, 2, 3, 4, 5, 6, 7];
        p.extend_from_slice(&[0xaa; 30]);
        p
    }

    fn long(kind: u8, dcid_len: u8, first: u8) -> Vec<u8> {
        let mut p = vec![0xc0 | kind, 0, 0, 0, 1, dcid_len, first];
        p.extend_from_slice(&[9; 40]);
        p
    }

    #[test]
    fn routes_by_the_worker_byte_and_hashes_the_rest() {
        let p = cid_program();
        assert!(p.len() <= 4096);
        for w in [0u8, 1, 7, 254] {
            assert_eq!(run(&p, &short(w)), u32::from(w));
            assert_eq!(run(&p, &long(0x20, 8, w)), u32::from(w), "handshake");
        }
        // Initial, 0-RTT and Retry long headers: the client chose the ID.
        for kind in [0x00, 0x10, 0x30] {
            assert_eq!(run(&p, &long(kind, 8, 3)), HASH, "type {kind:#x}");
        }
        // A Handshake whose ID is not ours by length.
        assert_eq!(run(&p, &long(0x20, 20, 3)), HASH);
        // Version Negotiation (version 0) with Handshake-looking type bits.
        let mut vn = long(0x20, 8, 3);
        vn[1..5].fill(0);
        assert_eq!(run(&p, &vn), HASH);
        // Too short for an ID: never a load past the end (which would pick worker 0).
        assert_eq!(run(&p, &[0x40, 3]), HASH);
        assert_eq!(run(&p, &short(3)[..8]), HASH);
        assert_eq!(run(&p, &short(3)[..9]), 3);
        assert_eq!(run(&p, &long(0x20, 8, 3)[..13]), HASH);
        assert_eq!(run(&p, &long(0x20, 8, 3)[..14]), 3);
        assert_eq!(run(&p, &[]), HASH);
    }

    #[test]
    fn only_unprotected_bits_of_the_first_byte_count() {
        // Header protection masks the low bits (RFC 9001 5.4.1) and the fixed bit may be
        // greased (RFC 9287): the program may read only the form and, for long headers, the
        // type.
        let p = cid_program();
        for first in 0..=255u8 {
            let mut s = short(5);
            s[0] = first & 0x7f;
            assert_eq!(run(&p, &s), 5, "short {first:#x}");
            let mut l = long(0, 8, 5);
            l[0] = first | 0x80;
            let want = if first & 0x30 == 0x20 { 5 } else { HASH };
            assert_eq!(run(&p, &l), want, "long {first:#x}");
        }
    }

    #[test]
    fn group_sizes_out_of_range_are_refused() {
        let a: SocketAddr = "127.0.0.1:0".parse().expect("addr");
        assert_eq!(bind_udp_group(a, 0).unwrap_err().kind(), io::ErrorKind::InvalidInput);
        assert_eq!(bind_udp_group(a, 256).unwrap_err().kind(), io::ErrorKind::InvalidInput);
    }
}
