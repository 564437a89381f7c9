//! Criterion micro-benchmarks of the reel-http codec: parsing a typical player
//! segment request head and serializing a hit's response head.
use std::hint::black_box;
use std::net::SocketAddr;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use reel_http::{HeadContext, HeadStatus, Limits, Request, Response, Version, encode_head};

/// A ~400-byte GET as sent by an HLS player for a media segment.
const PLAYER_GET: &[u8] = b"GET /live/channel-7/1080p/segment_000183742.m4s?token=9f8e7d6c5b4a&exp=1767225600 HTTP/1.1\r\n\
Host: edge-fra1.cdn.example.net\r\n\
User-Agent: AppleCoreMedia/1.0.0.21E236 (iPhone; U; CPU OS 17_4 like Mac OS X; en_us)\r\n\
Accept: */*\r\n\
Referer: https://player.example.com/watch/channel-7\r\n\
Accept-Language: en-US,en;q=0.9\r\n\
Accept-Encoding: identity\r\n\
X-Playback-Session-Id: 5A1C7B3E-4D2F-4C8B-9E6A-1F0D3B2A7C9E\r\n\
Connection: keep-alive\r\n\r\n";

fn parse_head(c: &mut Criterion) {
    let addr: SocketAddr = ([127, 0, 0, 1], 8080).into();
    let limits = Limits::default();
    let mut req = Request::new(addr, addr);
    let mut g = c.benchmark_group("http");
    g.throughput(Throughput::Bytes(PLAYER_GET.len() as u64));
    g.bench_function("parse_player_get", |b| {
        b.iter(|| {
            let st = req.parse_head(black_box(PLAYER_GET), &limits);
            assert!(matches!(st, Ok(HeadStatus::Complete(_))));
            black_box(req.path().len())
        })
    });
    g.finish();
}

fn encode_response_head(c: &mut Criterion) {
    let resp = Response::new(200)
        .header("content-type", "video/iso.segment")
        .header("cache-control", "public, max-age=31536000, immutable")
        .header("etag", "\"5f3a-18c2b7e4f00\"")
        .header("age", "12")
        .header("x-cache", "HIT")
        .bytes(vec![0u8; 1024]);
    let ctx = HeadContext { version: Version::Http11, head_request: false, keep_alive: true };
    let mut out = Vec::with_capacity(1024);
    c.bench_function("http/encode_hit_head", |b| {
        b.iter(|| {
            out.clear();
            black_box(encode_head(black_box(&resp), &ctx, &mut out));
            black_box(out.len())
        })
    });
}

criterion_group!(benches, parse_head, encode_response_head);
criterion_main!(benches);
