//! The core plan: which CPUs service the NIC's interrupts and which CPUs run workers.
//!
//! Worker threads compete with softirq network processing for the CPU when both share a core,
//! so by default the workers take the CPUs the process may run on (`sched_getaffinity`) minus
//! the CPUs that the NIC queue interrupts are routed to. The interrupt routing is discovered
//! from `/proc/interrupts`, `/proc/irq/N/{effective_affinity_list,smp_affinity_list}` and
//! `/sys/class/net/<nic>/device`. All parsing goes through the [`SysFs`] trait so it can be fed
//! recorded samples from other hosts.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

pub use crate::sysfs::{RealSysFs, SysFs, allowed_cpus};

/// How a set of CPUs is chosen.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum CpuSelect {
    /// Derive from the NIC interrupt routing (IRQ CPUs) or from the allowed set (workers).
    #[default]
    Auto,
    /// An explicit CPU list.
    List(Vec<usize>),
}

/// Input of the planner.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CoreSpec {
    /// Network interfaces whose queue interrupts should be kept off worker CPUs.
    pub nic: Vec<String>,
    /// CPUs that service NIC interrupts.
    pub irq: CpuSelect,
    /// CPUs that run workers.
    pub workers: CpuSelect,
}

impl Default for CoreSpec {
    fn default() -> Self {
        Self { nic: vec!["eth0".to_owned()], irq: CpuSelect::Auto, workers: CpuSelect::Auto }
    }
}

/// What a CPU is used for in a [`CorePlan`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Runs a worker thread and does not service NIC interrupts.
    Worker,
    /// Services NIC interrupts and runs no worker.
    Irq,
    /// Services NIC interrupts and also runs a worker (fallback or explicit overlap).
    IrqAndWorker,
    /// Neither (not allowed for this process, or left out by an explicit list).
    Unused,
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(match self {
            Role::Worker => "worker",
            Role::Irq => "irq",
            Role::IrqAndWorker => "irq+worker",
            Role::Unused => "unused",
        })
    }
}

/// One CPU of the plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuEntry {
    /// CPU number.
    pub cpu: usize,
    /// Its role.
    pub role: Role,
    /// Human-readable reasons: interrupts routed here, counts, allowed-set membership.
    pub evidence: Vec<String>,
}

/// The result of planning: printed by `reel plan` and consumed by [`crate::start`].
#[derive(Debug, Clone, PartialEq)]
pub struct CorePlan {
    /// Every CPU known to the planner, ascending.
    pub cpus: Vec<CpuEntry>,
    /// Worker CPUs in worker-index order (ascending).
    pub workers: Vec<usize>,
    /// CPUs servicing NIC interrupts, ascending.
    pub irq_cpus: Vec<usize>,
    /// Non-fatal problems worth telling the operator about.
    pub warnings: Vec<String>,
    /// The cgroup CPU quota in CPUs and the group that sets it, when there is one.
    pub cpu_quota: Option<(f64, String)>,
}

/// Errors of the planner (only for inputs that cannot be planned at all).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PlanError {
    /// The process affinity mask could not be read.
    #[error("cannot read the CPU affinity of the process (sched_getaffinity)")]
    AllowedCpus,
    /// An explicit worker CPU is outside the process affinity mask.
    #[error("worker cpu {cpu} is not in the allowed cpu set {allowed:?}")]
    WorkerNotAllowed {
        /// The offending CPU.
        cpu: usize,
        /// The allowed set.
        allowed: Vec<usize>,
    },
    /// An explicit worker list was empty.
    #[error("the explicit worker cpu list is empty")]
    NoWorkers,
    /// An explicit worker list names a CPU twice.
    #[error("worker cpu {0} is listed twice")]
    DuplicateWorker(usize),
}

/// Plans against the live system.
pub fn plan_system(spec: &CoreSpec) -> Result<CorePlan, PlanError> {
    plan(spec, &RealSysFs)
}

