//! Unit tests of the access log: line shapes, dates, and the file sink's batches,
//! reopen, close and drops.

use std::fs::OpenOptions;
use std::time::{Duration, UNIX_EPOCH};

use super::fields::Field;
use super::format::{combined_line, json_line};
use super::time::{clf_time, rfc3339};
use super::*;

fn json_line_all(s: &mut Vec<u8>, e: &Entry<'_>) {
    json_line(s, e, &Field::ALL);
}

fn entry(path: &[u8]) -> Entry<'_> {
    Entry {
        time: UNIX_EPOCH + Duration::from_millis(1_795_000_000_123),
        client: "127.0.0.1:5555".parse().unwrap(),
        peer: None,
        method: "GET",
        host: b"live.example.com",
        target: path,
        protocol: "HTTP/1.1",
        status: 200,
        bytes: 1234,
        cache: "hit",
        origin_time: None,
        total_time: Duration::from_micros(1500),
        user_agent: b"player/1.0",
        refused: None,
        denied: None,
        cmcd: None,
    }
}

fn refused_entry(line: &[u8]) -> Entry<'_> {
    Entry {
        method: "",
        host: b"",
        target: b"",
        protocol: "",
        status: 414,
        bytes: 120,
        cache: "local",
        user_agent: b"",
        refused: Some(Refused { request_line: line, reason: "request line too long" }),
        ..entry(b"")
    }
}

#[test]
fn refused_requests_log_their_line_escaped() {
    let line = b"GET /a\"b\xff\x01";
    let mut s = Vec::new();
    json_line_all(&mut s, &refused_entry(line));
    let v: serde_json::Value = serde_json::from_slice(&s).expect("valid JSON");
    assert_eq!(v["request"], "GET /a\"b\\xff\u{1}");
    assert_eq!(v["error"], "request line too long");
    assert_eq!((v["status"].as_u64(), v["cache"].as_str()), (Some(414), Some("local")));
    let mut s = Vec::new();
    combined_line(&mut s, &refused_entry(line));
    assert_eq!(
        text(s),
        "127.0.0.1 - - [18/Nov/2026:11:06:40 +0000] \"GET /a\\x22b\\xff\\x01\" 414 120 \"-\" \
         \"\" host=\"\" cache=local origin_ms=- total_ms=1.500 error=\"request line too long\"\n"
    );
    let mut s = Vec::new();
    json_line_all(&mut s, &entry(b"/ok"));
    let v: serde_json::Value = serde_json::from_slice(&s).expect("valid JSON");
    assert!(v.get("request").is_none() && v.get("error").is_none(), "{v}");
}

#[test]
fn requests_refused_by_access_rules_log_the_reason() {
    let e = Entry { status: 429, cache: "local", denied: Some("rate_limited"), ..entry(b"/a") };
    let mut s = Vec::new();
    json_line_all(&mut s, &e);
    let v: serde_json::Value = serde_json::from_slice(&s).expect("valid JSON");
    assert_eq!((v["status"].as_u64(), v["denied"].as_str()), (Some(429), Some("rate_limited")));
    let mut s = Vec::new();
    combined_line(&mut s, &e);
    assert!(text(s).ends_with(" denied=rate_limited\n"));
    let mut s = Vec::new();
    json_line_all(&mut s, &entry(b"/ok"));
    let v: serde_json::Value = serde_json::from_slice(&s).expect("valid JSON");
    assert!(v.get("denied").is_none(), "{v}");
}

fn wait_for(p: &std::path::Path, lines: usize) -> String {
    for _ in 0..200 {
        let t = std::fs::read_to_string(p).unwrap_or_default();
        if t.lines().count() >= lines {
            return t;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    std::fs::read_to_string(p).unwrap_or_default()
}

fn text(b: Vec<u8>) -> String {
    String::from_utf8(b).unwrap()
}

fn json_of(path: &[u8]) -> serde_json::Value {
    let mut s = Vec::new();
    json_line_all(&mut s, &entry(path));
    assert_eq!(s.last(), Some(&b'\n'));
    serde_json::from_slice(&s).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&s)))
}

#[test]
fn the_socket_peer_is_logged_when_it_is_not_the_client() {
    let v = json_of(b"/a");
    assert_eq!(v["client"], "127.0.0.1");
    assert!(v.get("peer").is_none(), "{v}");
    let e = Entry { peer: Some("10.0.0.2".parse().unwrap()), ..entry(b"/a") };
    let mut s = Vec::new();
    json_line_all(&mut s, &e);
    let v: serde_json::Value = serde_json::from_slice(&s).expect("valid JSON");
    assert_eq!((v["client"].as_str(), v["peer"].as_str()), (Some("127.0.0.1"), Some("10.0.0.2")));
    let mut s = Vec::new();
    combined_line(&mut s, &e);
    let line = text(s);
    assert!(line.starts_with("127.0.0.1 - - ["), "{line}");
    assert!(line.ends_with(" total_ms=1.500 peer=10.0.0.2\n"), "{line}");
}

