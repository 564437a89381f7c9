//! Tests that cannot run on this machine say so where CI sees it.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Reports the calling test as skipped: `SKIPPED <test>: <why>`, written straight to
/// standard error. The harness captures `eprintln!` of a passing test, so a skip printed
/// that way never shows; this line does, and `.ci/run` counts such lines. The test's name
/// is its thread's name, so call this from the test's own thread (the thread of a
/// `#[test]`, or of the body of a `#[tokio::test]`), then return.
pub fn skip(why: &str) {
    let test = std::thread::current().name().unwrap_or("?").to_owned();
    let _ = std::io::stderr().write_all(format!("SKIPPED {test}: {why}\n").as_bytes());
}

/// The path of the executable `cmd` in `PATH`, if there is one.
pub fn which(cmd: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|d| Path::new(d).join(cmd))
        .find(|p| p.is_file())
}

/// Whether `tool` (`ffmpeg` or `ffprobe`) runs here. When it does not, the calling test is
/// reported skipped with [`skip`], or fails if `REEL_REQUIRE_FFMPEG` is set (a machine
/// that must run the player checks).
pub fn have_ffmpeg(tool: &str) -> bool {
    let ok = Command::new(tool)
        .arg("-version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        assert!(
            std::env::var_os("REEL_REQUIRE_FFMPEG").is_none(),
            "{tool} is required (REEL_REQUIRE_FFMPEG) but not installed"
        );
        skip(&format!("{tool} is not installed (apt-get install -y ffmpeg)"));
    }
    ok
}

/// The path of the executable `cmd`, looked up in `PATH` and the `sbin` directories. When
/// it is missing and this process may install packages (root, with `apt-get`), Debian's
/// `package` is installed first. `None` when it is still missing: the calling test is then
/// reported skipped with [`skip`] (call this from the test's own thread).
pub fn tool_or_install(cmd: &str, package: &str) -> Option<PathBuf> {
    let find = || {
        which(cmd).or_else(|| {
            ["/usr/sbin", "/sbin", "/usr/bin"]
                .iter()
                .map(|d| Path::new(d).join(cmd))
                .find(|p| p.is_file())
        })
    };
    if let Some(p) = find() {
        return Some(p);
    }
    let root = std::fs::read_to_string("/proc/self/status").is_ok_and(|s| {
        s.lines().any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0"))
    });
    if root && which("apt-get").is_some() {
        let _ = Command::new("apt-get")
            .args(["install", "-y", "--no-install-recommends", package])
            .env("DEBIAN_FRONTEND", "noninteractive")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
    let found = find();
    if found.is_none() {
        skip(&format!("{cmd} is not installed and could not be (apt-get install -y {package})"));
    }
    found
}
