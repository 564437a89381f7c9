//! Read access to procfs, sysfs and the affinity mask ([`SysFs`]), which the core plan and
//! the cgroup reader go through so recorded samples from other hosts can stand in for the
//! live system ([`RealSysFs`]).

/// Read access to the parts of procfs/sysfs the planner needs.
pub trait SysFs {
    /// Contents of a file, `None` if it cannot be read.
    fn read(&self, path: &str) -> Option<String>;
    /// Fully resolved path (all symlinks followed) of `path`, `None` if it does not exist.
    fn canonical(&self, path: &str) -> Option<String>;
    /// CPUs this process may run on.
    fn allowed_cpus(&self) -> Option<Vec<usize>>;
}

/// The live system: `/proc`, `/sys` and `sched_getaffinity`.
#[derive(Debug, Clone, Copy, Default)]
pub struct RealSysFs;

impl SysFs for RealSysFs {
    fn read(&self, path: &str) -> Option<String> {
        std::fs::read_to_string(path).ok()
    }
    fn canonical(&self, path: &str) -> Option<String> {
        std::fs::canonicalize(path).ok().map(|p| p.to_string_lossy().into_owned())
    }
    fn allowed_cpus(&self) -> Option<Vec<usize>> {
        allowed_cpus()
    }
}

/// CPUs this process may run on (`sched_getaffinity`), ascending.
pub fn allowed_cpus() -> Option<Vec<usize>> {
    let mut v: Vec<usize> = core_affinity::get_core_ids()?.into_iter().map(|c| c.id).collect();
    v.sort_unstable();
    v.dedup();
    Some(v)
}
