//! The shipped systemd units and `reel-irq.sh`: `systemd-analyze verify` (when the tool
//! exists) with the binary paths pointed at this build, and the script's syntax and its
//! `DRY_RUN=1` output against `reel plan --format env`.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use reel_test_support::skip;

use crate::common::*;

fn systemd_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../systemd")
}

fn irq_script() -> PathBuf {
    systemd_dir().join("reel-irq.sh")
}

#[test]
fn units_pass_systemd_analyze_verify() {
    if Command::new("systemd-analyze").arg("--version").output().is_err() {
        return skip("systemd-analyze is not installed");
    }
    let dir = tempfile::tempdir().unwrap();
    let script = irq_script().canonicalize().unwrap();
    let mut units = Vec::new();
    for name in ["reel.service", "reel-irq.service", "reel.socket"] {
        let text = std::fs::read_to_string(systemd_dir().join(name)).unwrap();
        assert!(
            name.ends_with(".socket") || text.contains("/usr/local/"),
            "{name} names the installed paths"
        );
        let text = text
            .replace("/usr/local/lib/reel/reel-irq.sh", &script.display().to_string())
            .replace("/usr/local/bin/reel", BIN);
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        units.push(p);
    }
    let out = Command::new("systemd-analyze")
        .args(["verify", "--man=no"])
        .args(&units)
        .env("SYSTEMD_LOG_COLOR", "0")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    let problems: Vec<&str> = err
        .lines()
        .filter(|l| !l.trim().is_empty())
        // Only a missing binary is acceptable (none should be, with the paths substituted).
        .filter(|l| !l.contains("is not executable: No such file or directory"))
        .collect();
    assert!(problems.is_empty(), "systemd-analyze verify:\n{err}");
    assert!(out.status.success() || !err.contains("not executable"), "{err}");
}

#[test]
fn irq_script_parses() {
    let st = Command::new("sh").arg("-n").arg(irq_script()).status().unwrap();
    assert!(st.success());
}

fn parse_env(text: &str) -> HashMap<String, String> {
    text.lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.trim_matches('"').to_string()))
        .collect()
}

fn mask(cpus: &[usize]) -> String {
    let max = cpus.iter().copied().max().unwrap_or(0);
    let mut groups = Vec::new();
    for g in (0..=max / 32).rev() {
        let m: u32 = cpus.iter().filter(|c| *c / 32 == g).fold(0, |m, c| m | 1 << (c % 32));
        groups.push(if groups.is_empty() { format!("{m:x}") } else { format!("{m:08x}") });
    }
    groups.join(",")
}

#[test]
fn irq_script_dry_run_follows_the_plan() {
    let cpus = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    if cpus < 2 {
        return skip("one CPU: no room for an IRQ core");
    }
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("reel.toml");
    // The loopback device has queues but no interrupts: RPS/XPS lines, no IRQ lines.
    std::fs::write(
        &cfg,
        format!(
            "[cores]\nnic = [\"lo\"]\nirq = [0]\nworkers = [1]\n\n[store]\npath = \"{}/s\"\n\
             size = \"8MiB\"\nvolume_size = \"1MiB\"\n\n[[listener]]\nname = \"http\"\n\
             address = \"127.0.0.1:0\"\n",
            dir.path().display()
        ),
    )
    .unwrap();
    let plan =
        Command::new(BIN).args(["plan", "--format", "env", "--config"]).arg(&cfg).output().unwrap();
    assert!(plan.status.success(), "{}", String::from_utf8_lossy(&plan.stderr));
    let env = parse_env(&String::from_utf8_lossy(&plan.stdout));
    let list =
        |k: &str| -> Vec<usize> { env[k].split_whitespace().map(|c| c.parse().unwrap()).collect() };
    assert_eq!(list("IRQ_CPUS"), vec![0]);
    assert_eq!(list("WORKER_CPUS"), vec![1]);

    let out = Command::new("sh")
        .arg(irq_script())
        .arg(&cfg)
        .env("DRY_RUN", "1")
        .env("REEL", BIN)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}\n{}", String::from_utf8_lossy(&out.stderr));
    for irq in env["NIC_IRQS"].split_whitespace() {
        let line = format!("/proc/irq/{irq}/smp_affinity_list");
        assert!(text.lines().any(|l| l.ends_with(&line) && l.starts_with("0 ")), "{line}\n{text}");
    }
    let rps = format!("{} > /sys/class/net/lo/queues/rx-0/rps_cpus", mask(&list("IRQ_CPUS")));
    if std::path::Path::new("/sys/class/net/lo/queues/rx-0/rps_cpus").exists() {
        assert!(text.lines().any(|l| l == rps), "{rps}\n{text}");
    }
    let xps = format!("{} > /sys/class/net/lo/queues/tx-0/xps_cpus", mask(&list("WORKER_CPUS")));
    if std::path::Path::new("/sys/class/net/lo/queues/tx-0/xps_cpus").exists() {
        assert!(text.lines().any(|l| l == xps), "{xps}\n{text}");
    }
    assert!(text.contains("NIC interrupts on CPUs 0; workers on CPUs 1"), "{text}");
    // Every other line is a dry-run write.
    for l in text.lines().filter(|l| !l.starts_with("reel-irq:")) {
        assert!(l.contains(" > /"), "not a dry-run write: {l}");
    }

    // A failing plan stops the script.
    let out = Command::new("sh")
        .arg(irq_script())
        .arg(dir.path().join("missing.toml"))
        .env("DRY_RUN", "1")
        .env("REEL", BIN)
        .output()
        .unwrap();
    assert!(!out.status.success());
}

