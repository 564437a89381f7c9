//! Criterion micro-benchmarks of the HTTP caching policy: Cache-Control parsing of a typical
//! origin header, cache-key building and hashing for a tokenised segment URL, and the
//! per-hit freshness decision.
use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use reel_cache::key::{CacheKey, KeyConfig};
use reel_cache::policy::cache_control::{RequestCacheControl, ResponseCacheControl};
use reel_cache::policy::decision::decide;
use reel_cache::policy::freshness::PolicyConfig;
use reel_cache::policy::meta::{ResponseTimes, StoredMeta};
use reel_cache::policy::range::{Available, parse_range};
use reel_cache::policy::vary::VaryKey;

fn cache_control(c: &mut Criterion) {
    let value: &[u8] = b"public, max-age=86400, stale-while-revalidate=30";
    c.bench_function("cache_control_parse_typical", |b| {
        b.iter(|| ResponseCacheControl::parse_values([black_box(value)]))
    });
}

fn key(c: &mut Criterion) {
    let host: &[u8] = b"cdn.example.com";
    let target: &[u8] =
        b"/live/channel-7/1080p/segment_000123456.m4s?token=eyJhbGciOiJIUzI1NiJ9.abc.def&exp=1700000000&cid=42";
    let cfg = KeyConfig {
        ignore_query: vec!["token".into(), "exp".into()],
        drop_query: false,
        keep_query: Vec::new(),
    };
    c.bench_function("key_build_tokenised_segment", |b| {
        b.iter(|| CacheKey::build(black_box(host), black_box(target), &cfg))
    });
    c.bench_function("key_build_and_hash128", |b| {
        b.iter(|| CacheKey::build(black_box(host), black_box(target), &cfg).map(|k| k.hash128()))
    });
}

fn hit_path(c: &mut Criterion) {
    let resp: Vec<(&str, &str)> = vec![
        ("content-type", "video/iso.segment"),
        ("cache-control", "public, max-age=86400, stale-while-revalidate=30"),
        ("etag", "\"5f2a-1c0\""),
        ("date", "Tue, 14 Nov 2023 22:13:20 GMT"),
    ];
    let t0 = 1_700_000_000;
    let meta = StoredMeta::from_response(
        200,
        &resp,
        VaryKey::default(),
        ResponseTimes { request_time: t0, response_time: t0 },
        Some(1_200_000),
        &PolicyConfig::default(),
        None,
    );
    let blob = meta.encode();
    let req = RequestCacheControl::default();
    c.bench_function("decide_fresh_hit", |b| b.iter(|| decide(&req, black_box(&meta), t0 + 5)));
    c.bench_function("meta_decode", |b| b.iter(|| StoredMeta::decode(black_box(&blob))));
    c.bench_function("range_parse_resolve", |b| {
        b.iter(|| {
            parse_range(black_box(b"bytes=1000-65535"))
                .map(|r| r.resolve(Available::Complete(1_200_000)))
        })
    });
}

criterion_group!(benches, cache_control, key, hit_path);
criterion_main!(benches);