/// Parses a kernel CPU list such as `0-3,8,10-11`. Returns `None` on malformed input.
pub fn parse_cpu_list(s: &str) -> Option<Vec<usize>> {
    let s = s.trim();
    let mut out = Vec::new();
    if s.is_empty() {
        return Some(out);
    }
    for part in s.split(',') {
        let part = part.trim();
        // Kernel lists may carry a stride (`0-15:2`); honour it rather than reject.
        let (range, stride) = match part.split_once(':') {
            Some((r, st)) => (r, st.parse::<usize>().ok().filter(|&x| x > 0)?),
            None => (part, 1),
        };
        match range.split_once('-') {
            Some((a, b)) => {
                let (a, b) = (a.parse::<usize>().ok()?, b.parse::<usize>().ok()?);
                if b < a || b - a > 1 << 16 {
                    return None;
                }
                out.extend((a..=b).step_by(stride));
            }
            None => out.push(range.parse().ok()?),
        }
    }
    out.sort_unstable();
    out.dedup();
    Some(out)
}

/// One numbered interrupt line of `/proc/interrupts`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IrqLine {
    /// IRQ number.
    pub irq: u32,
    /// Interrupt count per CPU column (index = CPU number of the header).
    pub counts: Vec<(usize, u64)>,
    /// Action (device) names registered on this IRQ.
    pub names: Vec<String>,
}

/// Parses `/proc/interrupts`. Only numbered IRQs are returned; architecture
/// counters (`LOC`, `NMI`, ...) carry no device names and are skipped.
pub fn parse_interrupts(text: &str) -> Vec<IrqLine> {
    let mut lines = text.lines();
    let Some(header) = lines.next() else {
        return Vec::new();
    };
    // The header names only online CPUs, so columns are mapped through it instead of assuming 0..n.
    let cols: Vec<usize> =
        header.split_whitespace().filter_map(|t| t.strip_prefix("CPU")?.parse().ok()).collect();
    let mut out = Vec::new();
    for line in lines {
        let Some((num, rest)) = line.split_once(':') else {
            continue;
        };
        let Ok(irq) = num.trim().parse::<u32>() else {
            continue;
        };
        let mut rest = rest;
        let mut counts = Vec::with_capacity(cols.len());
        for &cpu in &cols {
            let trimmed = rest.trim_start();
            let end = trimmed.find(|c: char| c.is_whitespace()).unwrap_or(trimmed.len());
            match trimmed[..end].parse::<u64>() {
                Ok(n) => {
                    counts.push((cpu, n));
                    rest = &trimmed[end..];
                }
                Err(_) => break,
            }
        }
        // Shared IRQs list several actions separated by ", "; each action's name is its last token
        // (the earlier tokens are the chip name and hwirq/trigger type).
        let names = rest
            .split(',')
            .filter_map(|a| a.split_whitespace().last())
            .map(str::to_owned)
            .collect();
        out.push(IrqLine { irq, counts, names });
    }
    out
}

/// CPU numbers of the `/proc/interrupts` header.
pub fn interrupt_columns(text: &str) -> Vec<usize> {
    text.lines()
        .next()
        .map(|h| h.split_whitespace().filter_map(|t| t.strip_prefix("CPU")?.parse().ok()).collect())
        .unwrap_or_default()
}

/// What identifies a NIC's interrupts in `/proc/interrupts`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NicIdent {
    /// Interface name, e.g. `eth0`.
    pub name: String,
    /// PCI address of the device (`0000:3b:00.0`), when the NIC is a PCI function.
    pub pci: Option<String>,
    /// The virtio device behind the NIC (`virtio2`), when it is virtio-net.
    pub virtio: Option<String>,
}

fn is_pci_addr(s: &str) -> bool {
    // dddd:bb:dd.f
    let b = s.as_bytes();
    b.len() == 12
        && b[4] == b':'
        && b[7] == b':'
        && b[10] == b'.'
        && b.iter().enumerate().all(|(i, c)| matches!(i, 4 | 7 | 10) || c.is_ascii_hexdigit())
}

