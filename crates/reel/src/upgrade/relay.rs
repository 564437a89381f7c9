//! The successor's standard error while an upgrade is under way: a pipe this process reads
//! line by line, writing each line to its own standard error as it comes (where the
//! successor's would have gone) and keeping the last ones, so a successor that fails can
//! be reported with its own words. Once the successor serves it is handed this process's
//! standard error (`Msg::Stderr`) and the pipe closes.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read, Write};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

/// Lines kept for a failure report.
const KEEP: usize = 50;

/// A running relay.
pub(super) struct Relay {
    lines: Arc<Mutex<VecDeque<String>>>,
    closed: mpsc::Receiver<()>,
}

impl Relay {
    /// Relays `from` (the successor's standard error) on a thread of its own.
    pub(super) fn start(from: impl Read + Send + 'static) -> std::io::Result<Relay> {
        let lines = Arc::new(Mutex::new(VecDeque::with_capacity(KEEP)));
        let (tx, closed) = mpsc::channel();
        let kept = lines.clone();
        std::thread::Builder::new().name("reel-upgrade-log".into()).spawn(move || {
            for line in BufReader::new(from).split(b'\n') {
                let Ok(mut line) = line else { break };
                line.push(b'\n');
                let _ = std::io::stderr().lock().write_all(&line);
                let text = String::from_utf8_lossy(&line).trim_end().to_owned();
                if let Ok(mut k) = kept.lock() {
                    if k.len() == KEEP {
                        k.pop_front();
                    }
                    k.push_back(text);
                }
            }
            let _ = tx.send(());
        })?;
        Ok(Relay { lines, closed })
    }

    /// The lines the successor wrote that report a problem (everything but its JSON log
    /// lines below `WARN`), once its standard error closed or `wait` passed.
    pub(super) fn problems(&self, wait: Duration) -> Vec<String> {
        let _ = self.closed.recv_timeout(wait);
        let lines = self.lines.lock().map(|l| l.clone()).unwrap_or_default();
        lines.into_iter().filter(|l| !l.is_empty() && !informational(l)).collect()
    }
}

/// A JSON log line at `INFO`, `DEBUG` or `TRACE`.
fn informational(line: &str) -> bool {
    serde_json::from_str::<serde_json::Value>(line)
        .ok()
        .and_then(|v| v["level"].as_str().map(|l| matches!(l, "INFO" | "DEBUG" | "TRACE")))
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn problems_are_the_lines_that_are_not_information() {
        let text = "{\"level\":\"INFO\",\"fields\":{\"message\":\"hi\"}}\n\
                    reel.toml:3:1: bogus: unknown key\n\
                    {\"level\":\"ERROR\",\"fields\":{\"message\":\"no\"}}\n";
        let r = Relay::start(std::io::Cursor::new(text.as_bytes().to_vec())).unwrap();
        let p = r.problems(Duration::from_secs(5));
        assert_eq!(p.len(), 2, "{p:?}");
        assert!(p[0].contains("bogus"), "{p:?}");
    }
}
