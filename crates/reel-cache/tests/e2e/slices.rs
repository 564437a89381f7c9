//! Slice caching (`[[site]] slice`) against the demo origin's generated objects (any size,
//! every byte a function of path and offset, a counter per range asked for): seeking
//! viewers, objects larger than a volume, an origin whose object changes mid-way, an
//! origin that ignores Range, read-ahead, multipart.

use std::sync::atomic::Ordering::Relaxed;

use reel_cache::Slicing;
use reel_demo_origin::content::{expected_bytes, object_bytes};
use reel_demo_origin::{DemoOrigin, DemoOriginConfig, SplitMix};

use crate::client::{Conn, Resp, get, request};
use crate::server::{HOST, Opts, Server};

const MIB: u64 = 1 << 20;

fn demo() -> DemoOrigin {
    reel_demo_origin::spawn("127.0.0.1:0".parse().unwrap(), DemoOriginConfig::no_latency())
        .expect("demo origin")
}

/// A server slicing by 1 MiB in front of `o`, with `f` applied to its options.
fn sliced(o: &DemoOrigin, f: impl FnOnce(&mut Opts)) -> Server {
    let mut opts = Opts::new(o.local_addr());
    opts.slicing = Slicing { size: Some(MIB), read_ahead: 0 };
    // 64 volumes of 4 MiB: 1 MiB slices, objects far larger than a volume.
    opts.store = (256 * MIB, 4 * MIB);
    f(&mut opts);
    Server::start(opts)
}

/// Every range the origin was asked for `path`, as (start, end, count).
fn asked(o: &DemoOrigin, path: &str) -> Vec<(u64, u64, u64)> {
    let mut v: Vec<(u64, u64, u64)> = o
        .stats()
        .ranges_asked()
        .into_iter()
        .filter(|(p, _, _)| p == path)
        .map(|(_, r, n)| {
            let (a, b) = r.strip_prefix("bytes=").and_then(|r| r.split_once('-')).expect("range");
            (a.parse().expect("start"), b.parse().expect("end"), n)
        })
        .collect();
    v.sort();
    v
}

fn range(a: u64, b: u64) -> String {
    format!("bytes={a}-{b}")
}

