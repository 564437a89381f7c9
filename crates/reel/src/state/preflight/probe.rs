//! The checks of [`super::check`] that try what `serve` will do, without doing it: the
//! access log can be created or appended to, a port below the unprivileged range is
//! allowed to this process, and the UDP port of an HTTP/3 listener is not held by another
//! process. Each leaves nothing behind (no file created, no socket kept).

use std::net::SocketAddr;
use std::path::Path;

use reel_config::{Config, ConfigProblem, SinkKind};
use rustix::fs::{Access, access};
use socket2::{Domain, Protocol, Socket, Type};

use super::host::nearest_existing;

/// `CAP_NET_BIND_SERVICE`'s bit in the capability sets of `/proc/self/status`.
const CAP_NET_BIND_SERVICE: u32 = 10;

/// The access log's files (`path` and each file sink's): an existing file must open for
/// appending; a missing one must be creatable, in a directory reel can create (`serve`
/// creates the missing directories).
pub(super) fn access_log(cfg: &Config) -> Vec<ConfigProblem> {
    let a = &cfg.access_log;
    if !a.enabled {
        return Vec::new();
    }
    let sinks = a.sink.iter().enumerate().filter(|(_, s)| s.kind == Some(SinkKind::File));
    std::iter::once(("access_log.path".to_owned(), a.path.as_path()))
        .chain(sinks.map(|(i, s)| (format!("access_log.sink[{i}].path"), s.path.as_path())))
        .filter(|(_, p)| !p.as_os_str().is_empty() && p.as_os_str() != "-")
        .filter_map(|(key, path)| {
            let why = access_log_problem(path)?;
            Some(cfg.problem(
                &key,
                format!("{why}: fix it, set {key} to a file reel may write, or path = \"-\""),
            ))
        })
        .collect()
}

fn access_log_problem(path: &Path) -> Option<String> {
    let shown = path.display();
    let existing = nearest_existing(path)?;
    if existing == path {
        if path.is_dir() {
            return Some(format!("{shown} is a directory, not a file"));
        }
        // Appending without creating or truncating changes nothing.
        return std::fs::OpenOptions::new()
            .append(true)
            .open(path)
            .err()
            .map(|e| format!("{shown} cannot be opened for appending: {e}"));
    }
    if !existing.is_dir() {
        return Some(format!(
            "{shown} cannot be created: {} is not a directory",
            existing.display()
        ));
    }
    access(&existing, Access::WRITE_OK | Access::EXEC_OK).err().map(|e| {
        format!(
            "{shown} cannot be created: {} is not writable by this user (uid {}): {e}",
            existing.display(),
            rustix::process::geteuid().as_raw()
        )
    })
}

/// Ports below `net.ipv4.ip_unprivileged_port_start` (1024 unless lowered) need
/// `CAP_NET_BIND_SERVICE`; without it `serve`'s bind fails. Not asked when systemd
/// passes the listening sockets (`LISTEN_FDS`): then reel binds none of them.
pub(super) fn privileged_ports(cfg: &Config, origin_flag: bool) -> Vec<ConfigProblem> {
    if systemd_sockets() || may_bind_privileged() {
        return Vec::new();
    }
    let start = unprivileged_port_start();
    super::host::bound_addresses(cfg, origin_flag)
        .into_iter()
        .filter(|(_, a)| a.port() != 0 && a.port() < start)
        .map(|(key, a)| {
            cfg.problem(
                &key,
                format!(
                    "{a}: port {} is below {start}, and this process (uid {}) lacks \
                     CAP_NET_BIND_SERVICE to bind it: grant it (the systemd unit's \
                     AmbientCapabilities=CAP_NET_BIND_SERVICE, or setcap \
                     cap_net_bind_service=+ep on the binary), or use a port from {start} up",
                    a.port(),
                    rustix::process::geteuid().as_raw()
                ),
            )
        })
        .collect()
}

/// Whether systemd passed this process its listening sockets (socket activation).
fn systemd_sockets() -> bool {
    std::env::var_os("LISTEN_FDS").is_some()
}

/// Whether this process holds `CAP_NET_BIND_SERVICE` (its effective set).
fn may_bind_privileged() -> bool {
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else {
        // No way to tell: leave it to the bind.
        return true;
    };
    status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        .is_none_or(|eff| eff & (1 << CAP_NET_BIND_SERVICE) != 0)
}

/// `net.ipv4.ip_unprivileged_port_start` (also for IPv6), 1024 when unreadable.
fn unprivileged_port_start() -> u16 {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_unprivileged_port_start")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(1024)
}

/// The UDP port of each HTTP/3 listener: refused when another process holds it. reel's
/// own UDP sockets (this process's on a reload, a running reel's or a binary upgrade's
/// predecessor's, of the same user) are bound with `SO_REUSEPORT`, which a probe with
/// `SO_REUSEPORT` of the same user may join, so they pass; a socket of another program or
/// another user does not. Not asked when systemd passes sockets (`LISTEN_FDS`): what it
/// passes is checked where it is taken over, which names the socket unit's line to change.
pub(super) fn quic_ports(cfg: &Config) -> Vec<ConfigProblem> {
    if systemd_sockets() {
        return Vec::new();
    }
    cfg.listener
        .iter()
        .enumerate()
        .filter(|(_, l)| l.http3_enabled() && l.address.port() != 0)
        .filter_map(|(i, l)| {
            let a = l.address;
            if udp_bind(a, false).is_ok() {
                return None;
            }
            let e = udp_bind(a, true).err()?;
            Some(cfg.problem(
                &format!("listener[{i}].address"),
                format!(
                    "UDP {a} (HTTP/3, http3 = true) cannot be bound: {e}: another process \
                     holds it (`ss -ulpn 'sport = :{}'` names it): stop it, use another \
                     port, or set http3 = false",
                    a.port()
                ),
            ))
        })
        .collect()
}

/// Binds a UDP socket on `addr` and closes it.
fn udp_bind(addr: SocketAddr, reuse_port: bool) -> std::io::Result<()> {
    let s = Socket::new(Domain::for_address(addr), Type::DGRAM.cloexec(), Some(Protocol::UDP))?;
    if addr.is_ipv6() {
        s.set_only_v6(true)?;
    }
    if reuse_port {
        s.set_reuse_port(true)?;
    }
    s.bind(&addr.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn access_log_problems_leave_nothing_behind() {
        let d = tempfile::tempdir().unwrap();
        let missing = d.path().join("logs/access.log");
        assert_eq!(access_log_problem(&missing), None);
        assert!(!d.path().join("logs").exists());
        std::fs::write(d.path().join("file"), b"x").unwrap();
        let under_file = d.path().join("file/access.log");
        assert!(access_log_problem(&under_file).unwrap().contains("is not a directory"));
        assert!(access_log_problem(d.path()).unwrap().contains("is a directory"));
        let existing = d.path().join("file");
        assert_eq!(access_log_problem(&existing), None);
        assert_eq!(std::fs::read(&existing).unwrap(), b"x");
    }
}
