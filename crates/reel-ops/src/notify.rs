//! systemd's readiness protocol (`sd_notify(3)`): `READY=1`, `RELOADING=1` with
//! `MONOTONIC_USEC`, `STOPPING=1` and `STATUS=` sent as datagrams to `$NOTIFY_SOCKET`.
//!
//! Written by hand because it is one datagram on a Unix socket; a no-op when reel is not
//! started by systemd (no `NOTIFY_SOCKET`).

use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixDatagram};

/// Sends `state` (newline-separated `KEY=VALUE` lines) to systemd, if it is listening.
/// Returns whether a message was sent.
pub fn notify(state: &str) -> bool {
    let Some(path) = std::env::var_os("NOTIFY_SOCKET") else { return false };
    let bytes = path.as_encoded_bytes();
    let addr = match bytes.first() {
        Some(b'@') => SocketAddr::from_abstract_name(&bytes[1..]),
        Some(b'/') => SocketAddr::from_pathname(&path),
        _ => return false,
    };
    let Ok(addr) = addr else { return false };
    let Ok(sock) = UnixDatagram::unbound() else { return false };
    sock.send_to_addr(state.as_bytes(), &addr).is_ok()
}

/// `READY=1`: start-up finished, listeners bound.
pub fn ready() -> bool {
    notify("READY=1\nSTATUS=serving")
}

/// `RELOADING=1` with the CLOCK_MONOTONIC time systemd needs for `Type=notify-reload`.
pub fn reloading() -> bool {
    notify(&format!("RELOADING=1\nMONOTONIC_USEC={}", monotonic_usec()))
}

/// `STOPPING=1`: shutdown has begun.
pub fn stopping() -> bool {
    notify("STOPPING=1")
}

/// `MAINPID=`: after a binary upgrade, `pid` (the successor) is the service's main
/// process; systemd watches it from now on (sent by the current main process, which
/// `NotifyAccess=main` accepts).
pub fn main_pid(pid: u32) -> bool {
    notify(&format!("MAINPID={pid}\nSTATUS=serving (upgraded)"))
}

/// `STATUS=`: a free-form line `systemctl status` shows.
pub fn status(text: &str) -> bool {
    notify(&format!("STATUS={text}"))
}

fn monotonic_usec() -> u64 {
    crate::sys::monotonic_usec()
}

#[cfg(test)]
// The test changes the process environment, which Rust 2024 makes unsafe.
#[allow(unsafe_code)]
mod tests {
    use super::*;

    #[test]
    fn messages_reach_a_listening_socket() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("notify.sock");
        let rx = UnixDatagram::bind(&p).unwrap();
        // SAFETY: this is the only test in this binary that touches the environment, and
        // no other thread reads NOTIFY_SOCKET while it changes.
        unsafe { std::env::set_var("NOTIFY_SOCKET", &p) };
        assert!(reloading());
        let mut buf = [0u8; 256];
        let n = rx.recv(&mut buf).unwrap();
        let msg = std::str::from_utf8(&buf[..n]).unwrap();
        assert!(msg.starts_with("RELOADING=1\nMONOTONIC_USEC="), "{msg}");
        assert!(ready());
        let n = rx.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"READY=1\nSTATUS=serving");
        assert!(main_pid(77));
        let n = rx.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"MAINPID=77\nSTATUS=serving (upgraded)");
        // SAFETY: as for set_var above.
        unsafe { std::env::remove_var("NOTIFY_SOCKET") };
        assert!(!stopping());
    }
}
