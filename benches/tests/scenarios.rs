//! The generator's scenarios against a tiny in-test HTTP/1.1 server on
//! 127.0.0.1:0, checking request/byte/error accounting against what the server saw.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use reel_benches::scenario::{
    Common, ConnectConfig, FixedConfig, HerdConfig, IdleConfig, LiveConfig, Mark, OpenConfig,
    VodConfig, ZipfConfig, run_connect, run_fixed, run_herd, run_idle, run_live, run_open, run_vod,
    run_zipf,
};
use reel_benches::target::Target;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpListener;

/// Requests seen by the test server, by path.
type Seen = Arc<Mutex<HashMap<String, u64>>>;

/// Live segment duration of the test server.
const LIVE_SEG: Duration = Duration::from_millis(200);

struct Server {
    addr: SocketAddr,
    seen: Seen,
    scheme: &'static str,
}

impl Server {
    /// The same server behind TLS (a self-signed certificate made by the test).
    async fn start_tls() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let spec = reel_tls::CertSpec {
            source: reel_tls::CertSource::SelfSigned { names: vec!["127.0.0.1".into()] },
            names: Vec::new(),
            cert_key: "c".into(),
            key_key: "k".into(),
        };
        let cert = Arc::new(reel_tls::cert::load(&spec).unwrap());
        let tickets = reel_tls::Tickets::new().unwrap();
        let v12 = reel_tls::TlsVersion::Tls12;
        let tls = Arc::new(
            reel_tls::server_config(
                "l",
                cert,
                &[],
                false,
                false,
                v12,
                reel_tls::KtlsMode::Auto,
                &tickets,
            )
            .unwrap(),
        );
        let seen: Seen = Arc::default();
        let s2 = seen.clone();
        let epoch = Instant::now();
        tokio::spawn(async move {
            while let Ok((sock, _)) = listener.accept().await {
                let (tls, seen) = (tls.clone(), s2.clone());
                tokio::spawn(async move {
                    if let Ok((s, _)) = reel_tls::accept(&tls, sock, Duration::from_secs(5)).await {
                        serve_conn(s, seen, epoch).await;
                    }
                });
            }
        });
        Self { addr, seen, scheme: "https" }
    }

    async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let seen: Seen = Arc::default();
        let s2 = seen.clone();
        let epoch = Instant::now();
        tokio::spawn(async move {
            while let Ok((sock, _)) = listener.accept().await {
                tokio::spawn(serve_conn(sock, s2.clone(), epoch));
            }
        });
        Self { addr, seen, scheme: "http" }
    }

    fn url(&self, path: &str) -> Target {
        Target::parse(&format!("{}://{}{}", self.scheme, self.addr, path)).unwrap()
    }

    fn count(&self, pred: impl Fn(&str) -> bool) -> u64 {
        self.seen.lock().unwrap().iter().filter(|(k, _)| pred(k)).map(|(_, v)| v).sum()
    }
}

fn common(ms: u64) -> Common {
    Common {
        duration: Duration::from_millis(ms),
        timeout: Duration::from_secs(5),
        headers: vec!["x-test: 1".into()],
        mark: Default::default(),
        h3_streams: None,
    }
}

fn body(n: usize) -> Vec<u8> {
    (0..n).map(|i| b'a' + (i % 26) as u8).collect()
}

