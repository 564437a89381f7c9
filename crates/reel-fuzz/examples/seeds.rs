//! Writes the seed inputs of the targets whose inputs are made by reel's own encoders:
//! metadata blobs, volume files and a checkpoint of a real store, TLS records and
//! ClientHellos (`cargo run -p reel-fuzz --example seeds -- DIR`, into `DIR/<target>/`;
//! `docs/fuzzing.md`). The text targets' seeds are written by hand.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use reel_cache::policy::freshness::PolicyConfig;
use reel_cache::policy::meta::{ResponseTimes, StoredMeta};
use reel_cache::policy::vary::VaryKey;
use reel_store::{IoMode, Store, StoreConfig};
use reel_tls::record::{Cipher, DirectionKeys, Sealer, SessionKeys, Version};

fn main() {
    let out = PathBuf::from(std::env::args().nth(1).expect("usage: seeds DIR"));
    stored_meta(&out.join("stored_meta"));
    store(&out.join("store_volume"), &out.join("store_checkpoint"));
    tls_record(&out.join("tls_record"));
    client_hello(&out.join("client_hello"));
}

fn write(dir: &Path, name: &str, bytes: &[u8]) {
    std::fs::create_dir_all(dir).expect("seed folder");
    std::fs::write(dir.join(name), bytes).expect("seed file");
}

fn stored_meta(dir: &Path) {
    let times = ResponseTimes { request_time: 1_795_391_999, response_time: 1_795_392_000 };
    let cfg = PolicyConfig::default();
    type Head<'a> = (u16, &'a [(&'a str, &'a str)], Option<u64>);
    let heads: [Head; 5] = [
        (
            200,
            &[
                ("content-type", "video/mp2t"),
                ("cache-control", "public, max-age=86400"),
                ("etag", "\"5f-1a\""),
                ("last-modified", "Mon, 23 Nov 2026 10:00:00 GMT"),
            ],
            Some(1_880_000),
        ),
        (
            200,
            &[
                ("content-type", "application/vnd.apple.mpegurl"),
                ("cache-control", "max-age=1, stale-while-revalidate=2"),
                ("cdn-cache-control", "max-age=2"),
                ("vary", "accept-encoding"),
                ("date", "Mon, 23 Nov 2026 11:59:59 GMT"),
            ],
            None,
        ),
        (404, &[("cache-control", "no-cache=\"set-cookie\", private=\"x-user\"")], Some(9)),
        (
            206,
            &[("content-range", "bytes 0-99/1000"), ("expires", "Thu, 01 Jan 2037 00:00:00 GMT")],
            Some(100),
        ),
        (200, &[("vary", "*"), ("age", "30"), ("x-extension", "\u{7f}")], Some(0)),
    ];
    for (i, (status, headers, len)) in heads.into_iter().enumerate() {
        let m =
            StoredMeta::from_response(status, headers, VaryKey::default(), times, len, &cfg, None);
        write(dir, &format!("seed-{i}"), &m.encode());
    }
}

/// A store of 1 MiB volumes filled with objects, a metadata refresh, a removal, a purge
/// and an unfinished fill, closed (its checkpoint written); each volume's first 48 KiB
/// (the fuzzer's longest input) and the checkpoint are the seeds.
fn store(volumes: &Path, checkpoint: &Path) {
    let tmp = tempfile::tempdir().expect("store folder");
    let s = Store::open(StoreConfig::single(tmp.path(), 4 << 20, 1 << 20, IoMode::Threads))
        .expect("open the store");
    s.wait_loaded();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    rt.block_on(async {
        for (i, len) in [10usize, 5000, 0, 4096, 12_000].into_iter().enumerate() {
            put(&s, format!("host/seg_{i}.ts").as_bytes(), &vec![i as u8; len], true).await;
        }
        put(&s, b"host/live.m3u8", b"#EXTM3U\n", false).await;
        s.update_meta(b"host/seg_1.ts", Bytes::from_static(b"refreshed")).await.expect("meta");
        s.remove(b"host/seg_2.ts").await.expect("remove");
        s.remove_prefix(b"host/old/").await.expect("purge");
        let mut open = s.begin_fill(b"host/open.ts", Bytes::new(), None).await.expect("fill");
        open.append(Bytes::from_static(b"partial")).await.expect("append");
        open.flush().await.expect("flush");
        std::mem::forget(open);
    });
    s.close().expect("close the store");
    let mut n = 0;
    for e in std::fs::read_dir(tmp.path()).expect("store files") {
        let p = e.expect("store file").path();
        let bytes = std::fs::read(&p).expect("read a store file");
        let name = p.file_name().expect("a file name").to_string_lossy().into_owned();
        if name == "index.ckpt" {
            write(checkpoint, "seed-0", &[[0u8].as_slice(), &bytes].concat());
        } else if bytes.len() >= 1 << 20 && bytes[..8] == *b"REELVOL\0" {
            write(volumes, &format!("seed-{n}"), &[[0u8].as_slice(), &bytes[..48 << 10]].concat());
            // The header block, then the records from the first that is not an object on
            // (metadata, tombstone, purge, the unfinished fill), as if they came first.
            let mut off = 4096;
            while off + 72 <= bytes.len() && bytes[off..off + 4] == *b"REC1" && bytes[off + 6] == 1
            {
                off +=
                    u64::from_le_bytes(bytes[off + 48..off + 56].try_into().expect("8")) as usize;
            }
            let tail = &bytes[off..(off + (44 << 10)).min(bytes.len())];
            write(
                volumes,
                &format!("seed-{n}-small"),
                &[&[0u8][..], &bytes[..4096], tail].concat(),
            );
            n += 1;
        }
    }
}