#[test]
fn dates_format_in_utc() {
    let mut s = Vec::new();
    rfc3339(&mut s, UNIX_EPOCH + Duration::from_millis(951_782_400_500));
    assert_eq!(text(s), "2000-02-29T00:00:00.500Z");
    let mut s = Vec::new();
    clf_time(&mut s, UNIX_EPOCH + Duration::from_secs(1_795_000_000));
    assert_eq!(text(s), "18/Nov/2026:11:06:40 +0000");
}

#[test]
fn json_lines_are_valid_json_even_with_hostile_bytes() {
    let v = json_of(b"/a\"b\\c\x01\x7f");
    assert_eq!(v["path"], "/a\"b\\c\u{1}\u{7f}");
    assert_eq!(v["status"], 200);
    assert_eq!(v["cache"], "hit");
    assert_eq!(v["time"], "2026-11-18T11:06:40.123Z");
    assert_eq!(v["origin_ms"], serde_json::Value::Null);
    assert_eq!(v["total_ms"], 1.5);
}

#[test]
fn json_keeps_non_ascii_utf8() {
    let path = "/видео/épisode 1/セグメント.ts";
    assert_eq!(json_of(path.as_bytes())["path"], path);
}

#[test]
fn json_writes_invalid_utf8_bytes_as_hex_text() {
    // A lone byte, a truncated sequence after valid text, and a valid sequence between.
    let v = json_of(b"/a\xffb/\xc3\xa9\xe2\x82");
    assert_eq!(v["path"], "/a\\xffb/\u{e9}\\xe2\\x82");
}

#[test]
fn refusals_by_the_access_rules_name_their_reason() {
    let e = Entry { status: 403, cache: "local", denied: Some("token_expired"), ..entry(b"/a.ts") };
    let mut s = Vec::new();
    json_line_all(&mut s, &e);
    let v: serde_json::Value = serde_json::from_slice(&s).expect("valid JSON");
    assert_eq!(v["denied"], "token_expired");
    let mut s = Vec::new();
    combined_line(&mut s, &e);
    assert!(text(s).ends_with(" total_ms=1.500 denied=token_expired\n"));
    let mut s = Vec::new();
    json_line_all(&mut s, &entry(b"/a.ts"));
    assert!(!text(s).contains("denied"), "no field on lines that were not refused");
}

#[test]
fn combined_line_shape() {
    let mut s = Vec::new();
    combined_line(&mut s, &entry(b"/seg_1.ts"));
    assert_eq!(
        text(s),
        "127.0.0.1 - - [18/Nov/2026:11:06:40 +0000] \"GET /seg_1.ts HTTP/1.1\" 200 1234 \"-\" \
         \"player/1.0\" host=\"live.example.com\" cache=hit origin_ms=- total_ms=1.500\n"
    );
}

#[test]
fn close_returns_once_every_handed_over_line_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("access.log");
    let log = AccessLog::open(p.clone(), Format::Json).unwrap();
    // `a` hands over a few batches (the queue holds 64, so none is dropped however slow
    // the writer thread is on a loaded machine).
    let a = LogBuffer::new(log.clone(), 16 * 1024);
    let b = LogBuffer::new(log.clone(), 1024 * 1024);
    for i in 0..1000 {
        a.log(&entry(format!("/a/{i}").as_bytes()));
        b.log(&entry(format!("/b/{i}").as_bytes()));
    }
    // `b` never filled: its lines reach the writer because it is dropped.
    drop((a, b));
    assert!(log.close(Duration::from_secs(30)));
    let t = std::fs::read_to_string(&p).unwrap();
    assert_eq!(t.lines().count(), 2000);
    assert_eq!(log.written_lines(), 2000);
    assert_eq!(log.dropped_lines(), 0);
    assert!(log.close(Duration::ZERO), "a second close is a no-op");
}

#[test]
fn close_gives_up_on_a_stalled_writer() {
    use std::os::unix::fs::OpenOptionsExt;
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("fifo");
    crate::sys::mkfifo(&p).unwrap();
    // A reader that never reads: once the pipe buffer is full, the writer blocks.
    let _reader = OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(&p).unwrap();
    let log = AccessLog::open(p, Format::Json).unwrap();
    let buf = LogBuffer::new(log.clone(), 64 * 1024);
    let long = vec![b'a'; 900];
    for _ in 0..1_000 {
        buf.log(&entry(&long));
    }
    buf.flush();
    assert!(!log.close(Duration::from_millis(200)));
}

