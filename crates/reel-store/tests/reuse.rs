//! A reclaimed volume is rewritten while bytes of it still sit in a socket: `sendfile`
//! returns once it has queued *references* to the page-cache pages, and the socket sends
//! (over loopback: the peer reads) their contents later. A reader's lease ends when the
//! sendfile call returns, so a reused volume must not write into the pages it had: the
//! queued bytes would change under the socket.

use std::io::Read;
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsFd;

use reel_store::{IoMode, Lookup};

use crate::{body, both, open, put, rt};

/// A body small enough for the socket buffers below, so `sendfile` queues all of it.
const LEN: usize = 64 << 10;

fn bytes_sent_before_a_reclaim_arrive_unchanged(io: IoMode) {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path(), 3, io);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let tx = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let (mut rx, _) = listener.accept().unwrap();
    rustix::net::sockopt::set_socket_send_buffer_size(&tx, 1 << 20).unwrap();
    rustix::net::sockopt::set_socket_recv_buffer_size(&rx, 1 << 20).unwrap();
    let want = body(1, LEN);
    let (file, at) = rt(async {
        put(&s, b"seg/000", b"m", &want, true).await;
        let Some(Lookup::Hit(h)) = s.lookup(b"seg/000").await else { panic!("a hit") };
        let r = h.file_range(0, LEN as u64).unwrap();
        let (file, mut off, end) = (r.shared_file(), r.offset, r.offset + LEN as u64);
        // Queued, not read by the peer yet.
        while off < end {
            let left = (end - off) as usize;
            let n = rustix::fs::sendfile(tx.as_fd(), file.as_fd(), Some(&mut off), left)
                .expect("sendfile");
            assert!(n > 0, "sendfile made progress");
        }
        (file, end - LEN as u64)
        // The hit, and its lease, end here, as a response's range does once it is sent.
    });
    let before = s.stats().reclaims;
    rt(async {
        // Three volumes of fifteen such objects each, and more: the first volume is
        // reclaimed and written again from its start.
        for i in 1..80u64 {
            put(&s, format!("seg/{i:03}").as_bytes(), b"m", &body(1000 + i, LEN), true).await;
        }
    });
    assert!(s.stats().reclaims >= before + 2, "volumes were reclaimed: {:?}", s.stats());
    let mut now = vec![0u8; LEN];
    std::os::unix::fs::FileExt::read_exact_at(&*file, &mut now, at).unwrap();
    assert_ne!(now, want, "the first object's place was written again");

    let mut got = vec![0u8; LEN];
    rx.read_exact(&mut got).unwrap();
    let first_wrong = got.iter().zip(&want).position(|(a, b)| a != b);
    assert_eq!(first_wrong, None, "the socket carried other bytes from byte {first_wrong:?}");
}
both!(bytes_sent_before_a_reclaim_arrive_unchanged, bytes_sent_before_a_reclaim_arrive_unchanged);
