//! The idle lot with real sockets over loopback.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

use super::Lot;

/// A connected pair over loopback, the server side nonblocking as a worker's is.
fn pair(l: &TcpListener) -> (TcpStream, TcpStream) {
    let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let (s, _) = l.accept().unwrap();
    s.set_nonblocking(true).unwrap();
    (c, s)
}

fn wait_ready(lot: &mut Lot<u32>) -> Vec<u32> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let mut out = Vec::new();
        lot.take_ready(&mut out).unwrap();
        if !out.is_empty() {
            return out.into_iter().map(|w| w.guard).collect();
        }
        assert!(Instant::now() < deadline, "nothing became readable");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A deadline entry is 24 bytes, as the module doc says (the slot's size is checked
/// with the worker's guard in `thread::tests::a_parked_slot_is_56_bytes`).
#[test]
fn a_deadline_entry_is_24_bytes() {
    assert_eq!(std::mem::size_of::<std::cmp::Reverse<(Instant, u32)>>(), 24);
}

#[test]
fn a_parked_socket_leaves_the_lot_when_bytes_arrive_and_keeps_them() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let mut lot = Lot::new().unwrap();
    let far = Instant::now() + Duration::from_secs(60);
    let (mut c1, s1) = pair(&l);
    let (_c2, s2) = pair(&l);
    assert!(lot.park(s1, 1, far).unwrap());
    assert!(!lot.park(s2, 2, far).unwrap(), "not earlier");
    assert_eq!(lot.len(), 2);
    c1.write_all(b"GET / HTTP/1.1\r\n\r\n").unwrap();
    assert_eq!(wait_ready(&mut lot), vec![1]);
    assert_eq!(lot.len(), 1);
    // Out of the lot: the socket is whole and the bytes are still there to read.
    let mut out = Vec::new();
    lot.take_ready(&mut out).unwrap();
    assert!(out.is_empty());
}

#[test]
fn a_woken_socket_carries_its_bytes_out() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let mut lot = Lot::new().unwrap();
    let (mut c, s) = pair(&l);
    lot.park(s, 7, Instant::now() + Duration::from_secs(60)).unwrap();
    c.write_all(b"ping").unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut out = Vec::new();
    while out.is_empty() {
        assert!(Instant::now() < deadline);
        lot.take_ready(&mut out).unwrap();
    }
    let mut w = out.pop().unwrap();
    assert_eq!(w.guard, 7);
    w.stream.set_nonblocking(false).unwrap();
    let mut buf = [0u8; 4];
    w.stream.read_exact(&mut buf).unwrap();
    assert_eq!(&buf, b"ping");
    w.stream.write_all(b"pong").unwrap();
    c.read_exact(&mut buf).unwrap();
    assert_eq!(&buf, b"pong");
}

#[test]
fn a_peer_close_wakes_the_socket_too() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let mut lot = Lot::new().unwrap();
    let (c, s) = pair(&l);
    lot.park(s, 3, Instant::now() + Duration::from_secs(60)).unwrap();
    drop(c);
    assert_eq!(wait_ready(&mut lot), vec![3]);
}

#[test]
fn idle_deadlines_close_in_order_and_slots_are_reused() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let mut lot = Lot::new().unwrap();
    let now = Instant::now();
    let mut clients = Vec::new();
    for (i, secs) in [(1u32, 30u64), (2, 10), (3, 20)] {
        let (c, s) = pair(&l);
        lot.park(s, i, now + Duration::from_secs(secs)).unwrap();
        clients.push(c);
    }
    assert_eq!(lot.next_deadline(), Some(now + Duration::from_secs(10)));
    assert_eq!(lot.expire(now + Duration::from_secs(15)), 1);
    assert_eq!(lot.len(), 2);
    // The closed one's client sees EOF.
    clients[1].set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    assert_eq!(clients[1].read(&mut [0u8; 1]).unwrap(), 0);
    // Its slot is taken by the next park; the stale deadline does not close it.
    let (_c, s) = pair(&l);
    lot.park(s, 4, now + Duration::from_secs(40)).unwrap();
    assert_eq!(lot.slots.len(), 3, "a freed slot was reused");
    assert_eq!(lot.expire(now + Duration::from_secs(35)), 2);
    assert_eq!(lot.len(), 1);
    assert_eq!(lot.expire(now + Duration::from_secs(45)), 1);
    assert_eq!(lot.len(), 0);
}

#[test]
fn drain_hands_out_the_readable_and_closes_the_rest() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let mut lot = Lot::new().unwrap();
    let far = Instant::now() + Duration::from_secs(60);
    let (mut busy, s1) = pair(&l);
    let (mut quiet, s2) = pair(&l);
    lot.park(s1, 1, far).unwrap();
    lot.park(s2, 2, far).unwrap();
    busy.write_all(b"GET").unwrap();
    // Let the bytes reach the server socket.
    std::thread::sleep(Duration::from_millis(50));
    let mut ready = Vec::new();
    lot.drain(&mut ready);
    assert_eq!(ready.iter().map(|w| w.guard).collect::<Vec<_>>(), vec![1]);
    assert_eq!(lot.len(), 0);
    quiet.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    assert_eq!(quiet.read(&mut [0u8; 1]).unwrap(), 0, "the idle one is closed");
    drop(ready);
    busy.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    assert_eq!(busy.read(&mut [0u8; 1]).unwrap_or(0), 0);
}
