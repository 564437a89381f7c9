//! The planner against recorded `/proc` and `/sys` samples of other hosts.

use super::*;
use std::collections::HashMap;

/// Recorded files from another host.
#[derive(Default)]
struct Sample {
    files: HashMap<String, String>,
    links: HashMap<String, String>,
    allowed: Vec<usize>,
}

impl Sample {
    fn new(interrupts: &str, allowed: impl IntoIterator<Item = usize>) -> Self {
        let mut s = Sample { allowed: allowed.into_iter().collect(), ..Default::default() };
        s.files.insert("/proc/interrupts".into(), interrupts.into());
        s
    }
    fn link(mut self, nic: &str, target: &str) -> Self {
        self.links.insert(format!("/sys/class/net/{nic}/device"), target.into());
        self
    }
    fn file(mut self, path: String, content: &str) -> Self {
        self.files.insert(path, content.into());
        self
    }
}

impl SysFs for Sample {
    fn read(&self, path: &str) -> Option<String> {
        self.files.get(path).cloned()
    }
    fn canonical(&self, path: &str) -> Option<String> {
        self.links.get(path).cloned()
    }
    fn allowed_cpus(&self) -> Option<Vec<usize>> {
        Some(self.allowed.clone())
    }
}

const MLX5: &str = include_str!("../../fixtures/interrupts-mlx5-32cpu.txt");
const I40E: &str = include_str!("../../fixtures/interrupts-i40e-16cpu.txt");
const VIRTIO: &str = include_str!("../../fixtures/interrupts-virtio-2cpu.txt");
const VIRTIO_RXTX: &str = include_str!("../../fixtures/interrupts-virtio-rxtx-4cpu.txt");
const ENA: &str = include_str!("../../fixtures/interrupts-ena-8cpu.txt");

#[test]
fn cpu_lists() {
    assert_eq!(parse_cpu_list("0-3,8,10-11\n"), Some(vec![0, 1, 2, 3, 8, 10, 11]));
    assert_eq!(parse_cpu_list("5"), Some(vec![5]));
    assert_eq!(parse_cpu_list(""), Some(vec![]));
    assert_eq!(parse_cpu_list("0-7:2"), Some(vec![0, 2, 4, 6]));
    assert_eq!(parse_cpu_list("3-1"), None);
    assert_eq!(parse_cpu_list("x"), None);
}

#[test]
fn parses_header_counts_and_shared_names() {
    let lines = parse_interrupts(VIRTIO);
    let l = lines.iter().find(|l| l.irq == 38).unwrap();
    assert_eq!(l.counts, vec![(0, 0), (1, 4786)]);
    assert_eq!(l.names, vec!["virtio2-input.0".to_string()]);
    let shared = parse_interrupts(
        "           CPU0       CPU1\n 16:   5   6   IO-APIC  16-fasteoi   ehci_hcd:usb1, eth0\n",
    );
    assert_eq!(shared[0].names, vec!["ehci_hcd:usb1", "eth0"]);
    assert_eq!(shared[0].counts, vec![(0, 5), (1, 6)]);
    // LOC/NMI lines are not device interrupts.
    assert!(lines.iter().all(|l| l.irq < 100));
}

fn mlx5_host() -> Sample {
    let mut s = Sample::new(MLX5, 0..32)
        .link("ens1f0np0", "/sys/devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0");
    // mlx5_comp0..15 of 0000:3b:00.0 are IRQs 98..113, pinned to cpu 0..15 by the driver;
    // the second port (0000:3b:00.1) uses IRQs 115..130.
    for q in 0..16u32 {
        s = s.file(format!("/proc/irq/{}/effective_affinity_list", 98 + q), &format!("{q}\n"));
        s = s.file(format!("/proc/irq/{}/smp_affinity_list", 98 + q), &format!("{q}\n"));
        s = s.file(
            format!("/proc/irq/{}/effective_affinity_list", 115 + q),
            &format!("{}\n", 16 + q),
        );
    }
    s
}

#[test]
fn mlx5_queues_found_by_pci_address() {
    let s = mlx5_host();
    let (irqs, warnings) = detect_nic_irqs(&s, &["ens1f0np0".into()]);
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!(irqs.len(), 16, "{irqs:?}");
    assert!(irqs.iter().all(|i| i.name.starts_with("mlx5_comp")));
    assert!(irqs.iter().all(|i| i.source == "effective_affinity_list"));
    let plan = plan(&CoreSpec { nic: vec!["ens1f0np0".into()], ..Default::default() }, &s).unwrap();
    assert_eq!(plan.irq_cpus, (0..16).collect::<Vec<_>>());
    assert_eq!(plan.workers, (16..32).collect::<Vec<_>>());
    assert!(plan.warnings.is_empty());
    let cpu3 = &plan.cpus[3];
    assert_eq!(cpu3.role, Role::Irq);
    assert!(cpu3.evidence[0].contains("mlx5_comp3@pci:0000:3b:00.0"), "{cpu3:?}");
    let text = plan.to_string();
    assert!(text.contains("irq 101 mlx5_comp3@pci:0000:3b:00.0"), "{text}");
    assert!(text.contains("workers (16): 16,17,"), "{text}");
}

