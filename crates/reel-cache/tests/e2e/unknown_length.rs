//! Bodies of unknown length (chunked, as on-the-fly packagers send them) larger than a
//! fill's first reservation, several at once: every client gets every byte.

use std::sync::mpsc;
use std::time::Duration;

use crate::client::{Conn, GUARD, body_of, get};
use crate::origin::{Gate, Route};
use crate::server::HOST;

/// Issue 10.3: a fill of unknown length reserved 1 MiB and could only grow while it was
/// the last allocation of its volume. Concurrent chunked responses over 1 MiB were cut
/// short for leader and followers alike. Four such bodies interleave in the store (one
/// piece of each at a time), plus one larger than a volume (4 MiB here), which is
/// delivered whole and not stored.
#[test]
fn concurrent_chunked_bodies_over_a_mebibyte_reach_every_client_whole() {
    let (o, s) = crate::setup();
    let gate = Gate::new();
    let pieces = 12;
    let objects: Vec<(String, Vec<u8>)> = (0..5u8)
        .map(|i| {
            let len = if i == 4 { 5 << 20 } else { (5 << 19) + 4_321 * usize::from(i) };
            (format!("/u/seg{i}.m4s"), body_of(len, 40 + i))
        })
        .collect();
    for (path, body) in &objects {
        let mut r = Route::ok(body.clone(), &[("cache-control", "max-age=600")]);
        r.chunked = true;
        r.pieces = pieces;
        r.gate = Some(gate.clone());
        o.route(path, r);
    }
    // A leader and two followers per object, each on its own connection.
    let (head_tx, head_rx) = mpsc::channel();
    let mut clients = Vec::new();
    for (path, _) in &objects {
        for n in 0..3 {
            let (addr, path, head_tx) = (s.addr, path.clone(), head_tx.clone());
            clients.push(std::thread::spawn(move || {
                let mut c = Conn::open(addr);
                c.send(
                    format!("GET {path} HTTP/1.1\r\nHost: {HOST}\r\nConnection: close\r\n\r\n")
                        .as_bytes(),
                );
                let (status, headers) = c.read_head();
                head_tx.send(()).unwrap();
                let (body, complete) = c.read_body(&headers, false);
                (path, n, status, body, complete)
            }));
            if n == 0 {
                // The leader's fill is under way before its followers ask.
                head_rx.recv_timeout(GUARD).expect("leader's head");
            }
        }
    }
    drop(head_tx);
    for _ in 0..objects.len() * 2 {
        head_rx.recv_timeout(GUARD).expect("every follower gets a head");
    }
    // One piece at a time, so the fills grow side by side in the same volume.
    for _ in 0..(pieces - 1) * objects.len() {
        gate.open(1);
        std::thread::sleep(Duration::from_millis(5));
    }
    for c in clients {
        let (path, n, status, got, complete) = c.join().unwrap();
        let want = &objects.iter().find(|(p, _)| *p == path).unwrap().1;
        assert_eq!(status, 200, "{path} client {n}");
        assert!(
            complete,
            "{path} client {n}: body cut short ({} of {} bytes)",
            got.len(),
            want.len()
        );
        assert!(got == *want, "{path} client {n}: body differs from the origin's");
    }
    s.settle();
    // The one not stored goes to the origin again: let its pieces through.
    gate.open(pieces - 1);
    for (i, (path, body)) in objects.iter().enumerate() {
        let r = get(&s, path, &[]);
        assert!(r.complete && r.body == *body, "{path} again");
        if i < 4 {
            assert!(r.cache_status().contains("hit"), "{path}: {}", r.cache_status());
            assert_eq!(o.count(path), 1, "{path}: one origin fetch");
        } else {
            assert_eq!(o.count(path), 2, "{path}: larger than a volume, not stored");
        }
    }
}
