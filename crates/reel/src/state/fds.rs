//! The file-descriptor budget: reel raises its soft `RLIMIT_NOFILE` to the hard limit at
//! start, and client connections are capped at that limit minus the descriptors open at
//! start minus `http.reserved_fds`, so the admin listener, health probes and origin
//! connections still find descriptors when clients hold every connection they may.

use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};

/// The descriptor limit and what the process held before serving.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FdBudget {
    /// The soft `RLIMIT_NOFILE` (after raising it).
    pub limit: u64,
    /// Descriptors open when the budget was taken (store volumes, logs, rings...).
    pub base: u64,
}

impl FdBudget {
    /// Raises the soft limit to the hard one and counts the open descriptors.
    pub(crate) fn take() -> FdBudget {
        let cur = getrlimit(Resource::Nofile);
        if let (Some(soft), max) = (cur.current, cur.maximum)
            && max.is_none_or(|m| m > soft)
        {
            // An unlimited hard limit: the kernel still caps at fs.nr_open.
            let want = max.unwrap_or(nr_open());
            if setrlimit(Resource::Nofile, Rlimit { current: Some(want), maximum: max }).is_err() {
                tracing::warn!(soft, "could not raise the descriptor limit");
            }
        }
        let limit = getrlimit(Resource::Nofile).current.unwrap_or_else(nr_open);
        let base = std::fs::read_dir("/proc/self/fd").map(|d| d.count() as u64).unwrap_or(64);
        FdBudget { limit, base }
    }

    /// The budget `serve` will have once its store is open, for checks made before: what
    /// [`FdBudget::take`] finds plus a descriptor per store volume and a few for the store's
    /// lock and I/O.
    pub(crate) fn estimate(cfg: &reel_config::Config) -> FdBudget {
        let b = FdBudget::take();
        let vs = cfg.store.volume_size.bytes().max(1);
        let disks = cfg.store.disks();
        let volumes: u64 = disks.iter().map(|(_, _, size)| size.bytes() / vs).sum();
        FdBudget { limit: b.limit, base: b.base + volumes + STORE_EXTRA * disks.len() as u64 }
    }

    /// Client connections the process may hold with `reserved` descriptors kept free.
    pub(crate) fn max_connections(&self, reserved: u32) -> Result<usize, String> {
        let left = self.limit.saturating_sub(self.base).saturating_sub(u64::from(reserved));
        if left == 0 {
            return Err(format!(
                "the descriptor limit (RLIMIT_NOFILE {}) leaves no client connections: {} are \
                 open at start (the store's volumes included) and http.reserved_fds keeps \
                 {reserved}; raise LimitNOFILE (ulimit -n) or lower http.reserved_fds",
                self.limit, self.base
            ));
        }
        Ok(usize::try_from(left).unwrap_or(usize::MAX))
    }
}

/// Descriptors the store holds besides its volumes (the lock file, the I/O ring or pool's
/// event descriptors).
const STORE_EXTRA: u64 = 4;

fn nr_open() -> u64 {
    std::fs::read_to_string("/proc/sys/fs/nr_open")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(1 << 20)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_is_the_limit_minus_what_is_open_and_the_reserve() {
        let b = FdBudget { limit: 1024, base: 24 };
        assert_eq!(b.max_connections(256), Ok(744));
        let e = b.max_connections(1000).unwrap_err();
        assert!(e.contains("http.reserved_fds keeps 1000"), "{e}");
        let real = FdBudget::take();
        assert!(real.base > 2 && real.limit > real.base, "{real:?}");
    }
}
