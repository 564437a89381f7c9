//! HTTP/2 over TLS against the binary: the cache (hits, misses, coalesced misses, ranges, conditionals, HEAD), cookie fields, many streams, rapid reset and CONTINUATION floods, settings from the config, a cancelled leader.

use super::*;

#[test]
fn http2_serves_hits_misses_coalesced_misses_ranges_conditionals_and_head() {
    let dir = tempfile::tempdir().expect("tmp");
    let origin = Origin::start("o");
    let a = body(200_000, 1);
    let slow = body(1_500_000, 2);
    let cached = |b: &[u8]| {
        Object::ok(b.to_vec()).header("etag", "\"v1\"").header("cache-control", "max-age=3600")
    };
    origin.put("/a.ts", cached(&a));
    origin.put("/slow.ts", cached(&slow).delay(Duration::from_millis(700)));
    let pki = Pki::new(dir.path());
    pki.leaf("edge", &["edge.example.test"]);
    let reel = Reel::start(&tls_conf(dir.path(), &origin, &pki));
    let addr = reel.listener_addr("https").expect("https listener");
    rt().block_on(async {
        let c = h2_client(addr, pki.client(&[b"h2", b"http/1.1"]), "edge.example.test").await;
        let r = h2_get(&c, "/a.ts").await;
        assert_eq!(r.status, 200);
        assert!(r.cache_status().contains("fwd=miss"), "{}", r.cache_status());
        assert!(r.body == a);
        let r = h2_get(&c, "/a.ts").await;
        assert_eq!(r.cache_status(), "reel; hit");
        assert!(r.body == a);
        assert_eq!(origin.hits("/a.ts"), 1);
        // Range, conditional and HEAD on the cached object.
        let r = h2_req(&c, "GET", "/a.ts", &[("range", "bytes=1000-1999")]).await.expect("range");
        assert_eq!(r.status, 206);
        assert!(r.body == a[1000..2000]);
        assert_eq!(r.headers["content-range"], "bytes 1000-1999/200000");
        let r = h2_req(&c, "GET", "/a.ts", &[("if-none-match", "\"v1\"")]).await.expect("inm");
        assert_eq!((r.status, r.body.len()), (304, 0));
        let r = h2_req(&c, "HEAD", "/a.ts", &[]).await.expect("head");
        assert_eq!((r.status, r.body.len()), (200, 0));
        assert_eq!(r.headers["content-length"], "200000");
        // A slow miss asked for on many streams of two connections: one origin fetch, every
        // stream byte-exact.
        let c2 = h2_client(addr, pki.client(&[b"h2"]), "edge.example.test").await;
        let mut work = Vec::new();
        for i in 0..12 {
            let c = if i % 2 == 0 { c.clone() } else { c2.clone() };
            work.push(tokio::spawn(async move { h2_get(&c, "/slow.ts").await }));
        }
        let mut collapsed = 0;
        for w in work {
            let r = w.await.expect("task");
            assert_eq!(r.status, 200);
            assert!(r.body == slow, "a coalesced stream was not byte-exact");
            collapsed += usize::from(r.cache_status().contains("collapsed"));
        }
        assert_eq!(origin.hits("/slow.ts"), 1);
        assert!(collapsed > 0, "no stream joined the fill");
        // HTTPS/1.1 on the same listener, same cache.
        let (head, b, _) =
            https11_get(addr, pki.client(&[b"http/1.1"]), "/a.ts").await.expect("h1");
        assert!(
            head.starts_with("HTTP/1.1 200") && head.contains("cache-status: reel; hit"),
            "{head}"
        );
        assert!(b == a);
        // The health endpoint answers over HTTP/2 too (503 on an overloaded machine).
        let h = h2_get(&c, "/healthz").await;
        assert!(h.status == 200 || h.status == 503, "{}", h.status);
        assert_eq!(h.headers["content-type"], "application/json");
    });
    // Workers hand their lines over every flush_interval: wait for it.
    eventually("HTTP/2 requests in the access log", || {
        let log = std::fs::read_to_string(dir.path().join("access.log")).unwrap_or_default();
        log.contains("/slow.ts").then_some(())
    });
}

