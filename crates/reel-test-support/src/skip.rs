//! Tests that cannot run on this machine say so where CI sees it.

use std::io::Write as _;

/// Reports the calling test as skipped: `SKIPPED <test>: <why>`, written straight to
/// standard error. The harness captures `eprintln!` of a passing test, so a skip printed
/// that way never shows; this line does, and `.ci/run` counts such lines. The test's name
/// is its thread's name, so call this from the test's own thread (the thread of a
/// `#[test]`, or of the body of a `#[tokio::test]`), then return.
pub fn skip(why: &str) {
    let test = std::thread::current().name().unwrap_or("?").to_owned();
    let _ = std::io::stderr().write_all(format!("SKIPPED {test}: {why}\n").as_bytes());
}