/// Resolves `/sys/class/net/<nic>/device` to the PCI address and virtio device, `None` if the
/// interface does not exist or has no backing device (virtual interfaces).
pub fn resolve_nic(sys: &dyn SysFs, nic: &str) -> Option<NicIdent> {
    let path = sys.canonical(&format!("/sys/class/net/{nic}/device"))?;
    let comps: Vec<&str> = path.split('/').filter(|c| !c.is_empty()).collect();
    let last = *comps.last()?;
    let mut ident = NicIdent { name: nic.to_owned(), pci: None, virtio: None };
    if last.starts_with("virtio") && last[6..].bytes().all(|b| b.is_ascii_digit()) {
        ident.virtio = Some(last.to_owned());
    }
    ident.pci = comps.iter().rev().find(|c| is_pci_addr(c)).map(|c| (*c).to_owned());
    Some(ident)
}

/// Whether an interrupt action name belongs to a data queue of `nic`.
pub fn name_matches(name: &str, nic: &NicIdent) -> bool {
    let n = nic.name.as_str();
    // Generic, ixgbe, ena and i40e/ice styles: eth0, eth0-rx-0, eth0-TxRx-0, ens5-Tx-Rx-0,
    // i40e-eth0-TxRx-3.
    if name == n
        || name.starts_with(&format!("{n}-"))
        || name.contains(&format!("-{n}-"))
        || name.ends_with(&format!("-{n}"))
    {
        return true;
    }
    // mlx5/mlx4 style names the PCI function: mlx5_comp3@pci:0000:3b:00.0, mlx4-1@0000:04:00.0.
    // Control vectors (mlx5_async, ena-mgmnt) carry no packet traffic.
    if let Some(pci) = &nic.pci
        && let Some((prefix, addr)) = name.rsplit_once('@')
    {
        let addr = addr.strip_prefix("pci:").unwrap_or(addr);
        let control = ["async", "mgmnt", "mgmt", "ctrl", "cmd"].iter().any(|c| prefix.contains(c));
        if addr == pci && !control {
            return true;
        }
    }
    // virtio-net: virtio2-input.0 / virtio2-output.0, some hosts virtio3-rx / virtio3-tx, or a
    // single shared vector virtio0-virtqueues without per-queue MSI-X.
    if let Some(v) = &nic.virtio
        && let Some(q) = name.strip_prefix(v.as_str()).and_then(|s| s.strip_prefix('-'))
    {
        return ["input", "output", "rx", "tx", "virtqueues"].iter().any(|p| q.starts_with(p));
    }
    false
}

/// One NIC interrupt and where it is serviced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NicIrq {
    /// Interface name.
    pub nic: String,
    /// IRQ number.
    pub irq: u32,
    /// The matching action name.
    pub name: String,
    /// CPUs servicing it.
    pub cpus: Vec<usize>,
    /// Where `cpus` came from (`effective_affinity_list`, `smp_affinity_list` or `counts`).
    pub source: &'static str,
    /// Interrupt counts per CPU from `/proc/interrupts`.
    pub counts: Vec<(usize, u64)>,
}

