//! Issue 44.3: `reel --origin URL` outside the repository (no `--config`, no
//! `config/reel.toml` in the working directory) runs on built-in defaults, the shipped
//! config without its demo, and says so in its first log line.

use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, TcpListener, UdpSocket};
use std::process::{Command, Stdio};
use std::sync::mpsc;

use reel_test_support::skip;

use crate::common::*;

/// The shipped config's addresses, which the built-in defaults keep.
const DATA: &str = "127.0.0.1:8080";

/// Whether the built-in defaults' ports are free here (another server may hold them).
fn ports_free() -> Result<(), String> {
    for a in ["127.0.0.1:8080", "127.0.0.1:8443", "127.0.0.1:9090"] {
        TcpListener::bind(a).map_err(|e| format!("TCP {a}: {e}"))?;
    }
    UdpSocket::bind("127.0.0.1:8443").map_err(|e| format!("UDP 127.0.0.1:8443: {e}"))?;
    Ok(())
}

/// Kills the child when dropped, also when an assertion fails.
struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn origin_flag_runs_on_built_in_defaults_outside_the_repository() {
    let dir = tempfile::tempdir().unwrap();
    // Without `--origin` there is nothing to serve: refused as bad usage, saying what to do.
    let out = Command::new(BIN).current_dir(dir.path()).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(64), "{err}");
    assert!(err.contains("give --config FILE, or --origin URL"), "{err}");

    if let Err(why) = ports_free() {
        return skip(&format!("the built-in defaults' ports are taken: {why}"));
    }
    let origin = Origin::start("yours");
    origin.put("/seg/1.ts", Object::ok("segment one").header("cache-control", "max-age=60"));
    let child = Command::new(BIN)
        .arg("--origin")
        .arg(format!("http://{}", origin.addr))
        .current_dir(dir.path())
        .env_remove("RUST_LOG")
        .env_remove("NOTIFY_SOCKET")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut child = Killed(child);
    let (tx, rx) = mpsc::channel();
    let stderr = child.0.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut lines: Vec<String> = Vec::new();
    while !lines.last().is_some_and(|l| l.contains("reel is serving")) {
        match rx.recv_timeout(PATIENCE) {
            Ok(l) => lines.push(l),
            Err(e) => panic!("no `reel is serving` ({e}):\n{}", lines.join("\n")),
        }
    }
    let first = &lines[0];
    assert!(
        first.contains("no --config given")
            && first.contains("running on built-in defaults")
            && first.contains(&format!("data on {DATA}"))
            && first.contains("store ./var/cache"),
        "the first log line says so: {}",
        lines.join("\n")
    );
    // The store and the access log are where the line says, under the working directory.
    assert!(dir.path().join("var/cache").is_dir());

    let data: SocketAddr = DATA.parse().unwrap();
    let miss = request(data, "GET", "video.example.com", "/seg/1.ts", &[]);
    assert_eq!((miss.status, miss.text().as_str()), (200, "segment one"));
    // Stored once the fill completes: then a hit, and the origin was asked once.
    let hit = eventually("a hit", || {
        let r = request(data, "GET", "video.example.com", "/seg/1.ts", &[]);
        r.cache_status().contains("hit").then_some(r)
    });
    assert_eq!(hit.text(), "segment one");
    assert_eq!(origin.hits("/seg/1.ts"), 1, "one origin fetch");
    drop(child);
}