#[test]
fn i40e_queues_found_by_name_with_smp_affinity_fallback() {
    let mut s =
        Sample::new(I40E, 0..16).link("eth0", "/sys/devices/pci0000:00/0000:00:03.0/0000:03:00.0");
    // IRQs 45..52 are i40e-eth0-TxRx-0..7; only smp_affinity_list exists (older kernel).
    for q in 0..8u32 {
        s = s.file(format!("/proc/irq/{}/smp_affinity_list", 45 + q), &format!("{}\n", q * 2));
    }
    let plan = plan(&CoreSpec::default(), &s).unwrap();
    assert_eq!(plan.irq_cpus, vec![0, 2, 4, 6, 8, 10, 12, 14]);
    assert_eq!(plan.workers, vec![1, 3, 5, 7, 9, 11, 13, 15]);
    let e = &plan.cpus[4];
    assert_eq!(e.role, Role::Irq);
    assert!(e.evidence[0].contains("i40e-eth0-TxRx-2"));
    assert!(e.evidence[0].contains("smp_affinity_list"));
    // eth1's queues and the fdir / misc vectors are not eth0 data queues.
    assert!(!plan.to_string().contains("eth1"));
}

#[test]
fn virtio_input_output_naming() {
    // This machine's own layout: eth0 is virtio2; virtio3-rx/tx belong to another device.
    let s = Sample::new(VIRTIO, 0..2)
        .link("eth0", "/sys/devices/pci0000:00/0000:00:03.0/virtio2")
        .file("/proc/irq/38/effective_affinity_list".into(), "1\n")
        .file("/proc/irq/39/effective_affinity_list".into(), "0\n");
    let (irqs, w) = detect_nic_irqs(&s, &["eth0".into()]);
    assert!(w.is_empty());
    let names: Vec<&str> = irqs.iter().map(|i| i.name.as_str()).collect();
    assert_eq!(names, vec!["virtio2-input.0", "virtio2-output.0"]);
    // Both CPUs service interrupts: the "none left" fallback applies.
    let plan = plan(&CoreSpec::default(), &s).unwrap();
    assert_eq!(plan.irq_cpus, vec![0, 1]);
    assert_eq!(plan.workers, vec![0, 1]);
    assert_eq!(plan.warnings.len(), 1);
    assert!(plan.warnings[0].contains("every allowed cpu"), "{:?}", plan.warnings);
    assert!(plan.cpus.iter().all(|c| c.role == Role::IrqAndWorker));
}

#[test]
fn virtio_rx_tx_naming_with_count_fallback() {
    let s =
        Sample::new(VIRTIO_RXTX, 0..4).link("eth0", "/sys/devices/pci0000:00/0000:00:04.0/virtio3");
    // No affinity files readable: CPUs with nonzero counts are the evidence.
    let (irqs, _) = detect_nic_irqs(&s, &["eth0".into()]);
    let names: Vec<&str> = irqs.iter().map(|i| i.name.as_str()).collect();
    assert_eq!(names, vec!["virtio3-rx", "virtio3-tx"]);
    assert!(irqs.iter().all(|i| i.source == "counts"));
    let plan = plan(&CoreSpec::default(), &s).unwrap();
    assert_eq!(plan.irq_cpus, vec![1, 2]);
    assert_eq!(plan.workers, vec![0, 3]);
}

#[test]
fn ena_queues_and_management_vector() {
    let mut s = Sample::new(ENA, 0..8).link("ens5", "/sys/devices/pci0000:00/0000:00:05.0");
    for q in 0..4u32 {
        s = s.file(format!("/proc/irq/{}/effective_affinity_list", 28 + q), &format!("{q}"));
    }
    s = s.file("/proc/irq/27/effective_affinity_list".into(), "7");
    let plan = plan(&CoreSpec { nic: vec!["ens5".into()], ..Default::default() }, &s).unwrap();
    // ena-mgmnt@pci:0000:00:05.0 on cpu 7 is a control vector and does not reserve a CPU.
    assert_eq!(plan.irq_cpus, vec![0, 1, 2, 3]);
    assert_eq!(plan.workers, vec![4, 5, 6, 7]);
}

#[test]
fn nic_not_found_reserves_nothing_and_warns() {
    let s = Sample::new(I40E, 0..16);
    let plan = plan(&CoreSpec { nic: vec!["eth9".into()], ..Default::default() }, &s).unwrap();
    assert!(plan.irq_cpus.is_empty());
    assert_eq!(plan.workers, (0..16).collect::<Vec<_>>());
    assert_eq!(plan.warnings.len(), 1);
    assert!(plan.warnings[0].contains("eth9"));
    // Found in sysfs but without interrupt lines (e.g. a NIC handled by another host's naming).
    let s = Sample::new(I40E, 0..16).link("eth5", "/sys/devices/pci0000:00/0000:00:09.0");
    let plan =
        super::plan(&CoreSpec { nic: vec!["eth5".into()], ..Default::default() }, &s).unwrap();
    assert!(plan.irq_cpus.is_empty());
    assert!(plan.warnings[0].contains("no queue interrupts"), "{:?}", plan.warnings);
}

