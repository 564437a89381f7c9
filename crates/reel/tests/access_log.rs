//! The access log: JSON lines with the documented fields, and reopening after a rename
//! on SIGUSR1 (logrotate's `postrotate`).

use serde_json::Value;

use crate::common::*;

fn lines(path: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

#[test]
fn json_lines_and_reopen_on_sigusr1() {
    let dir = tempfile::tempdir().unwrap();
    let o = Origin::start("a");
    o.put("/al/seg.ts", Object::ok("abc"));
    let reel = Reel::start(&Conf::new(dir.path(), &o));
    let log = dir.path().join("access.log");
    let r = request(reel.data, "GET", "127.0.0.1", "/al/seg.ts?x=1", &[("user-agent", "t/1")]);
    assert_eq!(r.status, 200);
    let l = eventually("the line in the access log", || {
        lines(&log).into_iter().find(|v| v["path"] == "/al/seg.ts?x=1")
    });
    assert_eq!(l["method"], "GET");
    assert_eq!(l["host"], "127.0.0.1");
    assert_eq!(l["status"], 200);
    assert_eq!(l["cache"], "miss");
    assert_eq!(l["client"], "127.0.0.1");
    assert_eq!(l["ua"], "t/1");
    assert!(l["bytes"].as_u64().unwrap() >= 3);
    assert!(l["origin_ms"].is_number() && l["total_ms"].is_number(), "{l}");
    assert!(l["time"].as_str().unwrap().ends_with('Z'));

    // logrotate: rename, then SIGUSR1; new lines go to a new file at the old path.
    let rotated = dir.path().join("access.log.1");
    std::fs::rename(&log, &rotated).unwrap();
    reel.signal(libc::SIGUSR1);
    reel.logs.wait_for("the reopen", |v| message(v) == "reopening the access log");
    eventually("lines in the new file", || {
        // Requests until one lands after the writer reopened.
        assert_eq!(get(reel.data, "/al/seg.ts").status, 200);
        lines(&log).into_iter().find(|v| v["path"] == "/al/seg.ts" && v["cache"] == "hit")
    });
    assert!(lines(&rotated).iter().any(|v| v["path"] == "/al/seg.ts?x=1"));
}