/// RFC 9113 8.2.3 lets an HTTP/2 client split its cookie into several `cookie` fields;
/// they reached the HTTP/1.1 origin as several `Cookie:` lines, which RFC 6265 5.4 does
/// not allow and many origins read only the first of.
#[test]
fn separate_http2_cookie_fields_reach_the_origin_as_one_field() {
    let dir = tempfile::tempdir().expect("tmp");
    let origin = Origin::start("o");
    origin.put("/c.ts", Object::ok("c").header("cache-control", "no-store"));
    origin.put("/p", Object::ok("p"));
    let pki = Pki::new(dir.path());
    pki.leaf("edge", &["edge.example.test"]);
    let reel = Reel::start(&tls_conf(dir.path(), &origin, &pki));
    let addr = reel.listener_addr("https").expect("https listener");
    rt().block_on(async {
        let c = h2_client(addr, pki.client(&[b"h2"]), "edge.example.test").await;
        let split = [("cookie", "a=1"), ("cookie", "b=2")];
        for (method, path) in [("GET", "/c.ts"), ("POST", "/p")] {
            let r = h2_req(&c, method, path, &split).await.expect("h2 request");
            assert_eq!(r.status, 200, "{method} {path}");
            assert_eq!(origin.cookies(path), ["a=1; b=2"], "{method} {path}");
        }
    });
}

#[test]
fn many_multiplexed_streams_return_their_own_objects_byte_exact() {
    let dir = tempfile::tempdir().expect("tmp");
    let origin = Origin::start("o");
    let objects: Vec<Vec<u8>> = (0..40).map(|i| body(1000 + i * 15_013, i as u8)).collect();
    for (i, b) in objects.iter().enumerate() {
        origin.put(
            &format!("/m/{i}.ts"),
            Object::ok(b.clone()).header("cache-control", "max-age=3600"),
        );
    }
    let pki = Pki::new(dir.path());
    pki.leaf("edge", &["edge.example.test"]);
    let reel = Reel::start(&tls_conf(dir.path(), &origin, &pki));
    let addr = reel.listener_addr("https").expect("https listener");
    let objects = Arc::new(objects);
    rt().block_on(async {
        let c = h2_client(addr, pki.client(&[b"h2"]), "edge.example.test").await;
        // One stream first: the client then knows the server's stream limit (128) and
        // queues the rest instead of opening streams the server would refuse.
        assert_eq!(h2_get(&c, "/m/0.ts").await.status, 200);
        let mut work = Vec::new();
        for n in 0..200 {
            let (c, objects) = (c.clone(), objects.clone());
            work.push(tokio::spawn(async move {
                let i = (n * 7) % objects.len();
                let r = h2_get(&c, &format!("/m/{i}.ts")).await;
                assert_eq!(r.status, 200);
                assert!(r.body == objects[i], "stream for object {i} carried other bytes");
            }));
        }
        for w in work {
            w.await.expect("stream");
        }
    });
}

/// A hand-written HTTP/2 connection for the attacks.
async fn connect_raw(addr: SocketAddr, cfg: Arc<rustls::ClientConfig>) -> RawH2<Tls> {
    RawH2::handshake(tls_connect(addr, cfg, "edge.example.test").await.expect("TLS")).await
}