async fn serve_conn<S: AsyncRead + AsyncWrite + Unpin>(mut sock: S, seen: Seen, epoch: Instant) {
    let mut buf = Vec::new();
    let mut tmp = [0u8; 4096];
    loop {
        let end = loop {
            if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
            match sock.read(&mut tmp).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&tmp[..n]),
            }
        };
        let head = String::from_utf8_lossy(&buf[..end]).to_string();
        buf.drain(..end);
        assert!(head.contains("\r\nx-test: 1\r\n"), "extra header missing: {head}");
        let path = head.split(' ').nth(1).unwrap_or("/").to_string();
        *seen.lock().unwrap().entry(path.clone()).or_default() += 1;
        let ok = |b: &[u8], extra: &str| {
            let mut r = format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n{extra}\r\n", b.len())
                .into_bytes();
            r.extend_from_slice(b);
            r
        };
        let resp: Vec<u8> = if let Some(n) = path.strip_prefix("/ok/") {
            ok(&body(n.parse().unwrap()), "")
        } else if let Some(n) = path.strip_prefix("/close/") {
            ok(&body(n.parse().unwrap()), "Connection: close\r\n")
        } else if let Some(n) = path.strip_prefix("/chunked/") {
            let n: usize = n.parse().unwrap();
            let mut r = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
            for c in body(n).chunks(1000) {
                r.extend_from_slice(format!("{:x}\r\n", c.len()).as_bytes());
                r.extend_from_slice(c);
                r.extend_from_slice(b"\r\n");
            }
            r.extend_from_slice(b"0\r\nx-trailer: 1\r\n\r\n");
            r
        } else if path == "/err500" {
            b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 5\r\n\r\nerror".to_vec()
        } else if path == "/short" {
            // Announces 1000 bytes, sends 10, closes: a mid-body origin failure.
            let _ =
                sock.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n0123456789").await;
            let _ = sock.flush().await;
            return;
        } else if path == "/hang" {
            tokio::time::sleep(Duration::from_secs(30)).await;
            return;
        } else if path == "/drop" {
            return;
        } else if path == "/live/index.m3u8" {
            let now = (epoch.elapsed().as_millis() / LIVE_SEG.as_millis()) as u64 + 10;
            let first = now - 5;
            let mut p =
                format!("#EXTM3U\n#EXT-X-TARGETDURATION:0.2\n#EXT-X-MEDIA-SEQUENCE:{first}\n");
            for m in first..=now {
                p.push_str(&format!("#EXTINF:0.2,\nseg_{m}.ts\n"));
            }
            ok(p.as_bytes(), "")
        } else if path.starts_with("/live/seg_") {
            ok(&body(1000), "")
        } else if let Some(rest) = path.strip_prefix("/vod/") {
            if rest.ends_with("index.m3u8") {
                let mut p =
                    "#EXTM3U\n#EXT-X-TARGETDURATION:1\n#EXT-X-PLAYLIST-TYPE:VOD\n".to_string();
                for k in 0..3 {
                    p.push_str(&format!("#EXTINF:0.1,\nseg_{k}.ts\n"));
                }
                p.push_str("#EXT-X-ENDLIST\n");
                ok(p.as_bytes(), "")
            } else {
                ok(&body(5000), "")
            }
        } else if let Some(n) = path.strip_prefix("/zipf/") {
            // Even ranks answer as hits, odd ones as misses.
            let hit = n.parse::<u64>().unwrap().is_multiple_of(2);
            ok(&body(100), if hit { "X-Cache: HIT\r\n" } else { "X-Cache: MISS\r\n" })
        } else if path.starts_with("/herd/") {
            ok(&body(100), "")
        } else {
            b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n".to_vec()
        };
        // A TLS session may hold records until a flush (reel's record layer does).
        if sock.write_all(&resp).await.is_err() || sock.flush().await.is_err() {
            return;
        }
        if path.starts_with("/close/") {
            return;
        }
    }
}

#[tokio::test]
async fn fixed_counts_requests_and_bytes() {
    let s = Server::start().await;
    let cfg = FixedConfig { urls: vec![s.url("/ok/10000")], connections: 4, common: common(1000) };
    let r = run_fixed(&cfg).await.unwrap();
    assert!(r.requests > 0);
    assert_eq!(r.errors_total, 0, "{r}");
    assert_eq!(r.body_bytes, r.requests * 10000);
    assert!(r.bytes > r.body_bytes);
    assert_eq!(s.count(|p| p == "/ok/10000"), r.requests);
    assert!(r.latency_us.p50 > 0 && r.latency_us.max >= r.latency_us.p99);
}

#[tokio::test]
async fn fixed_over_https_counts_requests_and_bytes() {
    let s = Server::start_tls().await;
    let cfg = FixedConfig { urls: vec![s.url("/ok/300000")], connections: 3, common: common(800) };
    let r = run_fixed(&cfg).await.unwrap();
    assert!(r.requests > 0);
    assert_eq!(r.errors_total, 0, "{r}");
    assert_eq!(r.body_bytes, r.requests * 300_000);
    assert_eq!(s.count(|p| p == "/ok/300000"), r.requests);
}

