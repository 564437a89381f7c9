//! CORS in a real browser: `benches/browser-cors.sh` runs this build's binary with its demo
//! origin and a `[site.cors]` site, serves a player page from another port, and has headless
//! Chromium read a playlist, a segment by `Range` and a segment with CMCD fields (after a
//! preflight), then refuses a page of an origin the site does not allow. The script installs
//! Debian's `chromium` when missing and says `SKIPPED` where it cannot.

use std::path::Path;
use std::process::Command;

use reel_test_support::skip;

use crate::common::BIN;

#[test]
fn a_player_page_on_another_origin_reads_through_cors_and_a_stranger_is_refused() {
    if !cfg!(feature = "demo") {
        // The page plays from the built-in demo origin, which this build leaves out.
        return skip("built without the demo origin (cargo feature `demo`)");
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../benches/browser-cors.sh");
    let out = Command::new("bash")
        .arg(&script)
        .env("SKIP_BUILD", "1")
        .env("REEL_BIN", BIN)
        .output()
        .expect("run benches/browser-cors.sh");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    if let Some(why) = stdout.lines().find_map(|l| l.strip_prefix("SKIPPED browser-cors: ")) {
        return skip(why);
    }
    assert!(out.status.success(), "browser-cors.sh failed:\n{stdout}\n{stderr}");
    assert!(stdout.lines().any(|l| l == "browser-cors: ok"), "{stdout}\n{stderr}");
    // The checks it ran, each passed: both pages' reads and the preflights seen at the edge.
    let passed = stdout.lines().filter(|l| l.starts_with("ok      ")).count();
    assert_eq!(passed, 12, "{stdout}");
}