#[test]
fn rapid_reset_and_continuation_floods_get_goaway_while_other_connections_are_served() {
    let dir = tempfile::tempdir().expect("tmp");
    let origin = Origin::start("o");
    let a = body(50_000, 3);
    origin.put("/a.ts", Object::ok(a.clone()).header("cache-control", "max-age=3600"));
    origin.put("/slow.ts", Object::ok(body(10, 4)).delay(Duration::from_millis(400)));
    let pki = Pki::new(dir.path());
    pki.leaf("edge", &["edge.example.test"]);
    let mut conf = tls_conf(dir.path(), &origin, &pki);
    // The limit is per second: at the default (100) the 300 paced resets below tripped it
    // only while the client kept up 2 ms a reset, which a loaded CI machine did not. At 10
    // it trips at any pace faster than 100 ms a reset; the burst trips either.
    conf.http.push_str("h2_max_resets_per_second = 10\n");
    let reel = Reel::start(&conf);
    let addr = reel.listener_addr("https").expect("https listener");
    let served = Arc::new(Mutex::new((0u32, 0u32)));
    rt().block_on(async {
        // An honest viewer keeps fetching on its own connection the whole time.
        let stop = Arc::new(AtomicBool::new(false));
        let honest = {
            let (c, stop, served, a) = (
                h2_client(addr, pki.client(&[b"h2"]), "edge.example.test").await,
                stop.clone(),
                served.clone(),
                a.clone(),
            );
            tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    let ok = h2_req(&c, "GET", "/a.ts", &[]).await.is_ok_and(|r| r.body == a);
                    let mut s = served.lock().unwrap();
                    if ok { s.0 += 1 } else { s.1 += 1 }
                }
            })
        };
        // Rapid reset: HEADERS and RST_STREAM back to back, 1000 times, in one write.
        let mut raw = connect_raw(addr, pki.client(&[b"h2"])).await;
        let mut burst = Vec::new();
        for i in 0..1000u32 {
            let id = 2 * i + 1;
            burst.extend(frame(HEADERS, END_STREAM | END_HEADERS, id, &get_block("/slow.ts")));
            burst.extend(frame(RST_STREAM, 0, id, &CANCEL.to_be_bytes()));
        }
        let _ = raw.write(&burst).await;
        assert_eq!(raw.goaway().await, Some(ENHANCE_YOUR_CALM), "rapid reset");
        // Rapid reset of streams already being answered.
        let mut raw = connect_raw(addr, pki.client(&[b"h2"])).await;
        for i in 0..300u32 {
            let id = 2 * i + 1;
            raw.send(HEADERS, END_STREAM | END_HEADERS, id, &get_block("/slow.ts")).await;
            tokio::time::sleep(Duration::from_millis(2)).await;
            if raw.write(&frame(RST_STREAM, 0, id, &CANCEL.to_be_bytes())).await.is_err() {
                break;
            }
        }
        assert_eq!(raw.goaway().await, Some(ENHANCE_YOUR_CALM), "resets of running streams");
        // CONTINUATION flood: a header block that never ends.
        let mut raw = connect_raw(addr, pki.client(&[b"h2"])).await;
        raw.send(HEADERS, END_STREAM, 1, &get_block("/a.ts")).await;
        let mut flood = Vec::new();
        for _ in 0..20_000 {
            flood.extend(frame(CONTINUATION, 0, 1, &[0x40, 0x01, b'x', 0x01, b'y']));
        }
        let _ = raw.write(&flood).await;
        assert!(raw.goaway().await.is_some(), "CONTINUATION flood");
        stop.store(true, Ordering::Relaxed);
        honest.await.expect("honest viewer");
    });
    let (ok, failed) = *served.lock().unwrap();
    assert!(ok > 0 && failed == 0, "honest viewer: {ok} served, {failed} failed");
    // A fresh connection is served as usual.
    rt().block_on(async {
        let c = h2_client(addr, pki.client(&[b"h2"]), "edge.example.test").await;
        assert!(h2_get(&c, "/a.ts").await.body == a);
    });
}

#[test]
fn http2_settings_come_from_the_config_and_a_reload_applies_them_to_new_connections() {
    let dir = tempfile::tempdir().expect("tmp");
    let origin = Origin::start("o");
    let pki = Pki::new(dir.path());
    pki.leaf("edge", &["edge.example.test"]);
    let mut conf = tls_conf(dir.path(), &origin, &pki);
    conf.http = "h2_max_concurrent_streams = 7\n".into();
    let mut reel = Reel::start(&conf);
    let addr = reel.listener_addr("https").expect("https listener");
    // The client learns the server's SETTINGS_MAX_CONCURRENT_STREAMS once the connection
    // has read them: after the first response.
    let announced = |addr| {
        rt().block_on(async {
            let s = tls_connect(addr, pki.client(&[b"h2"]), "edge.example.test").await;
            let (send, mut conn) = h2::client::handshake(s.expect("TLS")).await.expect("h2");
            let req = async {
                let r = h2_req(&send, "GET", "/healthz", &[]).await;
                assert!(r.is_ok(), "no answer over HTTP/2: {:?}", r.err());
            };
            tokio::select! {
                () = req => {}
                r = &mut conn => panic!("connection ended first: {r:?}"),
            }
            conn.max_concurrent_send_streams()
        })
    };
    assert_eq!(announced(addr), 7);
    conf.http = "h2_max_concurrent_streams = 9\n".into();
    reel.rewrite(&conf);
    let st = reel.sighup_reload();
    assert_eq!(st["reload"]["last_ok"], true, "{st}");
    assert_eq!(announced(addr), 9);
}

