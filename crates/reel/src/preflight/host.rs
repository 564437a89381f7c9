//! The checks of [`super::check`] that ask this host: the CPUs `[cores]` names, the store's
//! directory and free disk space, and whether the listeners' IP addresses are this host's.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use reel_config::{Config, ConfigProblem};
use reel_runtime::{CorePlan, PlanError};
use rustix::fs::{Access, access, statvfs};
use socket2::{Domain, Protocol, Socket, Type};

use crate::options;

/// The core plan, or the problem that stops it (as `serve` would stop).
pub(super) fn core_plan(cfg: &Config) -> Result<CorePlan, ConfigProblem> {
    reel_runtime::plan_system(&options::core_spec(cfg)).map_err(|e| {
        let key = match e {
            PlanError::AllowedCpus => "cores",
            _ => "cores.workers",
        };
        cfg.problem(key, e.to_string())
    })
}

/// The store directory: a directory (or creatable, under a writable parent) with room on
/// its filesystem for the volumes that are not allocated yet.
pub(super) fn store(cfg: &Config) -> Vec<ConfigProblem> {
    let path = cfg.store.path.as_path();
    let mut problems = Vec::new();
    let Some(existing) = nearest_existing(path) else {
        return problems;
    };
    let shown = path.display();
    if !existing.is_dir() {
        let what = if existing == path {
            format!("{shown} is not a directory")
        } else {
            format!("{shown} cannot be created: {} is not a directory", existing.display())
        };
        problems.push(cfg.problem("store.path", what));
        return problems;
    }
    if let Err(e) = access(&existing, Access::WRITE_OK | Access::EXEC_OK) {
        let uid = rustix::process::geteuid().as_raw();
        let what = if existing == path {
            format!("{shown} is not writable by this user (uid {uid}): {e}")
        } else {
            format!(
                "{shown} does not exist and cannot be created: {} is not writable by this \
                 user (uid {uid}): {e}",
                existing.display()
            )
        };
        problems.push(cfg.problem("store.path", what));
        return problems;
    }
    // Volumes are preallocated at start: what is not allocated yet must fit.
    let vs = cfg.store.volume_size.bytes();
    // Validation keeps the count sane; the cap only bounds the stat calls below.
    let volumes = cfg.store.size.bytes().checked_div(vs).unwrap_or(0).min(1 << 20);
    let missing: u64 = (0..volumes)
        .map(|i| {
            let have = std::fs::metadata(path.join(format!("vol-{i:05}.dat")))
                .map(|m| m.len())
                .unwrap_or(0);
            vs.saturating_sub(have)
        })
        .fold(0, u64::saturating_add);
    if let Ok(fs) = statvfs(&existing) {
        let free = fs.f_bavail.saturating_mul(fs.f_frsize);
        if missing > free {
            problems.push(cfg.problem(
                "store.size",
                format!(
                    "the store's volumes need {} more on the filesystem of {shown}, which has \
                     {} free: lower store.size or free disk space",
                    human(missing),
                    human(free)
                ),
            ));
        }
    }
    problems
}

/// `path` or its nearest ancestor that exists (`.` for a relative path with none).
fn nearest_existing(path: &Path) -> Option<PathBuf> {
    let mut p = path.to_path_buf();
    loop {
        if std::fs::symlink_metadata(&p).is_ok() {
            return Some(p);
        }
        match p.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => p = parent.to_path_buf(),
            Some(_) => return Some(PathBuf::from(".")),
            None => return None,
        }
    }
}

/// Bytes with a binary unit, for messages.
fn human(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 { format!("{n}B") } else { format!("{v:.1}{}", UNITS[u]) }
}

/// The addresses the process binds (listeners, the admin listener, the demo origin unless
/// `--origin`) must be this host's: each IP is bound with port 0, which holds no port
/// another process might want and fails the same way `serve`'s bind would for an address
/// the host does not have. Whether the port itself is free is only known when binding.
pub(super) fn addresses(cfg: &Config, origin_flag: bool) -> Vec<ConfigProblem> {
    let mut wanted: Vec<(String, SocketAddr)> = cfg
        .listener
        .iter()
        .enumerate()
        .map(|(i, l)| (format!("listener[{i}].address"), l.address))
        .collect();
    wanted.push(("admin.address".into(), cfg.admin.address));
    if cfg.demo_origin.enabled && !origin_flag {
        wanted.push(("demo_origin.address".into(), cfg.demo_origin.address));
    }
    wanted
        .into_iter()
        .filter_map(|(key, addr)| {
            bind_ip(addr).err().map(|e| {
                cfg.problem(&key, format!("{addr}: this host cannot bind {}: {e}", addr.ip()))
            })
        })
        .collect()
}

fn bind_ip(addr: SocketAddr) -> std::io::Result<()> {
    let s = Socket::new(Domain::for_address(addr), Type::STREAM.cloexec(), Some(Protocol::TCP))?;
    if addr.is_ipv6() {
        s.set_only_v6(true)?;
    }
    s.bind(&SocketAddr::new(addr.ip(), 0).into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_existing_walks_up_to_what_exists() {
        let d = tempfile::tempdir().unwrap();
        let deep = d.path().join("a/b/c");
        assert_eq!(nearest_existing(&deep).as_deref(), Some(d.path()));
        assert_eq!(nearest_existing(Path::new("no-such-dir-here/x")), Some(PathBuf::from(".")));
        assert_eq!(human(512), "512B");
        assert_eq!(human(3 << 30), "3.0GiB");
    }
}