#[test]
fn allowed_mask_limits_workers() {
    // A cpuset-restricted container: only 16..24 allowed, IRQs on 0..16.
    let mut s = mlx5_host();
    s.allowed = (16..24).collect();
    let plan = plan(&CoreSpec { nic: vec!["ens1f0np0".into()], ..Default::default() }, &s).unwrap();
    assert_eq!(plan.workers, (16..24).collect::<Vec<_>>());
    assert_eq!(plan.cpus.iter().find(|c| c.cpu == 30).unwrap().role, Role::Unused);
}

#[test]
fn explicit_lists_override_and_validate() {
    let s = mlx5_host();
    let spec = CoreSpec {
        nic: vec!["ens1f0np0".into()],
        irq: CpuSelect::List(vec![0, 1]),
        workers: CpuSelect::List(vec![1, 2, 3]),
    };
    let p = plan(&spec, &s).unwrap();
    assert_eq!(p.irq_cpus, vec![0, 1]);
    assert_eq!(p.workers, vec![1, 2, 3]);
    assert_eq!(p.cpus[1].role, Role::IrqAndWorker);
    assert_eq!(p.cpus[4].role, Role::Unused);
    assert_eq!(p.warnings.len(), 1);
    assert!(p.warnings[0].contains("also service NIC interrupts"));

    let bad = CoreSpec { workers: CpuSelect::List(vec![40]), ..spec.clone() };
    assert!(matches!(plan(&bad, &s), Err(PlanError::WorkerNotAllowed { cpu: 40, .. })));
    let dup = CoreSpec { workers: CpuSelect::List(vec![4, 4]), ..spec.clone() };
    assert_eq!(plan(&dup, &s), Err(PlanError::DuplicateWorker(4)));
    let empty = CoreSpec { workers: CpuSelect::List(vec![]), ..spec };
    assert_eq!(plan(&empty, &s), Err(PlanError::NoWorkers));
}

#[test]
fn live_system_plans_without_error() {
    let p = plan_system(&CoreSpec::default()).unwrap();
    println!("{p}");
    assert!(!p.workers.is_empty());
    let allowed = allowed_cpus().unwrap();
    assert!(p.workers.iter().all(|w| allowed.contains(w)));
}

/// A container with a 1.5-CPU quota (cgroup v2) on a 4-CPU host without NIC interrupts.
fn quota_host(quota: &str) -> Sample {
    Sample::new("           CPU0       CPU1       CPU2       CPU3\n", [0, 1, 2, 3])
        .file("/proc/self/cgroup".into(), "0::/pod/ctr\n")
        .file("/sys/fs/cgroup/cgroup.controllers".into(), "cpu\n")
        .file("/sys/fs/cgroup/pod/cpu.max".into(), quota)
}

#[test]
fn automatic_workers_follow_the_cgroup_cpu_quota() {
    let spec = CoreSpec { nic: vec![], ..CoreSpec::default() };
    let p = plan(&spec, &quota_host("150000 100000\n")).unwrap();
    assert_eq!(p.workers, vec![0], "1.5 cpus of quota: one worker");
    assert_eq!(p.cpu_quota, Some((1.5, "/sys/fs/cgroup/pod".into())));
    let text = p.to_string();
    assert!(text.contains("cpu quota: 1.50 cpus (cgroup /sys/fs/cgroup/pod)"), "{text}");
    assert!(text.contains("left out: the cgroup CPU quota allows 1.50 cpus"), "{text}");
    // Two CPUs of quota, two workers; none, all four.
    assert_eq!(plan(&spec, &quota_host("200000 100000\n")).unwrap().workers, vec![0, 1]);
    assert_eq!(plan(&spec, &quota_host("max 100000\n")).unwrap().workers, vec![0, 1, 2, 3]);
    // Less than one CPU still runs one worker.
    assert_eq!(plan(&spec, &quota_host("20000 100000\n")).unwrap().workers, vec![0]);
}

#[test]
fn an_explicit_worker_list_above_the_quota_is_kept_with_a_warning() {
    let spec =
        CoreSpec { nic: vec![], workers: CpuSelect::List(vec![1, 2, 3]), ..CoreSpec::default() };
    let p = plan(&spec, &quota_host("150000 100000\n")).unwrap();
    assert_eq!(p.workers, vec![1, 2, 3]);
    assert!(
        p.warnings.iter().any(|w| w.contains("3 worker cpus are listed but the cgroup CPU quota")),
        "{:?}",
        p.warnings
    );
    let within = CoreSpec { workers: CpuSelect::List(vec![2]), ..spec };
    assert!(plan(&within, &quota_host("150000 100000\n")).unwrap().warnings.is_empty());
}