/// Finds the interrupts of `nics` and the CPUs they are routed to. Warnings explain NICs
/// that could not be found or have no interrupts.
pub fn detect_nic_irqs(sys: &dyn SysFs, nics: &[String]) -> (Vec<NicIrq>, Vec<String>) {
    let mut warnings = Vec::new();
    let mut found = Vec::new();
    let Some(text) = sys.read("/proc/interrupts") else {
        warnings.push("cannot read /proc/interrupts; no CPUs reserved for NIC interrupts".into());
        return (found, warnings);
    };
    let lines = parse_interrupts(&text);
    for nic in nics {
        let Some(ident) = resolve_nic(sys, nic) else {
            warnings.push(format!(
                "nic {nic}: /sys/class/net/{nic}/device not found (no such interface or not a \
                 hardware device); no CPUs reserved for its interrupts"
            ));
            continue;
        };
        let before = found.len();
        for line in &lines {
            let Some(name) = line.names.iter().find(|n| name_matches(n, &ident)) else {
                continue;
            };
            let read_list = |f: &str| {
                sys.read(&format!("/proc/irq/{}/{f}", line.irq))
                    .and_then(|s| parse_cpu_list(&s))
                    .filter(|v| !v.is_empty())
            };
            let (cpus, source) = if let Some(c) = read_list("effective_affinity_list") {
                (c, "effective_affinity_list")
            } else if let Some(c) = read_list("smp_affinity_list") {
                (c, "smp_affinity_list")
            } else {
                let c: Vec<usize> =
                    line.counts.iter().filter(|(_, n)| *n > 0).map(|(c, _)| *c).collect();
                (c, "counts")
            };
            found.push(NicIrq {
                nic: nic.clone(),
                irq: line.irq,
                name: name.clone(),
                cpus,
                source,
                counts: line.counts.clone(),
            });
        }
        if found.len() == before {
            warnings.push(format!(
                "nic {nic}: no queue interrupts found in /proc/interrupts (pci {}, virtio {}); \
                 no CPUs reserved for its interrupts",
                ident.pci.as_deref().unwrap_or("-"),
                ident.virtio.as_deref().unwrap_or("-"),
            ));
        }
    }
    (found, warnings)
}

fn fmt_list(v: &[usize]) -> String {
    let s: Vec<String> = v.iter().map(ToString::to_string).collect();
    s.join(",")
}

