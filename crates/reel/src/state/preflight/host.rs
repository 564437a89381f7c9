//! The checks of [`super::check`] that ask this host: the CPUs `[cores]` names, the store's
//! directory and free disk space, and whether the listeners' IP addresses are this host's.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use reel_config::{Config, ConfigProblem};
use reel_runtime::{CorePlan, PlanError};
use reel_store::Creation;
use rustix::fs::{Access, access, statvfs};
use socket2::{Domain, Protocol, Socket, Type};

use crate::state::options;

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

/// The store's disks: each a directory (or one reel may create, [`reel_store::may_create`],
/// under a writable parent) with room on its filesystem for the volumes not allocated yet.
/// With several disks, a disk that is missing or not writable is not a refusal (`serve`
/// starts without it and says so, as `notes` do) unless every disk is; too little room
/// always is. A directory to be created is noted in `notes` with the rule that allows it.
pub(super) fn store(cfg: &Config, notes: &mut Vec<String>) -> Vec<ConfigProblem> {
    let disks = cfg.store.disks();
    let single = disks.len() == 1;
    let mut unusable = Vec::new();
    let mut problems = Vec::new();
    for (key, path, size) in &disks {
        match disk(cfg, key, path, size.bytes(), single, notes) {
            Ok(Some(p)) => problems.push(p),
            Ok(None) => {}
            Err(p) => unusable.push(p),
        }
    }
    if single || unusable.len() == disks.len() {
        problems.extend(unusable);
    } else {
        notes.extend(unusable.iter().map(|p| format!("{p} (serve starts without this disk)")));
    }
    problems
}

/// One disk: `Err` if it cannot be used at all, `Ok(Some)` if its filesystem lacks room.
fn disk(
    cfg: &Config,
    key: &str,
    path: &Path,
    size: u64,
    single: bool,
    notes: &mut Vec<String>,
) -> Result<Option<ConfigProblem>, ConfigProblem> {
    let path_key = format!("{key}.path");
    let Some(existing) = nearest_existing(path) else {
        return Ok(None);
    };
    let shown = path.display();
    if existing != path {
        match reel_store::may_create(path, single) {
            Creation::Allowed(rule) => {
                notes.push(
                    cfg.problem(&path_key, format!("{shown} does not exist: {rule}")).to_string(),
                );
            }
            Creation::Refused(why) => {
                return Err(cfg.problem(
                    &path_key,
                    format!("{shown} does not exist and is not created: {why}"),
                ));
            }
        }
    }
    if !existing.is_dir() {
        let what = if existing == path {
            format!("{shown} is not a directory")
        } else {
            format!("{shown} cannot be created: {} is not a directory", existing.display())
        };
        return Err(cfg.problem(&path_key, what));
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
        return Err(cfg.problem(&path_key, what));
    }
    // Volumes are preallocated at start: what is not allocated yet must fit.
    let vs = cfg.store.volume_size.bytes();
    // Validation keeps the count sane; the cap only bounds the stat calls below.
    let volumes = size.checked_div(vs).unwrap_or(0).min(1 << 20);
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
            return Ok(Some(cfg.problem(
                &format!("{key}.size"),
                format!(
                    "the store's volumes need {} more on the filesystem of {shown}, which has \
                     {} free: lower {key}.size or free disk space",
                    human(missing),
                    human(free)
                ),
            )));
        }
    }
    Ok(None)
}

/// `path` or its nearest ancestor that exists (`.` for a relative path with none).
pub(super) fn nearest_existing(path: &Path) -> Option<PathBuf> {
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
    bound_addresses(cfg, origin_flag)
        .into_iter()
        .filter_map(|(key, addr)| {
            bind_ip(addr).err().map(|e| {
                cfg.problem(&key, format!("{addr}: this host cannot bind {}: {e}", addr.ip()))
            })
        })
        .collect()
}

/// The addresses the process binds, each with its key: the listeners, the admin listener
/// and the demo origin unless `--origin` (`origin_flag`).
pub(super) fn bound_addresses(cfg: &Config, origin_flag: bool) -> Vec<(String, SocketAddr)> {
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