#[tokio::test]
async fn connect_makes_a_connection_and_a_handshake_per_request() {
    let s = Server::start_tls().await;
    for resume in [false, true] {
        let cfg = ConnectConfig {
            urls: vec![s.url("/ok/1000")],
            connections: 2,
            resume,
            common: common(500),
        };
        let r = run_connect(&cfg).await.unwrap();
        assert!(r.requests > 0);
        assert_eq!(r.errors_total, 0, "{r}");
        assert_eq!(r.body_bytes, r.requests * 1000);
    }
    let plain = Server::start().await;
    let cfg = ConnectConfig {
        urls: vec![plain.url("/ok/10")],
        connections: 1,
        resume: true,
        common: common(300),
    };
    let r = run_connect(&cfg).await.unwrap();
    assert!(r.requests > 0 && r.errors_total == 0, "{r}");
}

#[tokio::test]
async fn fixed_counts_5xx_and_404_and_reconnects_on_close() {
    let s = Server::start().await;
    let cfg = FixedConfig {
        urls: vec![s.url("/close/100"), s.url("/err500"), s.url("/nothing")],
        connections: 3,
        common: common(800),
    };
    let r = run_fixed(&cfg).await.unwrap();
    assert_eq!(r.errors.status_5xx, s.count(|p| p == "/err500"));
    assert_eq!(r.errors.status_4xx, s.count(|p| p == "/nothing"));
    assert!(r.errors.status_5xx > 0 && r.errors.status_4xx > 0);
    assert_eq!(r.errors.reset + r.errors.short_body + r.errors.protocol, 0, "{r}");
    assert_eq!(r.requests, s.count(|_| true));
    let closes = s.count(|p| p == "/close/100");
    assert_eq!(r.body_bytes, closes * 100 + r.errors.status_5xx * 5);
}

#[tokio::test]
async fn chunked_bodies_are_decoded() {
    let s = Server::start().await;
    let cfg =
        FixedConfig { urls: vec![s.url("/chunked/4500")], connections: 2, common: common(500) };
    let r = run_fixed(&cfg).await.unwrap();
    assert!(r.requests > 0);
    assert_eq!(r.errors_total, 0, "{r}");
    assert_eq!(r.body_bytes, r.requests * 4500);
}

#[tokio::test]
async fn short_body_reset_timeout_and_connect_errors_are_classified() {
    let s = Server::start().await;
    let short = run_fixed(&FixedConfig {
        urls: vec![s.url("/short")],
        connections: 1,
        common: common(300),
    })
    .await
    .unwrap();
    assert_eq!(short.requests, 0);
    assert!(short.errors.short_body > 0);
    assert_eq!(short.errors.short_body, s.count(|p| p == "/short"));

    let dropped =
        run_fixed(&FixedConfig { urls: vec![s.url("/drop")], connections: 1, common: common(300) })
            .await
            .unwrap();
    assert!(dropped.errors.reset > 0 && dropped.requests == 0, "{dropped}");

    // Long enough for each connection's 200 ms timeout to fire even on a loaded machine.
    let mut c = common(1500);
    c.timeout = Duration::from_millis(200);
    let hung = run_fixed(&FixedConfig { urls: vec![s.url("/hang")], connections: 2, common: c })
        .await
        .unwrap();
    assert!(hung.errors.timeout >= 2 && hung.requests == 0, "{hung}");

    let closed = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let refused = run_fixed(&FixedConfig {
        urls: vec![Target::parse(&format!("http://127.0.0.1:{port}/")).unwrap()],
        connections: 1,
        common: common(200),
    })
    .await
    .unwrap();
    assert!(refused.errors.connect > 0 && refused.requests == 0, "{refused}");
}

#[tokio::test]
async fn open_loop_sends_exactly_the_schedule() {
    let s = Server::start().await;
    let r = run_open(&OpenConfig {
        urls: vec![s.url("/ok/1000")],
        connections: 4,
        rate: 200.0,
        common: common(1000),
    })
    .await
    .unwrap();
    // Requests due at k / 200 s for k < 200 are all sent, however late.
    assert_eq!(r.requests, 200, "{r}");
    assert_eq!(s.count(|p| p == "/ok/1000"), 200);
    assert_eq!(r.errors_total, 0);
}