/// Computes the plan for `spec` from the data behind `sys`.
pub fn plan(spec: &CoreSpec, sys: &dyn SysFs) -> Result<CorePlan, PlanError> {
    let allowed: BTreeSet<usize> = sys
        .allowed_cpus()
        .filter(|v| !v.is_empty())
        .ok_or(PlanError::AllowedCpus)?
        .into_iter()
        .collect();
    let allowed_vec: Vec<usize> = allowed.iter().copied().collect();
    // Detection runs even with explicit lists so the printed plan shows where interrupts really go.
    let (irqs, detect_warnings) = detect_nic_irqs(sys, &spec.nic);
    let mut warnings = Vec::new();

    let irq_set: BTreeSet<usize> = match &spec.irq {
        CpuSelect::Auto => {
            warnings.extend(detect_warnings);
            irqs.iter().flat_map(|i| i.cpus.iter().copied()).collect()
        }
        CpuSelect::List(v) => v.iter().copied().collect(),
    };

    let group = crate::cgroup::cpu_group(sys);
    let cap = group.as_ref().and_then(crate::cgroup::CpuGroup::worker_cap);
    let quota = group.and_then(|g| g.quota);
    let mut capped: Vec<usize> = Vec::new();
    let workers: Vec<usize> = match &spec.workers {
        CpuSelect::Auto => {
            let mut w: Vec<usize> = allowed.difference(&irq_set).copied().collect();
            if w.is_empty() {
                warnings.push(format!(
                    "every allowed cpu ({}) services NIC interrupts ({}); workers run on all \
                     allowed cpus and share them with interrupt handling",
                    fmt_list(&allowed_vec),
                    fmt_list(&irq_set.iter().copied().collect::<Vec<_>>()),
                ));
                w = allowed_vec.clone();
            }
            // More workers than the quota's CPUs would be throttled in bursts.
            if let Some(cap) = cap
                && w.len() > cap
            {
                capped = w.split_off(cap);
            }
            w
        }
        CpuSelect::List(v) => {
            if v.is_empty() {
                return Err(PlanError::NoWorkers);
            }
            let mut seen = BTreeSet::new();
            for &c in v {
                if !allowed.contains(&c) {
                    return Err(PlanError::WorkerNotAllowed {
                        cpu: c,
                        allowed: allowed_vec.clone(),
                    });
                }
                if !seen.insert(c) {
                    return Err(PlanError::DuplicateWorker(c));
                }
            }
            if let (Some(cap), Some((q, dir))) = (cap, &quota)
                && seen.len() > cap
            {
                warnings.push(format!(
                    "{} worker cpus are listed but the cgroup CPU quota ({dir}) allows {q:.2} \
                     cpus: the scheduler will throttle the workers in bursts (latency spikes); \
                     list at most {cap} or raise the quota",
                    seen.len()
                ));
            }
            let overlap: Vec<usize> = seen.intersection(&irq_set).copied().collect();
            if !overlap.is_empty() {
                warnings.push(format!(
                    "worker cpus {} also service NIC interrupts; workers there compete with \
                     softirq processing",
                    fmt_list(&overlap)
                ));
            }
            seen.into_iter().collect()
        }
    };

    let worker_set: BTreeSet<usize> = workers.iter().copied().collect();
    let mut all: BTreeSet<usize> = allowed.clone();
    all.extend(irq_set.iter().copied());
    if let Some(text) = sys.read("/proc/interrupts") {
        all.extend(interrupt_columns(&text));
    }

    let mut evidence: BTreeMap<usize, Vec<String>> = BTreeMap::new();
    for i in &irqs {
        for &c in &i.cpus {
            let count = i.counts.iter().find(|(cpu, _)| *cpu == c).map_or(0, |(_, n)| *n);
            evidence.entry(c).or_default().push(format!(
                "irq {} {} ({}: {}; {} interrupts here)",
                i.irq,
                i.name,
                i.source,
                fmt_list(&i.cpus),
                count
            ));
        }
    }
    if let CpuSelect::List(_) = spec.irq {
        for c in &irq_set {
            evidence.entry(*c).or_default().push("listed in explicit irq cpus".into());
        }
    }
    let cpus = all
        .iter()
        .map(|&cpu| {
            let role = match (irq_set.contains(&cpu), worker_set.contains(&cpu)) {
                (true, true) => Role::IrqAndWorker,
                (true, false) => Role::Irq,
                (false, true) => Role::Worker,
                (false, false) => Role::Unused,
            };
            let mut ev = evidence.remove(&cpu).unwrap_or_default();
            if capped.contains(&cpu)
                && let Some((q, _)) = &quota
            {
                ev.push(format!("left out: the cgroup CPU quota allows {q:.2} cpus"));
            } else if !allowed.contains(&cpu) {
                ev.push("not in the process affinity mask".into());
            } else if role == Role::Unused {
                ev.push("allowed but not in the explicit worker list".into());
            }
            CpuEntry { cpu, role, evidence: ev }
        })
        .collect();
    Ok(CorePlan {
        cpus,
        workers,
        irq_cpus: irq_set.into_iter().collect(),
        warnings,
        cpu_quota: quota,
    })
}

impl fmt::Display for CorePlan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{:>5}  {:<11} evidence", "cpu", "role")?;
        for e in &self.cpus {
            let mut ev = e.evidence.iter();
            writeln!(f, "{:>5}  {:<11} {}", e.cpu, e.role, ev.next().map_or("-", String::as_str))?;
            for more in ev {
                writeln!(f, "{:>5}  {:<11} {}", "", "", more)?;
            }
        }
        writeln!(f, "workers ({}): {}", self.workers.len(), fmt_list(&self.workers))?;
        writeln!(f, "irq cpus: {}", fmt_list(&self.irq_cpus))?;
        if let Some((q, dir)) = &self.cpu_quota {
            writeln!(f, "cpu quota: {q:.2} cpus (cgroup {dir})")?;
        }
        for w in &self.warnings {
            writeln!(f, "warning: {w}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