#[test]
fn fifty_seeking_viewers_of_a_3_gib_object_fetch_each_slice_once_and_get_the_origins_bytes() {
    let o = demo();
    let s = sliced(&o, |opts| opts.slicing.read_ahead = 2);
    let path = "/obj/3221225472.mp4";
    let total = 3u64 << 30;
    // Viewers seek around 12 spots (so several read the same slices at once), each to a
    // random offset near its spot, and read 64 KiB to 1.5 MiB from there, twice.
    let rng = SplitMix::new(7);
    let spots: Vec<u64> = (0..12).map(|_| rng.next_u64() % (total - 4 * MIB)).collect();
    let plan: Vec<Vec<(u64, u64)>> = (0..50)
        .map(|_| {
            (0..2)
                .map(|_| {
                    let spot = spots[(rng.next_u64() % spots.len() as u64) as usize];
                    let start = spot + rng.next_u64() % (2 * MIB);
                    let len = 64 * 1024 + rng.next_u64() % (1536 * 1024 - 64 * 1024);
                    (start, start + len - 1)
                })
                .collect()
        })
        .collect();
    let addr = s.addr;
    let viewers: Vec<_> = plan
        .clone()
        .into_iter()
        .map(|seeks| {
            std::thread::spawn(move || {
                seeks
                    .into_iter()
                    .map(|(a, b)| (a, b, request(addr, "GET", path, &[("Range", &range(a, b))])))
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    for v in viewers {
        for (a, b, r) in v.join().expect("viewer") {
            assert_eq!(r.status, 206, "{}", r.cache_status());
            assert!(r.complete);
            assert_eq!(r.header("content-range"), Some(&*format!("bytes {a}-{b}/{total}")));
            assert!(r.body == expected_bytes(0, path, a, (b - a + 1) as usize), "bytes {a}-{b}");
        }
    }
    s.settle();
    let fetched = asked(&o, path);
    for &(a, b, n) in &fetched {
        assert_eq!(n, 1, "slice {a}-{b} fetched {n} times");
        assert!(a % MIB == 0 && b == a + MIB - 1, "{a}-{b} is not a slice");
    }
    // Every slice a viewer touched was fetched (read-ahead adds at most two per read).
    let touched: std::collections::BTreeSet<u64> =
        plan.iter().flatten().flat_map(|&(a, b)| a / MIB..=b / MIB).collect();
    let got: std::collections::BTreeSet<u64> = fetched.iter().map(|&(a, _, _)| a / MIB).collect();
    assert!(touched.is_subset(&got));
    assert!(got.len() <= touched.len() + 2 * 100, "{} slices for {}", got.len(), touched.len());
    // Seeking again costs the origin nothing.
    let before = o.stats().total();
    for seeks in plan.iter().take(10) {
        for &(a, b) in seeks {
            let r = get(&s, path, &[("Range", &range(a, b))]);
            assert!(r.cache_status().contains("hit"), "{}", r.cache_status());
            assert!(r.body == expected_bytes(0, path, a, (b - a + 1) as usize));
        }
    }
    assert_eq!(o.stats().total(), before);
}

#[test]
fn an_object_larger_than_a_volume_is_streamed_whole_slice_after_slice() {
    let o = demo();
    let s = sliced(&o, |_| {});
    let total = 10 * MIB + 123;
    let path = format!("/obj/{total}");
    let r = get(&s, &path, &[]);
    assert_eq!((r.status, r.body.len() as u64), (200, total));
    assert_eq!(r.header("content-length"), Some(&*total.to_string()));
    assert!(r.header("content-range").is_none());
    assert!(r.body == expected_bytes(0, &path, 0, total as usize));
    assert_eq!(asked(&o, &path).len(), 11, "eleven slices, the last 123 bytes");
    assert!(asked(&o, &path).iter().all(|&(_, _, n)| n == 1));
    // From the store now: whole, HEAD, a range across slices, a suffix.
    let again = get(&s, &path, &[]);
    assert!(again.cache_status().contains("hit"), "{}", again.cache_status());
    assert!(again.body == r.body);
    let head = request(s.addr, "HEAD", &path, &[]);
    assert_eq!((head.status, head.header("content-length")), (200, Some(&*total.to_string())));
    let a = 3 * MIB - 10;
    let x = get(&s, &path, &[("Range", &range(a, a + 2 * MIB))]);
    assert_eq!(x.status, 206);
    assert!(x.body == expected_bytes(0, &path, a, 2 * MIB as usize + 1));
    let tail = get(&s, &path, &[("Range", "bytes=-200")]);
    assert!(tail.body == expected_bytes(0, &path, total - 200, 200));
    assert_eq!(o.stats().total(), 11, "everything else from the store");
    // A suffix range of a cold object: slice 0 tells the length, then the last slice.
    let cold = format!("/obj/{}", 5 * MIB + 7);
    let t = get(&s, &cold, &[("Range", "bytes=-7")]);
    let cr = format!("bytes {}-{}/{}", 5 * MIB, 5 * MIB + 6, 5 * MIB + 7);
    assert_eq!(t.header("content-range"), Some(cr.as_str()));
    assert!(t.body == expected_bytes(0, &cold, 5 * MIB, 7));
    assert_eq!(asked(&o, &cold).iter().map(|x| x.0 / MIB).collect::<Vec<_>>(), [0, 5]);
    // Beyond the end: 416 with the length.
    let r = get(&s, &cold, &[("Range", "bytes=99999999-")]);
    assert_eq!(
        (r.status, r.header("content-range")),
        (416, Some(&*format!("bytes */{}", 5 * MIB + 7)))
    );
}

/// Reads a response head and then whatever body arrives until the connection ends.
fn read_all(addr: std::net::SocketAddr, path: &str, hdrs: &[(&str, &str)]) -> Resp {
    let mut c = Conn::open(addr);
    let mut raw = format!("GET {path} HTTP/1.1\r\nHost: {HOST}\r\nConnection: close\r\n");
    for (n, v) in hdrs {
        raw.push_str(&format!("{n}: {v}\r\n"));
    }
    raw.push_str("\r\n");
    c.send(raw.as_bytes());
    c.read_response(false)
}

#[test]
fn an_object_that_changes_at_the_origin_is_never_spliced() {
    let o = demo();
    let s = sliced(&o, |_| {});
    let path = "/obj/8388608";
    let v0 = |a: u64, n: u64| object_bytes(0, 0, path, a, n as usize);
    let v1 = |a: u64, n: u64| object_bytes(0, 1, path, a, n as usize);
    // Slices 0 and 1 of version 0 are stored.
    let r = get(&s, path, &[("Range", &range(0, 2 * MIB - 1))]);
    assert!(r.body == v0(0, 2 * MIB));
    let etag0 = r.header("etag").unwrap().to_string();
    // The object changes at the origin.
    assert_eq!(request(o.local_addr(), "POST", "/__origin/version", &[]).status, 200);
    // A response that already sent version 0 (slice 1, stored) and then finds version 1
    // at the origin (slice 2) is cut, never completed with the other version's bytes.
    let cut = read_all(s.addr, path, &[("Range", &range(MIB, 3 * MIB - 1))]);
    assert_eq!(cut.status, 206);
    assert_eq!(cut.header("etag"), Some(etag0.as_str()));
    assert!(!cut.complete, "the response must end short, not spliced");
    assert!(cut.body.len() as u64 <= MIB && cut.body == v0(MIB, cut.body.len() as u64));
    assert_eq!(s.shared.slices.version_changes.load(Relaxed), 1);
    s.settle();
    // The head is version 1 now: the old slices are unreachable, everything is version 1.
    let r = get(&s, path, &[("Range", &range(MIB - 5, MIB + 4))]);
    assert_eq!(r.status, 206);
    assert_ne!(r.header("etag"), Some(etag0.as_str()));
    assert!(r.body == v1(MIB - 5, 10), "version 1 bytes only");
    let whole = get(&s, path, &[]);
    assert!(whole.complete && whole.body == v1(0, 8 * MIB));
    // A request holding nothing yet that meets the change at its first slice answers
    // with the new version at once.
    assert_eq!(request(o.local_addr(), "POST", "/__origin/version", &[]).status, 200);
    let purged =
        s.block_on(s.shared.purge(&s.settings, &format!("http://{HOST}{path}"), false, false));
    assert_eq!(purged.unwrap(), 1, "the exact purge removes the head");
    let r = get(&s, path, &[("Range", &range(7 * MIB, 7 * MIB + 9))]);
    assert!(r.complete && r.body == object_bytes(0, 2, path, 7 * MIB, 10));
}

#[test]
fn an_origin_that_ignores_range_is_stored_whole_or_passed() {
    let o = demo();
    let s = sliced(&o, |_| {});
    // It fits a volume: stored whole from the 200, every range served from it.
    let path = "/obj/3000000?x-origin-ranges=ignore";
    let bytes = expected_bytes(0, "/obj/3000000", 0, 3_000_000);
    let r = get(&s, path, &[("Range", "bytes=2500000-2500099")]);
    assert_eq!((r.status, r.header("content-range")), (206, Some("bytes 2500000-2500099/3000000")));
    assert!(r.body == bytes[2_500_000..2_500_100]);
    for (a, b) in [(0, 9), (1_048_570, 1_048_580), (2_999_990, 2_999_999)] {
        let r = get(&s, path, &[("Range", &range(a, b))]);
        assert_eq!(r.status, 206);
        assert!(r.body == bytes[a as usize..=b as usize]);
    }
    assert!(get(&s, path, &[]).body == bytes);
    assert_eq!(o.stats().path("/obj/3000000"), 1, "one origin fetch: the whole object");
    // Larger than a volume: it cannot be stored; each viewer gets the origin's 200.
    let big = "/obj/9000000?x-origin-ranges=ignore";
    for _ in 0..2 {
        let r = get(&s, big, &[("Range", "bytes=100-199")]);
        assert_eq!((r.status, r.body.len()), (200, 9_000_000));
        assert!(r.body[100..200] == expected_bytes(0, "/obj/9000000", 100, 100)[..]);
    }
}

#[test]
fn read_ahead_fetches_the_next_slices_of_a_sequential_viewer_and_stops_with_it() {
    let o = demo();
    let s = sliced(&o, |opts| opts.slicing.read_ahead = 2);
    let path = "/obj/16777216";
    // Slice by slice, in order: after the first, every slice is already there.
    for k in 0..4 {
        let r = get(&s, path, &[("Range", &range(k * MIB, (k + 1) * MIB - 1))]);
        assert!(r.body == expected_bytes(0, path, k * MIB, MIB as usize));
        let cs = r.cache_status();
        if k == 0 {
            assert!(cs.contains("fwd=miss; stored"), "{cs}");
        } else {
            assert!(cs.contains("hit"), "slice {k} was read ahead: {cs}");
        }
    }
    s.settle();
    // The viewer stopped after slice 3: read ahead to slice 5, no further.
    let got: Vec<u64> = asked(&o, path).iter().map(|x| x.0 / MIB).collect();
    assert_eq!(got, [0, 1, 2, 3, 4, 5]);
    assert_eq!(s.shared.slices.read_ahead_fetches.load(Relaxed), 5);
    assert_eq!(s.shared.slices.waits.load(Relaxed), 0);
    // A reader of one whole response: no wait after its first slice either.
    let r = get(&s, "/obj/12582912", &[]);
    assert!(r.body == expected_bytes(0, "/obj/12582912", 0, 12 * MIB as usize));
    assert_eq!(asked(&o, "/obj/12582912").len(), 12);
    // A small read inside a slice is not sequential reading: nothing is read ahead.
    let before = s.shared.slices.read_ahead_fetches.load(Relaxed);
    get(&s, "/obj/20971520", &[("Range", "bytes=5000000-5000100")]);
    assert_eq!(asked(&o, "/obj/20971520").len(), 1);
    assert_eq!(s.shared.slices.read_ahead_fetches.load(Relaxed), before);
}

#[test]
fn without_read_ahead_every_slice_is_fetched_when_reached_and_the_worker_bound_holds() {
    let o = demo();
    let s = sliced(&o, |_| {});
    let path = "/obj/8388608";
    for k in 0..3 {
        let r = get(&s, path, &[("Range", &range(k * MIB, (k + 1) * MIB - 1))]);
        assert!(r.cache_status().contains("fwd=miss; stored"), "{}", r.cache_status());
    }
    assert_eq!(asked(&o, path).len(), 3);
    assert_eq!(s.shared.slices.read_ahead_fetches.load(Relaxed), 0);
    // Depth 8 but one read-ahead fetch per worker: the rest is skipped.
    let o = demo();
    let s = sliced(&o, |opts| {
        opts.slicing.read_ahead = 8;
        opts.read_ahead_per_worker = 1;
    });
    let r = get(&s, path, &[("Range", &range(0, MIB - 1))]);
    assert!(r.body == expected_bytes(0, path, 0, MIB as usize));
    s.settle();
    assert_eq!(s.shared.slices.read_ahead_fetches.load(Relaxed), 1);
    assert!(s.shared.slices.read_ahead_skipped.load(Relaxed) >= 1);
    assert_eq!(asked(&o, path).len(), 2);
}

/// The parts of a `multipart/byteranges` body: (Content-Range, bytes).
fn parts(r: &Resp) -> Vec<(String, Vec<u8>)> {
    let ct = r.header("content-type").expect("content-type");
    let boundary = ct.split("boundary=").nth(1).expect("boundary");
    let delim = format!("--{boundary}");
    let body = &r.body;
    let find = |from: usize, pat: &[u8]| {
        body[from..].windows(pat.len()).position(|w| w == pat).map(|i| i + from)
    };
    let mut out = Vec::new();
    let mut at = find(0, delim.as_bytes()).expect("first delimiter");
    loop {
        at += delim.len();
        if body[at..].starts_with(b"--") {
            return out;
        }
        let head_end = find(at, b"\r\n\r\n").expect("part head");
        let head = String::from_utf8_lossy(&body[at..head_end]).to_string();
        let cr = head
            .lines()
            .find_map(|l| l.strip_prefix("Content-Range: "))
            .expect("content-range")
            .to_string();
        let next = find(head_end, format!("\r\n{delim}").as_bytes()).expect("next delimiter");
        out.push((cr, body[head_end + 4..next].to_vec()));
        at = next + 2;
    }
}

#[test]
fn several_ranges_are_a_multipart_answer_from_slices_and_from_whole_objects() {
    let o = demo();
    let s = sliced(&o, |_| {});
    let total = 6 * MIB;
    let path = format!("/obj/{total}");
    let want = |a: u64, b: u64| expected_bytes(0, &path, a, (b - a + 1) as usize);
    let r = get(&s, &path, &[("Range", "bytes=5000000-5000009,10-19,-5")]);
    assert_eq!(r.status, 206);
    assert!(r.header("content-type").unwrap().starts_with("multipart/byteranges; boundary="));
    assert_eq!(r.header("content-length"), Some(&*r.body.len().to_string()));
    let p = parts(&r);
    assert_eq!(p.len(), 3, "in the request's order");
    assert_eq!(p[0], (format!("bytes 5000000-5000009/{total}"), want(5_000_000, 5_000_009)));
    assert_eq!(p[1], (format!("bytes 10-19/{total}"), want(10, 19)));
    assert_eq!(
        p[2],
        (format!("bytes {}-{}/{total}", total - 5, total - 1), want(total - 5, total - 1))
    );
    // Overlapping ranges are coalesced into one.
    let r = get(&s, &path, &[("Range", "bytes=100-199,150-299,120-130")]);
    assert_eq!(
        (r.status, r.header("content-range")),
        (206, Some(&*format!("bytes 100-299/{total}")))
    );
    assert!(r.body == want(100, 299));
    // More ranges than the limit: the field is ignored.
    let many: Vec<String> = (0..17).map(|i| format!("{}-{}", i * 1000, i * 1000 + 1)).collect();
    let r = get(&s, &path, &[("Range", &format!("bytes={}", many.join(",")))]);
    assert_eq!((r.status, r.body.len() as u64), (200, total));

    // A whole object stored without slicing answers the same way.
    let (o2, s2) = crate::setup();
    let body = crate::client::body_of(300_000, 3);
    let cc = [("cache-control", "max-age=600"), ("content-type", "video/mp2t")];
    o2.route("/w.ts", crate::origin::Route::ok(body.clone(), &cc));
    get(&s2, "/w.ts", &[]);
    let r = get(&s2, "/w.ts", &[("Range", "bytes=0-9,200000-200009")]);
    assert_eq!(r.status, 206);
    let p = parts(&r);
    assert_eq!(p[0], ("bytes 0-9/300000".to_string(), body[..10].to_vec()));
    assert_eq!(p[1], ("bytes 200000-200009/300000".to_string(), body[200_000..200_010].to_vec()));
    assert!(r.body.windows(10).any(|w| w == b"video/mp2t"), "each part names the type");
    assert_eq!(o2.count("/w.ts"), 1);
}

#[test]
fn without_slicing_the_ranges_of_an_object_too_large_to_store_are_stored_and_complete_it() {
    let o = demo();
    let s = sliced(&o, |opts| opts.slicing = Slicing::default());
    let total = 10 * MIB;
    let path = format!("/obj/{total}");
    let want = |a: u64, b: u64| expected_bytes(0, &path, a, (b - a + 1) as usize);
    // The case: 101 bytes of an object larger than a volume. The whole fetch is
    // refused by the store; the viewer's range goes to the origin and is stored.
    let r = get(&s, &path, &[("Range", "bytes=5000000-5000100")]);
    assert_eq!(r.status, 206);
    assert_eq!(r.header("content-range"), Some(&*format!("bytes 5000000-5000100/{total}")));
    assert!(r.body == want(5_000_000, 5_000_100));
    assert_eq!(o.stats().range(&path, "bytes=5000000-5000100"), 1);
    assert_eq!(o.stats().path(&path), 2, "the whole fetch the store refused, then the range");
    // Reused for the ranges it covers.
    for (a, b) in [(5_000_000, 5_000_100), (5_000_010, 5_000_020)] {
        let r = get(&s, &path, &[("Range", &range(a, b))]);
        assert!(r.cache_status().contains("hit"), "{}", r.cache_status());
        assert!(r.body == want(a, b));
    }
    assert_eq!(o.stats().path(&path), 2);
    // Another range: straight to the origin, no whole fetch any more.
    let r = get(&s, &path, &[("Range", "bytes=6000000-6000099")]);
    assert!(r.body == want(6_000_000, 6_000_099));
    assert_eq!(o.stats().range(&path, "bytes=6000000-6000099"), 1);
    assert_eq!(o.stats().path(&path), 3);
    // A request for all of it fetches the gaps only, and completes the object.
    let whole = get(&s, &path, &[]);
    assert_eq!((whole.status, whole.body.len() as u64), (200, total));
    assert!(whole.body == want(0, total - 1));
    let fetched: u64 = asked(&o, &path).iter().map(|&(a, b, n)| (b - a + 1) * n).sum();
    assert_eq!(fetched, total, "every byte fetched by range exactly once");
    let before = o.stats().total();
    let again = get(&s, &path, &[]);
    assert!(again.cache_status().contains("hit"), "{}", again.cache_status());
    assert!(again.body == whole.body);
    let head = request(s.addr, "HEAD", &path, &[]);
    assert_eq!(head.header("content-length"), Some(&*total.to_string()));
    assert_eq!(o.stats().total(), before, "complete: served from the stored pieces");
    // Purge removes the index: the pieces are unreachable.
    let url = format!("http://{HOST}{path}");
    assert_eq!(s.block_on(s.shared.purge(&s.settings, &url, false, false)).unwrap(), 1);
    get(&s, &path, &[("Range", "bytes=0-9")]);
    assert_eq!(o.stats().total(), before + 2, "a whole fetch again, then the range");
}

#[test]
fn one_byte_ranges_at_slice_ends_start_no_read_ahead() {
    let o = demo();
    let s = sliced(&o, |opts| opts.slicing.read_ahead = 2);
    let path = "/obj/33554432";
    // Ten one-byte reads, each on the last byte of a slice (three apart, so no read-ahead
    // of one would serve another): each costs its own slice and nothing more.
    let ends: Vec<u64> = (0..10).map(|i| 3 * i).collect();
    for &k in &ends {
        let last = (k + 1) * MIB - 1;
        let r = get(&s, path, &[("Range", &range(last, last))]);
        assert_eq!(r.status, 206, "{}", r.cache_status());
        assert!(r.body == expected_bytes(0, path, last, 1));
    }
    s.settle();
    let got: Vec<u64> = asked(&o, path).iter().map(|x| x.0 / MIB).collect();
    assert_eq!(got, ends, "only the slices asked for, no read-ahead");
    assert_eq!(s.shared.slices.read_ahead_fetches.load(Relaxed), 0);
    // A player reading half a slice at a time still gets read-ahead: the read that takes
    // the second half of a slice (from its midpoint to its end) reads it sequentially.
    let path = "/obj/8388608";
    let half = MIB / 2;
    for i in 0..4 {
        let a = i * half;
        s.settle();
        let r = get(&s, path, &[("Range", &range(a, a + half - 1))]);
        assert!(r.body == expected_bytes(0, path, a, half as usize));
        if i >= 2 {
            assert!(r.cache_status().contains("hit"), "chunk {i} was read ahead");
        }
    }
    s.settle();
    let got: Vec<u64> = asked(&o, path).iter().map(|x| x.0 / MIB).collect();
    assert_eq!(got, [0, 1, 2, 3], "slices 1 and 2 read ahead after slice 0, then 3");
}

#[test]
fn a_range_from_the_last_u64_offset_with_a_slice_size_not_a_power_of_two_is_416_like_unsliced() {
    const SIZE: u64 = 3_000_000;
    let total = 5_000_000u64;
    let path = format!("/obj/{total}");
    let o = demo();
    let s = sliced(&o, |opts| {
        opts.slicing.size = Some(SIZE);
        opts.store = (256 * MIB, 8 * MIB);
    });
    let unsatisfied = format!("bytes */{total}");
    for r in [
        "bytes=18446744073709551615-",
        "bytes=18446744073709551615-18446744073709551615",
        "bytes=18446744073709551000-",
        "bytes=18446744073707000000-18446744073709551614",
    ] {
        let a = get(&s, &path, &[("Range", r)]);
        assert_eq!((a.status, a.header("content-range")), (416, Some(&*unsatisfied)), "{r}");
    }
    // The length was learnt from slice 0, the only thing the origin was asked for.
    assert_eq!(asked(&o, &path), [(0, SIZE - 1, 1)]);
    // The object is still served as usual.
    let r = get(&s, &path, &[("Range", "bytes=4999990-")]);
    assert_eq!(r.header("content-range"), Some(&*format!("bytes 4999990-4999999/{total}")));
    assert!(r.body == expected_bytes(0, &path, 4_999_990, 10));
    s.settle();
    for &(a, b, _) in &asked(&o, &path) {
        assert!(a % SIZE == 0 && b == (a + SIZE).min(total) - 1, "{a}-{b} is not a slice");
    }
    // A cold object meets the same range first: it answers the same.
    let cold = "/obj/7000000";
    let a = get(&s, cold, &[("Range", "bytes=18446744073709551615-")]);
    assert_eq!((a.status, a.header("content-range")), (416, Some("bytes */7000000")));
    assert_eq!(asked(&o, cold), [(0, SIZE - 1, 1)]);
    // Without slicing the same request gets the same answer.
    let o2 = demo();
    let plain = sliced(&o2, |opts| {
        opts.slicing = Slicing::default();
        opts.store = (256 * MIB, 8 * MIB);
    });
    let a = get(&plain, &path, &[("Range", "bytes=18446744073709551615-")]);
    assert_eq!((a.status, a.header("content-range")), (416, Some(&*unsatisfied)));
}