/// Plain HTTP/1.1 viewers of `target` (Host `edge.example.test`), each on its own
/// connection, in the background; their responses once all are answered.
fn viewers_bg(
    addr: SocketAddr,
    target: &str,
    n: usize,
) -> std::thread::JoinHandle<Vec<crate::common::Resp>> {
    let target = target.to_string();
    std::thread::spawn(move || {
        let asks: Vec<_> = (0..n)
            .map(|_| {
                let t = target.clone();
                std::thread::spawn(move || request(addr, "GET", "edge.example.test", &t, &[]))
            })
            .collect();
        asks.into_iter().map(|a| a.join().expect("viewer")).collect()
    })
}

/// An HTTP/2 leader of an LL-HLS blocking request that resets its stream (RST_STREAM
/// CANCEL) while the origin holds the request abandons its wait, not the fetch: every
/// viewer coalesced behind it gets what the origin sends, from that one origin request. The
/// same for a blocking playlist reload and for the part a playlist hinted.
#[test]
fn a_cancelled_http2_leader_of_a_blocking_request_leaves_its_followers_the_origins_answer() {
    let dir = tempfile::tempdir().expect("tmp");
    let origin = Origin::start("o");
    let pki = Pki::new(dir.path());
    pki.leaf("edge", &["edge.example.test"]);
    let reel = Reel::start(&tls_conf(dir.path(), &origin, &pki));
    let addr = reel.listener_addr("https").expect("https listener");
    // A playlist that hints the next part, so a request for that part is blocking.
    let hinting = "#EXTM3U\n#EXT-X-VERSION:9\n#EXT-X-TARGETDURATION:2\n\
                   #EXT-X-SERVER-CONTROL:CAN-BLOCK-RELOAD=YES,PART-HOLD-BACK=1.5\n\
                   #EXT-X-PART-INF:PART-TARGET=0.5\n#EXT-X-MEDIA-SEQUENCE:5\n\
                   #EXT-X-PART:DURATION=0.5,URI=\"seg5.part0.ts\"\n\
                   #EXT-X-PRELOAD-HINT:TYPE=PART,URI=\"seg5.part1.ts\"\n";
    origin.put("/live/p.m3u8", Object::ok(hinting).header("cache-control", "max-age=1"));
    let listed = request(reel.data, "GET", "edge.example.test", "/live/p.m3u8", &[]);
    assert_eq!(listed.status, 200);
    let followers = 6;
    for (path, target, want) in [
        ("/live/p.m3u8", "/live/p.m3u8?_HLS_msn=5&_HLS_part=1", hinting.as_bytes().to_vec()),
        ("/live/seg5.part1.ts", "/live/seg5.part1.ts", body(30_000, 9)),
    ] {
        let gate = Gate::default();
        let hits = origin.hits(path);
        let obj = Object::ok(want.clone()).header("cache-control", "max-age=60");
        origin.put(path, obj.gated(&gate));
        rt().block_on(async {
            let mut raw = connect_raw(addr, pki.client(&[b"h2"])).await;
            raw.send(HEADERS, END_STREAM | END_HEADERS, 1, &get_block(target)).await;
            eventually("the leader's origin request", || {
                (origin.hits(path) == hits + 1).then_some(())
            });
            let pending = viewers_bg(reel.data, target, followers);
            eventually("every follower waiting", || {
                let w = metric(&reel.metrics(), "reel_coalesced_waiters");
                (w == Some(followers as f64)).then_some(())
            });
            raw.send(RST_STREAM, 0, 1, &CANCEL.to_be_bytes()).await;
            // The reset reached the server once a PING sent after it is answered.
            raw.send(PING, 0, 0, &[0; 8]).await;
            while let Some(f) = raw.read().await {
                if f.kind == PING {
                    break;
                }
            }
            gate.open();
            let answers = pending.join().expect("viewers");
            for r in &answers {
                assert_eq!(r.status, 200, "{target}: {}", r.cache_status());
                assert_eq!(r.body, want, "{target}");
            }
            assert_eq!(origin.hits(path), hits + 1, "{target}: one origin request");
        });
    }
}
