//! Waiting for an observable condition, with a deadline that fails the test clearly.
//!
//! A fixed sleep that is long enough on an idle machine is too short on a loaded CI
//! machine, and needlessly long everywhere else; a poll returns as soon as the condition
//! holds. Polls start at 1 ms and back off to 50 ms, so a cheap condition is seen at once
//! and an expensive one (a request to the server under test) is not asked in a busy loop.

use std::time::{Duration, Instant};

/// How long anything that should happen "soon" may take on a loaded machine before a
/// test gives up on it.
pub const PATIENCE: Duration = Duration::from_secs(30);

/// Longest pause between two polls.
const MAX_POLL: Duration = Duration::from_millis(50);

/// Polls `f` until it returns `Some`, and returns that; panics with "timed out waiting
/// for `what`" after [`PATIENCE`].
pub fn eventually<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + PATIENCE;
    let mut pause = Duration::from_millis(1);
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(pause);
        pause = (pause * 2).min(MAX_POLL);
    }
}

/// Polls `cond` until it holds; panics with "timed out waiting for `what`" after
/// [`PATIENCE`].
pub fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    eventually(what, || cond().then_some(()))
}

/// [`wait_until`] inside a tokio runtime: the pauses are tokio sleeps, so the runtime's
/// other tasks (a client the test spawned, a server on the same thread) go on meanwhile.
pub async fn wait_until_async(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + PATIENCE;
    let mut pause = Duration::from_millis(1);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(MAX_POLL);
    }
}