async fn put(s: &Arc<Store>, key: &[u8], body: &[u8], known: bool) {
    let len = known.then_some(body.len() as u64);
    let mut w = s.begin_fill(key, Bytes::from_static(b"meta"), len).await.expect("fill");
    w.append(Bytes::copy_from_slice(body)).await.expect("append");
    w.commit().await.expect("commit");
}

/// For each suite: a record sealed with the target's keys (to open as received), and the
/// plaintext to seal and open.
fn tls_record(dir: &Path) {
    for suite in 0u8..6 {
        let version = if suite & 1 == 0 { Version::Tls12 } else { Version::Tls13 };
        let cipher = match (suite >> 1) % 3 {
            0 => Cipher::Aes128Gcm,
            1 => Cipher::Aes256Gcm,
            _ => Cipher::Chacha20Poly1305,
        };
        let len = if cipher == Cipher::Aes128Gcm { 16 } else { 32 };
        let k = DirectionKeys { cipher, key: vec![0x5a; len], iv: [0xa5; 12], seq: 0 };
        let keys = SessionKeys { version, tx: k.clone(), rx: k };
        let mut sealer = Sealer::new(&keys).expect("a sealer");
        let mut input = vec![suite, 0, 0, 0];
        for body in [&b"GET / HTTP/1.1\r\nhost: a\r\n\r\n"[..], b"", &[0u8; 40]] {
            let (h, t) = (sealer.head_room(), sealer.tail_room());
            let mut rec = vec![0u8; h + body.len() + t];
            rec[h..h + body.len()].copy_from_slice(body);
            let n = sealer.seal(23, &mut rec, body.len()).expect("seal");
            input.extend_from_slice(&rec[..n]);
        }
        write(dir, &format!("seed-open-{suite}"), &input);
        let seal = [&[suite, 1 | (23 << 1), 0, 0][..], b"HTTP/1.1 200 OK\r\n\r\n"].concat();
        write(dir, &format!("seed-seal-{suite}"), &seal);
    }
}

/// ClientHellos rustls sends: TLS 1.3 and 1.2, with a DNS name, whole and split over two
/// records.
fn client_hello(dir: &Path) {
    use rustls::pki_types::ServerName;
    let provider = reel_tls::cert::provider();
    let versions: [&[&rustls::SupportedProtocolVersion]; 2] =
        [&[&rustls::version::TLS13, &rustls::version::TLS12], &[&rustls::version::TLS12]];
    for (i, v) in versions.into_iter().enumerate() {
        let mut cfg = rustls::ClientConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(v)
            .expect("versions")
            .with_root_certificates(rustls::RootCertStore::empty())
            .with_no_client_auth();
        cfg.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        let name = ServerName::try_from("video.example.com").expect("a name");
        let mut c = rustls::ClientConnection::new(Arc::new(cfg), name).expect("a client");
        let mut hello = Vec::new();
        c.write_tls(&mut hello).expect("the ClientHello");
        write(dir, &format!("seed-rustls-{i}"), &hello);
        // The same handshake message over two records.
        let msg = &hello[5..];
        let (a, b) = msg.split_at(msg.len() / 2);
        let mut split = Vec::new();
        for part in [a, b] {
            split.extend_from_slice(&[22, 3, 1]);
            split.extend_from_slice(&(part.len() as u16).to_be_bytes());
            split.extend_from_slice(part);
        }
        write(dir, &format!("seed-rustls-split-{i}"), &split);
    }
}
