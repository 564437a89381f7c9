//! What the host says about limits that hide: the cgroup's CPU quota and its throttling,
//! the data interfaces' byte counters, and the descriptors in use against the limit. Read
//! on demand (a `/metrics` scrape, the health sampler), never on the request path.

use reel_runtime::cgroup::{self, CpuGroup, CpuStat};
use reel_runtime::core_plan::RealSysFs;

/// One data interface's counters (`/sys/class/net/<name>/statistics`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct NetCounters {
    /// Interface name, from `[cores] nic`.
    pub name: String,
    /// Bytes received since the interface came up.
    pub rx_bytes: u64,
    /// Bytes sent since the interface came up.
    pub tx_bytes: u64,
}

/// One reading of the host.
#[derive(Debug, Clone, Default)]
pub(crate) struct HostSample {
    /// The process's CPU cgroup (with its quota), where there is one to read.
    pub cpu_group: Option<CpuGroup>,
    /// Its throttling counters.
    pub cpu_stat: Option<CpuStat>,
    /// The data interfaces that exist, in config order.
    pub net: Vec<NetCounters>,
    /// Descriptors open now.
    pub open_fds: Option<u64>,
    /// The soft descriptor limit.
    pub max_fds: Option<u64>,
}

/// Reads the host now; `nics` are the data interfaces (`[cores] nic`).
pub(crate) fn sample(nics: &[String]) -> HostSample {
    let (cpu_group, cpu_stat, net) = counters(nics);
    let open_fds = std::fs::read_dir("/proc/self/fd").ok().map(|d| d.count() as u64);
    let max_fds = rustix::process::getrlimit(rustix::process::Resource::Nofile).current;
    HostSample { cpu_group, cpu_stat, net, open_fds, max_fds }
}

/// The counters only (no descriptor count), for the once-a-second history.
pub(crate) fn counters(nics: &[String]) -> (Option<CpuGroup>, Option<CpuStat>, Vec<NetCounters>) {
    let cpu_group = cgroup::cpu_group(&RealSysFs);
    let cpu_stat = cpu_group.as_ref().and_then(|g| cgroup::cpu_stat(&RealSysFs, g));
    let net = nics.iter().filter_map(|n| net_counters(n)).collect();
    (cpu_group, cpu_stat, net)
}

/// The counters of interface `name`; `None` when it does not exist. The name comes from the
/// config, which validation limits to interface-name characters, so it cannot leave
/// `/sys/class/net`.
fn net_counters(name: &str) -> Option<NetCounters> {
    if name.is_empty() || name.contains('/') || name.starts_with('.') {
        return None;
    }
    let read = |f: &str| {
        std::fs::read_to_string(format!("/sys/class/net/{name}/statistics/{f}"))
            .ok()
            .and_then(|s| s.trim().parse::<u64>().ok())
    };
    Some(NetCounters {
        name: name.to_owned(),
        rx_bytes: read("rx_bytes")?,
        tx_bytes: read("tx_bytes")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_counts_and_names_that_leave_the_directory_do_not() {
        let s = sample(&["lo".into(), "../../etc".into(), "no-such-if0".into()]);
        assert_eq!(s.net.len(), 1, "{:?}", s.net);
        assert_eq!(s.net[0].name, "lo");
        assert!(s.open_fds.is_some_and(|n| n > 2));
        assert!(s.max_fds.is_some());
    }
}
