//! The CPU limit of the process's cgroup, and the scheduler's throttling of it.
//!
//! A container's CPU quota (Kubernetes `limits.cpu`, cgroup v2 `cpu.max`, v1
//! `cpu.cfs_quota_us`) lets the process use `quota / period` CPUs' worth of time per
//! period, whatever its affinity mask says. Thread-per-core workers beyond that are
//! throttled in bursts: each period the group runs out of quota, every thread waits for
//! the next one, and requests see latency spikes of up to a period that average CPU
//! figures never show. The core plan runs no more workers than the quota
//! ([`crate::core_plan::plan`]); the sampler reads [`cpu_stat`] for the metrics and the
//! health figures.
//!
//! Both hierarchies are read: v2 (`/proc/self/cgroup` line `0::/path`, files under
//! `/sys/fs/cgroup`) and v1 (the line whose controllers include `cpu`, files under
//! `/sys/fs/cgroup/cpu` or `cpu,cpuacct`). Every level from the process's group up to the
//! root is looked at, since a parent's limit binds its children too.

use crate::sysfs::SysFs;

/// Which cgroup hierarchy a limit came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    /// The unified hierarchy (`cpu.max`, `cpu.stat` with `throttled_usec`).
    V2,
    /// The v1 `cpu` controller (`cpu.cfs_quota_us`, `cpu.cfs_period_us`).
    V1,
}

/// The process's cgroup for the CPU controller.
#[derive(Debug, Clone, PartialEq)]
pub struct CpuGroup {
    /// Hierarchy of the group.
    pub version: Version,
    /// Directory of the process's own group (its `cpu.stat` counts the throttling).
    pub dir: String,
    /// The tightest quota on the way to the root, in CPUs (`quota / period`), and the
    /// directory that sets it; `None` when no level limits the group.
    pub quota: Option<(f64, String)>,
}

impl CpuGroup {
    /// Whole CPUs the quota allows, at least one; `None` without a quota.
    pub fn worker_cap(&self) -> Option<usize> {
        self.quota.as_ref().map(|(q, _)| (q.floor() as usize).max(1))
    }
}

/// The throttling counters of a group's `cpu.stat`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CpuStat {
    /// Enforcement periods that elapsed while the group had runnable threads.
    pub periods: u64,
    /// Periods in which the group ran out of quota.
    pub throttled_periods: u64,
    /// Time the group's threads waited for the next period, microseconds.
    pub throttled_usec: u64,
}

impl CpuStat {
    /// Throttling since `earlier`: the share of periods that ran out of quota (0 to 1, 0
    /// when no period elapsed) and the microseconds the group waited. Counters that went
    /// back (another group after a move) count as no change.
    pub fn throttled_since(&self, earlier: &CpuStat) -> (f64, u64) {
        let periods = self.periods.saturating_sub(earlier.periods);
        let throttled = self.throttled_periods.saturating_sub(earlier.throttled_periods);
        let ratio = if periods > 0 { (throttled as f64 / periods as f64).min(1.0) } else { 0.0 };
        (ratio, self.throttled_usec.saturating_sub(earlier.throttled_usec))
    }
}

/// The process's CPU cgroup, from `/proc/self/cgroup`; `None` when there is none to read.
pub fn cpu_group(sys: &dyn SysFs) -> Option<CpuGroup> {
    let text = sys.read("/proc/self/cgroup")?;
    // v1 first: on a hybrid host the v2 line exists too, but without the cpu controller.
    for line in text.lines() {
        let mut f = line.splitn(3, ':');
        let (Some(_), Some(controllers), Some(path)) = (f.next(), f.next(), f.next()) else {
            continue;
        };
        if controllers.split(',').any(|c| c == "cpu") {
            for mount in ["/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpu,cpuacct"] {
                if sys.read(&format!("{mount}/cpu.cfs_period_us")).is_some() {
                    return Some(walk(sys, Version::V1, mount, path));
                }
            }
        }
    }
    let path = text.lines().find_map(|l| l.strip_prefix("0::"))?;
    // The unified hierarchy with the cpu controller (a root without one has no cpu.max
    // anywhere below it either, but still has cpu.stat).
    sys.read("/sys/fs/cgroup/cgroup.controllers")?;
    Some(walk(sys, Version::V2, "/sys/fs/cgroup", path))
}

