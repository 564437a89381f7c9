//! LL-HLS blocking playlist reloads: requests waiting on the same `_HLS_msn` / `_HLS_part`
//! collapse into one origin request; different parameters are different objects.

use std::sync::mpsc;
use std::time::Duration;

use crate::client::{Conn, GUARD};
use crate::origin::{Gate, Route};
use crate::server::HOST;

#[test]
fn blocking_playlist_requests_coalesce_per_hls_parameters() {
    let (o, s) = crate::setup();
    let gate = Gate::new();
    let playlist =
        b"#EXTM3U\n#EXT-X-VERSION:9\n#EXT-X-PART:DURATION=0.2,URI=\"p.m4s\"\n".repeat(20);
    let mut r = Route::ok(
        playlist.clone(),
        &[("cache-control", "max-age=1"), ("content-type", "application/vnd.apple.mpegurl")],
    );
    // The origin holds a blocking reload until the part exists.
    r.delay = Duration::from_millis(200);
    r.chunked = true;
    r.pieces = 2;
    r.gate = Some(gate.clone());
    o.route("/ll/p.m3u8", r);
    let t1 = "/ll/p.m3u8?_HLS_msn=5&_HLS_part=1";
    let t2 = "/ll/p.m3u8?_HLS_msn=5&_HLS_part=2";
    let (tx, rx) = mpsc::channel();
    let addr = s.addr;
    let clients: Vec<_> = (0..40)
        .map(|i| {
            let tx = tx.clone();
            let t = if i % 2 == 0 { t1 } else { t2 };
            std::thread::spawn(move || {
                let mut c = Conn::open(addr);
                c.send(
                    format!("GET {t} HTTP/1.1\r\nHost: {HOST}\r\nConnection: close\r\n\r\n")
                        .as_bytes(),
                );
                let (st, h) = c.read_head();
                tx.send(()).unwrap();
                let (b, ok) = c.read_body(&h, false);
                (st, b, ok)
            })
        })
        .collect();
    drop(tx);
    for _ in 0..40 {
        rx.recv_timeout(GUARD).expect("head while the reload is held");
    }
    gate.open(2);
    for c in clients {
        let (st, b, ok) = c.join().unwrap();
        assert_eq!(st, 200);
        assert!(ok && b == playlist);
    }
    assert_eq!(o.count(t1), 1, "one origin request for msn=5 part=1");
    assert_eq!(o.count(t2), 1, "one origin request for msn=5 part=2");
}