#[test]
fn mask_groups_32_bit_words() {
    assert_eq!(mask(&[0]), "1");
    assert_eq!(mask(&[0, 1, 40]), "100,00000003");
}

/// `Type=notify`: the binary tells systemd READY=1 once it serves, RELOADING=1 with
/// MONOTONIC_USEC then READY=1 around a SIGHUP reload, and STOPPING=1 on SIGTERM.
#[test]
fn the_binary_speaks_the_sd_notify_protocol() {
    use std::os::unix::net::UnixDatagram;

    let origin = Origin::start("notify");
    let dir = tempfile::tempdir().unwrap();
    let sock_path = dir.path().join("notify.sock");
    let sock = UnixDatagram::bind(&sock_path).unwrap();
    sock.set_read_timeout(Some(std::time::Duration::from_secs(30))).unwrap();
    let recv = || {
        let mut buf = [0u8; 512];
        let n = sock.recv(&mut buf).expect("a notification within 30 s");
        String::from_utf8_lossy(&buf[..n]).into_owned()
    };
    let conf = Conf::new(dir.path(), &origin);
    let mut reel = Reel::start_env(&conf, &[("NOTIFY_SOCKET", sock_path.to_str().unwrap())]);
    assert!(recv().starts_with("READY=1"), "READY=1 after start-up");

    reel.signal(libc::SIGHUP);
    let reloading = recv();
    let mut lines = reloading.lines();
    assert_eq!(lines.next(), Some("RELOADING=1"), "{reloading}");
    let usec: u64 = lines
        .next()
        .and_then(|l| l.strip_prefix("MONOTONIC_USEC="))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("MONOTONIC_USEC in {reloading:?}"));
    assert!(usec > 0);
    assert!(recv().starts_with("READY=1"), "READY=1 after the reload");

    reel.signal(libc::SIGTERM);
    assert_eq!(recv(), "STOPPING=1");
    assert!(reel.wait_exit().success());
}

#[test]
fn the_socket_unit_and_the_stop_timeout_match_the_production_config() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../config/production.toml");
    let cfg = reel_config::load_and_validate(&dir).expect("production config");
    let unit = std::fs::read_to_string(systemd_dir().join("reel.socket")).unwrap();
    let listen: Vec<&str> = unit.lines().filter_map(|l| l.strip_prefix("ListenStream=")).collect();
    let mut want: Vec<String> = cfg.listener.iter().map(|l| l.address.to_string()).collect();
    want.push(cfg.admin.address.to_string());
    assert_eq!(listen, want);
    let service = std::fs::read_to_string(systemd_dir().join("reel.service")).unwrap();
    let stop: u64 = service
        .lines()
        .find_map(|l| l.strip_prefix("TimeoutStopSec="))
        .and_then(|v| v.parse().ok())
        .expect("TimeoutStopSec in seconds");
    let s = &cfg.server;
    let needed = s.shutdown_delay.get() + s.shutdown_timeout.get() + Duration::from_secs(5);
    assert!(Duration::from_secs(stop) > needed, "TimeoutStopSec={stop} <= {needed:?}");
    assert!(!s.shutdown_delay.get().is_zero(), "production waits for the balancers");
}