/// The group at `mount` + `path`, with the tightest quota from there up to the root.
fn walk(sys: &dyn SysFs, version: Version, mount: &str, path: &str) -> CpuGroup {
    let path = path.trim().trim_end_matches('/');
    let dir = format!("{mount}{path}");
    let mut quota: Option<(f64, String)> = None;
    let mut at = dir.clone();
    loop {
        if let Some(q) = level_quota(sys, version, &at)
            && quota.as_ref().is_none_or(|(best, _)| q < *best)
        {
            quota = Some((q, at.clone()));
        }
        if at.len() <= mount.len() {
            break;
        }
        match at.rfind('/') {
            Some(i) if i >= mount.len() => at.truncate(i),
            _ => break,
        }
    }
    CpuGroup { version, dir, quota }
}

/// The quota one level sets, in CPUs.
fn level_quota(sys: &dyn SysFs, version: Version, dir: &str) -> Option<f64> {
    let (quota, period) = match version {
        Version::V2 => {
            let text = sys.read(&format!("{dir}/cpu.max"))?;
            let mut f = text.split_whitespace();
            let q = f.next()?;
            let p = f.next().map_or(Some(100_000), |p| p.parse::<u64>().ok())?;
            (q.parse::<u64>().ok()?, p)
        }
        Version::V1 => {
            let q = sys.read(&format!("{dir}/cpu.cfs_quota_us"))?.trim().parse::<i64>().ok()?;
            let p = sys.read(&format!("{dir}/cpu.cfs_period_us"))?.trim().parse::<u64>().ok()?;
            (u64::try_from(q).ok()?, p)
        }
    };
    // `max` (v2) and -1 (v1) fail the parses above: no limit at this level.
    (quota > 0 && period > 0).then(|| quota as f64 / period as f64)
}