#[test]
fn batches_reach_the_file_and_reopen_follows_a_rename() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("access.log");
    let log = AccessLog::open(p.clone(), Format::Json).unwrap();
    let buf = LogBuffer::new(log.clone(), 1024);
    buf.log(&entry(b"/one"));
    buf.flush();
    assert!(wait_for(&p, 1).contains("/one"));
    let rotated = dir.path().join("access.log.1");
    std::fs::rename(&p, &rotated).unwrap();
    log.reopen();
    // The reopen happens before the next batch is written.
    std::thread::sleep(Duration::from_millis(50));
    buf.log(&entry(b"/two"));
    buf.flush();
    let fresh = wait_for(&p, 1);
    assert!(fresh.contains("/two"), "new file has the new line: {fresh:?}");
    assert!(!std::fs::read_to_string(&rotated).unwrap().contains("/two"));
    assert_eq!(log.written_lines(), 2);
}

#[test]
fn a_full_buffer_is_handed_over_without_flush() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("a.log");
    let log = AccessLog::open(p.clone(), Format::Combined).unwrap();
    let buf = LogBuffer::new(log, 1024);
    for _ in 0..20 {
        buf.log(&entry(b"/x"));
    }
    assert!(wait_for(&p, 5).lines().count() >= 5);
}

#[test]
fn a_stalled_disk_drops_and_counts_lines_instead_of_blocking() {
    use std::os::unix::fs::OpenOptionsExt;
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("fifo");
    crate::sys::mkfifo(&p).unwrap();
    // A reader that never reads: once the pipe buffer is full, the writer blocks.
    let _reader = OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(&p).unwrap();
    let log = AccessLog::open(p, Format::Json).unwrap();
    let buf = LogBuffer::new(log.clone(), 1024);
    let long = vec![b'a'; 900];
    for _ in 0..5_000 {
        buf.log(&entry(&long));
    }
    assert!(log.dropped_lines() > 0, "lines are dropped, the worker goes on");
}

#[test]
fn the_default_fields_write_the_line_reel_always_wrote_and_a_choice_reorders_it() {
    let e = Entry { peer: Some("10.0.0.2".parse().unwrap()), ..entry(b"/seg_1.ts") };
    let mut s = Vec::new();
    json_line(&mut s, &e, &Layout::default().fields);
    assert_eq!(
        text(s),
        "{\"time\":\"2026-11-18T11:06:40.123Z\",\"client\":\"127.0.0.1\",\"peer\":\"10.0.0.2\",\
         \"method\":\"GET\",\"host\":\"live.example.com\",\"path\":\"/seg_1.ts\",\"protocol\":\
         \"HTTP/1.1\",\"status\":200,\"bytes\":1234,\"cache\":\"hit\",\"origin_ms\":null,\
         \"total_ms\":1.500,\"ua\":\"player/1.0\"}\n"
    );
    // A field with nothing to say first: no stray comma.
    let fields = [Field::Denied, Field::Status, Field::Peer, Field::Path];
    let mut s = Vec::new();
    json_line(&mut s, &entry(b"/a"), &fields);
    assert_eq!(text(s), "{\"status\":200,\"path\":\"/a\"}\n");
    let mut s = Vec::new();
    json_line(&mut s, &entry(b"/a"), &[Field::Denied]);
    assert_eq!(text(s), "{}\n");
    assert_eq!(Field::from_name("origin_ms"), Some(Field::OriginMs));
    assert_eq!(Field::from_name("nope"), None);
}

#[test]
fn sampling_leaves_lines_out_and_counts_them() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("a.log");
    let log = AccessLog::open(p.clone(), Format::Json).unwrap();
    let layout = Layout {
        fields: vec![Field::Path],
        sample: Sample::from_fractions([1.0, 0.1, 1.0, 1.0, 1.0]),
    };
    let buf = LogBuffer::with_layout(log.clone(), 64 * 1024, std::sync::Arc::new(layout));
    for i in 0..30 {
        buf.log(&entry(format!("/{i}").as_bytes()));
    }
    buf.log(&Entry { status: 404, ..entry(b"/missing") });
    drop(buf);
    assert!(log.close(Duration::from_secs(30)));
    assert_eq!(
        std::fs::read_to_string(&p).unwrap(),
        "{\"path\":\"/0\"}\n{\"path\":\"/10\"}\n{\"path\":\"/20\"}\n{\"path\":\"/missing\"}\n"
    );
    assert_eq!(log.sampled_out(), 27);
}