#[tokio::test]
async fn live_viewers_fetch_each_new_segment_once() {
    let s = Server::start().await;
    let viewers = 5;
    let r = run_live(&LiveConfig {
        playlist: s.url("/live/index.m3u8"),
        viewers,
        jitter: None,
        common: common(1500),
    })
    .await
    .unwrap();
    assert_eq!(r.errors_total, 0, "{r}");
    assert!(r.playlists >= viewers as u64);
    assert!(r.segments >= viewers as u64, "{r}");
    assert_eq!(r.playlists, s.count(|p| p.ends_with(".m3u8")));
    assert_eq!(r.segments, s.count(|p| p.starts_with("/live/seg_")));
    assert_eq!(r.requests, r.playlists + r.segments);
    // Each segment at most once per viewer.
    for (path, n) in s.seen.lock().unwrap().iter() {
        if path.starts_with("/live/seg_") {
            assert!(*n <= viewers as u64, "{path} fetched {n} times");
        }
    }
    assert!(r.segment_ttfb_us.p50 > 0);
}

#[tokio::test]
async fn live_with_jitter_runs() {
    let s = Server::start().await;
    let r = run_live(&LiveConfig {
        playlist: s.url("/live/index.m3u8"),
        viewers: 4,
        jitter: Some(Duration::from_millis(200)),
        common: common(1000),
    })
    .await
    .unwrap();
    assert_eq!(r.errors_total, 0, "{r}");
    assert!(r.segments >= 4);
}

#[tokio::test]
async fn vod_viewers_walk_titles() {
    let s = Server::start().await;
    let r = run_vod(&VodConfig {
        server: s.url("/"),
        title_template: "/vod/title{i:02}/index.m3u8".into(),
        titles: 10,
        zipf_exponent: 1.0,
        viewers: 3,
        realtime: false,
        seed: 1,
        common: common(800),
    })
    .await
    .unwrap();
    assert_eq!(r.errors_total, 0, "{r}");
    assert!(r.playlists >= 3);
    assert_eq!(r.segments, s.count(|p| p.ends_with(".ts")));
    assert!(r.body_bytes > r.segments * 5000);
    for path in s.seen.lock().unwrap().keys() {
        let title = path.strip_prefix("/vod/title").and_then(|p| p.split('/').next()).unwrap();
        assert_eq!(title.len(), 2, "{path}");
        assert!(title.parse::<usize>().unwrap() < 10);
    }

    // Real-time pacing: 3 segments of 0.1 s per title, so far fewer segments per viewer.
    let paced = run_vod(&VodConfig {
        server: s.url("/"),
        title_template: "/vod/title{i:02}/index.m3u8".into(),
        titles: 10,
        zipf_exponent: 1.0,
        viewers: 2,
        realtime: true,
        seed: 1,
        common: common(500),
    })
    .await
    .unwrap();
    assert_eq!(paced.errors_total, 0);
    // At most one segment per 0.1 s of the run per viewer, plus the first one.
    assert!(paced.segments <= 2 * 6, "{paced}");
    assert!(paced.playlists <= 2 * 2, "{paced}");
    assert!(paced.segments >= 2);
}

#[tokio::test]
async fn herd_rounds_hit_one_fresh_url_each() {
    let s = Server::start().await;
    let r = run_herd(&HerdConfig {
        target: s.url("/herd/{n}.ts"),
        viewers: 8,
        interval: Duration::from_millis(300),
        common: common(1000),
    })
    .await
    .unwrap();
    assert_eq!(r.errors_total, 0, "{r}");
    let seen = s.seen.lock().unwrap().clone();
    assert!(!seen.is_empty());
    for (path, n) in &seen {
        assert!(path.starts_with("/herd/") && !path.contains("{n}"));
        assert_eq!(*n, 8, "{path}");
    }
    assert_eq!(r.segments, 8 * seen.len() as u64);
    assert_eq!(r.body_bytes, r.segments * 100);
}

