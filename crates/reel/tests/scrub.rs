//! The store scrub in a running server: a byte flipped inside a stored body on disk is
//! found by the background scrub (turned on by a live reload), the object is dropped, and
//! the next request fetches it from the origin again, intact.

use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::common::*;

/// Where `data` starts in the volume files under `dir`: bodies start on 4 KiB boundaries.
fn find_body(dir: &Path, data: &[u8]) -> (PathBuf, u64) {
    let probe = &data[..256];
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_none_or(|x| x != "dat") {
            continue;
        }
        let bytes = std::fs::read(&p).unwrap();
        if let Some(at) = (0..bytes.len()).step_by(4096).find(|&at| bytes[at..].starts_with(probe))
        {
            return (p, at as u64);
        }
    }
    panic!("body not found in the volumes under {}", dir.display());
}

#[test]
fn a_corrupt_stored_body_is_dropped_and_fetched_again() {
    let dir = tempfile::tempdir().unwrap();
    let origin = Origin::start("o");
    let mut x = 0x2545_f491_4f6c_dd1d_u64;
    let data: Vec<u8> = (0..300 * 1024)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    origin.put("/v/scrub.ts", Object::ok(data.clone()));
    let mut conf = Conf::new(dir.path(), &origin);
    conf.store = "scrub_rate = \"0\"\n".into();
    let mut reel = Reel::start(&conf);

    let r = get(reel.data, "/v/scrub.ts");
    assert_eq!(r.status, 200);
    assert!(r.body == data, "wrong body from the origin");
    eventually("a hit", || {
        let r = get(reel.data, "/v/scrub.ts");
        assert!(r.body == data, "wrong body");
        r.cache_status().contains("hit").then_some(())
    });
    assert_eq!(origin.hits("/v/scrub.ts"), 1);
    assert_eq!(reel.status()["store"]["scrub"]["rate"], 0);

    let (file, at) = find_body(&dir.path().join("store"), &data);
    let f = std::fs::OpenOptions::new().read(true).write(true).open(&file).unwrap();
    let mut b = [0u8; 1];
    f.read_exact_at(&mut b, at + 12_345).unwrap();
    f.write_all_at(&[b[0] ^ 0x01], at + 12_345).unwrap();
    drop(f);

    // Turned on by a reload, no restart.
    conf.store = "scrub_rate = \"64MiB\"\n".into();
    reel.rewrite(&conf);
    let st = reel.sighup_reload();
    assert_eq!(st["reload"]["last_ok"], true, "{st}");
    assert_eq!(st["reload"]["needs_restart"], serde_json::json!([]), "{st}");
    assert_eq!(reel.status()["store"]["scrub"]["rate"], 64 << 20);
    eventually("the scrub finds the corrupt body", || {
        let m = reel.metrics();
        (metric(&m, "reel_store_scrub_corrupt_total") == Some(1.0)).then_some(())
    });
    let logged = reel.logs.wait_for("the scrub's warning", |v| {
        message(v) == "store scrub: object corrupt on disk, removed"
            && v["fields"]["key"].as_str().is_some_and(|k| k.contains("/v/scrub.ts"))
    });
    assert_eq!(logged["level"], "WARN", "{logged}");
    let m = reel.metrics();
    assert!(metric(&m, "reel_store_scrub_objects_total").is_some_and(|n| n >= 1.0), "{m}");
    assert!(metric(&m, "reel_store_scrub_bytes_total").is_some_and(|n| n >= 300.0 * 1024.0));

    // Never served again from the store: a miss, fetched again, intact.
    let r = get(reel.data, "/v/scrub.ts");
    assert_eq!(r.status, 200);
    assert!(r.body == data, "the corrupt body was served");
    assert!(r.cache_status().contains("fwd=miss"), "{}", r.cache_status());
    assert_eq!(origin.hits("/v/scrub.ts"), 2);
    eventually("a hit on the new copy", || {
        let r = get(reel.data, "/v/scrub.ts");
        assert!(r.body == data, "wrong body");
        r.cache_status().contains("hit").then_some(())
    });
    assert_eq!(reel.status()["store"]["scrub"]["corrupt"], 1);
}
