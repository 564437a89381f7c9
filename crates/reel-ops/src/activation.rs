//! Descriptors a process inherits at `exec`: systemd socket activation
//! (`sd_listen_fds(3)`: `LISTEN_PID`, `LISTEN_FDS`, `LISTEN_FDNAMES`, descriptors from 3
//! on) and a descriptor named by our own environment (the control socket a binary
//! upgrade passes to its successor).
//!
//! Taking ownership of a descriptor number is only sound for descriptors the process
//! inherited and nothing in it opened: every number is taken at most once per process
//! (a registry in `sys` refuses the second taker), is checked to be open, and gets
//! `FD_CLOEXEC` so it is not passed on further by accident.

use std::os::fd::{OwnedFd, RawFd};

/// The first descriptor systemd passes (`SD_LISTEN_FDS_START`).
pub const LISTEN_FDS_START: RawFd = 3;

/// Why inherited descriptors could not be taken.
#[derive(Debug, thiserror::Error)]
pub enum ActivationError {
    /// A variable of the protocol does not parse.
    #[error("{var}={value:?}: {why}")]
    Malformed {
        /// The variable.
        var: &'static str,
        /// Its value.
        value: String,
        /// What is wrong.
        why: &'static str,
    },
    /// The descriptor is not open, or was taken already.
    #[error("inherited descriptor {fd}: {source}")]
    Descriptor {
        /// The number.
        fd: RawFd,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

/// One socket systemd passed, with its `FileDescriptorName=` when it set one.
#[derive(Debug)]
pub struct Activated {
    /// The socket.
    pub fd: OwnedFd,
    /// Its name from `LISTEN_FDNAMES` (systemd's default `unknown` counts as none).
    pub name: Option<String>,
}

/// The descriptor numbers and names systemd's variables describe for process `pid`;
/// empty when the variables are absent or meant for another process (a parent that
/// did not clear them).
pub fn parse_listen_fds(
    listen_pid: Option<&str>,
    listen_fds: Option<&str>,
    names: Option<&str>,
    pid: u32,
) -> Result<Vec<(RawFd, Option<String>)>, ActivationError> {
    let (Some(p), Some(n)) = (listen_pid, listen_fds) else { return Ok(Vec::new()) };
    let bad = |var, value: &str, why| ActivationError::Malformed { var, value: value.into(), why };
    let p: u32 = p.trim().parse().map_err(|_| bad("LISTEN_PID", p, "not a process id"))?;
    if p != pid {
        return Ok(Vec::new());
    }
    let count: RawFd = n.trim().parse().map_err(|_| bad("LISTEN_FDS", n, "not a count"))?;
    if !(0..=4096).contains(&count) {
        return Err(bad("LISTEN_FDS", n, "out of range"));
    }
    let names: Vec<&str> = names.map(|s| s.split(':').collect()).unwrap_or_default();
    Ok((0..count)
        .map(|i| {
            let name = names
                .get(i as usize)
                .filter(|n| !n.is_empty() && **n != "unknown")
                .map(|n| (*n).to_string());
            (LISTEN_FDS_START + i, name)
        })
        .collect())
}

/// Takes the sockets of systemd socket activation, if this process was given any.
pub fn listen_fds() -> Result<Vec<Activated>, ActivationError> {
    let var = |k| std::env::var(k).ok();
    let fds = parse_listen_fds(
        var("LISTEN_PID").as_deref(),
        var("LISTEN_FDS").as_deref(),
        var("LISTEN_FDNAMES").as_deref(),
        std::process::id(),
    )?;
    fds.into_iter().map(|(fd, name)| Ok(Activated { fd: take_inherited(fd)?, name })).collect()
}

/// Takes ownership of descriptor `fd`, inherited at `exec` and named by the environment
/// (systemd's variables, or the variable a predecessor process set). Fails if it is not open
/// or was taken before in this process. Sets `FD_CLOEXEC`.
pub fn take_inherited(fd: RawFd) -> Result<OwnedFd, ActivationError> {
    crate::sys::take_inherited_fd(fd).map_err(|source| ActivationError::Descriptor { fd, source })
}

#[cfg(test)]
mod tests {
    use std::os::fd::{AsRawFd, IntoRawFd};

    use super::*;

    #[test]
    fn variables_for_this_process_only_with_names() {
        let fds = parse_listen_fds(Some("42"), Some("3"), Some("http:unknown:admin"), 42).unwrap();
        assert_eq!(
            fds,
            vec![(3, Some("http".to_string())), (4, None), (5, Some("admin".to_string()))]
        );
        assert!(parse_listen_fds(Some("41"), Some("3"), None, 42).unwrap().is_empty());
        assert!(parse_listen_fds(None, Some("3"), None, 42).unwrap().is_empty());
        assert_eq!(parse_listen_fds(Some("42"), Some("1"), None, 42).unwrap(), vec![(3, None)]);
        assert!(parse_listen_fds(Some("x"), Some("1"), None, 42).is_err());
        assert!(parse_listen_fds(Some("42"), Some("-1"), None, 42).is_err());
    }

    #[test]
    fn a_descriptor_is_taken_once_and_gets_cloexec() {
        let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
        let raw = a.into_raw_fd();
        let fd = take_inherited(raw).unwrap();
        assert_eq!(fd.as_raw_fd(), raw);
        assert_eq!(crate::sys::fd_flags(&fd) & libc::FD_CLOEXEC, libc::FD_CLOEXEC);
        assert!(take_inherited(raw).is_err(), "the second taker is refused");
        assert!(take_inherited(-1).is_err());
        assert!(take_inherited(1_000_000).is_err(), "not open");
        drop(fd);
    }
}