#[tokio::test]
async fn zipf_viewers_favour_low_ranks_and_split_hits_by_header() {
    let s = Server::start().await;
    let mut c = common(800);
    c.mark = Mark { header: Some(("x-cache".into(), "hit".into())), url: None };
    let r = run_zipf(&ZipfConfig {
        target: s.url("/zipf/{i}"),
        objects: 50,
        exponent: 1.0,
        viewers: 4,
        interval: None,
        seed: 7,
        one_hit_share: 0.0,
        common: c,
    })
    .await
    .unwrap();
    assert_eq!(r.errors_total, 0, "{r}");
    assert_eq!(r.requests, s.count(|p| p.starts_with("/zipf/")));
    let rank = |p: &str| p.strip_prefix("/zipf/").and_then(|n| n.parse::<u64>().ok());
    let even = s.count(|p| rank(p).is_some_and(|n| n.is_multiple_of(2)));
    assert_eq!(r.marked, even, "hits are the even ranks: {r}");
    assert_eq!(r.unmarked, r.requests - even);
    assert!(
        s.count(|p| p == "/zipf/0") > s.count(|p| p == "/zipf/49"),
        "rank 0 is the most popular"
    );
    assert!(s.count(|p| rank(p).is_some_and(|n| n >= 50)) == 0);

    // Paced: one request per viewer per 100 ms, and marking by URL.
    let mut c = common(500);
    c.mark = Mark { header: None, url: Some("/zipf/1".into()) };
    let paced = run_zipf(&ZipfConfig {
        target: s.url("/zipf/{i}"),
        objects: 2,
        exponent: 0.0,
        viewers: 2,
        interval: Some(Duration::from_millis(100)),
        seed: 1,
        one_hit_share: 0.0,
        common: c,
    })
    .await
    .unwrap();
    assert_eq!(paced.errors_total, 0);
    assert!(paced.requests >= 6 && paced.requests <= 12, "{paced}");
    assert_eq!(paced.marked + paced.unmarked, paced.requests);
}

#[tokio::test]
async fn zipf_one_hit_urls_are_each_requested_once_past_the_catalog() {
    let s = Server::start().await;
    let mut c = common(600);
    c.mark = Mark { header: Some(("x-cache".into(), "hit".into())), url: None };
    let r = run_zipf(&ZipfConfig {
        target: s.url("/zipf/{i}"),
        objects: 20,
        exponent: 1.0,
        viewers: 4,
        interval: None,
        seed: 3,
        one_hit_share: 0.3,
        common: c,
    })
    .await
    .unwrap();
    assert_eq!(r.errors_total, 0, "{r}");
    let rank = |p: &str| p.strip_prefix("/zipf/").and_then(|n| n.parse::<u64>().ok());
    let seen = s.seen.lock().unwrap().clone();
    let one_hit: Vec<_> = seen.iter().filter(|(p, _)| rank(p).is_some_and(|n| n >= 20)).collect();
    assert_eq!(one_hit.len() as u64, r.one_hit, "{r}");
    assert!(one_hit.iter().all(|(_, n)| **n == 1), "each one-hit URL once");
    let share = r.one_hit as f64 / r.requests as f64;
    assert!((0.2..0.4).contains(&share), "share {share}: {r}");
    let even = one_hit.iter().filter(|(p, _)| rank(p).is_some_and(|n| n % 2 == 0)).count();
    assert_eq!(r.one_hit_marked, even as u64, "marked by the server's header: {r}");
    assert!(r.to_string().contains("one-hit URLs"), "{r}");
    assert!(
        run_zipf(&ZipfConfig {
            target: s.url("/zipf/{i}"),
            objects: 20,
            exponent: 1.0,
            viewers: 1,
            interval: None,
            seed: 3,
            one_hit_share: 1.5,
            common: common(100),
        })
        .await
        .is_err()
    );
}

#[tokio::test]
async fn idle_connections_make_one_request_and_stay_open() {
    let s = Server::start().await;
    let r = run_idle(&IdleConfig {
        target: s.url("/ok/500"),
        connections: 20,
        connect_rate: 1000.0,
        buffer: 4096,
        common: common(600),
    })
    .await
    .unwrap();
    assert_eq!(r.errors_total, 0, "{r}");
    assert_eq!((r.requests, r.held), (20, 20));
    assert_eq!(s.count(|p| p == "/ok/500"), 20);
    // A server that closes after the response leaves nothing to hold.
    let r = run_idle(&IdleConfig {
        target: s.url("/close/10"),
        connections: 5,
        connect_rate: 1000.0,
        buffer: 4096,
        common: common(300),
    })
    .await
    .unwrap();
    assert_eq!((r.requests, r.held, r.errors_total), (5, 0, 0), "{r}");
}