/// The throttling counters of the group (`None` when its `cpu.stat` cannot be read).
pub fn cpu_stat(sys: &dyn SysFs, group: &CpuGroup) -> Option<CpuStat> {
    let text = sys.read(&format!("{}/cpu.stat", group.dir))?;
    let mut st = CpuStat::default();
    let mut seen = false;
    for line in text.lines() {
        let mut f = line.split_whitespace();
        let (Some(k), Some(Ok(v))) = (f.next(), f.next().map(str::parse::<u64>)) else {
            continue;
        };
        match k {
            "nr_periods" => st.periods = v,
            "nr_throttled" => st.throttled_periods = v,
            "throttled_usec" => st.throttled_usec = v,
            // v1 counts nanoseconds.
            "throttled_time" => st.throttled_usec = v / 1000,
            _ => continue,
        }
        seen = true;
    }
    seen.then_some(st)
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    struct Files(HashMap<&'static str, &'static str>);

    impl SysFs for Files {
        fn read(&self, path: &str) -> Option<String> {
            self.0.get(path).map(|s| (*s).to_owned())
        }
        fn canonical(&self, _: &str) -> Option<String> {
            None
        }
        fn allowed_cpus(&self) -> Option<Vec<usize>> {
            Some(vec![0, 1, 2, 3])
        }
    }

    #[test]
    fn v2_takes_the_tightest_level_up_to_the_root() {
        let sys = Files(HashMap::from([
            ("/proc/self/cgroup", "0::/kubepods/pod1/ctr\n"),
            ("/sys/fs/cgroup/cgroup.controllers", "cpu memory\n"),
            ("/sys/fs/cgroup/kubepods/pod1/ctr/cpu.max", "max 100000\n"),
            ("/sys/fs/cgroup/kubepods/pod1/cpu.max", "150000 100000\n"),
            ("/sys/fs/cgroup/kubepods/cpu.max", "400000 100000\n"),
            (
                "/sys/fs/cgroup/kubepods/pod1/ctr/cpu.stat",
                "usage_usec 5\nnr_periods 10\nnr_throttled 4\nthrottled_usec 1234\n",
            ),
        ]));
        let g = cpu_group(&sys).unwrap();
        assert_eq!(g.version, Version::V2);
        assert_eq!(g.dir, "/sys/fs/cgroup/kubepods/pod1/ctr");
        assert_eq!(g.quota, Some((1.5, "/sys/fs/cgroup/kubepods/pod1".into())));
        assert_eq!(g.worker_cap(), Some(1));
        let st = cpu_stat(&sys, &g).unwrap();
        assert_eq!(st, CpuStat { periods: 10, throttled_periods: 4, throttled_usec: 1234 });
        let before = CpuStat { periods: 6, throttled_periods: 3, throttled_usec: 1000 };
        assert_eq!(st.throttled_since(&before), (0.25, 234));
        assert_eq!(before.throttled_since(&st), (0.0, 0), "counters that went back");
    }

    #[test]
    fn v2_without_a_quota_and_a_half_cpu_quota() {
        let mut files = HashMap::from([
            ("/proc/self/cgroup", "0::/\n"),
            ("/sys/fs/cgroup/cgroup.controllers", "cpu\n"),
            ("/sys/fs/cgroup/cpu.max", "max 100000\n"),
        ]);
        let g = cpu_group(&Files(files.clone())).unwrap();
        assert_eq!(
            (g.dir.as_str(), g.quota.clone(), g.worker_cap()),
            ("/sys/fs/cgroup", None, None)
        );
        files.insert("/sys/fs/cgroup/cpu.max", "50000 100000\n");
        let g = cpu_group(&Files(files)).unwrap();
        assert_eq!(g.worker_cap(), Some(1), "a fraction of a CPU still runs one worker");
    }

    #[test]
    fn v1_on_a_hybrid_host() {
        let sys = Files(HashMap::from([
            ("/proc/self/cgroup", "4:memory:/x\n2:cpuacct,cpu:/svc/reel\n0::/\n"),
            ("/sys/fs/cgroup/cgroup.controllers", ""),
            ("/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us", "100000\n"),
            ("/sys/fs/cgroup/cpu,cpuacct/svc/reel/cpu.cfs_quota_us", "250000\n"),
            ("/sys/fs/cgroup/cpu,cpuacct/svc/reel/cpu.cfs_period_us", "100000\n"),
            ("/sys/fs/cgroup/cpu,cpuacct/svc/cpu.cfs_quota_us", "-1\n"),
            ("/sys/fs/cgroup/cpu,cpuacct/svc/cpu.cfs_period_us", "100000\n"),
            (
                "/sys/fs/cgroup/cpu,cpuacct/svc/reel/cpu.stat",
                "nr_periods 7\nnr_throttled 2\nthrottled_time 5000000\n",
            ),
        ]));
        let g = cpu_group(&sys).unwrap();
        assert_eq!(g.version, Version::V1);
        assert_eq!(g.worker_cap(), Some(2));
        let st = cpu_stat(&sys, &g).unwrap();
        assert_eq!(st.throttled_usec, 5000);
    }

    #[test]
    fn garbage_is_no_limit_not_a_panic() {
        let sys = Files(HashMap::from([
            ("/proc/self/cgroup", "garbage\n0::\n"),
            ("/sys/fs/cgroup/cgroup.controllers", "cpu\n"),
            ("/sys/fs/cgroup/cpu.max", "0 0\n"),
            ("/sys/fs/cgroup/cpu.stat", "nr_periods x\n\n"),
        ]));
        let g = cpu_group(&sys).unwrap();
        assert_eq!(g.quota, None);
        assert_eq!(cpu_stat(&sys, &g), None);
        assert_eq!(cpu_group(&Files(HashMap::new())), None);
    }
}