#[test]
fn title_templates_expand() {
    use reel_benches::scenario::title_path;
    assert_eq!(title_path("/vod/title_{i:03}/index.m3u8", 7).unwrap(), "/vod/title_007/index.m3u8");
    assert_eq!(title_path("/t{i}.m3u8", 12).unwrap(), "/t12.m3u8");
    assert_eq!(title_path("/t.m3u8", 1), None);
    assert_eq!(title_path("/t{i:x}.m3u8", 1), None);
}

#[tokio::test]
async fn invalid_configs_are_refused() {
    let s = Server::start().await;
    let mut c = common(100);
    c.headers = vec!["bad\r\nheader: x".into()];
    assert!(
        run_fixed(&FixedConfig { urls: vec![s.url("/ok/1")], connections: 1, common: c })
            .await
            .is_err()
    );
    assert!(
        run_fixed(&FixedConfig {
            urls: vec![s.url("/ok/1"), Target::parse("http://127.0.0.1:1/").unwrap()],
            connections: 1,
            common: common(100)
        })
        .await
        .is_err()
    );
    assert!(
        run_open(&OpenConfig {
            urls: vec![s.url("/ok/1")],
            connections: 1,
            rate: 0.0,
            common: common(100)
        })
        .await
        .is_err()
    );
    assert!(
        run_herd(&HerdConfig {
            target: s.url("/herd/x"),
            viewers: 1,
            interval: Duration::from_millis(100),
            common: common(100)
        })
        .await
        .is_err()
    );
}

#[tokio::test]
async fn seek_viewers_play_by_ranges_and_count_what_they_asked_for() {
    // The demo origin answers ranges; it says nothing of a cache, so no chunk counts as
    // stored.
    let o = reel_demo_origin::spawn(
        "127.0.0.1:0".parse().unwrap(),
        reel_demo_origin::DemoOriginConfig::no_latency(),
    )
    .unwrap();
    let size = 64u64 << 20;
    let cfg = reel_benches::seek::SeekConfig {
        target: Target::parse(&o.url(&format!("/obj/{size}.mp4"))).unwrap(),
        size,
        viewers: 4,
        chunk: 1 << 20,
        rate: 20 << 20,
        startup: 1,
        run: Duration::from_millis(300),
        seed: 1,
        common: common(1000),
    };
    let r = reel_benches::seek::run_seek(&cfg).await.unwrap();
    let s = &r.seek;
    assert_eq!(r.base.errors_total, 0);
    assert!(s.seeks >= 4 && s.chunks_after_seek > 0, "{s:?}");
    // One seek per run at most: 300 ms runs in one second, per viewer.
    assert!(s.seeks <= 4 * 4, "{s:?}");
    assert_eq!(s.chunks_after_seek_not_stored, s.chunks_after_seek);
    assert!(s.paced_chunks > 0 && s.paced_chunks < s.chunks_after_seek, "{s:?}");
    assert_eq!(s.paced_chunks_not_stored, s.paced_chunks);
    assert_eq!(r.base.requests, s.seeks + s.chunks_after_seek);
    assert_eq!(r.base.body_bytes, s.requested_bytes, "every chunk asked for was received");
    assert!(s.distinct_bytes <= s.requested_bytes && s.distinct_bytes > 0);
    assert_eq!(o.stats().body_bytes(), s.requested_bytes);
    // Every request was one chunk, ending on a chunk boundary (or the end of the file).
    for (_, range, _) in o.stats().ranges_asked() {
        let (a, b) = range.strip_prefix("bytes=").unwrap().split_once('-').unwrap();
        let (a, b): (u64, u64) = (a.parse().unwrap(), b.parse().unwrap());
        assert!(b / (1 << 20) == a / (1 << 20) && ((b + 1) % (1 << 20) == 0 || b == size - 1));
    }
}
